// The policy-independent half of every allocator: the lock, the argument
// contract (allocator.h), statistics and the device calls that keep them,
// the JSON snapshot and the factory.
#include "memwall/alloc/allocator.h"

#include <array>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "policies.h"

namespace memwall::alloc {

std::string hex_address(uintptr_t address) {
  char text[2 + 16 + 1];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

double Stats::fragmentation() const {
  if (peak_reserved_bytes == 0) return 0.0;
  return 1.0 -
         static_cast<double>(allocated_at_peak_reserved) / static_cast<double>(peak_reserved_bytes);
}

Allocator::Allocator(std::string_view policy, Device& device)
    : device_(device), policy_(policy), granularity_(device.granularity()) {}

Allocation Allocator::allocate(uint64_t bytes, StreamId stream, uint64_t tag) {
  std::lock_guard lock(mutex_);
  ++stats_.alloc_calls;
  if (bytes == 0) return {};
  if (bytes > kMaxRequestBytes) {
    throw Error(policy_ + ": request of " + std::to_string(bytes) +
                " bytes exceeds the largest allocatable size (2^62 bytes)");
  }
  Allocation result = do_allocate(bytes, stream, tag);
  if (!result) {
    ++stats_.oom_events;
    result.out_of_memory = true;
    return result;
  }
  ++stats_.live_allocations;
  stats_.requested_bytes += bytes;
  stats_.allocated_bytes += result.block_bytes;
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  if (stats_.reserved_bytes == stats_.peak_reserved_bytes) {
    stats_.allocated_at_peak_reserved =
        std::max(stats_.allocated_at_peak_reserved, stats_.allocated_bytes);
  }
  return result;
}

void Allocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  const Freed freed = do_free(ptr);
  ++stats_.free_calls;
  --stats_.live_allocations;
  stats_.requested_bytes -= freed.requested;
  stats_.allocated_bytes -= freed.block_bytes;
}

void Allocator::empty_cache() {
  std::lock_guard lock(mutex_);
  ++stats_.cache_flushes;
  do_empty_cache();
}

Stats Allocator::stats() const {
  std::lock_guard lock(mutex_);
  Stats stats = stats_;
  stats.cached_bytes = do_cached_bytes();
  return stats;
}

uint64_t Allocator::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return stats_.reserved_bytes;
}

void Allocator::audit() const {
  std::lock_guard lock(mutex_);
  do_audit();
  if (stats_.reserved_bytes > device_.chunks_in_use() * granularity_) {
    throw Error(policy_ + ": audit: reserved bytes exceed the device's chunks in use");
  }
}

uintptr_t Allocator::reserve_range(uint64_t bytes) {
  const uintptr_t base = device_.reserve(bytes);
  ++stats_.segments_created;
  return base;
}

void Allocator::unreserve_range(uintptr_t base, uint64_t bytes) {
  device_.unreserve(base, bytes);
  ++stats_.segments_released;
}

bool Allocator::create_chunks(uint64_t count, std::vector<ChunkRun>& runs) {
  if (count == 0) return true;
  if (count > device_headroom_chunks() || !device_.create_chunks(count, runs)) return false;
  stats_.chunks_created += count;
  stats_.reserved_bytes += count * granularity_;
  if (stats_.reserved_bytes > stats_.peak_reserved_bytes) {
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
    stats_.allocated_at_peak_reserved = stats_.allocated_bytes;
  }
  return true;
}

void Allocator::release_chunks(ChunkRun run) {
  device_.release_chunks(run);
  stats_.chunks_released += run.count;
  stats_.reserved_bytes -= run.count * granularity_;
}

void Allocator::map_chunks(uintptr_t address, ChunkRun run) {
  device_.map_chunks(address, run);
  stats_.maps += run.count;
}

void Allocator::unmap_range(uintptr_t address, uint64_t bytes) {
  device_.unmap(address, bytes);
  ++stats_.unmaps;
}

uint64_t Allocator::device_headroom_chunks() const {
  return device_.capacity() / granularity_ - device_.chunks_in_use();
}

std::string Allocator::snapshot_json() const {
  std::lock_guard lock(mutex_);
  const Stats& s = stats_;
  nlohmann::ordered_json stats = {
      {"requested_bytes", s.requested_bytes},
      {"peak_requested_bytes", s.peak_requested_bytes},
      {"allocated_bytes", s.allocated_bytes},
      {"peak_allocated_bytes", s.peak_allocated_bytes},
      {"reserved_bytes", s.reserved_bytes},
      {"cached_bytes", do_cached_bytes()},
      {"peak_reserved_bytes", s.peak_reserved_bytes},
      {"allocated_at_peak_reserved", s.allocated_at_peak_reserved},
      {"fragmentation", s.fragmentation()},
      {"chunks_created", s.chunks_created},
      {"chunks_released", s.chunks_released},
      {"segments_created", s.segments_created},
      {"segments_released", s.segments_released},
      {"maps", s.maps},
      {"unmaps", s.unmaps},
      {"stitches", s.stitches},
      {"cache_flushes", s.cache_flushes},
      {"oom_events", s.oom_events},
      {"alloc_calls", s.alloc_calls},
      {"free_calls", s.free_calls},
      {"live_allocations", s.live_allocations},
  };
  nlohmann::ordered_json segments = nlohmann::ordered_json::array();
  for (const SnapshotSegment& segment : do_snapshot()) {
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (const SnapshotBlock& block : segment.blocks) {
      blocks.push_back({{"address", block.address},
                        {"bytes", block.bytes},
                        {"requested", block.requested},
                        {"allocated", block.allocated}});
    }
    segments.push_back({{"address", segment.address},
                        {"virtual_bytes", segment.virtual_bytes},
                        {"mapped_bytes", segment.mapped_bytes},
                        {"stream", segment.stream},
                        {"pool", segment.pool == PoolKind::small ? "small" : "large"},
                        {"blocks", std::move(blocks)}});
  }
  const nlohmann::ordered_json snapshot = {
      {"policy", policy_},           {"device", device_.name()},
      {"granularity", granularity_}, {"capacity", device_.capacity()},
      {"stats", std::move(stats)},   {"segments", std::move(segments)}};
  return snapshot.dump();
}

namespace {
constexpr std::array<std::string_view, 4> kPolicyNames = {"caching", "expandable", "stitching",
                                                          "plan"};
}

std::span<const std::string_view> policy_names() { return kPolicyNames; }

std::unique_ptr<Allocator> make_allocator(std::string_view policy, Device& device,
                                          const Options& options) {
  if (policy == "caching") return make_block_allocator(BlockPolicy::caching, device, options);
  if (policy == "expandable") {
    return make_block_allocator(BlockPolicy::expandable, device, options);
  }
  if (policy == "stitching") return make_block_allocator(BlockPolicy::stitching, device, options);
  if (policy == "plan") return make_plan_allocator(device, options);
  std::string known;
  for (std::string_view name : kPolicyNames) {
    known += known.empty() ? "" : ", ";
    known += name;
  }
  throw Error("unknown allocator policy \"" + std::string(policy) + "\" (known: " + known + ")");
}

}  // namespace memwall::alloc
