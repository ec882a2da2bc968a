// A plan simulated again with the kernels a run measured
// (iteration_time_with_kernels in memwall/sim/simulator.h).
#include "memwall/sim/simulator.h"

namespace memwall {

// Note [The run's own kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A prediction from measured kernels has two errors: the kernels' times
// (calibrated minutes before the run, on a machine whose speed drifts
// between minutes: the same keep-all plan of MobileNetV2 ran 88-111 ms a
// step in runs a minute apart on the development VM) and the rest of the
// model (the executor's own time, copies, waits, contention). Each op's
// median call time in this run, put in the graph and simulated again with
// the same profile, is the step the simulator predicts for the kernels as
// they ran: its ratio to the measured step is the second error alone.
// Those times already hold what copies beside them cost the kernels, so
// the profile's compute slowdown beside copies (Note [Copy contention]) is
// left out there; the copies' own slowdown stays.
std::optional<double> iteration_time_with_kernels(Graph graph, const Plan& plan, Hardware hardware,
                                                  const std::vector<double>& kernel_seconds,
                                                  uint64_t host_block_bytes) {
  hardware.copy_contention.compute = 1;
  if (kernel_seconds.size() != graph.ops.size()) return std::nullopt;
  size_t timed = 0;
  for (Op& op : graph.ops) {
    const double t = kernel_seconds[static_cast<size_t>(op.id)];
    if (t > 0) {
      op.time = t;
      ++timed;
    }
  }
  if (timed == 0) return std::nullopt;
  const SimResult again =
      simulate(graph, plan, hardware,
               {.live_scratch = plan.offsets.empty(), .host_block_bytes = host_block_bytes});
  if (!again.valid) return std::nullopt;
  return again.iteration_time;
}

}  // namespace memwall
