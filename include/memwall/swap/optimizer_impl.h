// The optimizer step as the device runs it (Note [Optimizer as the device
// runs it] in src/swap/optimizer_impl.cc): torch.optim's for-loop, foreach
// (multi-tensor) or fused implementation.
#pragma once

#include <optional>
#include <string_view>

#include "memwall/graph/types.h"

namespace memwall {

enum class OptimizerImpl { kForLoop, kForeach, kFused };

// "for-loop", "foreach", "fused"; throws Error naming the known ones.
OptimizerImpl parse_optimizer_impl(std::string_view name);
std::string_view to_string(OptimizerImpl impl);

// `graph` with its optimizer steps as `impl` runs them, and meta
// "optimizer_impl" saying which. for-loop: as traced, one kernel per op per
// parameter. foreach and fused: each parameter's step one op (the same
// ATen calls in sequence, so the executor runs it bit for bit as before);
// foreach moves the bytes its kernels move one after another, fused reads
// and writes each tensor once and holds no temporaries. Throws as
// model_states does for an optimizer phase it cannot group.
Graph optimizer_as_run(const Graph& graph, OptimizerImpl impl);

// A traced graph as its kernels' device runs the step: `impl` when given;
// else, unless meta "optimizer_impl" already says, torch's default there
// (foreach for CUDA's kernels, the for-loop for the CPU's, by meta
// "kernels", CUDA's when absent). A default that cannot group the steps (a
// script's own optimizer) leaves them as traced and says for-loop. What
// `memwall trace` writes and what memwall.estimate and memwall.plan read.
Graph optimizer_as_the_device_runs_it(Graph graph, std::optional<OptimizerImpl> impl = {});

}  // namespace memwall
