// Note [Eager lifetimes] (graph.h) on a hand-built graph.
#include <gtest/gtest.h>

#include <string>

#include "graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// x input 10; op 0 f: x -> a (20); op 1 relu_: updates a; op 2 g: a -> l (4);
// op 3 bwd: l -> d (30); op 4 opt: d -> t (40, a temporary); op 5 opt2: t.
// Eager: x alive to the end (the loop holds the batch), a freed after op 3
// (autograd kept it though nothing read it), t after op 5, d after op 4.
Graph step() {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 10, BufferKind::kInput);
  const BufferId a = g.buffer("a", 20, BufferKind::kActivation);
  const BufferId l = g.buffer("l", 4, BufferKind::kActivation);
  const BufferId d = g.buffer("d", 30, BufferKind::kTemp);
  const BufferId t = g.buffer("t", 40, BufferKind::kTemp);
  g.op("f", Phase::kForward, {x}, {a});
  g.op("relu_", Phase::kForward, {}, {}, {a});
  g.op("g", Phase::kForward, {a}, {l});
  g.op("bwd", Phase::kBackward, {l}, {d});
  g.op("opt", Phase::kOptimizer, {d}, {t});
  g.op("opt2", Phase::kOptimizer, {t}, {});
  g.graph.buffers[x].eager_free = kNoOp;
  g.graph.buffers[a].eager_free = 3;
  g.graph.buffers[l].eager_free = 3;
  g.graph.buffers[d].eager_free = 4;
  g.graph.buffers[t].eager_free = 5;
  return g.graph;
}

TEST(EagerLifetimes, ThePeakOfEagerPyTorchHoldsWhatItsReferencesHold) {
  const Graph g = step();
  validate(g);
  ASSERT_TRUE(has_eager_lifetimes(g));
  // Last reader: x freed after op 0, a after op 2, l after op 3, d after 4,
  // t after 5: 30, 20, 24, 34, 70, 40. Eager: x to the end, a to op 3:
  // 30, 30, 34, 64, 80, 50.
  EXPECT_EQ(memory_profile(g).curve, (std::vector<uint64_t>{30, 20, 24, 34, 70, 40}));
  const MemoryProfile eager = memory_profile(g, eager_liveness(g));
  EXPECT_EQ(eager.curve, (std::vector<uint64_t>{30, 30, 34, 64, 80, 50}));
  EXPECT_EQ(eager.peak_op, 4);
}

TEST(EagerLifetimes, VersionsPassTheStoragesDeathToTheLastVersion) {
  Graph g = step();
  version_in_place_updates(g);
  validate(g);
  const Buffer& a = g.buffers[1];
  const Buffer& a1 = g.buffers.back();
  ASSERT_EQ(a1.version_of, a.id);
  EXPECT_EQ(a.eager_free, 1);   // taken over by relu_'s output
  EXPECT_EQ(a1.eager_free, 3);  // the storage's death
  // relu_ runs in place under either lifetime: the curves do not change.
  EXPECT_EQ(memory_profile(g, eager_liveness(g)).curve,
            (std::vector<uint64_t>{30, 30, 34, 64, 80, 50}));
}

TEST(EagerLifetimes, JsonCarriesThemAndValidationChecksThem) {
  const Graph g = step();
  const std::string text = graph_to_json_text(g);
  EXPECT_NE(text.find("\"name\":\"x\",\"bytes\":10,\"kind\":\"input\",\"dtype\":\"fp32\","
                      "\"shape\":[],\"eager_free\":null}"),
            std::string::npos);
  const Graph back = graph_from_json_text(text);
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    EXPECT_EQ(back.buffers[b].eager_free, g.buffers[b].eager_free) << b;
  }
  EXPECT_EQ(graph_fingerprint(back), graph_fingerprint(g));  // an annotation
  Graph bad = g;
  bad.buffers[1].eager_free = 6;
  EXPECT_EQ(testing::json_error_of(graph_to_json_text(bad)),
            "graph: buffer 1 (\"a\"): \"eager_free\" is 6, which is not an op");
  bad.buffers[1].eager_free = kEagerUnknown;
  bad.buffers[3].eager_free = 2;  // d is made by op 3
  EXPECT_EQ(testing::json_error_of(graph_to_json_text(bad)),
            "graph: buffer 3 (\"d\"): \"eager_free\" is op 2, before op 3 (\"bwd\") creates it");
  // Without records, eager lifetimes are the last-reader ones.
  Graph plain = g;
  for (Buffer& b : plain.buffers) b.eager_free = kEagerUnknown;
  EXPECT_FALSE(has_eager_lifetimes(plain));
  EXPECT_EQ(memory_profile(plain, eager_liveness(plain)).curve, memory_profile(plain).curve);
}

}  // namespace
}  // namespace memwall
