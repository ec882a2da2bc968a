// Per-parameter optimizer steps (optimizer_steps.h).
//
// Note [Traced optimizer steps]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The zoo emits one optimizer op per parameter (in: its gradient; updates:
// its states and the parameter). A traced torch.optim step (foreach=False)
// is the same step as the ATen kernels that run it: Adam is `step.add_`,
// `exp_avg.lerp_(grad)`, `exp_avg_sq.mul_` and `.addcmul_(grad, grad)`,
// `sqrt` into a temporary, `div` and `add_(eps)` on it, then
// `param.addcdiv_(exp_avg, temp)`; AdamW adds `param.mul_` (decoupled
// weight decay) early on; SGD with momentum is `buf.mul_`, `buf.add_(grad)`,
// `param.add_(buf)`. torch.optim's per-parameter loop runs one parameter's
// kernels together, so a step is a run of consecutive optimizer-phase ops:
// from the first one after the previous step up to the last one that
// updates the first parameter the run updates. Ops of other phases are
// skipped (ZeRO's collectives sit between steps), so the grouping depends
// on nothing else in the graph, buffer versions included.
//
// A run is that parameter's step only if its ops update nothing but the
// parameter, optimizer states and buffers the run creates; read nothing
// but the parameter, one gradient, the run's states and its own buffers;
// and no op outside the run touches its states or its buffers, nor does
// another run read its gradient (ZeRO shards the states and the step's
// work, offloading moves them to the CPU: a reader elsewhere would see the
// wrong thing). The step counter's `add_` reads no gradient; it belongs to
// its run by position, as in torch's loop. Batch norm's running statistics
// are optim_state buffers updated in forward, never by the optimizer, so
// they are no step's states. Anything else (a multi-tensor `_foreach_*` op
// over every parameter, torch 2.x's default; kernels interleaved across
// parameters; an op after the last parameter update) gets one error naming
// the op: the automatic planner then keeps to the configuration that needs
// no rewrite (one rank, every state on the device), which plans the graph
// as it is.
//
// Fusing: ZeRO divides a run's work in place (zero.cc), but offloading runs
// the step as one CPU op, timed per parameter rather than per kernel, so
// offload_graph fuses each run first into the op the zoo would have
// emitted: at the run's last place, in: the gradient, updates: the states
// then the parameter; workspace: the most bytes the run's temporaries hold
// at once (each from the op that creates it to its last user) with that
// op's own workspace; flops and bytes summed, time summed when every op was
// measured (else the cost model's, from the sums).
#include "memwall/swap/optimizer_steps.h"

#include "memwall/graph/calls.h"

#include <algorithm>
#include <string>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/describe.h"

namespace memwall {
namespace {

using detail::buffer_label;
using detail::op_label;

BufferKind kind_of(const Graph& g, BufferId b) { return g.buffers[b].kind; }

// The parameter `op` updates, -1 for none; throws for several.
BufferId updated_param(const Graph& g, const Op& op) {
  BufferId param = -1;
  int count = 0;
  for (const BufferId b : op.updates) {
    if (kind_of(g, b) != BufferKind::kParam || b == param) continue;
    param = b;
    ++count;
  }
  if (count > 1) {
    fail(
        "{} updates {} parameters: a multi-tensor (foreach) optimizer step, not one step per "
        "parameter (torch.optim's foreach=False traces one)",
        op_label(g, op.id), count);
  }
  return param;
}

class Grouping {
 public:
  explicit Grouping(const Graph& graph)
      : g_(graph),
        made_in_(graph.buffers.size(), -1),
        state_of_(graph.buffers.size(), -1),
        grad_of_(graph.buffers.size(), -1),
        run_of_(graph.ops.size(), -1) {}

  std::vector<ModelState> run() {
    std::vector<OpId> opt;  // optimizer ops, in order
    std::vector<OpId> last_update(g_.buffers.size(), kNoOp);
    for (const Op& op : g_.ops) {
      if (op.phase != Phase::kOptimizer) continue;
      updated_param(g_, op);  // a multi-tensor op, named before it spoils a run
      opt.push_back(op.id);
      for (const BufferId b : op.updates) {
        if (kind_of(g_, b) == BufferKind::kParam) last_update[b] = op.id;
      }
    }
    for (size_t i = 0; i < opt.size();) {
      BufferId param = -1;
      for (size_t j = i; j < opt.size() && param < 0; ++j) {
        param = updated_param(g_, g_.ops[opt[j]]);
      }
      if (param < 0) {
        fail(
            "{} is an optimizer op after the last one that updates a parameter: it belongs to no "
            "parameter's step",
            op_label(g_, opt[i]));
      }
      size_t end = i;
      while (opt[end] != last_update[param]) ++end;
      group(param, {opt.begin() + static_cast<ptrdiff_t>(i),
                    opt.begin() + static_cast<ptrdiff_t>(end) + 1});
      i = end + 1;
    }
    check_outside();
    return std::move(steps_);
  }

