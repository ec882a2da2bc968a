// Stream-ordered frees (src/exec/cuda/stream_ordered_frees.h, Note
// [Stream-ordered frees]) on memwall's stitching allocator over a simulated
// device of 2 MiB chunks, with fake events the test completes by hand: a
// freed block goes back only once its events have completed, a request that
// does not fit waits for the oldest pending free first, the byte counts
// are exact, and misuse is refused with a clear error. No GPU involved.
#include "exec/cuda/stream_ordered_frees.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"

namespace memwall::exec {
namespace {

constexpr uint64_t kFreesMiB = uint64_t{1} << 20;

// Events as numbers 1, 2, ... in record order; the test says when each
// completes. wait() completes it (as the GPU would by then).
class FakeFreeEvents {
 public:
  struct Event {
    StreamKey stream = 0;
    bool done = false;
    int released = 0;
  };

  EventFunctions functions() {
    return {.record =
                [this](StreamKey stream) {
                  std::lock_guard lock(mutex_);
                  if (fail_record) throw std::runtime_error("record failed");
                  events_.push_back({stream});
                  return handle(events_.size());
                },
            .done =
                [this](EventHandle e) {
                  std::lock_guard lock(mutex_);
                  return at(e).done || complete_on_query;
                },
            .wait =
                [this](EventHandle e) {
                  std::lock_guard lock(mutex_);
                  if (fail_wait) throw std::runtime_error("wait failed");
                  at(e).done = true;
                  waited_.push_back(number(e));
                },
            .release =
                [this](EventHandle e) {
                  std::lock_guard lock(mutex_);
                  ++at(e).released;
                }};
  }
  void complete(size_t number) {
    std::lock_guard lock(mutex_);
    events_.at(number - 1).done = true;
  }
  size_t count() {
    std::lock_guard lock(mutex_);
    return events_.size();
  }
  Event event(size_t number) {
    std::lock_guard lock(mutex_);
    return events_.at(number - 1);
  }
  std::vector<size_t> waited() {
    std::lock_guard lock(mutex_);
    return waited_;
  }

  bool fail_record = false;
  bool fail_wait = false;
  bool complete_on_query = false;  // every event is done when asked

 private:
  static EventHandle handle(size_t number) { return reinterpret_cast<EventHandle>(number); }
  static size_t number(EventHandle e) { return reinterpret_cast<uintptr_t>(e); }
  Event& at(EventHandle e) { return events_.at(number(e) - 1); }

  std::mutex mutex_;
  std::vector<Event> events_;
  std::vector<size_t> waited_;
};

struct FreesFixture {
  explicit FreesFixture(uint64_t chunks)
      : device(alloc::make_sim_device(chunks * 2 * kFreesMiB)),
        allocator(alloc::make_allocator("stitching", *device)),
        frees(std::make_unique<StreamOrderedFrees>(*allocator, events.functions())) {}
  uint64_t allocator_bytes() const { return allocator->stats().allocated_bytes; }

  FakeFreeEvents events;
  std::unique_ptr<alloc::Device> device;
  std::unique_ptr<alloc::Allocator> allocator;
  std::unique_ptr<StreamOrderedFrees> frees;
};

void* frees_take(StreamOrderedFrees& frees, uint64_t bytes) {
  const alloc::Allocation a = frees.allocate(bytes);
  EXPECT_TRUE(a) << bytes << " bytes";
  return a.ptr;
}

TEST(StreamOrderedFrees, CountsLiveAndPeakBytesExactly) {
  FreesFixture f(4);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 1000);  // rounded to 1024
  StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 2 * kFreesMiB + 1000);
  EXPECT_EQ(s.live_allocated_bytes, 2 * kFreesMiB + 1024);
  EXPECT_EQ(s.peak_bytes, 2 * kFreesMiB + 1000);
  EXPECT_EQ(s.peak_allocated_bytes, 2 * kFreesMiB + 1024);

  // The program's bytes drop at the free; the block is pending, held.
  f.frees->free(a, 2 * kFreesMiB, 1);
  s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 1000u);
  EXPECT_EQ(s.live_allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_bytes, 2 * kFreesMiB + 1000);
  EXPECT_EQ(s.pending_frees, 1u);
  EXPECT_EQ(s.pending_bytes, 2 * kFreesMiB);
  EXPECT_EQ(s.peak_held_bytes, 2 * kFreesMiB + 1024);

  f.frees->reset_peak();
  s = f.frees->stats();
  EXPECT_EQ(s.peak_bytes, 1000u);
  EXPECT_EQ(s.peak_allocated_bytes, 1024u);
  EXPECT_EQ(s.peak_held_bytes, 2 * kFreesMiB + 1024);  // the pending block is still held

  void* c = frees_take(*f.frees, 3 * kFreesMiB);
  s = f.frees->stats();
  EXPECT_EQ(s.peak_bytes, 3 * kFreesMiB + 1000);
  EXPECT_EQ(s.peak_held_bytes, 5 * kFreesMiB + 1024);

  f.events.complete(1);
  f.frees->free(b, 1000, 1);
  f.frees->free(c, 3 * kFreesMiB, 1);
  f.frees->synchronize();
  s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(s.pending_frees, 0u);
  EXPECT_EQ(s.pending_bytes, 0u);
  EXPECT_EQ(s.peak_bytes, 3 * kFreesMiB + 1000);
  EXPECT_EQ(f.allocator_bytes(), 0u);
  EXPECT_EQ(s.event_waits, 0u);  // synchronize's waits are not for want of memory
}

