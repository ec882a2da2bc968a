// Element counts of buffers and graphs.
#pragma once

#include <cstdint>

#include "memwall/graph/types.h"

namespace memwall {

// Elements of a buffer: the product of its shape, or bytes / dtype size when
// the shape is empty (a scalar has shape [] and one element's bytes).
uint64_t element_count(const Buffer& buffer);
// Scalar parameters of a graph: elements of its `param` buffers.
uint64_t param_count(const Graph& graph);
// The model's parameter count: meta "param_count" when the graph has it (a
// quantized weight's buffer holds more elements than bytes, Note [NF4
// weights] in src/models/lora.cc), else param_count.
uint64_t model_param_count(const Graph& graph);
// Elements of the `param` buffers an optimizer-phase op updates: the
// parameters that train (all of them but frozen ones, as LoRA's base).
uint64_t trainable_param_count(const Graph& graph);

}  // namespace memwall
