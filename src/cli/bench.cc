// `memwall bench <what>`: side-by-side comparisons of memwall's algorithms
// and the published baselines on the same inputs.
#include "commands.h"

namespace memwall::cli {

void add_bench(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("bench", "compare algorithms side by side on real inputs");
  cmd->require_subcommand(1);
  add_bench_layout(*cmd, action);
  add_bench_remat(*cmd, action);
  add_bench_plan(*cmd, action);
  add_bench_alloc(*cmd, action);
  add_bench_offload(*cmd, action);
  add_bench_fidelity(*cmd, action);
  add_bench_cpu_adam(*cmd, action);
  add_bench_published(*cmd, action);
}

}  // namespace memwall::cli