// The allocator's chunks at most since reset_peak: read after each of its
// allocations, and kept after the chunks go (cache emptied).
TEST(StreamOrderedFrees, KeepsThePeakOfTheAllocatorsChunks) {
  FreesFixture f(4);
  EXPECT_EQ(f.frees->stats().peak_reserved_bytes, 0u);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);  // one 2 MiB chunk
  void* b = frees_take(*f.frees, 4 * kFreesMiB);  // two more
  EXPECT_EQ(f.allocator->reserved_bytes(), 6 * kFreesMiB);
  EXPECT_EQ(f.frees->stats().peak_reserved_bytes, 6 * kFreesMiB);
  f.frees->free(a, 2 * kFreesMiB, 1);
  f.frees->free(b, 4 * kFreesMiB, 1);
  f.frees->synchronize();
  f.allocator->empty_cache();
  EXPECT_EQ(f.allocator->reserved_bytes(), 0u);
  EXPECT_EQ(f.frees->stats().peak_reserved_bytes, 6 * kFreesMiB);
  f.frees->reset_peak();
  EXPECT_EQ(f.frees->stats().peak_reserved_bytes, 0u);
  void* c = frees_take(*f.frees, 2 * kFreesMiB);
  EXPECT_EQ(f.frees->stats().peak_reserved_bytes, 2 * kFreesMiB);
  f.frees->free(c, 2 * kFreesMiB, 1);
}

TEST(StreamOrderedFrees, BlockGoesBackOnlyOnceItsEventCompletes) {
  FreesFixture f(2);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  frees_take(*f.frees, 2 * kFreesMiB);
  f.frees->free(a, 2 * kFreesMiB, 7);
  ASSERT_EQ(f.events.count(), 1u);
  EXPECT_EQ(f.events.event(1).stream, 7u);

  f.frees->poll();
  EXPECT_EQ(f.allocator_bytes(), 4 * kFreesMiB);  // still the GPU's
  EXPECT_EQ(f.events.event(1).released, 0);

  f.events.complete(1);
  f.frees->poll();
  EXPECT_EQ(f.allocator_bytes(), 2 * kFreesMiB);
  EXPECT_EQ(f.events.event(1).released, 1);
  EXPECT_EQ(f.frees->stats().pending_frees, 0u);
  // Polled by the next allocation too: no wait was needed.
  void* c = frees_take(*f.frees, 2 * kFreesMiB);
  EXPECT_EQ(c, a);
  EXPECT_EQ(f.frees->stats().event_waits, 0u);
}

TEST(StreamOrderedFrees, AllocationPollsCompletedEventsOnEveryStream) {
  FreesFixture f(2);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 2 * kFreesMiB);
  f.frees->free(a, 2 * kFreesMiB, 1);  // event 1, not done
  f.frees->free(b, 2 * kFreesMiB, 2);  // event 2
  f.events.complete(2);
  EXPECT_EQ(frees_take(*f.frees, 2 * kFreesMiB), b);
  EXPECT_TRUE(f.events.waited().empty());
  EXPECT_EQ(f.frees->stats().pending_frees, 1u);
}

TEST(StreamOrderedFrees, ShortMemoryWaitsForTheOldestFreeFirst) {
  FreesFixture f(3);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 2 * kFreesMiB);
  void* c = frees_take(*f.frees, 2 * kFreesMiB);
  f.frees->free(b, 2 * kFreesMiB, 1);  // event 1
  f.frees->free(a, 2 * kFreesMiB, 2);  // event 2
  f.frees->free(c, 2 * kFreesMiB, 1);  // event 3

  // One block's worth: the oldest free (b's) is enough.
  EXPECT_EQ(frees_take(*f.frees, 2 * kFreesMiB), b);
  EXPECT_EQ(f.events.waited(), std::vector<size_t>{1});
  StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.event_waits, 1u);
  EXPECT_EQ(s.pending_frees, 2u);
  EXPECT_EQ(s.out_of_memory, 0u);

  // Two blocks' worth: a's (older) then c's, whatever their streams.
  frees_take(*f.frees, 4 * kFreesMiB);
  EXPECT_EQ(f.events.waited(), (std::vector<size_t>{1, 2, 3}));
  s = f.frees->stats();
  EXPECT_EQ(s.pending_frees, 0u);
  EXPECT_EQ(s.live_bytes, 6 * kFreesMiB);
  EXPECT_EQ(s.peak_held_bytes, 6 * kFreesMiB);  // never past the device
}