 private:
  void group(BufferId param, std::vector<OpId> ops) {
    const int k = static_cast<int>(steps_.size());
    ModelState s;
    s.param = param;
    s.step = ops.back();
    // States first: an op may read a state its run updates later.
    for (const OpId id : ops) {
      run_of_[id] = k;
      for (const BufferId b : g_.ops[id].updates) {
        if (kind_of(g_, b) != BufferKind::kOptimState || state_of_[b] == k) continue;
        if (state_of_[b] >= 0) {
          fail("{} updates {}, which the optimizer step of {} updates too", op_label(g_, id),
               buffer_label(g_, b), buffer_label(g_, steps_[state_of_[b]].param));
        }
        state_of_[b] = k;
        s.states.push_back(b);
      }
    }
    const auto read_grad = [&](OpId id, BufferId b) {
      if (s.grad >= 0 && s.grad != b) {
        fail("{} reads {}, but its optimizer step (of {}) already read {}", op_label(g_, id),
             buffer_label(g_, b), buffer_label(g_, param), buffer_label(g_, s.grad));
      }
      s.grad = b;
    };
    for (const OpId id : ops) {
      const Op& op = g_.ops[id];
      for (const BufferId b : op.in) {
        if (b == param || state_of_[b] == k || made_in_[b] == k) continue;
        if (kind_of(g_, b) == BufferKind::kGrad) {
          read_grad(id, b);
        } else {
          fail(
              "{} reads {}, which is neither the parameter it steps ({}), a gradient, one of its "
              "optimizer states nor a buffer its step creates",
              op_label(g_, id), buffer_label(g_, b), buffer_label(g_, param));
        }
      }
      for (const BufferId b : op.updates) {
        const BufferKind kind = kind_of(g_, b);
        if (state_of_[b] == k || made_in_[b] == k) continue;
        if (kind == BufferKind::kParam) {
          if (b != param) {
            fail(
                "{} updates {} inside the optimizer step of {}: the steps of different "
                "parameters interleave",
                op_label(g_, id), buffer_label(g_, b), buffer_label(g_, param));
          }
        } else if (kind == BufferKind::kGrad) {
          read_grad(id, b);  // the step may scale its own gradient in place
        } else {
          fail(
              "{} updates {}, which is neither the parameter it steps ({}), an optimizer state "
              "nor a buffer its step creates",
              op_label(g_, id), buffer_label(g_, b), buffer_label(g_, param));
        }
      }
      for (const BufferId b : op.out) {
        made_in_[b] = k;
        s.temps.push_back(b);
      }
    }
    if (s.grad < 0) {
      fail("{} ends the optimizer step of {}, which reads no gradient", op_label(g_, s.step),
           buffer_label(g_, param));
    }
    if (grad_of_[s.grad] >= 0) {
      fail("{} reads {}, which the optimizer step of {} reads too", op_label(g_, s.step),
           buffer_label(g_, s.grad), buffer_label(g_, steps_[grad_of_[s.grad]].param));
    }
    grad_of_[s.grad] = k;
    s.ops = std::move(ops);
    steps_.push_back(std::move(s));
  }

  // No op outside a step touches its states or buffers.
  void check_outside() const {
    for (const Op& op : g_.ops) {
      const int own = run_of_[op.id];
      const auto check = [&](BufferId b) {
        const int state = state_of_[b], made = made_in_[b];
        if (state >= 0 && state != own) {
          fail("{} uses {}, an optimizer state of the step of {}", op_label(g_, op.id),
               buffer_label(g_, b), buffer_label(g_, steps_[state].param));
        }
        if (made >= 0 && made != own) {
          fail("{} uses {}, a temporary of the optimizer step of {}", op_label(g_, op.id),
               buffer_label(g_, b), buffer_label(g_, steps_[made].param));
        }
      };
      for (const BufferId b : op.in) check(b);
      for (const BufferId b : op.updates) check(b);
    }
  }

  const Graph& g_;
  std::vector<ModelState> steps_;
  std::vector<int> made_in_;   // per buffer: the step whose op creates it
  std::vector<int> state_of_;  // per buffer: the step that updates it as a state
  std::vector<int> grad_of_;   // per buffer: the step that reads it as its gradient
  std::vector<int> run_of_;    // per op: its step
};

// The most bytes s's temporaries hold at once, with the op's workspace.
uint64_t step_workspace(const Graph& g, const ModelState& s) {
  std::vector<size_t> first(s.temps.size()), last(s.temps.size());
  for (size_t t = 0; t < s.temps.size(); ++t) {
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = g.ops[s.ops[i]];
      const BufferId b = s.temps[t];
      const auto has = [b](const BufferIds& ids) {
        return std::find(ids.begin(), ids.end(), b) != ids.end();
      };
      if (has(op.out)) first[t] = i;
      if (has(op.out) || has(op.in) || has(op.updates)) last[t] = i;
    }
  }
  uint64_t peak = 0;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    uint64_t live = contiguous_workspace(g.ops[s.ops[i]]);
    for (size_t t = 0; t < s.temps.size(); ++t) {
      if (first[t] <= i && i <= last[t]) {
        live = checked_add(live, g.buffers[s.temps[t]].bytes, "an optimizer step's workspace");
      }
    }
    peak = std::max(peak, live);
  }
  return peak;
}

