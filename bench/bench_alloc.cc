// Allocation + free of a cached size, per policy: the runtime allocator's
// fast path (issue 7's target: under 100 ns median). The block is freed and
// re-taken from the cache every iteration; the device is never called.
// Run: build/bench/bench_alloc (reports the median of 10 repetitions; on a
// loaded machine the CPU column is the one to read).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "memwall/alloc/allocator.h"

namespace {

using memwall::alloc::Allocator;
using memwall::alloc::kMiB;

constexpr uint64_t kCapacity = uint64_t{1} << 30;

struct Rig {
  std::unique_ptr<memwall::alloc::Device> device;
  std::unique_ptr<Allocator> allocator;
};

Rig make_rig(std::string_view policy) {
  Rig rig;
  rig.device = memwall::alloc::make_host_vmm(kCapacity);
  memwall::alloc::Options options;  // "plan": every tag has its own 8 MiB slot
  options.arena_bytes = 512 * kMiB;
  for (uint64_t tag = 0; tag < 64; ++tag) options.offsets[tag] = tag * 8 * kMiB;
  rig.allocator = memwall::alloc::make_allocator(policy, *rig.device, options);
  return rig;
}

void alloc_free_loop(benchmark::State& state, Allocator& allocator, uint64_t bytes, uint64_t tag) {
  for (auto _ : state) {
    void* ptr = allocator.allocate(bytes, 0, tag).ptr;
    benchmark::DoNotOptimize(ptr);
    allocator.free(ptr);
  }
}

// The usual cached reuse: the freed block's neighbours are live, so it goes
// back to its pool whole and the next request of its size takes it again.
void alloc_free_cached(benchmark::State& state, std::string_view policy) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  Rig rig = make_rig(policy);
  std::vector<void*> blocks;
  for (uint64_t tag = 0; tag < 64; ++tag)
    blocks.push_back(rig.allocator->allocate(bytes, 0, tag).ptr);
  rig.allocator->free(blocks[32]);
  alloc_free_loop(state, *rig.allocator, bytes, 32);
  blocks[32] = nullptr;
  for (void* ptr : blocks) rig.allocator->free(ptr);
  state.SetLabel(std::string(policy));
}

// The worst cached case: the block is split off a free remainder on every
// allocation and merged back on every free.
void alloc_free_split_merge(benchmark::State& state, std::string_view policy) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  Rig rig = make_rig(policy);
  rig.allocator->free(rig.allocator->allocate(bytes, 0, 0).ptr);
  alloc_free_loop(state, *rig.allocator, bytes, 0);
  state.SetLabel(std::string(policy));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Repetitions(10)->ReportAggregatesOnly(true);
}

BENCHMARK_CAPTURE(alloc_free_cached, caching, "caching")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, expandable, "expandable")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, stitching, "stitching")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, plan, "plan")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_split_merge, caching, "caching")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_split_merge, expandable, "expandable")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_split_merge, stitching, "stitching")->Apply(sizes);

// Four threads on one allocator: the cost of its single mutex under contention.
void alloc_free_contended(benchmark::State& state) {
  static std::unique_ptr<memwall::alloc::Device> device;
  static std::unique_ptr<Allocator> allocator;
  if (state.thread_index() == 0) {
    device = memwall::alloc::make_host_vmm(kCapacity);
    allocator = memwall::alloc::make_allocator("caching", *device);
  }
  for (auto _ : state) {
    void* ptr = allocator->allocate(4096, static_cast<uint32_t>(state.thread_index())).ptr;
    benchmark::DoNotOptimize(ptr);
    allocator->free(ptr);
  }
  if (state.thread_index() == 0) {
    allocator.reset();
    device.reset();
  }
}
BENCHMARK(alloc_free_contended)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
