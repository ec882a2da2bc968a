// The optimizer step as the device runs it (optimizer_impl.h).
//
// Note [Optimizer as the device runs it]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The tracer records torch.optim's step with foreach=False: one ATen kernel
// per op per parameter, which is what the CPU runs by default and what the
// executor replays. On CUDA, torch 2.x's default is the multi-tensor
// (foreach) path, and fused=True (or apex's FusedAdam, as Megatron-LM and
// DeepSpeed use) runs the whole update of a tensor in one kernel. The
// difference is time, not what is computed: issue 48 measured a 20M
// parameter EfficientNet-V2-S traced for a100-80g spending 27.26 ms of a
// keep-all step in 3,616 optimizer ops, most of it their launches.
//  - for-loop: the ops as traced, each with its launch.
//  - foreach: each kernel of the loop becomes one launch over every
//    tensor; its memory traffic is the loop's (each _foreach_ op reads and
//    writes its lists in a pass of its own). Modelled as one op per
//    parameter with the loop's bytes and one launch.
//  - fused: one kernel reads the gradient and reads and writes each state
//    and the parameter once: the zoo's step (src/models/builder.cc), with
//    no temporaries.
// The fused ops keep their parts' calls as a memwall::sequence (Note [Fused
// calls] in optimizer_steps.cc), so a plan of the graph still runs.
//
// Note [Foreach lists]
// ~~~~~~~~~~~~~~~~~~~~
// A foreach step runs each kernel of the loop over every tensor of a group
// before the next kernel, so a temporary the loop makes per parameter is a
// list over all of them at once. torch 2.x's _multi_tensor_adam
// (torch/optim/adam.py) groups the tensors by device and dtype
// (_group_tensors_by_device_and_dtype) and, per group, makes
// `exp_avg_sq_sqrt = torch._foreach_sqrt(device_exp_avg_sqs)`, divides and
// adds eps to it in place, and holds it through `_foreach_addcdiv_`: a list
// the size of every exp_avg_sq at once (4 bytes a parameter in fp32),
// beside parameters, gradients and states. (Adam's weight decay copies the
// gradients into a list first, deleted before the sqrt.) The for-loop makes
// the same values out of place (`exp_avg_sq.sqrt() / bc`, then `add_`),
// but what crosses from one kernel to the next is one tensor per
// parameter; so the list a foreach step holds is, at each position of the
// loop, the loop's temporaries alive between two of its kernels, summed
// over the group's parameters (steps of unequal length: each step's most,
// summed). The zoo's step is one op with no temporaries: for it, Adam's
// list is its largest state's bytes, SGD's none (_multi_tensor_sgd updates
// its momentum buffers in place). Groups are the parameters' dtypes (one
// device; a script's several param_groups would each hold their own, at
// different times: one group is an upper bound). The list is held at the
// group's last step, as workspace on top of that step's own: in the model
// every step of the group is then alive at once, as in torch. Checked
// against torch's own foreach step in python/tests/test_foreach_lists.py.
#include "memwall/swap/optimizer_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "memwall/base/error.h"
#include "memwall/swap/optimizer_steps.h"

