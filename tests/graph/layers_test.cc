// Note [What a layer is] (src/graph/layers.cc): layers from module prefixes,
// blocks at weight ops in a graph without them, and the saved bytes per
// layer that `memwall inspect --by-layer` prints.
#include "memwall/graph/layers.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// A two-block transformer's forward (wte, h0, h1, ln_f, loss) and the
// backward ops that read what it saves.
//   wte -> e (8)   h0.ln -> a (16)  h0.mlp -> b (32)  h1.ln -> c (64)
//   h1.mlp -> d (128)  ln_f -> f (256)  loss -> l (512)
Graph two_blocks() {
  GraphBuilder g;
  const BufferId ids = g.buffer("ids", 4, BufferKind::kInput);
  std::vector<BufferId> act;
  uint64_t bytes = 8;
  for (const char* name : {"e", "a", "b", "c", "d", "f", "l"}) {
    act.push_back(g.buffer(name, bytes, BufferKind::kActivation));
    bytes *= 2;
  }
  BufferId prev = ids;
  int i = 0;
  for (const char* op : {"wte", "h0.ln", "h0.mlp", "h1.ln", "h1.mlp", "ln_f", "loss"}) {
    g.op(op, Phase::kForward, {prev}, {act[i]});
    prev = act[i++];
  }
  // Every activation but the loss's is read by the backward: saved.
  const BufferId grad = g.buffer("grad", 4, BufferKind::kGrad);
  g.op("loss.bwd", Phase::kBackward, {act[5], act[4], act[3], act[2], act[1], act[0]}, {grad});
  return std::move(g.graph);
}

TEST(Layers, ModulePrefixesNameRunsOfForwardOps) {
  const Graph graph = two_blocks();
  const Layers layers = find_layers(graph);
  EXPECT_EQ(layers.names, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(layers.of_op, (std::vector<int>{-1, 0, 0, 1, 1, -1, -1, -1}));
  const std::vector<int> of_buffer = buffer_layers(graph, layers);
  // ids (input), e, a, b, c, d, f, l, grad.
  EXPECT_EQ(of_buffer, (std::vector<int>{-1, -1, 0, 0, 1, 1, -1, -1, -1}));
}

TEST(Layers, SavedBytesPerLayerInOrderOfFirstAppearance) {
  std::vector<std::pair<std::string, uint64_t>> rows;
  for (const LayerBytes& r : saved_by_layer(two_blocks())) rows.emplace_back(r.layer, r.saved);
  // e (8) and f (256) outside; l (512) is not read by the backward.
  EXPECT_EQ(rows, (std::vector<std::pair<std::string, uint64_t>>{
                      {"(outside layers)", 264}, {"h0", 48}, {"h1", 192}}));
}

TEST(Layers, ALayerIsAMaximalRunOfOnePrefix) {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 1, BufferKind::kInput);
  for (const char* op : {"layers.1.attn", "layers.1.mlp", "head", "layers.1.attn", "layers.12.mlp",
                         "layer2.1.conv1", "layer2.10.conv1", "features.3.conv", "inc.conv",
                         "down1.pool", "up4.cat", "hx.mlp", "encoder.layer.0.attn", "h7"}) {
    g.op(op, Phase::kForward, {x}, {});
  }
  g.op("layers.1.attn.bwd", Phase::kBackward, {x}, {});
  const Layers layers = find_layers(g.graph);
  EXPECT_EQ(layers.names,
            (std::vector<std::string>{"layers.1", "layers.1", "layers.12", "layer2.1", "layer2.10",
                                      "features.3", "inc", "down1", "up4", "encoder.layer.0"}));
  EXPECT_EQ(layers.of_op, (std::vector<int>{0, 0, -1, 1, 2, 3, 4, 5, 6, 7, 8, -1, 9, -1, -1}));
}

// Traced Hugging Face names carry the model's own prefix: a pattern matches
// at any dotted component, leftmost first (issue 48: per-layer checkpointing
// dropped nothing on a traced GPT-2 before).
TEST(Layers, PatternsMatchAfterAModelPrefix) {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 1, BufferKind::kInput);
  for (const char* op : {"transformer.wte.embedding", "transformer.h.0.attn.c_attn.addmm",
                         "transformer.h.0.mlp.act.mul", "transformer.h.1.ln_1.native_layer_norm",
                         "model.layers.3.self_attn.q_proj.mm", "transformer.blocks.2.ffn.up",
                         "bert.encoder.layer.5.output.dense", "transformer.hx.0.mul",
                         "transformer.ln_f.native_layer_norm"}) {
    g.op(op, Phase::kForward, {x}, {});
  }
  const Layers layers = find_layers(g.graph);
  EXPECT_EQ(layers.names,
            (std::vector<std::string>{"transformer.h.0", "transformer.h.1", "model.layers.3",
                                      "transformer.blocks.2", "bert.encoder.layer.5"}));
  EXPECT_EQ(layers.of_op, (std::vector<int>{-1, 0, 0, 1, 2, 3, 4, -1, -1}));
}

TEST(Layers, WithoutPrefixesBlocksStartAtWeightOpsAndEndAtTheLoss) {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 1, BufferKind::kInput);
  const std::pair<const char*, const char*> ops[] = {{"norm", "mul"},
                                                     {"features.0", "conv2d"},
                                                     {"features.1", "relu"},
                                                     {"features.2", "conv2d"},
                                                     {"features.3", "relu"},
                                                     {"features.4", "max_pool2d"},
                                                     {"classifier.0", "matmul"},
                                                     {"classifier.1", "relu"},
                                                     {"loss", "cross_entropy"},
                                                     {"after", "matmul"}};
  for (const auto& [name, type] : ops)
    g.graph.ops[g.op(name, Phase::kForward, {x}, {})].type = type;
  const Layers layers = find_layers(g.graph);
  EXPECT_EQ(layers.names, (std::vector<std::string>{"features.0", "features.2", "classifier.0"}));
  EXPECT_EQ(layers.of_op, (std::vector<int>{-1, 0, 0, 1, 1, 1, 2, 2, -1, -1}));
}

}  // namespace
}  // namespace memwall