Op fused_step(const Graph& g, const ModelState& s) {
  Op op;
  op.name = g.buffers[s.param].name + ".step";
  const auto optimizer = g.meta.find("optimizer");
  op.type = optimizer != g.meta.end() && optimizer->is_string() ? optimizer->get<std::string>()
                                                                : std::string("optimizer_step");
  op.phase = Phase::kOptimizer;
  op.in = {s.grad};
  op.updates = BufferIds(s.states.begin(), s.states.end());
  op.updates.push_back(s.param);
  op.workspace = step_workspace(g, s);
  double time = 0;
  bool timed = true;
  for (const OpId id : s.ops) {
    const Op& part = g.ops[id];
    op.flops += part.flops;
    op.bytes += part.bytes;
    timed = timed && part.time.has_value();
    if (part.time) time += *part.time;
  }
  if (timed) op.time = time;
  return op;
}

// Note [Fused calls]: a fused step runs its ops' own calls in order
// (docs/exec.md): {"op": "memwall::sequence", "steps": [call, ...],
// "locals": n}, where references to the step's temporaries, which the
// fused graph no longer has, are locals {"l": k} (k their index in
// s.temps) and every other reference takes the fused graph's ids. Empty
// when some op has no call (a zoo graph).
std::string fused_call(const Graph& g, const ModelState& s, const std::vector<BufferId>& new_id) {
  nlohmann::json steps = nlohmann::json::array();
  const auto map = [&](int64_t b) {
    const auto t = std::find(s.temps.begin(), s.temps.end(), static_cast<BufferId>(b));
    if (t != s.temps.end()) return CallBuffer{t - s.temps.begin(), true};
    return CallBuffer{new_id.at(static_cast<size_t>(b)), false};
  };
  for (const OpId id : s.ops) {
    if (g.ops[id].call.empty()) return {};
    steps.push_back(remap_call(g.ops[id].call, map));
  }
  return nlohmann::json{
      {"op", "memwall::sequence"}, {"steps", std::move(steps)}, {"locals", s.temps.size()}}
      .dump();
}

}  // namespace

std::vector<ModelState> model_states(const Graph& graph) { return Grouping(graph).run(); }

bool is_single_op_step(const Graph& graph, const ModelState& s) {
  if (s.ops.size() != 1) return false;
  const Op& op = graph.ops[s.ops[0]];
  if (op.in.size() != 1 || op.in[0] != s.grad || !op.out.empty()) return false;
  return std::none_of(op.updates.begin(), op.updates.end(),
                      [&](BufferId b) { return kind_of(graph, b) == BufferKind::kGrad; });
}

Graph fuse_optimizer_steps(const Graph& graph) {
  const std::vector<ModelState> states = model_states(graph);
  std::vector<int> fused_at(graph.ops.size(), -1);  // per op: the step it ends, if fused
  std::vector<char> drop_op(graph.ops.size(), 0), drop_buffer(graph.buffers.size(), 0);
  bool any = false;
  for (size_t k = 0; k < states.size(); ++k) {
    const ModelState& s = states[k];
    if (is_single_op_step(graph, s)) continue;
    any = true;
    for (const OpId id : s.ops) drop_op[id] = 1;
    for (const BufferId b : s.temps) drop_buffer[b] = 1;
    fused_at[s.step] = static_cast<int>(k);
  }
  if (!any) return graph;
  Graph out;
  out.name = graph.name;
  out.meta = graph.meta;
  std::vector<BufferId> new_id(graph.buffers.size(), kNoBuffer);
  for (const Buffer& b : graph.buffers) {
    if (drop_buffer[b.id]) continue;
    new_id[b.id] = static_cast<BufferId>(out.buffers.size());
    out.buffers.push_back(b);
    out.buffers.back().id = new_id[b.id];
  }
  for (Buffer& b : out.buffers) {
    if (b.version_of != kNoBuffer) b.version_of = new_id[b.version_of];
  }
  const auto renumber = [&](BufferIds& ids) {
    for (BufferId& b : ids) b = new_id[b];
  };
  for (const Op& op : graph.ops) {
    Op next;
    if (fused_at[op.id] >= 0) {
      next = fused_step(graph, states[fused_at[op.id]]);
      next.call = fused_call(graph, states[fused_at[op.id]], new_id);
    } else if (drop_op[op.id]) {
      continue;
    } else {
      next = op;
      if (!op.call.empty()) {
        next.call = remap_call_text(op.call, [&](int64_t b) {
          return CallBuffer{new_id.at(static_cast<size_t>(b)), false};
        });
      }
    }
    renumber(next.in);
    renumber(next.out);
    renumber(next.updates);
    next.id = static_cast<OpId>(out.ops.size());
    out.ops.push_back(std::move(next));
  }
  return out;
}

}  // namespace memwall