namespace memwall {
namespace {

// Per position in s's ops: the bytes of its temporaries made at or before
// that op and read after it (Note [Foreach lists]). The zoo's single op:
// Adam's list element, its largest state.
std::vector<uint64_t> held_between_kernels(const Graph& g, const ModelState& s) {
  if (is_single_op_step(g, s)) {
    const Op& op = g.ops[s.step];
    uint64_t largest = 0;
    if (op.type == "adam" || op.type == "adamw") {
      for (const BufferId b : s.states) largest = std::max(largest, g.buffers[b].bytes);
    }
    return {largest};
  }
  std::vector<uint64_t> held(s.ops.size(), 0);
  for (const BufferId t : s.temps) {
    size_t made = s.ops.size(), last = 0;
    for (size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = g.ops[s.ops[i]];
      const auto has = [t](const BufferIds& ids) {
        return std::find(ids.begin(), ids.end(), t) != ids.end();
      };
      if (has(op.out)) made = std::min(made, i);
      if (has(op.in) || has(op.updates)) last = i;
    }
    for (size_t i = made; i < last; ++i) {
      held[i] = checked_add(held[i], g.buffers[t].bytes, "a foreach step's lists");
    }
  }
  return held;
}

// The bytes of lists each dtype group's foreach step holds at its most.
std::map<DType, uint64_t> foreach_lists(const Graph& g, const std::vector<ModelState>& steps) {
  std::map<DType, std::vector<std::vector<uint64_t>>> groups;
  for (const ModelState& s : steps) {
    groups[g.buffers[s.param].dtype].push_back(held_between_kernels(g, s));
  }
  std::map<DType, uint64_t> lists;
  for (const auto& [dtype, held] : groups) {
    const bool aligned = std::all_of(
        held.begin(), held.end(), [&](const auto& h) { return h.size() == held.front().size(); });
    uint64_t most = 0;
    if (aligned) {
      for (size_t i = 0; i < held.front().size(); ++i) {
        uint64_t at = 0;
        for (const auto& h : held) at = checked_add(at, h[i], "a foreach step's lists");
        most = std::max(most, at);
      }
    } else {
      for (const auto& h : held) {
        most = checked_add(most, *std::max_element(h.begin(), h.end()), "a foreach step's lists");
      }
    }
    lists[dtype] = most;
  }
  return lists;
}

// Holds each group's lists at its last step (Note [Foreach lists]).
void hold_foreach_lists(const Graph& traced, Graph& fused) {
  const std::vector<ModelState> before = model_states(traced);
  const std::vector<ModelState> after = model_states(fused);
  if (before.size() != after.size()) {
    fail("fusing the optimizer steps of graph \"{}\" changed their number from {} to {}",
         traced.name, before.size(), after.size());
  }
  std::map<DType, OpId> last_step;
  for (const ModelState& s : after) {
    const auto [at, added] = last_step.emplace(fused.buffers[s.param].dtype, s.step);
    if (!added) at->second = std::max(at->second, s.step);
  }
  for (const auto& [dtype, bytes] : foreach_lists(traced, before)) {
    Op& op = fused.ops[last_step.at(dtype)];
    op.workspace = std::max(op.workspace, bytes);
  }
}

}  // namespace

OptimizerImpl parse_optimizer_impl(std::string_view name) {
  if (name == "for-loop") return OptimizerImpl::kForLoop;
  if (name == "foreach") return OptimizerImpl::kForeach;
  if (name == "fused") return OptimizerImpl::kFused;
  fail("unknown optimizer implementation '{}' (known: for-loop, foreach, fused)", name);
}

std::string_view to_string(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::kForLoop:
      return "for-loop";
    case OptimizerImpl::kForeach:
      return "foreach";
    case OptimizerImpl::kFused:
      return "fused";
  }
  return "?";
}

Graph optimizer_as_run(const Graph& graph, OptimizerImpl impl) {
  Graph out = impl == OptimizerImpl::kForLoop ? graph : fuse_optimizer_steps(graph);
  out.meta["optimizer_impl"] = std::string(to_string(impl));
  if (impl == OptimizerImpl::kForeach) hold_foreach_lists(graph, out);
  if (impl != OptimizerImpl::kFused) return out;
  for (Op& op : out.ops) {
    if (op.phase != Phase::kOptimizer) continue;
    double bytes = 0;
    for (const BufferId b : op.in) bytes += static_cast<double>(out.buffers[b].bytes);
    for (const BufferId b : op.out) bytes += static_cast<double>(out.buffers[b].bytes);
    for (const BufferId b : op.updates) bytes += 2.0 * static_cast<double>(out.buffers[b].bytes);
    op.bytes = bytes;
    op.workspace = 0;
    op.workspace_span = 0;
    op.scratch_first.clear();
    op.scratch_at.clear();
  }
  return out;
}

Graph optimizer_as_the_device_runs_it(Graph graph, std::optional<OptimizerImpl> impl) {
  if (impl) return optimizer_as_run(graph, *impl);
  if (graph.meta.contains("optimizer_impl")) return graph;
  const auto kernels = graph.meta.find("kernels");
  const bool cpu = kernels != graph.meta.end() && *kernels == "cpu";
  try {
    return optimizer_as_run(graph, cpu ? OptimizerImpl::kForLoop : OptimizerImpl::kForeach);
  } catch (const Error&) {
    graph.meta["optimizer_impl"] = "for-loop";
    return graph;
  }
}

}  // namespace memwall
