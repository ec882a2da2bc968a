#include "stream_ordered_frees.h"

#include <algorithm>
#include <string>
#include <utility>

namespace memwall::exec {

// Note [Stream-ordered frees]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A tensor dies on the host when its last reader has been queued, not when
// the GPU has run it: handing its block out again at once would let the
// next owner's kernels (on another stream, or before the reader on a copy
// stream) write memory still being read. So a free records an event on the
// block's stream (and on every stream use_on named), and the block returns
// to the allocator only when all of its events have completed. Events on
// one stream complete in the order they were recorded, so each stream's
// queue is polled from its front and stops at the first event not done;
// `order` numbers the events over all streams, so that when memory is short
// the oldest one is waited for first: it is the likeliest to be done, and
// waiting in free order gives memory back the way the program freed it.
// live_bytes drops at the free (the program's view, which the planner's
// simulation counts); pending blocks are counted apart (pending_bytes,
// peak_held_bytes). Unlike PyTorch's caching allocator, a block is not
// reused on its own stream before its event completes: the allocator's
// pools are not per stream here (stitching moves chunks across blocks), so
// a block back early would be free for every stream.

StreamOrderedFrees::StreamOrderedFrees(alloc::Allocator& allocator, EventFunctions events)
    : allocator_(allocator), events_(std::move(events)) {
  stats_.peak_reserved_bytes = allocator_.reserved_bytes();
}

StreamOrderedFrees::~StreamOrderedFrees() {
  try {
    synchronize();
  } catch (...) {
    // A failed device: the allocator's destruction releases the blocks.
  }
  for (const auto& [stream, queue] : recorded_) {
    for (const Recorded& r : queue) {
      try {
        events_.release(r.event);
      } catch (...) {
        // Nothing left to do with an event that cannot be released.
      }
    }
  }
}

alloc::Allocation StreamOrderedFrees::allocate(uint64_t bytes) {
  if (bytes == 0) return {};
  std::unique_lock lock(mutex_);
  poll_locked();
  alloc::Allocation a = allocator_.allocate(bytes);
  note_reserved();
  while (!a && wait_oldest(lock)) {
    ++stats_.event_waits;
    a = allocator_.allocate(bytes);
    note_reserved();
  }
  if (!a) {
    ++stats_.out_of_memory;
    return a;
  }
  live_[a.ptr] = {.bytes = bytes, .allocated = a.block_bytes};
  stats_.live_bytes += bytes;
  stats_.live_allocated_bytes += a.block_bytes;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.live_allocated_bytes);
  note_held();
  return a;
}

void StreamOrderedFrees::use_on(void* ptr, StreamKey stream) {
  std::lock_guard lock(mutex_);
  const auto it = live_.find(ptr);
  if (it == live_.end()) {
    throw alloc::Error("device memory: record_stream of " +
                       alloc::hex_address(reinterpret_cast<uintptr_t>(ptr)) +
                       ", which is not a live block");
  }
  std::vector<StreamKey>& streams = it->second.streams;
  if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
}

void StreamOrderedFrees::free(void* ptr, uint64_t bytes, StreamKey stream) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const std::string at = alloc::hex_address(reinterpret_cast<uintptr_t>(ptr));
  const auto it = live_.find(ptr);
  if (it == live_.end()) {
    if (pending_.contains(ptr)) {
      throw alloc::Error("device memory: double free of " + at +
                         " (freed before, still waiting for its stream)");
    }
    throw alloc::Error("device memory: free of " + at +
                       ", which is not a live block (a double free, or a pointer not from here)");
  }
  Block block = it->second;
  if (block.bytes != bytes) {
    throw alloc::Error("device memory: free of " + at + " as " + std::to_string(bytes) +
                       " bytes, but it was allocated as " + std::to_string(block.bytes));
  }
  std::vector<StreamKey> streams{stream};
  for (const StreamKey s : block.streams) {
    if (s != stream) streams.push_back(s);
  }
  // Every event first, so that a failure leaves no half-recorded free.
  std::vector<EventHandle> events;
  try {
    for (const StreamKey s : streams) events.push_back(events_.record(s));
  } catch (...) {
    for (const EventHandle e : events) events_.release(e);
    live_.erase(it);
    stats_.live_bytes -= block.bytes;
    stats_.live_allocated_bytes -= block.allocated;
    stats_.lost_bytes += block.allocated;  // the GPU may still use it: never reused
    throw;
  }
  live_.erase(it);
  stats_.live_bytes -= block.bytes;
  stats_.live_allocated_bytes -= block.allocated;
  stats_.pending_bytes += block.allocated;
  ++stats_.pending_frees;
  block.events_left = static_cast<uint32_t>(events.size());
  block.streams.clear();
  pending_.emplace(ptr, std::move(block));
  for (size_t i = 0; i < streams.size(); ++i) {
    recorded_[streams[i]].push_back({next_order_++, events[i], ptr});
  }
}

void StreamOrderedFrees::poll() {
  std::lock_guard lock(mutex_);
  poll_locked();
}

void StreamOrderedFrees::synchronize() {
  std::unique_lock lock(mutex_);
  poll_locked();
  while (wait_oldest(lock)) {
  }
}

void StreamOrderedFrees::poll_locked() {
  for (auto it = recorded_.begin(); it != recorded_.end();) {
    std::deque<Recorded>& queue = it->second;
    while (!queue.empty() && events_.done(queue.front().event)) {
      const Recorded r = queue.front();
      queue.pop_front();
      completed(r);
    }
    it = queue.empty() ? recorded_.erase(it) : std::next(it);
  }
}

bool StreamOrderedFrees::wait_oldest(std::unique_lock<std::mutex>& lock) {
  if (recorded_.empty()) return false;
  auto oldest = recorded_.begin();
  for (auto it = recorded_.begin(); it != recorded_.end(); ++it) {
    if (it->second.front().order < oldest->second.front().order) oldest = it;
  }
  // Taken off its queue while this thread waits unlocked, so that no other
  // thread completes it too.
  const StreamKey stream = oldest->first;
  const Recorded r = oldest->second.front();
  oldest->second.pop_front();
  if (oldest->second.empty()) recorded_.erase(oldest);
  lock.unlock();
  try {
    events_.wait(r.event);
  } catch (...) {
    lock.lock();
    recorded_[stream].push_front(r);  // still pending; later events stay behind it
    throw;
  }
  lock.lock();
  completed(r);
  poll_locked();  // others may have completed meanwhile
  return true;
}

void StreamOrderedFrees::completed(const Recorded& r) {
  // The block's bookkeeping first: an event that fails to go back to its
  // pool must not leave the block pending for ever.
  const auto it = pending_.find(r.ptr);
  if (--it->second.events_left == 0) {
    stats_.pending_bytes -= it->second.allocated;
    --stats_.pending_frees;
    pending_.erase(it);
    allocator_.free(r.ptr);
  }
  events_.release(r.event);
}

void StreamOrderedFrees::note_held() {
  stats_.peak_held_bytes =
      std::max(stats_.peak_held_bytes, stats_.live_allocated_bytes + stats_.pending_bytes);
}

void StreamOrderedFrees::note_reserved() {
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, allocator_.reserved_bytes());
}

StreamOrderedFrees::Stats StreamOrderedFrees::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void StreamOrderedFrees::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes = stats_.live_bytes;
  stats_.peak_allocated_bytes = stats_.live_allocated_bytes;
  stats_.peak_held_bytes = stats_.live_allocated_bytes + stats_.pending_bytes;
  stats_.peak_reserved_bytes = allocator_.reserved_bytes();
}

}  // namespace memwall::exec
