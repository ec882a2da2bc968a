// Replays an allocation/free sequence (replay.h).
#include "memwall/alloc/replay.h"

#include <unordered_map>

namespace memwall::alloc {

ReplayResult replay(Allocator& allocator, std::span<const ReplayEvent> events) {
  ReplayResult result;
  std::unordered_map<uint64_t, void*> live;
  live.reserve(events.size() / 2 + 1);
  auto fail = [](uint64_t index, const std::string& what) {
    throw Error("replay: event " + std::to_string(index) + ": " + what);
  };
  for (uint64_t index = 0; index < events.size(); ++index) {
    const ReplayEvent& event = events[index];
    if (event.kind == ReplayEvent::Kind::alloc) {
      if (live.count(event.id) != 0) {
        fail(index, "id " + std::to_string(event.id) + " allocated again while live");
      }
      const Allocation allocation = allocator.allocate(event.bytes, event.stream, event.id);
      if (allocation.out_of_memory) {
        result.fits = false;
        result.failed_event = index;
        break;
      }
      live.emplace(event.id, allocation.ptr);
    } else {
      auto it = live.find(event.id);
      if (it == live.end()) fail(index, "free of id " + std::to_string(event.id) + " not live");
      allocator.free(it->second);
      live.erase(it);
    }
  }
  result.stats = allocator.stats();
  for (const auto& [id, ptr] : live) allocator.free(ptr);
  return result;
}

ReplayResult replay(std::string_view policy, uint64_t capacity, std::span<const ReplayEvent> events,
                    const Options& options, uint64_t granularity) {
  const std::unique_ptr<Device> device = make_sim_device(capacity, granularity);
  const std::unique_ptr<Allocator> allocator = make_allocator(policy, *device, options);
  return replay(*allocator, events);
}

}  // namespace memwall::alloc
