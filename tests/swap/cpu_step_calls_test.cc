// Note [CPU step calls] (src/swap/offload.cc) and Note [Call bindings]
// (src/graph/call_bindings.cc), issue 45: a bf16 ZeRO-Offload plan that
// `memwall plan` and `memwall simulate` accepted stopped in `memwall run`
// ("op model.norm.weight.step names buffer 25 (model.norm.weight), which
// it neither reads nor writes"). A 16-bit parameter's traced
// mixed-precision step ends by copying its fp32 master into it; on the CPU
// those references mean the update it sends back. A graph whose call names
// a buffer its op does not bind is refused when it is validated.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../graph/graph_builder.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/graph.h"
#include "memwall/swap/offload.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

nlohmann::json view(BufferId b, const char* dtype, int64_t elements) {
  return {{"t", b}, {"size", {elements}}, {"stride", {1}}, {"offset", 0}, {"dtype", dtype}};
}

std::string aten(const char* op, nlohmann::json args) {
  return nlohmann::json{{"op", op},
                        {"overload", ""},
                        {"args", std::move(args)},
                        {"kwargs", nlohmann::json::object()},
                        {"results", nlohmann::json::array()}}
      .dump();
}

struct Step16 {
  Graph graph;
  BufferId w = -1, grad = -1, master = -1;
};

// A bf16 weight of 8 elements read by one forward op; its backward makes
// the gradient; then its step as `memwall trace` records mixed precision:
// the fp32 master takes the gradient, and the weight is copied from it
// (`pure`: the step updates the 16-bit weight itself, no master).
Step16 bf16_step(bool pure) {
  GraphBuilder g;
  Step16 s;
  s.w = g.buffer("w", 16, BufferKind::kParam);
  g.graph.buffers[s.w].dtype = DType::kBF16;
  g.graph.buffers[s.w].shape = {8};
  const BufferId x = g.buffer("x", 16, BufferKind::kInput);
  if (!pure) {
    s.master = g.buffer("w.master", 32, BufferKind::kOptimState);
    g.graph.buffers[s.master].shape = {8};
  }
  const BufferId y = g.buffer("y", 16, BufferKind::kActivation);
  s.grad = g.buffer("w.grad", 16, BufferKind::kGrad);
  g.graph.buffers[s.grad].dtype = DType::kBF16;
  g.graph.buffers[s.grad].shape = {8};
  g.op("f", Phase::kForward, {x, s.w}, {y});
  g.op("f.bwd", Phase::kBackward, {y, x}, {s.grad});
  if (pure) {
    const OpId add = g.op("w.add_", Phase::kOptimizer, {s.grad}, {}, {s.w});
    g.graph.ops[add].call =
        aten("aten::add_", {view(s.w, "BFloat16", 8), view(s.grad, "BFloat16", 8)});
  } else {
    const OpId add = g.op("w.add_", Phase::kOptimizer, {s.grad}, {}, {s.master});
    g.graph.ops[add].call =
        aten("aten::add_", {view(s.master, "Float", 8), view(s.grad, "BFloat16", 8)});
    const OpId copy = g.op("w.copy_", Phase::kOptimizer, {s.master}, {}, {s.w});
    g.graph.ops[copy].call =
        aten("aten::copy_", {view(s.w, "BFloat16", 8), view(s.master, "Float", 8)});
  }
  s.graph = std::move(g.graph);
  validate(s.graph);
  return s;
}

TEST(CpuStepCalls, MixedPrecisionStepWritesItsUpdate) {
  const Step16 s = bf16_step(/*pure=*/false);
  const OffloadGraph og = offload_graph(s.graph, {.optimizer = Tier::kHost});
  validate(og.graph);  // Note [Call bindings]: the rewrite binds what its calls name
  ASSERT_EQ(og.states.size(), 1u);
  const OffloadedState& o = og.states[0];
  const nlohmann::json call = call_object(og.graph.ops[o.step].call);
  EXPECT_EQ(call.at("op"), "memwall::cpu_step");
  EXPECT_EQ(call.at("param"), (nlohmann::json{{"t", s.w}}));
  // No master added for a 16-bit weight: the trace's own is a state.
  EXPECT_TRUE(call.at("master").is_null());
  EXPECT_EQ(call.at("update"), (nlohmann::json{{"t", o.update}}));
  EXPECT_TRUE(call_only_overwrites(call, og.graph.buffers[s.w]));
  EXPECT_EQ(og.graph.ops[o.step].out, BufferIds{o.update});
}

TEST(CpuStepCalls, PureSixteenBitStepIsRefused) {
  const Step16 s = bf16_step(/*pure=*/true);
  try {
    (void)offload_graph(s.graph, {.optimizer = Tier::kHost});
    FAIL() << "a step reading the 16-bit weight was offloaded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "the optimizer step of w reads the 16-bit parameter itself (no fp32 master copy), "
              "which the host does not hold: its step stays on the device");
  }
}

TEST(CallBindings, ACallNamingABufferItsOpDoesNotBindIsRefused) {
  Step16 s = bf16_step(/*pure=*/false);
  // The copy names the weight, which it no longer updates: what the
  // executor stopped at mid-run before.
  Op& copy = s.graph.ops.back();
  copy.updates = {};
  copy.out = {};
  EXPECT_THROW(
      {
        try {
          validate(s.graph);
        } catch (const Error& e) {
          EXPECT_EQ(
              std::string(e.what()),
              "graph: op 3 (\"w.copy_\"): its call names buffer 0 (\"w\"), which the op neither "
              "reads nor writes, so it cannot run (Note [Call bindings])");
          throw;
        }
      },
      Error);
}

TEST(CallBindings, ACpuStepReadingTheSixteenBitParameterIsRefused) {
  Step16 s = bf16_step(/*pure=*/true);
  // What the rewrite refuses to make, written by hand: the step's update
  // could not start from the weight's values, which only the device holds.
  const BufferId update = static_cast<BufferId>(s.graph.buffers.size());
  s.graph.buffers.push_back(s.graph.buffers[s.w]);
  s.graph.buffers.back().id = update;
  s.graph.buffers.back().name = "w.update";
  s.graph.buffers.back().kind = BufferKind::kTemp;
  Op& step = s.graph.ops.back();
  step.updates = {};
  step.out = {update};
  step.call = nlohmann::json{{"op", "memwall::cpu_step"},
                             {"steps", {call_object(step.call)}},
                             {"locals", 0},
                             {"param", {{"t", s.w}}},
                             {"master", nullptr},
                             {"update", {{"t", update}}}}
                  .dump();
  try {
    validate(s.graph);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "graph: op 2 (\"w.add_\"): its CPU step reads buffer 0 (\"w\"), a 16-bit "
              "parameter that the host does not hold (only a step that overwrites it from an "
              "fp32 master copy runs there)");
  }
}

}  // namespace
}  // namespace memwall
