// Graph I/O and memory accounting on a synthetic 1M-op training iteration.
//
// The graph is bench/synthetic.h's chain of 1M ops.
// Target: load + liveness + peak of 1M ops well under one second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "synthetic.h"

namespace memwall {
namespace {

using bench::synthetic_graph;

const std::string& graph_text() {
  static const std::string text = graph_to_json_text(synthetic_graph());
  return text;
}

const Graph& parsed_graph() {
  static const Graph graph = graph_from_json_text(graph_text());
  return graph;
}

void BM_ParseJson(benchmark::State& state) {
  const std::string& text = graph_text();
  for (auto _ : state) benchmark::DoNotOptimize(graph_from_json_text(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["ops"] = static_cast<double>(parsed_graph().ops.size());
  state.counters["buffers"] = static_cast<double>(parsed_graph().buffers.size());
  state.counters["MB"] = static_cast<double>(text.size()) / 1e6;
}

void BM_Liveness(benchmark::State& state) {
  const Graph& graph = parsed_graph();
  for (auto _ : state) benchmark::DoNotOptimize(liveness(graph));
}

void BM_MemoryProfile(benchmark::State& state) {
  const Graph& graph = parsed_graph();
  const std::vector<BufferLife> lives = liveness(graph);
  for (auto _ : state) benchmark::DoNotOptimize(memory_profile(graph, lives));
}

// The target as a user meets it: `memwall inspect --graph` of a 1M-op file
// (in the page cache) up to the peak. Dropping the graph afterwards is not
// part of it and runs outside the timed region.
void BM_LoadLivenessPeak(benchmark::State& state) {
  const std::string path = fmt::format("/tmp/memwall_bench_graph_{}.json", ::getpid());
  {
    std::FILE* file = std::fopen(path.c_str(), "wb");
    if (file == nullptr ||
        std::fwrite(graph_text().data(), 1, graph_text().size(), file) != graph_text().size()) {
      state.SkipWithError("cannot write the graph file");
      if (file) std::fclose(file);
      return;
    }
    std::fclose(file);
  }
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto graph = std::make_unique<Graph>(read_graph_file(path));
    const std::vector<BufferLife> lives = liveness(*graph);
    const MemoryProfile profile = memory_profile(*graph, lives);
    benchmark::DoNotOptimize(profile.peak_bytes);
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::remove(path.c_str());
}

void BM_WriteJson(benchmark::State& state) {
  const Graph& graph = parsed_graph();
  for (auto _ : state) benchmark::DoNotOptimize(graph_to_json_text(graph));
}

BENCHMARK(BM_ParseJson)->Unit(benchmark::kMillisecond)->MinTime(2);
BENCHMARK(BM_Liveness)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_MemoryProfile)->Unit(benchmark::kMillisecond)->MinTime(1);
BENCHMARK(BM_LoadLivenessPeak)->Unit(benchmark::kMillisecond)->MinTime(3)->UseManualTime();
BENCHMARK(BM_WriteJson)->Unit(benchmark::kMillisecond)->MinTime(1);

}  // namespace
}  // namespace memwall

BENCHMARK_MAIN();
