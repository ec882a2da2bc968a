// The layout problem of a graph's default schedule (graph.h `liveness`).
#pragma once

#include "memwall/graph/types.h"
#include "memwall/layout/types.h"

namespace memwall {

// One LayoutBuffer per buffer with bytes > 0, with the buffer's id: a buffer
// allocated at op a (0 when it exists before the first op) and freed right
// after op f (the op count n when it lives to the end) is live on [a, f + 1).
// Times are op indices, so the live lower bound of the result is the
// default schedule's peak without op workspace. Alignment 1, no capacity.
// A graph without ops gives every buffer the lifetime [0, 1).
LayoutProblem layout_problem(const Graph& graph);

}  // namespace memwall
