// The per-layer planner checkpoints the layers `memwall inspect --by-layer`
// counts (Note [What a layer is] in src/graph/layers.cc): on a small U-Net,
// each layer's saved bytes from the architecture, and what the planner
// recomputes and drops, layer by layer.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/models/zoo.h"
#include "memwall/remat/remat.h"
#include "remat_test_util.h"

namespace memwall {
namespace {

constexpr uint64_t kBf16 = 2, kFp32 = 4, kI64 = 8;

// src/models/unet.cc at batch 1. A DoubleConv of c channels at side h saves
// both convolutions' outputs (the batch norms' inputs), both ReLUs' outputs,
// and each batch norm's mean and inverse std (fp32, per channel).
uint64_t unet_double_conv(uint64_t c, uint64_t h) {
  return 4 * c * h * h * kBf16 + 2 * 2 * c * kFp32;
}
// Down: the max pool's output (the first convolution's input) and its int64
// indices, c_in channels at the output side h, then a DoubleConv.
uint64_t unet_down(uint64_t c_in, uint64_t c, uint64_t h) {
  return c_in * h * h * (kBf16 + kI64) + unet_double_conv(c, h);
}
// Up: the concatenation of the skip and the upsampled map (2c channels, the
// first convolution's input), then a DoubleConv of c channels.
uint64_t unet_up(uint64_t c, uint64_t h) { return 2 * c * h * h * kBf16 + unet_double_conv(c, h); }

TEST(RematPerLayer, UNetLayersAreTheRowsOfInspectByLayer) {
  const Graph graph = build_model("unet", {.batch = 1, .image = 64});
  // Each layer's rows and what it hands to the next layers: its last ReLU's
  // output (c channels at side h), read by a forward op of another layer.
  struct Row {
    std::string layer;
    uint64_t saved;
    uint64_t handed_on;
  };
  const std::vector<Row> expected = {
      {"inc", unet_double_conv(64, 64), 64 * 64 * 64 * kBf16},
      {"down1", unet_down(64, 128, 32), 128 * 32 * 32 * kBf16},
      {"down2", unet_down(128, 256, 16), 256 * 16 * 16 * kBf16},
      {"down3", unet_down(256, 512, 8), 512 * 8 * 8 * kBf16},
      {"down4", unet_down(512, 1024, 4), 1024 * 4 * 4 * kBf16},
      {"up1", unet_up(512, 8), 512 * 8 * 8 * kBf16},
      {"up2", unet_up(256, 16), 256 * 16 * 16 * kBf16},
      {"up3", unet_up(128, 32), 128 * 32 * 32 * kBf16},
      {"up4", unet_up(64, 64), 64 * 64 * 64 * kBf16},
      // The loss's log-probabilities, fp32, 2 classes.
      {"(outside layers)", 2 * 64 * 64 * kFp32, 0},
  };
  ASSERT_EQ(expected[0].saved, 2'098'176u);
  std::vector<std::pair<std::string, uint64_t>> want, got;
  for (const Row& r : expected) want.emplace_back(r.layer, r.saved);
  for (const LayerBytes& r : saved_by_layer(graph)) got.emplace_back(r.layer, r.saved);
  EXPECT_EQ(got, want);

  // The planner recomputes the ops of exactly those layers and drops what
  // each saves but its output.
  const RematResult result = plan_per_layer(graph, gpu(), kMaxBytes, {});
  EXPECT_EQ(result.note.substr(0, result.note.find(',')), "9 layers checkpointed");
  const Layers layers = find_layers(graph);
  std::set<std::string> recomputed;
  for (const Step& step : result.plan.steps) {
    if (step.kind != StepKind::kRecompute) continue;
    ASSERT_GE(layers.of_op[step.op], 0) << graph.ops[step.op].name;
    recomputed.insert(layers.names[layers.of_op[step.op]]);
  }
  std::set<std::string> listed;
  for (const Row& r : expected) {
    if (r.layer != "(outside layers)") listed.insert(r.layer);
  }
  EXPECT_EQ(recomputed, listed);
  const std::vector<uint8_t> dropped = dropped_saved(graph, result.plan);
  const std::vector<int> layer_of = buffer_layers(graph, layers);
  std::map<std::string, uint64_t> dropped_bytes;
  for (const Buffer& b : graph.buffers) {
    if (!dropped[b.id]) continue;
    ASSERT_GE(layer_of[b.id], 0) << b.name;
    dropped_bytes[layers.names[layer_of[b.id]]] += b.bytes;
  }
  for (const Row& r : expected) {
    if (r.layer == "(outside layers)") continue;
    EXPECT_EQ(dropped_bytes[r.layer], r.saved - r.handed_on) << r.layer;
  }
}

}  // namespace
}  // namespace memwall
