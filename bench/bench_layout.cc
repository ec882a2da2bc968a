// Layout heuristics, the validator and the CSV reader on the largest real
// input, PanGu-α 2.6B's 18,692 MindSpore tensors (../shared/data/layout,
// see its README); each benchmark is skipped when the file is absent.
// Target: every heuristic well under one second. docs/layout.md has the
// arena ÷ lower bound table for every input.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <optional>
#include <string>

#include "memwall/base/file_text.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"

namespace memwall {
namespace {

const std::string kPangu =
    std::string(MEMWALL_SOURCE_DIR) + "/../shared/data/layout/somas-pangu_2.6B.csv";

const std::optional<LayoutProblem>& pangu() {
  static const std::optional<LayoutProblem> problem = []() -> std::optional<LayoutProblem> {
    if (!std::filesystem::exists(kPangu)) return std::nullopt;
    return read_layout_csv(kPangu).problem;
  }();
  return problem;
}

void BM_Heuristic(benchmark::State& state, Layout (*run)(const LayoutProblem&)) {
  if (!pangu()) return state.SkipWithError("../shared/data/layout is absent");
  const LayoutProblem& problem = *pangu();
  const double bound = static_cast<double>(arena_lower_bound(problem));
  uint64_t arena = 0;
  for (auto _ : state) arena = run(problem).arena;
  state.counters["buffers"] = static_cast<double>(problem.buffers.size());
  state.counters["arena/bound"] = static_cast<double>(arena) / bound;
}

void BM_CheckLayout(benchmark::State& state) {
  if (!pangu()) return state.SkipWithError("../shared/data/layout is absent");
  const Layout layout = greedy_by_size(*pangu());
  for (auto _ : state) benchmark::DoNotOptimize(check_layout(*pangu(), layout));
}

void BM_LowerBound(benchmark::State& state) {
  if (!pangu()) return state.SkipWithError("../shared/data/layout is absent");
  for (auto _ : state) benchmark::DoNotOptimize(arena_lower_bound(*pangu()));
}

void BM_ReadCsv(benchmark::State& state) {
  if (!pangu()) return state.SkipWithError("../shared/data/layout is absent");
  const FileText file(kPangu);
  for (auto _ : state) benchmark::DoNotOptimize(layout_from_csv(file.text()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * file.text().size()));
}

void register_heuristics() {
  for (const LayoutHeuristic& h : layout_heuristics()) {
    benchmark::RegisterBenchmark(("BM_Heuristic/" + std::string(h.name)).c_str(), BM_Heuristic,
                                 h.run)
        ->Unit(benchmark::kMillisecond);
  }
}

BENCHMARK(BM_CheckLayout)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LowerBound)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadCsv)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memwall

int main(int argc, char** argv) {
  memwall::register_heuristics();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
