// Device memory whose frees are stream-ordered: a freed block goes back to
// memwall's allocator only once an event recorded on its streams at the
// free has completed (Note [Stream-ordered frees]). Nothing here knows
// CUDA: a stream is a number and an event an opaque handle, made, queried,
// waited for and released by the functions the caller passes in, so that
// the logic is tested on a machine without a GPU
// (tests/exec_cuda/stream_ordered_frees_test.cc). The CUDA side is
// src/exec/cuda/cuda_device_memory.cc (Note [CUDA device memory]).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "memwall/alloc/allocator.h"

namespace memwall::exec {

// A stream as a number (a cudaStream_t's value; 0 is CUDA's default stream).
using StreamKey = uintptr_t;
// An event, opaque here (a cudaEvent_t).
using EventHandle = void*;

// What StreamOrderedFrees calls to order frees after the work on a stream.
// record, done and release are called under its lock (they must not call
// back into it); wait is called without it, so that other threads allocate
// and free while one waits. Any of them may throw: the error reaches the
// caller of allocate, free or synchronize.
struct EventFunctions {
  std::function<EventHandle(StreamKey)> record;  // an event recorded on the stream now
  std::function<bool(EventHandle)> done;         // completed? never blocks
  std::function<void(EventHandle)> wait;         // blocks until it has completed
  std::function<void(EventHandle)> release;      // no longer needed (done or abandoned)
};

class StreamOrderedFrees {
 public:
  // Requested bytes are what callers asked for; allocated bytes are the
  // allocator's blocks (after its rounding).
  struct Stats {
    uint64_t live_bytes = 0;  // requested, of blocks not freed
    uint64_t peak_bytes = 0;  // live_bytes at most since reset_peak
    uint64_t live_allocated_bytes = 0;
    uint64_t peak_allocated_bytes = 0;
    uint64_t pending_frees = 0;  // freed blocks waiting for their events
    uint64_t pending_bytes = 0;  // their allocated bytes
    // Allocated bytes of live and pending blocks together, at most since
    // reset_peak: what the allocator held in blocks for us.
    uint64_t peak_held_bytes = 0;
    // The allocator's reserved bytes (its chunks) at most since reset_peak,
    // read after each of its allocations, where they grow.
    uint64_t peak_reserved_bytes = 0;
    uint64_t event_waits = 0;    // events waited for because memory was short
    uint64_t out_of_memory = 0;  // requests refused after every pending free returned
    uint64_t lost_bytes = 0;     // allocated bytes of frees whose event failed: never reused
  };

  // `allocator` must outlive this.
  StreamOrderedFrees(alloc::Allocator& allocator, EventFunctions events);
  // Waits for the pending frees and returns their blocks; errors are
  // dropped (the blocks stay with the allocator, which frees them all).
  ~StreamOrderedFrees();
  StreamOrderedFrees(const StreamOrderedFrees&) = delete;
  StreamOrderedFrees& operator=(const StreamOrderedFrees&) = delete;

  // A block of at least `bytes`, from any stream's memory (every block
  // here is free for every stream once back, so the allocator's stream 0
  // pool serves all). Returns blocks whose events completed first; when the
  // allocator is still short, waits for pending frees oldest first and
  // retries. Null with out_of_memory set when it cannot hold `bytes` with
  // nothing pending; null without it for 0 bytes. Throws alloc::Error for
  // a request above kMaxRequestBytes.
  alloc::Allocation allocate(uint64_t bytes);
  // `ptr` is used on `stream` too (torch's record_stream): its free waits
  // for the work there as well. Throws alloc::Error unless `ptr` is live.
  void use_on(void* ptr, StreamKey stream);
  // Frees `ptr`, asked for as `bytes`, after the work queued so far on
  // `stream` (and every use_on stream). Throws alloc::Error, changing
  // nothing, when `ptr` is not a live block (a double free, a foreign or
  // interior pointer) or `bytes` is not its size. If recording an event
  // throws, the block is never reused (lost_bytes) and the error rethrown.
  void free(void* ptr, uint64_t bytes, StreamKey stream);
  // Returns the blocks whose events have completed, without waiting.
  void poll();
  // Waits for every pending free and returns its block.
  void synchronize();

  Stats stats() const;
  void reset_peak();  // peaks restart at the current values

 private:
  struct Block {
    uint64_t bytes = 0, allocated = 0;
    std::vector<StreamKey> streams;  // use_on's
    uint32_t events_left = 0;        // while pending
  };
  struct Recorded {
    uint64_t order = 0;  // when recorded, over all streams
    EventHandle event = nullptr;
    void* ptr = nullptr;
  };
  void poll_locked();                 // under mutex_
  void completed(const Recorded& r);  // under mutex_: its event is done
  void note_held();                   // under mutex_: peak_held_bytes
  void note_reserved();               // under mutex_: peak_reserved_bytes
  // Under `lock`: waits for the oldest pending event and completes it;
  // false when nothing is pending.
  bool wait_oldest(std::unique_lock<std::mutex>& lock);

  alloc::Allocator& allocator_;
  EventFunctions events_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<void*, Block> pending_;
  // Each stream's events in record order, which is the order they complete in.
  std::map<StreamKey, std::deque<Recorded>> recorded_;
  uint64_t next_order_ = 0;
  Stats stats_;
};

}  // namespace memwall::exec
