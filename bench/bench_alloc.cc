// Allocation + free of a cached size, per policy: the runtime allocator's
// fast path (issue 7's target: under 100 ns median). The block is freed and
// re-taken from the cache every iteration; the device is never called.
// Run: build/bench/bench_alloc (reports the median of 10 repetitions).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "memwall/alloc/allocator.h"

namespace {

using memwall::alloc::Allocator;
using memwall::alloc::kMiB;

constexpr uint64_t kCapacity = uint64_t{1} << 30;

void alloc_free_cached(benchmark::State& state, std::string_view policy) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  auto device = memwall::alloc::make_host_vmm(kCapacity);
  memwall::alloc::Options options;
  options.arena_bytes = 64 * kMiB;
  options.offsets = {{0, 0}};
  std::unique_ptr<Allocator> allocator = memwall::alloc::make_allocator(policy, *device, options);
  // A neighbour keeps the block from merging into a whole free segment, as
  // in a running program; the first allocation fills the cache.
  void* neighbour = allocator->allocate(512, 1, 1).ptr;
  allocator->free(allocator->allocate(bytes, 0, 0).ptr);
  for (auto _ : state) {
    void* ptr = allocator->allocate(bytes, 0, 0).ptr;
    benchmark::DoNotOptimize(ptr);
    allocator->free(ptr);
  }
  allocator->free(neighbour);
  state.SetLabel(std::string(policy));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Repetitions(10)->ReportAggregatesOnly(true);
}

BENCHMARK_CAPTURE(alloc_free_cached, caching, "caching")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, expandable, "expandable")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, stitching, "stitching")->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free_cached, plan, "plan")->Apply(sizes);

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
