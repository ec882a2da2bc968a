// graph_fingerprint (Note [Graph fingerprint]): what it covers, what it
// leaves out, and that it is stable (plan files record it).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

Graph small() {
  testing::GraphBuilder b;
  const BufferId w = b.buffer("w", 64, BufferKind::kParam);
  const BufferId x = b.buffer("x", 32, BufferKind::kInput);
  const BufferId y = b.buffer("y", 32, BufferKind::kActivation);
  const BufferId g = b.buffer("w.grad", 64, BufferKind::kGrad);
  b.op("fc", Phase::kForward, {w, x}, {y}, {}, 16);
  b.op("fc.bwd", Phase::kBackward, {y, x}, {g});
  b.op("sgd", Phase::kOptimizer, {g}, {}, {w});
  b.graph.name = "small";
  b.graph.buffers[0].shape = {4, 4};
  b.graph.buffers[0].dtype = DType::kF32;
  return b.graph;
}

TEST(Fingerprint, IsStableAcrossVersions) {
  // Plan files carry it: changing the hash orphans every plan written. This
  // value pins the algorithm (it was computed by this code, not taken from
  // elsewhere); change it only with the format.
  EXPECT_EQ(graph_fingerprint(small()), "7ae2796c15b8e556");
  EXPECT_EQ(graph_fingerprint(small()).size(), 16u);
}

TEST(Fingerprint, EveryFieldAPlanDependsOnChangesIt) {
  const std::string base = graph_fingerprint(small());
  const std::vector<std::pair<const char*, std::function<void(Graph&)>>> changes = {
      {"buffer name", [](Graph& g) { g.buffers[1].name = "x2"; }},
      {"buffer bytes", [](Graph& g) { g.buffers[1].bytes = 33; }},
      {"buffer kind", [](Graph& g) { g.buffers[2].kind = BufferKind::kTemp; }},
      {"buffer dtype", [](Graph& g) { g.buffers[0].dtype = DType::kBF16; }},
      {"buffer shape", [](Graph& g) { g.buffers[0].shape = {16}; }},
      {"extra buffer", [](Graph& g) { g.buffers.push_back(g.buffers[2]); }},
      {"op name", [](Graph& g) { g.ops[0].name = "fc1"; }},
      {"op type", [](Graph& g) { g.ops[0].type = "matmul"; }},
      {"op phase", [](Graph& g) { g.ops[1].phase = Phase::kForward; }},
      {"op inputs", [](Graph& g) { g.ops[1].in = {1}; }},
      {"op input order", [](Graph& g) { std::swap(g.ops[1].in[0], g.ops[1].in[1]); }},
      {"op outputs", [](Graph& g) { g.ops[0].out = {}; }},
      {"op updates", [](Graph& g) { g.ops[2].updates = {}; }},
      {"op workspace", [](Graph& g) { g.ops[0].workspace = 17; }},
      {"op workspace span", [](Graph& g) { g.ops[0].workspace_span = g.ops[0].workspace + 64; }},
      {"op order", [](Graph& g) { std::swap(g.ops[1], g.ops[2]); }},
      {"ids moved between lists",
       [](Graph& g) {
         g.ops[2].in = {};
         g.ops[2].updates = {3, 0};
       }},
  };
  for (const auto& [what, change] : changes) {
    Graph g = small();
    change(g);
    EXPECT_NE(graph_fingerprint(g), base) << what;
  }
}

TEST(Fingerprint, LabelsAndCostsLeaveItAlone) {
  // A re-measured or renamed graph still runs the plans made for it.
  const std::string base = graph_fingerprint(small());
  Graph g = small();
  g.name = "another name";
  g.meta = {{"model", "x"}, {"fingerprint", "0000000000000000"}};
  g.ops[0].flops = 1e12;
  g.ops[0].bytes = 5e9;
  g.ops[1].time = 3e-3;
  EXPECT_EQ(graph_fingerprint(g), base);
}

TEST(Fingerprint, WrittenIntoMetaAndReadBack) {
  const Graph g = small();
  const Graph back = graph_from_json_text(graph_to_json_text(g));
  EXPECT_EQ(back.meta.at("fingerprint"), graph_fingerprint(g));
  EXPECT_EQ(graph_fingerprint(back), graph_fingerprint(g));
}

}  // namespace
}  // namespace memwall
