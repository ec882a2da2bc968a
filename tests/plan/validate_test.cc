// validate_plan: a plan checked against its graph, each invalid one rejected
// with one exact line naming the step, op or buffer.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "small_graph.h"

namespace memwall {
namespace {

// Valid for small_graph(): every step kind, every placement tier, offsets up
// to the very end of the budget.
Plan valid_plan() {
  Plan plan;
  plan.graph = "small";
  plan.hardware = "a100-40g";
  plan.budget = 128;
  plan.placement = {{0, Tier::kHost}, {1, Tier::kDevice}, {2, Tier::kNvme}};
  plan.steps = {Step::compute(0),
                Step::swap_out(5, Tier::kNvme),
                Step::compute(1, Tier::kHost),
                Step::swap_in(5),
                Step::free(4),
                Step::recompute(1),
                Step::compute(2),
                Step::free(5),
                Step::swap_out(3),
                Step::compute(3)};
  plan.offsets = {{5, 0}, {4, 64}, {1, 112}};  // 1 ("x", 16 bytes) ends exactly at 128
  return plan;
}

struct ValidateCase {
  std::string label;
  std::function<void(Plan&)> change;
  std::string expected;  // the whole message
};

std::vector<ValidateCase> validate_cases() {
  return {
      {"budget above 2^62", [](Plan& p) { p.budget = kMaxBytes + 1; },
       "plan: \"budget\" is 4611686018427387905, above the limit of 2^62 bytes"},
      {"placement of a missing buffer", [](Plan& p) { p.placement[6] = Tier::kHost; },
       "plan: placement: buffer 6 does not exist (the graph has 6 buffers)"},
      {"placement of a negative id", [](Plan& p) { p.placement[-1] = Tier::kHost; },
       "plan: placement: buffer -1 does not exist (the graph has 6 buffers)"},
      {"placement of an activation", [](Plan& p) { p.placement[5] = Tier::kHost; },
       "plan: placement: buffer 5 (\"h0.out\") of kind activation does not exist before the "
       "first op (only param, optim_state and input buffers have a starting tier)"},
      {"placement of a grad", [](Plan& p) { p.placement[3] = Tier::kDevice; },
       "plan: placement: buffer 3 (\"w.grad\") of kind grad does not exist before the first op "
       "(only param, optim_state and input buffers have a starting tier)"},
      {"placement with a corrupt tier", [](Plan& p) { p.placement[0] = static_cast<Tier>(7); },
       R"(plan: placement: buffer 0 ("w") must be "host", "nvme" or "device", got 7)"},
      {"compute of a missing op", [](Plan& p) { p.steps[6] = Step::compute(4); },
       "plan: step 6 (compute): op 4 does not exist (the graph has 4 ops)"},
      {"compute of op 9000", [](Plan& p) { p.steps[7] = Step::compute(9000); },
       "plan: step 7 (compute): op 9000 does not exist (the graph has 4 ops)"},
      {"recompute of a negative op", [](Plan& p) { p.steps[5] = Step::recompute(-1); },
       "plan: step 5 (recompute): op -1 does not exist (the graph has 4 ops)"},
      {"compute on nvme", [](Plan& p) { p.steps[2].on = Tier::kNvme; },
       R"(plan: step 2 (compute): "on" must be "device" or "host", got "nvme")"},
      {"swap_out to the device", [](Plan& p) { p.steps[1].to = Tier::kDevice; },
       R"(plan: step 1 (swap_out): "to" must be "host" or "nvme", got "device")"},
      {"swap_out to a corrupt tier", [](Plan& p) { p.steps[8].to = static_cast<Tier>(255); },
       R"(plan: step 8 (swap_out): "to" must be "host" or "nvme", got 255)"},
      {"swap_out of a missing buffer", [](Plan& p) { p.steps[1].buf = 6; },
       "plan: step 1 (swap_out): buffer 6 does not exist (the graph has 6 buffers)"},
      {"swap_in of a missing buffer", [](Plan& p) { p.steps[3].buf = 1000000; },
       "plan: step 3 (swap_in): buffer 1000000 does not exist (the graph has 6 buffers)"},
      {"free of a negative id", [](Plan& p) { p.steps[4] = Step::free(-1); },
       "plan: step 4 (free): buffer -1 does not exist (the graph has 6 buffers)"},
      {"corrupt step kind", [](Plan& p) { p.steps[9].kind = static_cast<StepKind>(5); },
       "plan: step 9: unknown step kind 5"},
      {"offset of a missing buffer", [](Plan& p) { p.offsets[7] = 0; },
       "plan: offsets: buffer 7 does not exist (the graph has 6 buffers)"},
      {"offset of a negative id", [](Plan& p) { p.offsets[-2] = 0; },
       "plan: offsets: buffer -2 does not exist (the graph has 6 buffers)"},
      {"offset past the budget", [](Plan& p) { p.offsets[5] = 100; },
       "plan: offsets: buffer 5 (\"h0.out\") at 100 with 64 bytes ends past the budget of 128"},
      {"offset one byte past the budget", [](Plan& p) { p.offsets[1] = 113; },
       "plan: offsets: buffer 1 (\"x\") at 113 with 16 bytes ends past the budget of 128"},
      {"offset beyond the budget", [](Plan& p) { p.offsets[0] = 1000; },
       "plan: offsets: buffer 0 (\"w\") at 1000 with 64 bytes ends past the budget of 128"},
      {"offset at 2^62, whose end overflows the limit",
       [](Plan& p) {
         p.budget = kMaxBytes;
         p.offsets[0] = kMaxBytes;
       },
       "plan: offsets: an offset plus its size exceeds the limit of 2^62 bytes "
       "(4611686018427387904 + 64)"},
      {"offset above 2^62", [](Plan& p) { p.offsets[0] = ~uint64_t{0}; },
       "plan: offsets: buffer 0 (\"w\") at 18446744073709551615 is above the limit of 2^62 "
       "bytes"},
      {"placement is checked before steps",
       [](Plan& p) {
         p.steps[0] = Step::compute(99);
         p.placement[4] = Tier::kHost;
       },
       "plan: placement: buffer 4 (\"y\") of kind activation does not exist before the first op "
       "(only param, optim_state and input buffers have a starting tier)"},
      {"steps are checked before offsets",
       [](Plan& p) {
         p.offsets[99] = 0;
         p.steps[2] = Step::free(99);
       },
       "plan: step 2 (free): buffer 99 does not exist (the graph has 6 buffers)"},
      {"the first bad step is reported",
       [](Plan& p) {
         p.steps[8] = Step::free(99);
         p.steps[3] = Step::swap_in(98);
       },
       "plan: step 3 (swap_in): buffer 98 does not exist (the graph has 6 buffers)"},
  };
}

TEST(ValidatePlan, AcceptsAValidPlan) {
  const Graph graph = testing::small_graph();
  ASSERT_NO_THROW(validate(graph));
  EXPECT_NO_THROW(validate_plan(valid_plan(), graph));
  // Nothing to check in an empty plan.
  EXPECT_NO_THROW(validate_plan(Plan{}, graph));
  // And what is valid survives a trip through JSON.
  EXPECT_NO_THROW(validate_plan(plan_from_json_text(plan_to_json_text(valid_plan())), graph));
}

TEST(ValidatePlan, EachInvalidPlanIsRejectedWithItsMessage) {
  const Graph graph = testing::small_graph();
  for (const ValidateCase& c : validate_cases()) {
    SCOPED_TRACE(c.label);
    Plan plan = valid_plan();
    c.change(plan);
    try {
      validate_plan(plan, graph);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), c.expected);
    }
  }
}

