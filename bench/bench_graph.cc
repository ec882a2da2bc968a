// Graph I/O and memory accounting on a synthetic 1M-op training iteration.
//
// The graph is chain-like, as a deep network's is: forward op i reads
// activation i-1 and a parameter and creates activation i; backward ops walk
// the chain in reverse, reading the saved activation and creating its
// gradient while accumulating parameter gradients in place; one optimizer op
// per parameter reads its gradient and updates it and its optimizer state.
// Target: load + liveness + peak of 1M ops well under one second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "memwall/graph/graph.h"

namespace memwall {
namespace {

constexpr int kOps = 1'000'000;
constexpr int kParams = 16;

BufferId add_buffer(Graph& graph, std::string name, uint64_t bytes, BufferKind kind) {
  Buffer& b = graph.buffers.emplace_back();
  b.id = static_cast<BufferId>(graph.buffers.size() - 1);
  b.name = std::move(name);
  b.bytes = bytes;
  b.kind = kind;
  b.dtype = DType::kBF16;
  b.shape = {static_cast<int64_t>(bytes / 2)};
  return b.id;
}

Op& add_op(Graph& graph, std::string name, std::string type, Phase phase) {
  Op& op = graph.ops.emplace_back();
  op.id = static_cast<OpId>(graph.ops.size() - 1);
  op.name = std::move(name);
  op.type = std::move(type);
  op.phase = phase;
  op.flops = 1.5e9;
  op.bytes = 4.2e6;
  return op;
}

Graph synthetic_graph() {
  Graph graph;
  graph.name = "synthetic chain 1M ops";
  graph.meta = {{"generator", "bench_graph"}, {"ops", kOps}};
  const int forward = (kOps - kParams) / 2;
  std::vector<BufferId> params, states, param_grads(kParams, -1), acts, grads(forward, -1);
  for (int p = 0; p < kParams; ++p) {
    params.push_back(add_buffer(graph, fmt::format("p{}", p), 1 << 20, BufferKind::kParam));
    states.push_back(add_buffer(graph, fmt::format("p{}.m", p), 2 << 20, BufferKind::kOptimState));
  }
  const BufferId input = add_buffer(graph, "x", 1 << 16, BufferKind::kInput);
  for (int i = 0; i < forward; ++i) {
    const BufferId a =
        add_buffer(graph, fmt::format("l{}.out", i), 1 << 16, BufferKind::kActivation);
    Op& op = add_op(graph, fmt::format("l{}.fwd", i), "matmul", Phase::kForward);
    op.in = {i == 0 ? input : acts.back(), params[i % kParams]};
    op.out = {a};
    acts.push_back(a);
  }
  for (int i = forward - 1; i >= 0; --i) {
    const BufferId g = add_buffer(graph, fmt::format("l{}.grad", i), 1 << 16, BufferKind::kGrad);
    Op& op = add_op(graph, fmt::format("l{}.bwd", i), "matmul_grad", Phase::kBackward);
    op.in = {acts[i], params[i % kParams]};
    if (i + 1 < forward) op.in.push_back(grads[i + 1]);
    op.out = {g};
    grads[i] = g;
    BufferId& pg = param_grads[i % kParams];
    if (pg < 0) {
      pg = add_buffer(graph, fmt::format("p{}.grad", i % kParams), 1 << 20, BufferKind::kGrad);
      op.out.push_back(pg);
    } else {
      op.updates = {pg};  // gradient accumulation
    }
    op.workspace = 1 << 12;
  }
  for (int p = 0; p < kParams; ++p) {
    Op& op = add_op(graph, fmt::format("p{}.adam", p), "adam", Phase::kOptimizer);
    op.in = {param_grads[p]};
    op.updates = {params[p], states[p]};
  }
  return graph;
}

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
