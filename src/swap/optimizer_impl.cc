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
// calls] in optimizer_steps.cc), so a plan of the graph still runs. Not
// modelled: foreach's temporaries for every tensor at once (its sqrt of
// exp_avg_sq is a list as large as the parameters), which it holds only
// during the step.
#include "memwall/swap/optimizer_impl.h"

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/swap/optimizer_steps.h"

namespace memwall {

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
