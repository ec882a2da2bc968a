// The figures in docs/swap-vdnn.md and docs/swap-capuchin.md: every swap
// planner on the zoo shapes of activations_zoo_test.cc, on an A100 80GB,
// at an unlimited budget and at 0.9, 0.8 and 0.7 of keep-all's peak.
// Disabled (it only prints); run it with
//   build/tests/test_swap --gtest_also_run_disabled_tests --gtest_filter='*SwapFigures*'
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/swap/activations.h"

namespace memwall {
namespace {

TEST(SwapFigures, DISABLED_Table) {
  const Hardware& hw = find_gpu("a100-80g");
  struct Shape {
    const char* model;
    int64_t batch, size;
  };
  fmt::print(
      "| model | planner | budget / keep-all | peak / keep-all | time / keep-all | "
      "swapped, recomputed | bytes out |\n");
  for (const Shape s : {Shape{"gpt2-small", 4, 512}, Shape{"bert-base", 4, 512},
                        Shape{"resnet50", 16, 160}, Shape{"vgg16", 32, 224}}) {
    ModelOptions options;
    options.batch = s.batch;
    (find_model(s.model).family == ModelFamily::kCnn ? options.image : options.seq) = s.size;
    const Graph graph = build_model(s.model, options);
    const SimResult keep = simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw);
    const auto peak = static_cast<double>(keep.peak_bytes[static_cast<int>(Tier::kDevice)]);
    for (const SwapPlanner& planner : swap_planners()) {
      for (const double fraction : {0.0, 0.9, 0.8, 0.7}) {
        const uint64_t budget = fraction == 0 ? kMaxBytes : static_cast<uint64_t>(fraction * peak);
        const std::string label = fraction == 0 ? "unlimited" : fmt::format("{}", fraction);
        try {
          const SwapResult r = planner.fn(graph, hw, budget, {});
          fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {}, {} | {:.1f} MB |\n", s.model,
                     planner.name, label, static_cast<double>(r.simulated_peak) / peak,
                     r.simulated_time / keep.iteration_time, r.swapped, r.recomputed,
                     static_cast<double>(r.bytes_swapped_out) / 1e6);
        } catch (const Error& e) {
          fmt::print("| {} | {} | {} | {} |\n", s.model, planner.name, label, e.what());
        }
      }
    }
  }
}

}  // namespace
}  // namespace memwall
