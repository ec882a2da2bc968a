// `memwall calibrate --graph` and --from (calibrate_kernels.h): the
// kernels of a traced graph measured on this machine through the executor
// (Note [Measured kernels] in hw/hardware.h, Note [Kernel timing] in
// src/exec, Note [Measuring copy contention] in src/hw/calibration.cc).
#include "calibrate_kernels.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/exec/kernel_timing.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/remat/remat.h"
#include "memwall/report/hardware_tables.h"

namespace memwall::cli {
namespace {

// A --graph file read for measure_kernels, before any measuring: throws
// Error when it carries no call records.
Graph read_kernel_graph(const std::string& graph_file) {
  Graph graph = read_graph_file(graph_file);
  if (!graph.meta.contains("calls")) {
    fail(
        "calibrate: {}: graph \"{}\" carries no call records, so its kernels cannot be run: "
        "trace the model with `memwall trace`",
        graph_file, graph.name);
  }
  return graph;
}

// Runs `graph_file`'s keep-all plan `rounds` times for 1 + `iterations`
// iterations on hw's device (the emulated one, as large as hw's device
// memory; or the GPU, Note [The CUDA run]) and folds the rounds into a
// profile's kernels. The values come from a fresh trace of its model (on
// the GPU for a GPU) or from `kept` (memwall run --keep-values).
KernelMeasure measure_kernels(const std::string& graph_file, const Graph& graph,
                              importers::KeptValues& kept, int iterations, int rounds,
                              const Hardware& hw, const std::string& python) {
  const bool gpu = !hw.device_is_host_cpu;
  importers::TorchTraceRequest request = importers::request_for(graph);
  request.kernels = gpu ? "cuda" : "cpu";
  request.device = gpu ? "cuda" : "cpu";
  request.python = python;
  const std::unique_ptr<importers::RunTrace> trace = kept.take(request, 1, 0);
  importers::check_same_structure(graph, trace->graph(), graph_file);
  // Keep-all on a device as large as the host: every op computed once per
  // iteration, in the graph's order.
  // On a GPU 9/10 of its memory, the same for every graph: torch's CUDA
  // allocator is installed once per process (Note [CUDA device memory]),
  // and the driver and cuBLAS hold some of the rest.
  const uint64_t budget = gpu ? hw.device_memory_bytes / 10 * 9 : hw.device_memory_bytes;
  const RematResult keep_all = plan_keep_all(graph, hw, budget, {});
  exec::KernelTiming timing = exec::time_kernel_rounds(
      graph, keep_all.plan, trace->values_dir(), iterations, rounds, gpu ? "cuda" : "emulated");
  if (timing.status != exec::Status::kOk) {
    fail("calibrate: {}: timing its kernels: {}", graph_file, timing.error);
  }
  std::vector<KernelRound> measured;
  for (exec::KernelRoundTimes& r : timing.rounds) {
    measured.push_back({.kernel_seconds = std::move(r.kernel_seconds),
                        .step_s = r.step_s,
                        .overhead_s = r.overhead_s,
                        .loaded_step_s = r.loaded_step_s,
                        .load_busy_share = r.load_busy_share,
                        .copy_alone_s = r.copy_alone_s,
                        .copy_beside_s = r.copy_beside_s});
  }
  return fold_kernel_rounds(graph, measured);
}

}  // namespace

void progress(const CalibrateArgs& args, const std::string& what) {
  if (!args.json && ::isatty(STDERR_FILENO) == 1)
    std::cerr << "memwall: calibrate: " << what << "\n";
}

KernelGraphs kernel_graphs(const CalibrateArgs& args) {
  if (!args.keep_values.empty() && args.graphs.size() != 1) {
    fail("calibrate: --keep-values goes with exactly one --graph");
  }
  if (args.kernel_iterations < 1 || args.kernel_iterations > 1000) {
    fail("calibrate: --kernel-iterations must be in [1, 1000], got {}", args.kernel_iterations);
  }
  if (args.kernel_rounds < 1 || args.kernel_rounds > 100) {
    fail("calibrate: --kernel-rounds must be in [1, 100], got {}", args.kernel_rounds);
  }
  KernelGraphs out;
  for (const std::string& file : args.graphs) out.graphs.push_back(read_kernel_graph(file));
  if (!args.keep_values.empty()) {
    out.kept = importers::KeptValues(args.keep_values);
    const Graph& graph = out.graphs.front();
    out.kept.check_model(importers::request_for(graph),
                         fmt::format("{}'s model (\"{}\")", args.graphs.front(), graph.name));
  }
  return out;
}

std::vector<TimedGraph> add_kernels(const CalibrateArgs& args, KernelGraphs& in, Hardware& hw) {
  std::vector<TimedGraph> timed;
  for (size_t g = 0; g < args.graphs.size(); ++g) {
    const std::string& file = args.graphs[g];
    const int iterations = args.quick ? 2 : args.kernel_iterations;
    const int rounds = args.quick ? 1 : args.kernel_rounds;
    progress(args, fmt::format("the kernels of {} ({} rounds of {} iterations)...", file, rounds,
                               iterations));
    KernelMeasure m =
        measure_kernels(file, in.graphs[g], in.kept, iterations, rounds, hw, args.python);
    add_measured_kernels(hw, m);
    timed.push_back({file, std::move(m)});
  }
  return timed;
}

nlohmann::json timed_json(const std::vector<TimedGraph>& timed) {
  nlohmann::json out = nlohmann::json::array();
  for (const TimedGraph& t : timed) out.push_back(kernel_measure_json(t.file, t.measure));
  return out;
}

void print_timed(const std::vector<TimedGraph>& timed) {
  for (const TimedGraph& t : timed) std::cout << kernel_measure_rows(t.file, t.measure);
}

// --from PROFILE --graph G...: kernels added to a profile measured before,
// without measuring the machine again.
int calibrate_kernels_only(const CalibrateArgs& args) {
  if (args.graphs.empty()) fail("calibrate: --from adds measured kernels: name a --graph");
  OutputFiles outputs;
  const std::string out = args.out.empty() ? args.from : args.out;
  outputs.declare(out);
  Hardware hw = read_hardware_file(args.from);
  KernelGraphs graphs = kernel_graphs(args);
  const std::vector<TimedGraph> timed = add_kernels(args, graphs, hw);
  const nlohmann::json profile = hardware_to_json(hw);
  (void)hardware_from_json(profile);
  outputs.set(out, profile.dump(2) + "\n");
  outputs.commit();
  if (args.json) {
    std::cout << nlohmann::json{{"profile_file", out}, {"timed", timed_json(timed)}}.dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("{} ({}), with measured kernels\n", hw.name, args.from);
  print_timed(timed);
  std::cout << fmt::format("  {:<28} {}\n", "profile written to", out);
  return 0;
}

}  // namespace memwall::cli
