// Checkmate's MILP over a forward-only program too large to solve op by op
// (checkmate_graph.h, docs/remat-checkmate.md).
//
// Note [Forward-only groups]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The MILP is defined for any DAG, so a forward-only program (no backward
// op: inference, an unrolled generator, a custom loop) is planned as it
// is. Above kMaxOpNodes ops (checkmate.cc) it has no Rotor chain to fall
// back on, so its ops are cut into at most `nodes` runs of consecutive ops,
// one node each. A node recomputes as a whole, so the cuts go where
// recomputation pays: around the producer of each activation read again
// after a gap (read_again_later), so that it runs alone, after the use
// before its largest gap, so that it can go there, and before the use
// ending it, so that the recompute can come just before; largest buffers
// first while nodes remain, then the longest runs are halved.
//
// A node's values are the buffers it creates that a later node reads; the
// rest of its buffers live and die inside it. The MILP holds a node's input
// values and all its output values while it runs; W_k adds what the node's
// ops hold beyond that at worst (inputs not yet past their last use,
// outputs made so far, its own buffers alive, the op's workspace), so the
// MILP's count stays an upper bound of the simulator's, as the minimal
// liveness of the plan frees no later than the MILP's FREE.
#include <algorithm>
#include <optional>
#include <vector>

#include "checkmate_graph.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "memwall/plan/builders.h"

namespace memwall::remat_detail {
namespace {

// The first op of each node, ascending, starting with 0 (Note [Forward-only
// groups]).
std::vector<OpId> node_starts(const Graph& graph, size_t nodes) {
  const auto n = static_cast<OpId>(graph.ops.size());
  const std::vector<uint8_t> later = read_again_later(graph);
  const BufferUses uses(graph);
  std::vector<BufferId> special;
  for (const Buffer& b : graph.buffers) {
    if (later[b.id]) special.push_back(b.id);
  }
  std::stable_sort(special.begin(), special.end(), [&](BufferId a, BufferId b) {
    return graph.buffers[a].bytes > graph.buffers[b].bytes;
  });
  std::vector<uint8_t> start(graph.ops.size(), 0);
  start[0] = 1;
  size_t count = 1;
  for (const BufferId b : special) {
    const std::optional<Eviction> gap = largest_gap(uses, b, 2);
    if (!gap) continue;
    const OpId p = uses.producer(b);
    std::vector<OpId> cuts = {p, p + 1, gap->after + 1, gap->before};
    cuts.erase(std::remove_if(cuts.begin(), cuts.end(), [&](OpId c) { return c >= n || start[c]; }),
               cuts.end());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (count + cuts.size() > nodes) break;
    for (const OpId c : cuts) start[c] = 1;
    count += cuts.size();
  }
  std::vector<OpId> starts;
  for (OpId i = 0; i < n; ++i) {
    if (start[i]) starts.push_back(i);
  }
  while (starts.size() < nodes) {
    size_t longest = 0;
    OpId length = 0;
    for (size_t k = 0; k < starts.size(); ++k) {
      const OpId end = k + 1 < starts.size() ? starts[k + 1] : n;
      if (end - starts[k] > length) {
        length = end - starts[k];
        longest = k;
      }
    }
    if (length < 2) break;
    starts.insert(starts.begin() + static_cast<std::ptrdiff_t>(longest) + 1,
                  starts[longest] + length / 2);
  }
  return starts;
}

}  // namespace

MilpGraph group_graph(const Graph& graph, const Hardware& hw, int nodes) {
  const std::vector<OpId> starts = node_starts(graph, static_cast<size_t>(std::max(nodes, 1)));
  MilpGraph g;
  g.grouped = true;
  resize_nodes(g, static_cast<int>(starts.size()));
  std::vector<int> node_of(graph.ops.size(), 0);
  for (size_t k = 0; k < starts.size(); ++k) {
    const auto end = k + 1 < starts.size() ? starts[k + 1] : static_cast<OpId>(graph.ops.size());
    for (OpId i = starts[k]; i < end; ++i) node_of[i] = static_cast<int>(k);
  }
  std::vector<int> last_node(graph.buffers.size(), -1);
  std::vector<uint8_t> updated(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.in) last_node[b] = node_of[op.id];
    for (const BufferId b : op.updates) {
      last_node[b] = node_of[op.id];
      updated[b] = 1;
    }
  }
  for (const Buffer& b : graph.buffers) {
    if (exists_before_first_op(b.kind)) g.static_bytes += b.bytes;
  }
  // Values and their users.
  std::vector<int> value_of(graph.buffers.size(), -1);
  std::vector<BufferId> buffer_of;  // per value
  for (const Op& op : graph.ops) {
    const int k = node_of[op.id];
    g.cost[k] += op_time(hw, graph, op);
    g.ops[k].push_back(op.id);
    g.once[k] = g.once[k] || !recomputable(graph, op);
    const auto use = [&](BufferId b) {
      const int v = value_of[b];
      if (v >= 0 && g.producer[v] != k) add_use(g, v, k);
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
    for (const BufferId b : op.out) {
      if (updated[b]) g.once[k] = 1;
      if (last_node[b] > k) {
        value_of[b] = add_value(g, k, graph.buffers[b].bytes);
        buffer_of.push_back(b);
      }
    }
  }
  // W_k: what the node's ops hold beyond its input and output values.
  const std::vector<BufferLife> lives = liveness(graph);
  std::vector<uint8_t> inside_of(graph.buffers.size(), 0);  // the node's own, alive
  for (int k = 0; k < g.n; ++k) {
    uint64_t counted = 0;
    for (const int v : g.in[k]) counted += g.bytes[v];
    for (const int v : g.out[k]) counted += g.bytes[v];
    uint64_t made = 0;    // output values made so far
    uint64_t inside = 0;  // bytes of the node's own buffers alive
    uint64_t most = 0;
    for (const OpId i : g.ops[k]) {
      const Op& op = graph.ops[i];
      for (const BufferId b : op.out) {
        if (value_of[b] >= 0) {
          made += graph.buffers[b].bytes;
        } else {
          inside += graph.buffers[b].bytes;
          inside_of[b] = 1;
        }
      }
      uint64_t inputs = 0;  // input values not yet past their last use
      for (const int v : g.in[k]) {
        if (lives[buffer_of[v]].last_use >= i) inputs += g.bytes[v];
      }
      most = std::max(most, inputs + made + inside + contiguous_workspace(op));
      // The node's own buffers go after their last use, or their producer
      // when nothing reads them.
      const auto release = [&](BufferId b) {
        if (!inside_of[b] || (lives[b].last_use != kNoOp && lives[b].last_use != i)) return;
        inside -= graph.buffers[b].bytes;
        inside_of[b] = 0;
      };
      for (const BufferId b : op.out) release(b);
      for (const BufferId b : op.in) release(b);
      for (const BufferId b : op.updates) release(b);
    }
    g.workspace[k] = most > counted ? most - counted : 0;
  }
  for (auto& u : g.users) std::sort(u.begin(), u.end());
  for (auto& v : g.in) std::sort(v.begin(), v.end());
  return g;
}

}  // namespace memwall::remat_detail
