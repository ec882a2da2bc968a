// What a training step needs before any plan: `memwall inspect`'s figures
// (and the Python package's estimate): parameters, bytes by kind, the peak
// of the default schedule and of eager PyTorch (traced graphs), whether it
// fits the device and the estimated iteration time, as a record, a table
// and JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall {

struct Inspection {
  std::string graph_name, fingerprint;
  nlohmann::json model;  // the graph's meta "model", or null
  size_t ops = 0, buffers = 0;
  uint64_t params = 0, trainable = 0;
  MemorySummary summary;
  MemoryProfile profile;  // the default schedule: each buffer freed after its last use
  std::string peak_op_name;
  // A traced graph knows when eager PyTorch frees each storage (Note [Eager
  // lifetimes]): its peak is what the user's unmodified script reaches, so
  // it decides whether the step fits.
  std::optional<MemoryProfile> eager;
  std::string eager_peak_op_name;
  std::string gpu, gpu_description;
  uint64_t device_memory_bytes = 0;
  bool fits = false;
  uint64_t shortfall = 0;  // bytes beyond the device when it does not fit
  double iteration_time = 0;
  bool by_layer = false;  // whether saved_by_layer was asked for
  std::vector<LayerBytes> saved_by_layer;

  uint64_t headline_peak() const { return eager ? eager->peak_bytes : profile.peak_bytes; }
};

// `graph`'s figures on `hw`, with the saved activations by layer when
// `by_layer` (Note [What a layer is] in graph/layers.h).
Inspection inspect_graph(const Graph& graph, const Hardware& hw, bool by_layer);

// `memwall inspect --json` and its table (without the "graph written to" row).
nlohmann::json inspection_json(const Inspection& in);
std::string inspection_text(const Inspection& in);

}  // namespace memwall
