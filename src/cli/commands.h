// Verbs of the `memwall` command. Each adds its subcommand to the app and
// sets `action` to run when that subcommand is chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace memwall::cli {

using Action = std::function<int()>;

void add_inspect(CLI::App& app, Action& action);
void add_models(CLI::App& app, Action& action);
void add_gpus(CLI::App& app, Action& action);
void add_simulate(CLI::App& app, Action& action);
void add_plan(CLI::App& app, Action& action);
void add_layout(CLI::App& app, Action& action);
void add_bench(CLI::App& app, Action& action);
void add_trace(CLI::App& app, Action& action);
void add_calibrate(CLI::App& app, Action& action);
void add_run(CLI::App& app, Action& action);
void add_run_rank(CLI::App& app, Action& action);  // hidden: a data-parallel run's other ranks
void add_alloc_replay(CLI::App& app, Action& action);
// Subcommands of `memwall bench`.
void add_bench_layout(CLI::App& bench, Action& action);
void add_bench_remat(CLI::App& bench, Action& action);
void add_bench_plan(CLI::App& bench, Action& action);
void add_bench_alloc(CLI::App& bench, Action& action);
void add_bench_offload(CLI::App& bench, Action& action);
void add_bench_fidelity(CLI::App& bench, Action& action);
void add_bench_cpu_adam(CLI::App& bench, Action& action);
void add_bench_published(CLI::App& bench, Action& action);

}  // namespace memwall::cli
