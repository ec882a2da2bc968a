// per-layer: full activation checkpointing as Megatron-LM
// (--recompute-granularity full --recompute-method uniform, one layer per
// chunk) and Hugging Face's gradient_checkpointing_enable() apply it: keep
// each transformer layer's (or CNN block's) input, drop everything the
// layer saves, and recompute the layer's forward when its backward starts.
// Embeddings, the final norm, the head and the loss are not checkpointed.
//
// Layers are found by the rule `inspect --by-layer` also uses (Note [What a
// layer is] in src/graph/layers.cc, docs/remat-per-layer.md): runs of
// forward ops under one module prefix ("h3.", "layers.3.", "layer2.1.", ...),
// or, in a graph with none (VGG), blocks cut at each conv2d or matmul.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "planner_common.h"

namespace memwall {

RematResult plan_per_layer(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  const Layers layers = find_layers(graph);
  const std::vector<int>& layer_of = layers.of_op;
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  // Keep what is created outside every layer, and what a layer hands to
  // another region (the next layer's input, or the head's).
  std::vector<uint8_t> keep(graph.buffers.size(), 1);
  const std::vector<int> producer_layer = buffer_layers(graph, layers);
  for (size_t b = 0; b < keep.size(); ++b) {
    if (droppable[b] && producer_layer[b] >= 0) keep[b] = 0;
  }
  std::vector<uint8_t> hold(graph.buffers.size(), 0);
  remat_detail::keep_layer_inputs(graph, layer_of, producer_layer, keep, hold);
  Plan plan = remat_detail::checkpoint_plan(graph, hardware, budget, keep, hold);
  std::string note = fmt::format("{} layers checkpointed, {} bytes dropped after forward",
                                 layers.names.size(), dropped_bytes(graph, keep));
  return remat_detail::finish(graph, hardware, budget, std::move(plan), "per-layer",
                              std::move(note), clock);
}

}  // namespace memwall
