// `memwall run` of ZeRO's rank graphs (issue 22): two processes, one per
// rank, meet through torch.distributed's gloo backend. After 3 steps every
// rank's losses, parameters and optimizer states (its shards of them) are
// bitwise those of eager PyTorch's data-parallel reference: each rank its
// own micro-batch, gradients divided by 2 and summed, as DDP's default
// hook does (Note [Data-parallel reference] in python/memwall/values/reference.py);
// and rank 0's device memory is the simulator's.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_memwall.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/plan.h"
#include "run_checks.h"

namespace memwall::testing {
namespace {

struct RankCase {
  int stage;
  std::string options;  // more `memwall plan` options
  std::string states;   // what the plan's "model states" row must say
};

bool no_gloo(const RunResult& r) { return r.err.find("without gloo") != std::string::npos; }

#define SKIP_WITHOUT_GLOO(r)                                                           \
  if (no_gloo(r)) {                                                                    \
    GTEST_SKIP() << "memwall was built without gloo's headers (apt install "           \
                    "libgloo-dev, scripts/install-deps.sh --torch): no data-parallel " \
                    "runs";                                                            \
  }

// Collectives the plan recomputes (stage 3's gathers, again in backward).
int recomputed_collectives(const Graph& g, const Plan& p) {
  int n = 0;
  for (const Step& s : p.steps) {
    if (s.kind == StepKind::kRecompute && g.ops[s.op].phase == Phase::kComm) ++n;
  }
  return n;
}

// Traces `source` for one rank (memwall run's one-go path) into `dir`, then
// plans each case for 2 ranks and runs it on values traced once for 2 ranks
// (dir/ranks). The last case's plan stays in dir/plan.json and
// dir/rank_graph.json.
void run_ranks(const std::string& dir, const std::string& tag, const std::string& source,
               const std::vector<RankCase>& cases, int* recomputed = nullptr) {
  const std::string ranks = dir + "/ranks";
  check_run(run_memwall("run " + source +
                        " --gpu l4 --steps 1 --check-eager --json --keep-values " + dir),
            tag + " traced");
  for (const RankCase& c : cases) {
    const std::string what = fmt::format("{} ZeRO-{} {}", tag, c.stage, c.options);
    const std::string plan = dir + "/plan.json", graph = dir + "/rank_graph.json";
    const RunResult planned = run_memwall(fmt::format(
        "plan --graph {}/graph.json --gpu l4 --strategy auto --ranks 2 --zero-stage {} {} --out "
        "{} --out-graph {}",
        dir, c.stage, c.options, plan, graph));
    ASSERT_EQ(planned.exit_code, 0) << what << ": " << planned.err;
    EXPECT_NE(planned.out.find("model states            " + c.states), std::string::npos)
        << what << ": " << planned.out;
    if (recomputed != nullptr) {
      *recomputed += recomputed_collectives(read_graph_file(graph), read_plan_file(plan));
    }
    const RunResult r =
        run_memwall("run --graph " + graph + " --plan " + plan +
                    " --gpu l4 --steps 3 --check-eager --json --keep-values " + ranks);
    SKIP_WITHOUT_GLOO(r);
    const nlohmann::json j = check_run(r, what);
    if (j.is_null()) continue;
    EXPECT_EQ(j.at("ranks"), 2) << what;
    for (const nlohmann::json& step : j.at("steps")) {
      EXPECT_GT(step.at("comm_time_s").get<double>(), 0) << what;
    }
  }
  // The values for two ranks: each its own micro-batch.
  EXPECT_TRUE(std::filesystem::exists(ranks + "/inputs1.bin")) << tag;
  EXPECT_FALSE(std::filesystem::exists(ranks + "/inputs2.bin")) << tag;
}

// gpt-mini (python/memwall/sources/builtin.py): dropout after embeddings,
// attention and MLP, AdamW. Every stage, with the optimizer where auto puts
// it (host, paged, device chunks), without offsets, and on the device; at
// 22 MiB stage 3's plan recomputes gathers in backward, which both ranks do
// in step.
TEST(RunRanks, TransformerWithDropoutEveryStageIsEagerBitForBit) {
  REQUIRE_EXECUTOR();
  int recomputed = 0;
  const std::string dir = dir_for("ranks_gpt_mini");
  run_ranks(dir, "ranks_gpt_mini", "--builtin gpt-mini",
            {{0, "", "replicated states"},
             {1, "", "ZeRO-1"},
             {2, "", "ZeRO-2"},
             {3, "", "ZeRO-3"},
             // On the stitching allocator: the live bytes count the gathered
             // parameters (they once went to the host with gloo's staging).
             {3, "--no-layout", "ZeRO-3"},
             {1, "--host-memory 1KiB", "ZeRO-1, all on the device"},
             {3, "--host-memory 1KiB --budget 22MiB", "ZeRO-3, all on the device"}},
            &recomputed);
  EXPECT_GT(recomputed, 0);
  std::filesystem::remove_all(dir);
}

// Batch norm: each rank keeps its own running statistics (as DDP with
// broadcast_buffers=False), which rank 0 compares.
TEST(RunRanks, CnnWithBatchNormIsEagerBitForBit) {
  REQUIRE_EXECUTOR();
  const std::string dir = dir_for("ranks_cnn_bn");
  run_ranks(dir, "ranks_cnn_bn", "--script " + models("cnn_bn"),
            {{2, "", "ZeRO-2, optimizer on host"},
             {3, "--host-memory 1KiB", "ZeRO-3, all on the device"}});
  const std::string run = "run --graph " + dir + "/rank_graph.json --plan " + dir +
                          "/plan.json --gpu l4 --steps 3 --check-eager --keep-values ";
  // Values kept for one rank cannot feed two: one line, before any rank starts.
  expect_one_line(run_memwall(run + dir), 2,
                  "the values were kept for fewer than the plan's 2 data-parallel ranks");
  // Note [Dead ranks]: rank 1 fails before it joins (its micro-batch is cut
  // short); rank 0, waiting for it, is ended with rank 1's error line.
  const std::string broken = dir + "/broken";
  std::filesystem::copy(dir + "/ranks", broken);
  std::filesystem::resize_file(broken + "/inputs1.bin", 100);
  const RunResult dead = run_memwall(run + broken);
  SKIP_WITHOUT_GLOO(dead);
  expect_one_line(dead, 2, "run failed: rank 1: " + broken + "/inputs1.bin");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace memwall::testing
