// Replays an allocation/free sequence through an allocator: the engine of
// `memwall alloc-replay` and `memwall bench alloc`, fed from a graph's
// schedule, a plan or a lifetimes CSV by the caller (alloc depends on no
// other module, so events are plain records).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memwall/alloc/allocator.h"

namespace memwall::alloc {

struct ReplayEvent {
  enum class Kind : uint8_t { alloc, free };
  Kind kind = Kind::alloc;
  uint64_t id = 0;     // names the buffer; a free names an earlier alloc's id
  uint64_t bytes = 0;  // alloc only
  StreamId stream = 0;
};

struct ReplayResult {
  bool fits = true;  // every allocation succeeded
  // Index of the event that ran out of memory when !fits (the replay stops there).
  uint64_t failed_event = 0;
  Stats stats;  // taken when the replay ends (before the leftover frees)
};

// Runs `events` in order; allocation ids are passed as the request tag (the
// "plan" policy's offset key). Throws Error for a malformed sequence (an id
// allocated twice while live, a free of an unknown id, naming the event
// index). Live allocations left at the end are freed after taking the stats.
ReplayResult replay(Allocator& allocator, std::span<const ReplayEvent> events);

// The same on a fresh simulated device of `capacity` bytes.
ReplayResult replay(std::string_view policy, uint64_t capacity, std::span<const ReplayEvent> events,
                    const Options& options = {}, uint64_t granularity = kDefaultGranularity);

}  // namespace memwall::alloc
