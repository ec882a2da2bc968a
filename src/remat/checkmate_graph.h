// The graph Checkmate's MILP is built over (internal to src/remat):
// nodes, each running a list of ops, and values, each created by one node
// and read by others. checkmate.cc builds it from the op graph or the Rotor
// chain; checkmate_groups.cc from runs of a forward-only program's ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall::checkmate {

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

inline int add_value(MilpGraph& g, int producer, uint64_t bytes) {
  g.bytes.push_back(bytes);
  g.producer.push_back(producer);
  g.users.emplace_back();
  g.out[producer].push_back(static_cast<int>(g.bytes.size()) - 1);
  return static_cast<int>(g.bytes.size()) - 1;
}

inline void add_use(MilpGraph& g, int value, int node) {
  auto& u = g.users[value];
  if (std::find(u.begin(), u.end(), node) != u.end()) return;
  u.push_back(node);
  g.in[node].push_back(value);
}

inline void resize_nodes(MilpGraph& g, int n) {
  g.n = n;
  g.cost.assign(n, 0);
  g.workspace.assign(n, 0);
  g.once.assign(n, 0);
  g.in.assign(n, {});
  g.out.assign(n, {});
  g.ops.assign(n, {});
}

// The MILP's graph of a forward-only program: at most `nodes` runs of
// consecutive ops (Note [Forward-only groups] in checkmate_groups.cc).
MilpGraph group_graph(const Graph& graph, const Hardware& hw, int nodes);

}  // namespace memwall::checkmate
