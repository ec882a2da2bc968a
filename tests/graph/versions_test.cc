// Buffer versions (Note [Buffer versions] in src/graph/versions.cc) on
// hand-built graphs whose figures are worked out in the comments.
#include "memwall/graph/versions.h"

#include <gtest/gtest.h>

#include <string>

#include "graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using testing::GraphBuilder;
using testing::json_error_of;

// An in-place chain as torchvision's ResNet stem writes it:
//   0 w    param       8      3 r   activation 64 (the residual)
//   1 rm   optim_state 4      4 g   temp       64 (a gradient)
//   2 x    input       16     5 w.grad grad    8
//   6 a    activation  64
//   op 0 conv   fwd  in [x, w] out [a]
//   op 1 relu_  fwd  updates [a]                  -> a@v1
//   op 2 bn     fwd  in [a] out [r] updates [rm]   (running statistics stay updates)
//   op 3 add_   fwd  in [r] updates [a]           -> a@v2
//   op 4 bwd    bwd  in [a, x] out [g, w.grad]
//   op 5 acc    bwd  in [a] updates [g, w.grad]   -> g@v1; w.grad stays an update
//   op 6 use    bwd  in [g]
//   op 7 adam   opt  in [w.grad] updates [w]
Graph in_place_chain() {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 8, BufferKind::kParam);
  const BufferId rm = g.buffer("rm", 4, BufferKind::kOptimState);
  const BufferId x = g.buffer("x", 16, BufferKind::kInput);
  const BufferId r = g.buffer("r", 64, BufferKind::kActivation);
  const BufferId gr = g.buffer("g", 64, BufferKind::kTemp);
  const BufferId wg = g.buffer("w.grad", 8, BufferKind::kGrad);
  const BufferId a = g.buffer("a", 64, BufferKind::kActivation);
  g.op("conv", Phase::kForward, {x, w}, {a});
  g.op("relu_", Phase::kForward, {}, {}, {a});
  g.op("bn", Phase::kForward, {a}, {r}, {rm});
  g.op("add_", Phase::kForward, {r}, {}, {a});
  g.op("bwd", Phase::kBackward, {a, x}, {gr, wg});
  g.op("acc", Phase::kBackward, {a}, {}, {gr, wg});
  g.op("use", Phase::kBackward, {gr}, {});
  g.op("adam", Phase::kOptimizer, {wg}, {}, {w});
  return g.graph;
}

TEST(Versions, InPlaceUpdatesOfActivationsBecomeNextVersions) {
  Graph g = in_place_chain();
  EXPECT_EQ(version_in_place_updates(g), 3);
  validate(g);
  ASSERT_EQ(g.buffers.size(), 10u);
  // Appended in the order the updates run: a@v1 (7), a@v2 (8), g@v1 (9).
  EXPECT_EQ(g.buffers[7].name, "a@v1");
  EXPECT_EQ(g.buffers[7].version_of, 6);
  EXPECT_EQ(g.buffers[8].name, "a@v2");
  EXPECT_EQ(g.buffers[8].version_of, 7);
  EXPECT_EQ(g.buffers[9].name, "g@v1");
  EXPECT_EQ(g.buffers[9].version_of, 4);
  EXPECT_EQ(g.buffers[9].kind, BufferKind::kTemp);
  for (const BufferId v : {7, 8, 9}) EXPECT_EQ(g.buffers[v].bytes, 64u);
  // Every op refers to the version current when it runs.
  EXPECT_EQ(g.ops[1].in, (BufferIds{6}));
  EXPECT_EQ(g.ops[1].out, (BufferIds{7}));
  EXPECT_TRUE(g.ops[1].updates.empty());
  EXPECT_EQ(g.ops[2].in, (BufferIds{7}));
  EXPECT_EQ(g.ops[2].updates, (BufferIds{1}));  // persistent state: still an update
  EXPECT_EQ(g.ops[3].in, (BufferIds{3, 7}));
  EXPECT_EQ(g.ops[3].out, (BufferIds{8}));
  EXPECT_EQ(g.ops[4].in, (BufferIds{8, 2}));
  EXPECT_EQ(g.ops[5].in, (BufferIds{8, 4}));
  EXPECT_EQ(g.ops[5].out, (BufferIds{9}));
  EXPECT_EQ(g.ops[5].updates, (BufferIds{5}));  // a gradient: still an update
  EXPECT_EQ(g.ops[6].in, (BufferIds{9}));
  EXPECT_EQ(g.ops[7].updates, (BufferIds{0}));
  // Only the last version is saved for backward.
  const std::vector<uint8_t> saved = saved_for_backward(g);
  EXPECT_FALSE(saved[6]);
  EXPECT_FALSE(saved[7]);
  EXPECT_TRUE(saved[8]);
  // A second pass finds nothing left to version.
  EXPECT_EQ(version_in_place_updates(g), 0);
}

