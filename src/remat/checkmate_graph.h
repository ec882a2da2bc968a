// The graph Checkmate's MILP is over (checkmate.cc, Note [Checkmate's MILP]):
// op by op, Rotor's stage chain for larger graphs, or runs of consecutive
// ops of a larger forward-only program (checkmate_groups.cc). Internal to
// src/remat.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/remat/rotor.h"

namespace memwall::remat_detail {

// The graph Checkmate sees: nodes run a list of ops; values have one
// producing node and read by users.
struct MilpGraph {
  int n = 0;
  std::vector<double> cost;
  std::vector<uint64_t> workspace;
  std::vector<uint8_t> once;  // may not be recomputed
  std::vector<std::vector<int>> in, out;
  std::vector<uint64_t> bytes;
  std::vector<int> producer;
  std::vector<std::vector<int>> users;  // sorted, distinct
  uint64_t static_bytes = 0;
  std::vector<std::vector<OpId>> ops;
  std::vector<OpId> tail;
  bool coarse = false;   // the Rotor chain's stages
  bool grouped = false;  // runs of consecutive ops (Note [Forward-only groups])
};

// Building blocks of the graphs below.
int add_value(MilpGraph& g, int producer, uint64_t bytes);
void add_use(MilpGraph& g, int value, int node);
void resize_nodes(MilpGraph& g, int n);

// One node per op: its cost under the cost model, its workspace, one value
// per buffer it creates.
MilpGraph op_graph(const Graph& graph, const Hardware& hw);

// Nodes F_0..F_{L-1}, B_{L-1}..B_0 of the Rotor chain; values: X_{s+1}
// (F_s to F_{s+1} and the backwards that read it), the rest of xbar_s (F_s
// to B_s) and the gradient of B_s to B_{s-1}.
MilpGraph chain_graph(const rotor::Chain& chain);

// The MILP's graph of a forward-only program: at most `nodes` runs of
// consecutive ops (Note [Forward-only groups] in checkmate_groups.cc).
MilpGraph group_graph(const Graph& graph, const Hardware& hw, int nodes);

}  // namespace memwall::remat_detail
