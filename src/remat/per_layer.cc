// per-layer: full activation checkpointing as Megatron-LM
// (--recompute-granularity full --recompute-method uniform, one layer per
// chunk) and Hugging Face's gradient_checkpointing_enable() apply it: keep
// each transformer layer's (or CNN block's) input, drop everything the
// layer saves, and recompute the layer's forward when its backward starts.
// Embeddings, the final norm, the head and the loss are not checkpointed.
//
// Layers are found from the zoo's names (docs/remat-per-layer.md):
// every op of a layer carries the layer's module prefix, e.g. "h3." (GPT-2),
// "layers.3." (Llama, Mixtral), "encoder.layer.3." (BERT), "layer2.1."
// (a ResNet bottleneck), "features.5." (a MobileNetV2 inverted residual),
// "down2." / "up1." (U-Net). A graph with none of those (VGG's flat
// "features.N") is cut into blocks at each conv2d or matmul, each block a
// weight layer with its activation and pooling.
#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "planner_common.h"

namespace memwall {
namespace {

// '#' matches one or more digits; everything else matches itself.
constexpr std::array<std::string_view, 8> kLayerPrefixes = {
    "h#.", "layers.#.", "encoder.layer.#.", "layer#.#.", "features.#.", "inc.", "down#.", "up#.",
};

// Length of the prefix of `name` matching `pattern`, or 0.
size_t match_prefix(std::string_view name, std::string_view pattern) {
  size_t at = 0;
  for (const char want : pattern) {
    if (want == '#') {
      const size_t digits_start = at;
      while (at < name.size() && std::isdigit(static_cast<unsigned char>(name[at]))) ++at;
      if (at == digits_start) return 0;
    } else {
      if (at >= name.size() || name[at] != want) return 0;
      ++at;
    }
  }
  return at;
}

std::string_view layer_key(std::string_view op_name) {
  for (const std::string_view pattern : kLayerPrefixes) {
    if (const size_t length = match_prefix(op_name, pattern)) return op_name.substr(0, length);
  }
  return {};
}

// Per op: the index of its layer (consecutive forward ops with one key), or
// -1 outside every layer and for non-forward ops.
std::vector<int> forward_layers(const Graph& graph, int* count) {
  std::vector<int> layer(graph.ops.size(), -1);
  bool any_named = false;
  for (const Op& op : graph.ops) {
    any_named = any_named || (op.phase == Phase::kForward && !layer_key(op.name).empty());
  }
  int next = 0;
  std::string_view current;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    if (any_named) {
      const std::string_view key = layer_key(op.name);
      if (key.empty()) {
        current = {};
        continue;
      }
      if (key != current) {
        current = key;
        ++next;
      }
      layer[op.id] = next - 1;
    } else {
      // Blocks start at each weight layer; what precedes the first is outside.
      if (op.type == "conv2d" || op.type == "matmul") ++next;
      if (op.type == "cross_entropy") break;
      if (next > 0) layer[op.id] = next - 1;
    }
  }
  *count = next;
  return layer;
}

}  // namespace

RematResult plan_per_layer(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  int layers = 0;
  const std::vector<int> layer_of = forward_layers(graph, &layers);
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  // Keep what is created outside every layer, and what a layer hands to
  // another region (the next layer's input, or the head's).
  std::vector<uint8_t> keep(graph.buffers.size(), 1);
  std::vector<int> producer_layer(graph.buffers.size(), -1);
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.out) {
      producer_layer[b] = layer_of[op.id];
      if (droppable[b] && layer_of[op.id] >= 0) keep[b] = 0;
    }
  }
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.in) {
      if (producer_layer[b] != layer_of[op.id]) keep[b] = 1;
    }
  }
  Plan plan = remat_detail::checkpoint_plan(graph, hardware, budget, keep);
  std::string note = fmt::format("{} layers checkpointed, {} bytes dropped after forward", layers,
                                 dropped_bytes(graph, keep));
  return remat_detail::finish(graph, hardware, budget, std::move(plan), "per-layer",
                              std::move(note), clock);
}

}  // namespace memwall