TEST(Versions, TheDefaultScheduleKeepsTheInPlaceProgramsPeak) {
  Graph legacy = in_place_chain();
  Graph g = legacy;
  version_in_place_updates(g);
  // Before op 0: w 8 + rm 4 + x 16 = 28. Op 0 adds a: 92. Op 1 runs in place
  // (a dies there): 92. Op 2 adds r: 156. Op 3 reads r (its last use) and
  // a@v1, which dies there: a@v2 takes its place, 156; r freed after.
  // Op 4 adds g and w.grad: 92 + 72 = 164, and frees x: 148. Op 5 in place:
  // g@v1 over g, 148, then a@v2 freed: 84. Op 6: 84, then g@v1 freed: 20.
  // Peak: 164 at op 4, as with `updates`.
  const MemoryProfile with_updates = memory_profile(legacy);
  const MemoryProfile versioned = memory_profile(g);
  EXPECT_EQ(with_updates.peak_bytes, 164u);
  EXPECT_EQ(versioned.peak_bytes, 164u);
  EXPECT_EQ(versioned.peak_op, 4);
  EXPECT_EQ(versioned.curve, with_updates.curve);
  EXPECT_EQ(versioned.curve, (std::vector<uint64_t>{92, 92, 156, 156, 164, 148, 84, 20}));
  // The totals and the breakdown count a shared storage once.
  EXPECT_EQ(memory_summary(g).bytes_by_kind, memory_summary(legacy).bytes_by_kind);
  EXPECT_EQ(memory_summary(g).saved_activation_bytes,
            memory_summary(legacy).saved_activation_bytes);
  EXPECT_EQ(versioned.peak_by_kind[static_cast<size_t>(BufferKind::kActivation)], 64u);
  // Out of place, each version gets storage of its own: op 1 holds a and
  // a@v1 (156), op 3 r, a@v1 and a@v2 (220), op 5 a@v2, g and g@v1 (212).
  const MemoryProfile rewritten = memory_profile(out_of_place(g));
  EXPECT_EQ(rewritten.curve, (std::vector<uint64_t>{92, 156, 156, 220, 164, 212, 84, 20}));
}

TEST(Versions, RecomputableOpsUpdateNothingButPersistentStateInForward) {
  Graph g = in_place_chain();
  version_in_place_updates(g);
  EXPECT_TRUE(recomputable(g, g.ops[0]));   // conv: no updates
  EXPECT_TRUE(recomputable(g, g.ops[1]));   // relu_: now creates a@v1
  EXPECT_TRUE(recomputable(g, g.ops[2]));   // bn: running statistics only
  EXPECT_FALSE(recomputable(g, g.ops[5]));  // accumulates into a gradient
  EXPECT_FALSE(recomputable(g, g.ops[7]));  // the optimizer step
  // A forward op whose outputs read the state it updates is not.
  g.ops[2].in.push_back(1);
  EXPECT_FALSE(recomputable(g, g.ops[2]));
}

TEST(Versions, JsonRoundTripsVersionOf) {
  Graph g = in_place_chain();
  version_in_place_updates(g);
  const std::string text = graph_to_json_text(g);
  EXPECT_NE(text.find("\"name\":\"a@v1\",\"bytes\":64,\"kind\":\"activation\",\"dtype\":\"fp32\","
                      "\"shape\":[],\"version_of\":6}"),
            std::string::npos);
  const Graph back = graph_from_json_text(text);
  ASSERT_EQ(back.buffers.size(), g.buffers.size());
  for (size_t b = 0; b < g.buffers.size(); ++b) {
    EXPECT_EQ(back.buffers[b].version_of, g.buffers[b].version_of) << b;
  }
  EXPECT_EQ(graph_fingerprint(back), graph_fingerprint(g));
  // Versions are part of what a plan depends on; graphs without them keep
  // the fingerprints they had.
  EXPECT_NE(graph_fingerprint(out_of_place(g)), graph_fingerprint(g));
  // The general reader (spaces, another field order, null) reads the same.
  const Graph spaced = graph_from_json(graph_to_json(g));
  EXPECT_EQ(spaced.buffers[8].version_of, 7);
}

TEST(Versions, ValidationNamesWhatIsWrong) {
  const auto error_of = [](Graph g) {
    try {
      validate(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Graph g = in_place_chain();
  version_in_place_updates(g);
  EXPECT_EQ(error_of(g), "no error");
  Graph bad = g;
  bad.buffers[7].bytes = 32;
  EXPECT_EQ(error_of(bad),
            "graph: buffer 7 (\"a@v1\") has 32 bytes, but the version it follows, buffer 6 "
            "(\"a\"), has 64");
  bad = g;
  bad.buffers[7].version_of = 3;  // r: op 1 does not read it
  EXPECT_EQ(error_of(bad),
            "graph: buffer 7 (\"a@v1\") is a version of buffer 3 (\"r\"), but its producer op 1 "
            "(\"relu_\") does not read it");
  bad = g;
  bad.buffers[8].version_of = 6;  // a would have two next versions (op 3 does not read a)
  bad.ops[3].in.push_back(6);
  EXPECT_EQ(error_of(bad),
            "graph: buffer 6 (\"a\") has two next versions (the second is buffer 8 "
            "(\"a@v2\"))");
  bad = g;
  bad.buffers[7].version_of = 0;
  EXPECT_EQ(error_of(bad),
            "graph: buffer 7 (\"a@v1\") is a version of buffer 0 (\"w\"), but only buffers that "
            "ops create have versions");
  bad = g;
  bad.buffers[7].version_of = 7;
  EXPECT_EQ(error_of(bad),
            "graph: buffer 7 (\"a@v1\"): \"version_of\" is 7, which is not another "
            "buffer");
  // From JSON: a negative or non-integer id is a reader's error.
  std::string text = graph_to_json_text(g);
  text.replace(text.find("\"version_of\":6"), 14, "\"version_of\":-1");
  EXPECT_NE(json_error_of(text).find("\"version_of\""), std::string::npos) << json_error_of(text);
}

}  // namespace
}  // namespace memwall