TEST(StreamOrderedFrees, OutOfMemoryOnlyAfterEveryPendingFreeReturned) {
  FreesFixture f(2);
  frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 2 * kFreesMiB);
  f.frees->free(b, 2 * kFreesMiB, 1);
  const alloc::Allocation a = f.frees->allocate(4 * kFreesMiB);
  EXPECT_FALSE(a);
  EXPECT_TRUE(a.out_of_memory);
  const StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.event_waits, 1u);
  EXPECT_EQ(s.out_of_memory, 1u);
  EXPECT_EQ(s.pending_frees, 0u);
  EXPECT_EQ(s.live_bytes, 2 * kFreesMiB);
  // Zero bytes: no memory and no failure.
  const alloc::Allocation none = f.frees->allocate(0);
  EXPECT_FALSE(none);
  EXPECT_FALSE(none.out_of_memory);
}

TEST(StreamOrderedFrees, FreeWaitsForEveryStreamThatUsedTheBlock) {
  FreesFixture f(2);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  frees_take(*f.frees, 2 * kFreesMiB);
  f.frees->use_on(a, 2);
  f.frees->use_on(a, 2);  // once is enough
  f.frees->use_on(a, 1);  // its own stream: no second event there
  f.frees->free(a, 2 * kFreesMiB, 1);
  ASSERT_EQ(f.events.count(), 2u);
  EXPECT_EQ(f.events.event(1).stream, 1u);
  EXPECT_EQ(f.events.event(2).stream, 2u);

  f.events.complete(1);
  f.frees->poll();
  EXPECT_EQ(f.allocator_bytes(), 4 * kFreesMiB);  // stream 2 may still read it
  f.events.complete(2);
  f.frees->poll();
  EXPECT_EQ(f.allocator_bytes(), 2 * kFreesMiB);
  EXPECT_EQ(f.events.event(1).released, 1);
  EXPECT_EQ(f.events.event(2).released, 1);
}

TEST(StreamOrderedFrees, MisuseIsRefusedAndChangesNothing) {
  FreesFixture f(2);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 1000);
  auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const alloc::Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([&] { f.frees->free(b, 999, 0); }).find("allocated as 1000"),
            std::string::npos);
  f.frees->free(a, 2 * kFreesMiB, 0);
  EXPECT_NE(message([&] { f.frees->free(a, 2 * kFreesMiB, 0); }).find("double free"),
            std::string::npos);
  f.events.complete(1);
  f.frees->poll();
  EXPECT_NE(message([&] { f.frees->free(a, 2 * kFreesMiB, 0); }).find("not a live block"),
            std::string::npos);
  int local = 0;
  EXPECT_NE(message([&] { f.frees->free(&local, 4, 0); }).find("not a live block"),
            std::string::npos);
  EXPECT_NE(message([&] { f.frees->use_on(a, 3); }).find("not a live block"), std::string::npos);
  const StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 1000u);
  EXPECT_EQ(s.pending_frees, 0u);
  EXPECT_EQ(f.events.count(), 1u);  // no event for a refused free
  f.frees->free(nullptr, 0, 0);     // nothing, as PyTorch's allocators do
}

TEST(StreamOrderedFrees, FailedEventsLoseTheBlockOrKeepItPending) {
  FreesFixture f(2);
  void* a = frees_take(*f.frees, 2 * kFreesMiB);
  void* b = frees_take(*f.frees, 2 * kFreesMiB);
  // No event: the GPU may still use the block, so it is never reused.
  f.events.fail_record = true;
  EXPECT_THROW(f.frees->free(a, 2 * kFreesMiB, 1), std::runtime_error);
  f.events.fail_record = false;
  StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 2 * kFreesMiB);
  EXPECT_EQ(s.lost_bytes, 2 * kFreesMiB);
  EXPECT_EQ(f.allocator_bytes(), 4 * kFreesMiB);

  // A wait that fails leaves its free pending, to be waited for again.
  f.frees->free(b, 2 * kFreesMiB, 1);
  f.events.fail_wait = true;
  EXPECT_THROW(f.frees->allocate(2 * kFreesMiB), std::runtime_error);
  EXPECT_EQ(f.frees->stats().pending_frees, 1u);
  f.events.fail_wait = false;
  EXPECT_EQ(frees_take(*f.frees, 2 * kFreesMiB), b);
}

TEST(StreamOrderedFrees, ThreadsAllocateAndFreeConcurrently) {
  FreesFixture f(4);
  f.events.complete_on_query = true;
  std::vector<std::thread> threads;
  for (StreamKey stream = 1; stream <= 4; ++stream) {
    threads.emplace_back([&f, stream] {
      for (int i = 0; i < 200; ++i) {
        const alloc::Allocation a = f.frees->allocate(kFreesMiB);
        if (a) f.frees->free(a.ptr, kFreesMiB, stream);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  f.frees->synchronize();
  const StreamOrderedFrees::Stats s = f.frees->stats();
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(s.pending_frees, 0u);
  EXPECT_EQ(s.out_of_memory, 0u);  // 4 MiB live at most of 8
  EXPECT_EQ(f.allocator_bytes(), 0u);
  for (size_t n = 1; n <= f.events.count(); ++n) EXPECT_EQ(f.events.event(n).released, 1);
}

}  // namespace
}  // namespace memwall::exec
