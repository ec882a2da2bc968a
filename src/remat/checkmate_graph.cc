// Checkmate's graphs (checkmate_graph.h).
#include "checkmate_graph.h"

#include <algorithm>

#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "memwall/sim/simulator.h"

namespace memwall::remat_detail {

int add_value(MilpGraph& g, int producer, uint64_t bytes) {
  g.bytes.push_back(bytes);
  g.producer.push_back(producer);
  g.users.emplace_back();
  g.out[producer].push_back(static_cast<int>(g.bytes.size()) - 1);
  return static_cast<int>(g.bytes.size()) - 1;
}

void add_use(MilpGraph& g, int value, int node) {
  auto& u = g.users[value];
  if (std::find(u.begin(), u.end(), node) != u.end()) return;
  u.push_back(node);
  g.in[node].push_back(value);
}

void resize_nodes(MilpGraph& g, int n) {
  g.n = n;
  g.cost.assign(n, 0);
  g.workspace.assign(n, 0);
  g.once.assign(n, 0);
  g.in.assign(n, {});
  g.out.assign(n, {});
  g.ops.assign(n, {});
}

MilpGraph op_graph(const Graph& graph, const Hardware& hw) {
  MilpGraph g;
  resize_nodes(g, static_cast<int>(graph.ops.size()));
  std::vector<int> value_of(graph.buffers.size(), -1);
  std::vector<uint8_t> updated(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.updates) updated[b] = 1;
  }
  for (const Buffer& b : graph.buffers) {
    if (exists_before_first_op(b.kind)) g.static_bytes += b.bytes;
  }
  for (const Op& op : graph.ops) {
    g.cost[op.id] = op_time(hw, graph, op);
    g.workspace[op.id] = contiguous_workspace(op);
    g.ops[op.id] = {op.id};
    g.once[op.id] = !recomputable(graph, op);
    const auto use = [&](BufferId b) {
      if (value_of[b] >= 0) add_use(g, value_of[b], op.id);
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
    for (const BufferId b : op.out) {
      // Recomputing the producer of a value updated in place would undo the update.
      if (updated[b]) g.once[op.id] = 1;
      value_of[b] = add_value(g, op.id, graph.buffers[b].bytes);
    }
  }
  for (auto& u : g.users) std::sort(u.begin(), u.end());
  return g;
}

MilpGraph chain_graph(const rotor::Chain& chain) {
  MilpGraph g;
  g.coarse = true;
  const int L = static_cast<int>(chain.stages.size());
  resize_nodes(g, 2 * L);
  g.static_bytes = chain.baseline;
  g.tail = chain.tail;
  const auto F = [](int s) { return s; };
  const auto B = [L](int s) { return 2 * L - 1 - s; };
  for (int s = 0; s < L; ++s) {
    const rotor::Stage& st = chain.stages[s];
    g.cost[F(s)] = st.fwd_time;
    g.cost[B(s)] = st.bwd_time;
    g.ops[F(s)] = st.fwd;
    g.ops[B(s)] = st.bwd;
    g.once[F(s)] = !st.recomputable;
    g.once[B(s)] = 1;  // backward stages run once (they create grads)
  }
  std::vector<int> out_value(L, -1), grad_value(L, -1);
  for (int s = 0; s < L; ++s) {
    const rotor::Stage& st = chain.stages[s];
    const uint64_t x_next = s + 1 < L ? chain.stages[s + 1].x : 0;
    if (s + 1 < L) {
      out_value[s] = add_value(g, F(s), x_next);
      add_use(g, out_value[s], F(s + 1));
    }
    const int saved = add_value(g, F(s), st.xbar >= x_next ? st.xbar - x_next : 0);
    add_use(g, saved, B(s));
    if (s > 0) grad_value[s] = add_value(g, B(s), chain.stages[s - 1].delta_in);
    if (st.grads > 0 && s > 0) {
      // Param grads live to the optimizer: read by the last node.
      add_use(g, add_value(g, B(s), st.grads), B(0));
    } else if (st.grads > 0) {
      add_value(g, B(s), st.grads);
    }
  }
  for (int s = 0; s < L; ++s) {
    const rotor::Stage& st = chain.stages[s];
    if (st.bwd_reads_output && out_value[s] >= 0) add_use(g, out_value[s], B(s));
    if (st.bwd_reads_input && s > 0) add_use(g, out_value[s - 1], B(s));
    if (s + 1 < L) add_use(g, grad_value[s + 1], B(s));
    // Workspace: what the measured peaks exceed the values' bytes by.
    const uint64_t x_next = s + 1 < L ? chain.stages[s + 1].x : 0;
    g.workspace[F(s)] = st.peak_fwd_all > st.xbar ? st.peak_fwd_all - st.xbar : 0;
    uint64_t held = (st.xbar >= x_next ? st.xbar - x_next : 0) + st.delta_in + st.grads +
                    (s > 0 ? chain.stages[s - 1].delta_in : 0) + (st.bwd_reads_output ? x_next : 0);
    g.workspace[B(s)] = st.peak_bwd > held ? st.peak_bwd - held : 0;
  }
  for (auto& u : g.users) std::sort(u.begin(), u.end());
  for (auto& v : g.in) std::sort(v.begin(), v.end());
  return g;
}

}  // namespace memwall::remat_detail
