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

}  // namespace memwall
