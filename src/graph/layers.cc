// Note [What a layer is]
// ~~~~~~~~~~~~~~~~~~~~~~
// One rule serves `memwall inspect --by-layer` (the activations saved for
// backward per layer) and the per-layer planner (which keeps each layer's
// input and recomputes the layer), so that the layers one lists are the
// layers the other checkpoints (issue 46; docs/remat-per-layer.md).
//
// The zoo and the tracer name every op of a layer with the module's prefix
// (torchvision and Hugging Face module paths), so a layer is a maximal run
// of forward ops whose names start with the same match of one of these
// patterns ('#' is one or more digits), at the start of the name or of a
// dotted component: "h#." (GPT-2 blocks), "h.#." (Hugging Face's GPT-2),
// "layers.#." (Llama, Mixtral), "blocks.#." (MPT), "encoder.layer.#."
// (BERT), "layer#.#." (a ResNet bottleneck), "features.#." (a MobileNetV2
// inverted residual), "inc.", "down#.", "up#." (U-Net). The layer is named
// by the match without its final dot ("h3", "layer2.1", "inc"), with what
// precedes it in the name ("transformer.h.0"). Forward ops matching none,
// between or around the layers (embeddings, the stem, the final norm, the
// head, the loss), are outside every layer.
//
// A graph where no forward op matches (VGG, whose torchvision "features.N"
// are single ops) is cut into blocks at each conv2d or matmul op, up to the
// loss (cross_entropy): one weight layer with its activation and pooling,
// the granularity torch's checkpoint_sequential gives with one module per
// segment. A block is named by its first op ("features.0", "classifier.3").
//
// A buffer belongs to the layer of the forward op that creates it. Before
// this rule, `inspect --by-layer` cut buffer names at their first dotted
// component holding a digit, which split a U-Net's "inc" block into its six
// ops, merged a ResNet's bottlenecks into their stage ("layer4") and made a
// row of each VGG op.
#include "memwall/graph/layers.h"

#include <array>
#include <cctype>
#include <map>
#include <string_view>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

// '#' matches one or more digits; everything else matches itself.
constexpr std::array<std::string_view, 10> kLayerPrefixes = {
    "h#.",       "h.#.",        "layers.#.", "blocks.#.", "encoder.layer.#.",
    "layer#.#.", "features.#.", "inc.",      "down#.",    "up#.",
};

// Length of the prefix of `name` matching `pattern`, or 0.
size_t match_layer_prefix(std::string_view name, std::string_view pattern) {
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

// The prefix naming the op's layer, final dot included; empty when none
// matches. A pattern matches at the start of the name or of any dotted
// component, leftmost first: traced Hugging Face names carry the model's
// own prefix ("transformer.h.0.attn", "model.layers.3.mlp").
std::string_view layer_key(std::string_view op_name) {
  for (size_t start = 0; start < op_name.size();) {
    for (const std::string_view pattern : kLayerPrefixes) {
      if (const size_t length = match_layer_prefix(op_name.substr(start), pattern)) {
        return op_name.substr(0, start + length);
      }
    }
    const size_t dot = op_name.find('.', start);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return {};
}

}  // namespace

Layers find_layers(const Graph& graph) {
  Layers layers;
  layers.of_op.assign(graph.ops.size(), -1);
  bool any_named = false;
  for (const Op& op : graph.ops) {
    any_named = any_named || (op.phase == Phase::kForward && !layer_key(op.name).empty());
  }
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
        layers.names.emplace_back(key.substr(0, key.size() - 1));
      }
    } else {
      // Blocks start at each weight layer; what precedes the first is outside.
      if (op.type == "conv2d" || op.type == "matmul") layers.names.push_back(op.name);
      if (op.type == "cross_entropy") break;
      if (layers.names.empty()) continue;
    }
    layers.of_op[op.id] = static_cast<int>(layers.names.size()) - 1;
  }
  return layers;
}

std::vector<int> buffer_layers(const Graph& graph, const Layers& layers) {
  std::vector<int> layer(graph.buffers.size(), -1);
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.out) layer[b] = layers.of_op[op.id];
  }
  return layer;
}

std::vector<LayerBytes> saved_by_layer(const Graph& graph) {
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  const Layers layers = find_layers(graph);
  const std::vector<int> layer_of = buffer_layers(graph, layers);
  std::vector<LayerBytes> rows;
  std::map<int, size_t> index;  // layer (-1: outside every layer) -> row
  for (const Buffer& b : graph.buffers) {
    if (!saved[b.id]) continue;
    const int layer = layer_of[b.id];
    auto [it, inserted] = index.try_emplace(layer, rows.size());
    if (inserted) rows.push_back({layer < 0 ? "(outside layers)" : layers.names[layer], 0});
    rows[it->second].saved = checked_add(rows[it->second].saved, b.bytes, "saved bytes");
  }
  return rows;
}

}  // namespace memwall