// Note [Offsets per stay]: later stays and workspaces fit the budget; state
// that survives the iteration keeps one offset; workspace needs an arena.
TEST(ValidatePlan, OffsetsPerStayAndWorkspaceOffsets) {
  Graph graph = testing::small_graph();
  graph.ops[2].workspace = 16;  // fc.bwd
  Plan plan = valid_plan();
  plan.stay_offsets[5] = {64, 0};  // h0.out comes back elsewhere
  plan.workspace_offsets[2] = {0, 112};
  EXPECT_NO_THROW(validate_plan(plan, graph));
  const auto refused = [&](const std::function<void(Plan&)>& change, const std::string& expected) {
    Plan p = plan;
    change(p);
    try {
      validate_plan(p, graph);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  };
  refused([](Plan& p) { p.stay_offsets[5] = {65}; },
          "plan: offsets: buffer 5 (\"h0.out\") at 65 with 64 bytes ends past the budget of 128");
  refused(
      [](Plan& p) {
        p.workspace_offsets[2] = {0, 113};
      },
      "plan: workspace_offsets: the workspace of op 2 (\"fc.bwd\") at 113 with 16 bytes ends "
      "past the budget of 128");
  refused([](Plan& p) { p.workspace_offsets[1] = {0}; },
          "plan: workspace_offsets: op 1 (\"act\") has no workspace to place");
  refused([](Plan& p) { p.workspace_offsets[4] = {0}; },
          "plan: workspace_offsets: op 4 does not exist (the graph has 4 ops)");
  refused([](Plan& p) { p.workspace_offsets[2] = {}; },
          "plan: workspace_offsets: op 2 (\"fc.bwd\") has no offset");
  refused(
      [](Plan& p) {
        p.offsets.clear();
        p.stay_offsets.clear();
      },
      "plan: workspace_offsets without offsets: the workspace has no arena to sit in");
}

TEST(ValidatePlan, CountsAreSingularForOne) {
  Graph graph;
  graph.buffers.push_back({.id = 0, .name = "x", .bytes = 4, .kind = BufferKind::kInput});
  graph.ops.push_back({.id = 0, .name = "f", .type = "t", .in = {0}});
  Plan plan;
  plan.steps = {Step::compute(1)};
  try {
    validate_plan(plan, graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: step 0 (compute): op 1 does not exist (the graph has 1 op)");
  }
  plan.steps = {Step::free(3)};
  try {
    validate_plan(plan, graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: step 0 (free): buffer 3 does not exist (the graph has 1 buffer)");
  }
}

TEST(ValidatePlan, DesignExampleOnGpt2Small) {
  // DESIGN.md's example plan names "gpt2-small b8 s1024 bf16". Its steps and
  // offsets fit the zoo's graph of that name; its placement does not: there,
  // buffers 12 and 13 are activations (3 and 4 are the embedding weights).
  ModelOptions options;
  options.batch = 8;
  options.seq = 1024;
  options.precision = Precision::kBf16;
  const Graph graph = build_model("gpt2-small", options);
  Plan plan;
  plan.graph = graph.name;
  EXPECT_EQ(plan.graph, "gpt2-small b8 s1024 bf16");
  plan.budget = 42949672960;
  plan.placement = {{12, Tier::kHost}, {13, Tier::kNvme}};
  plan.steps = {Step::compute(0),   Step::swap_out(5, Tier::kHost), Step::swap_in(5), Step::free(7),
                Step::recompute(2), Step::compute(40, Tier::kHost)};
  plan.offsets = {{5, 0}, {7, 1048576}};
  try {
    validate_plan(plan, graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "plan: placement: buffer 12 (\"h0.ln_1\") of kind activation does not exist before "
              "the first op (only param, optim_state and input buffers have a starting tier)");
  }
  plan.placement = {{3, Tier::kHost}, {4, Tier::kNvme}};
  EXPECT_NO_THROW(validate_plan(plan, graph));
  // The last op is in range, the one after it is not.
  plan.steps.push_back(Step::compute(static_cast<OpId>(graph.ops.size() - 1)));
  EXPECT_NO_THROW(validate_plan(plan, graph));
  plan.steps.push_back(Step::compute(static_cast<OpId>(graph.ops.size())));
  try {
    validate_plan(plan, graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("plan: step 7 (compute): op {0} does not exist (the graph has {0} ops)",
                          graph.ops.size()));
  }
  // An offset that ends past the budget, on a real buffer.
  plan.steps.pop_back();
  plan.offsets[7] = plan.budget - 1;
  try {
    validate_plan(plan, graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("plan: offsets: buffer 7 (\"embed_sum\") at 42949672959 with {} bytes "
                          "ends past the budget of 42949672960",
                          graph.buffers[7].bytes));
  }
}

}  // namespace
}  // namespace memwall
