// `memwall trace`: imports one training iteration of a real PyTorch model
// (a torchvision classifier or the user's own script) as a memwall.graph/1
// file, through the tracer of src/importers (docs/trace.md).
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/base/stopwatch.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/report/format.h"
#include "memwall/swap/optimizer_impl.h"
#include "options.h"
#include "traced_model.h"

namespace memwall::cli {
namespace {

struct TraceArgs {
  TracedModel model;
  bool measure = false;
  std::string kernels;
  std::string optimizer_impl;  // --optimizer-impl; empty: the kernels' default
  std::optional<std::string> threads;
  double timeout = importers::TorchTraceRequest{}.timeout_s;
  std::string out;
  std::string python;  // Note [Tracer interpreter]
  bool json = false;
};

// "torch 2.14.1+cu130, torchvision 0.29.2": the versions the tracer recorded
// in the graph's meta (python/memwall/tracer/trace.py), for the summary.
std::string traced_with(const Graph& graph) {
  std::string text;
  for (const char* package : {"torch", "torchvision", "transformers"}) {
    const auto it = graph.meta.find(package);
    if (it == graph.meta.end() || !it->is_string()) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}", package, it->get<std::string>());
  }
  return text;
}

int run_trace(const TraceArgs& args) {
  importers::TorchTraceRequest request;
  const TracedModel& model = args.model;
  model.apply(request, "");
  request.measure = args.measure;
  request.kernels = args.kernels;
  if (args.threads) {
    const int64_t threads = parse_count(*args.threads, "--threads");
    if (threads > 4096) fail("--threads must be at most 4096 (got {})", threads);
    request.threads = static_cast<int>(threads);
  }
  if (!(args.timeout > 0) || args.timeout > 1e7) {
    fail("--timeout must be a number of seconds in (0, 10^7] (got {})", args.timeout);
  }
  request.timeout_s = args.timeout;
  request.python = args.python;
  OutputFiles outputs;
  outputs.declare(args.out);

  std::optional<OptimizerImpl> impl;
  if (!args.optimizer_impl.empty()) impl = parse_optimizer_impl(args.optimizer_impl);
  const Stopwatch stopwatch;
  // Note [Optimizer as the device runs it] (src/swap/optimizer_impl.cc).
  const Graph graph = optimizer_as_the_device_runs_it(importers::trace_torch(request), impl);
  const double seconds = stopwatch.seconds();
  outputs.set(args.out, graph_to_json_text(graph));
  outputs.commit();

  const MemoryProfile profile = memory_profile(graph);
  // What the user's unmodified script reaches (Note [Eager lifetimes]).
  const uint64_t eager_peak = memory_profile(graph, eager_liveness(graph)).peak_bytes;
  const MemorySummary summary = memory_summary(graph);
  const uint64_t params = model_param_count(graph);
  const uint64_t trainable = trainable_param_count(graph);
  const std::string device = args.measure ? "cpu" : "meta";
  if (args.json) {
    nlohmann::json out = {{"graph", graph.name},
                          {"out", args.out},
                          {"device", device},
                          {"ops", graph.ops.size()},
                          {"buffers", graph.buffers.size()},
                          {"param_count", params},
                          {"trainable_param_count", trainable},
                          {"saved_activation_bytes", summary.saved_activation_bytes},
                          {"peak_bytes", profile.peak_bytes},
                          {"eager_peak_bytes", eager_peak},
                          {"trace_seconds", seconds},
                          {"python", importers::tracer_python(args.python)}};
    for (const char* key : {"kernels", "optimizer_impl", "torch", "torchvision", "transformers"}) {
      if (graph.meta.contains(key)) out[key] = graph.meta.at(key);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{} ({} device, traced in {})\n", graph.name, device,
                           human_seconds(seconds));
  std::cout << field("ops / buffers", fmt::format("{} / {}", grouped(graph.ops.size()),
                                                  grouped(graph.buffers.size())));
  std::cout << field("traced with", fmt::format("{} ({})", traced_with(graph),
                                                importers::tracer_python(args.python)));
  std::cout << field("parameters",
                     trainable < params
                         ? fmt::format("{} ({} trainable)", grouped(params), grouped(trainable))
                         : grouped(params));
  std::cout << field("saved for backward", exact_bytes(summary.saved_activation_bytes));
  std::cout << field("peak (eager PyTorch)", exact_bytes(eager_peak));
  std::cout << field("peak (default schedule)", exact_bytes(profile.peak_bytes));
  std::cout << field("graph written to", args.out);
  return 0;
}

}  // namespace

void add_trace(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "trace", "import one training iteration of a PyTorch model as a memwall graph");
  auto args = std::make_shared<TraceArgs>();
  const std::vector<CLI::Option*> sources = args->model.add_options(*cmd);
  for (CLI::Option* a : sources) {
    for (CLI::Option* b : sources) {
      if (a != b) a->excludes(b);
    }
  }
  cmd->add_flag("--measure", args->measure,
                "run on the CPU and record each op's measured time (default: meta device)");
  cmd->add_option("--kernels", args->kernels,
                  "whose kernels the graph stands for, cuda or cpu: what they save differs "
                  "(dropout keeps a 1-byte mask on CUDA, one of the input's dtype on the CPU); "
                  "default cuda, cpu with --measure");
  cmd->add_option("--optimizer-impl", args->optimizer_impl,
                  "how the device runs torch.optim's step: for-loop (one kernel per op per "
                  "parameter), foreach (multi-tensor) or fused; default: torch's default for the "
                  "kernels, foreach on CUDA, for-loop on the CPU");
  cmd->add_option("--threads", args->threads,
                  "torch's thread count while tracing (the CPU's kernels depend on it: an "
                  "unstrided 1x1 convolution goes to oneDNN only with more than one)");
  cmd->add_option("--timeout", args->timeout, "seconds the tracer may take before it is stopped")
      ->capture_default_str();
  cmd->add_option("--python", args->python,
                  "the Python (with torch) that runs the tracer (default: $MEMWALL_PYTHON, else "
                  "memwall's environment from scripts/install-deps.sh --torch, else python3 on "
                  "PATH)");
  cmd->add_option("--out", args->out, "where to write the graph (memwall.graph/1 JSON)")
      ->required();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] {
    const TracedModel& m = args->model;
    if (m.torchvision.empty() && m.script.empty() && !m.hf_given()) {
      // Checked here so that it is reported like other option errors.
      throw CLI::ValidationError(
          "trace",
          "give --torchvision NAME, --script FILE.py:FUNCTION, --hf NAME or --hf-config "
          "FILE");
    }
    action = [args] { return run_trace(*args); };
  });
}

}  // namespace memwall::cli
