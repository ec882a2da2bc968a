// The layers of a graph: what `inspect --by-layer` counts and what the
// per-layer planner checkpoints (Note [What a layer is] in
// src/graph/layers.cc, docs/remat-per-layer.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memwall/graph/types.h"

namespace memwall {

struct Layers {
  std::vector<int> of_op;          // per op: its layer, -1 outside every layer and off the forward
  std::vector<std::string> names;  // per layer, in forward order
};

// The layers of the graph's forward (Note [What a layer is]).
Layers find_layers(const Graph& graph);

// Per buffer: the layer of the forward op that creates it, -1 for every other
// buffer (created outside every layer, off the forward, or before the first op).
std::vector<int> buffer_layers(const Graph& graph, const Layers& layers);

// Bytes of the activations saved for backward (saved_for_backward) per
// layer, in order of the buffers' first appearance; those created outside
// every layer in one row named "(outside layers)". `memwall inspect
// --by-layer` prints them.
struct LayerBytes {
  std::string layer;
  uint64_t saved = 0;
};
std::vector<LayerBytes> saved_by_layer(const Graph& graph);

}  // namespace memwall
