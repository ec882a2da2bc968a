// `memwall bench fidelity`: memwall's predicted peak of a plain PyTorch
// training step (the eager lifetimes and kernel scratch of a traced graph)
// against the peak PyTorch's own CPU allocator records when the same step
// runs for real (docs/cost-model.md, "Fidelity"). Each case is traced on
// the meta device with the CPU's kernels and then run on the CPU, one
// Python process per case; with --device cuda (scripts/gpu-check.sh on a GPU
// machine) traced for CUDA kernels (cuBLAS's workspaces, the attention
// kernel CUDA picks) and run on the GPU, measured by the CUDA caching
// allocator's peak. The comparison is importers' (memwall/importers/
// fidelity.h); this file reads the options and prints.
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/importers/fidelity.h"
#include "memwall/importers/torch_trace.h"
#include "options.h"

namespace memwall::cli {
namespace {

// The set of issue 20's table: torchvision classifiers at batch 8 (ViT-B/16
// at 2), a GPT with and without dropout, and the two-Linear toy.
const std::vector<std::string> kDefaultCases = {
    "resnet18:8", "resnet50:8",         "mobilenet_v2:8", "densenet121:8", "efficientnet_b0:8",
    "vit_b_16:2", "gpt-mini-nodropout", "gpt-mini",       "linear-toy"};
const std::vector<std::string> kBuiltins = {"gpt-mini", "gpt-mini-nodropout", "linear-toy"};

struct BenchFidelityArgs {
  std::vector<std::string> cases;
  int threads = 1;
  double timeout = 900;
  std::string python;
  std::string device = "cpu";
  bool ops = false;
  bool json = false;
};

importers::TorchTraceRequest request_for(const std::string& spec, const BenchFidelityArgs& args) {
  importers::TorchTraceRequest request;
  request.kernels = args.device;
  request.threads = args.threads;
  request.timeout_s = args.timeout;
  request.python = args.python;
  if (std::find(kBuiltins.begin(), kBuiltins.end(), spec) != kBuiltins.end()) {
    request.builtin = spec;
    return request;
  }
  if (spec.find(".py:") != std::string::npos) {  // the user's own FILE.py:FUNCTION
    request.script = spec;
    return request;
  }
  const size_t colon = spec.find(':');
  request.torchvision = spec.substr(0, colon);
  request.batch = colon == std::string::npos ? 8 : parse_count(spec.substr(colon + 1), "--cases");
  if (request.torchvision.empty()) fail("--cases: an empty model name in '{}'", spec);
  return request;
}

nlohmann::json scratch_json(const std::vector<importers::ScratchComparison>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const importers::ScratchComparison& r : rows) {
    out.push_back({{"type", r.type},
                   {"graph_ops", r.graph_ops},
                   {"run_ops", r.run_ops},
                   {"aligned", r.aligned()},
                   {"measured_max_bytes", r.measured_max},
                   {"predicted_max_bytes", r.predicted_max},
                   {"under", r.under},
                   {"worst_under_bytes", r.worst_under},
                   {"over", r.over},
                   {"worst_over_bytes", r.worst_over}});
  }
  return out;
}

void print_scratch(const importers::FidelityCase& row) {
  size_t width = 7;
  for (const importers::ScratchComparison& r : row.scratch) width = std::max(width, r.type.size());
  std::cout << fmt::format(
      "\n{}: kernel scratch per op type, the profiler's against the rules' (\"a/b\": the "
      "graph has a ops of the type, the run b; not compared one by one)\n",
      row.model);
  const auto line = [&](auto&&... columns) {
    std::cout << fmt::format("  {:<{}}  {:>9}  {:>14}  {:>15}  {:>17}  {:>17}\n", columns...);
  };
  line("op type", width, "ops", "measured max B", "predicted max B", "under: n, worst B",
       "over: n, worst B");
  for (const importers::ScratchComparison& r : row.scratch) {
    const bool aligned = r.aligned();
    line(r.type, width, aligned ? grouped(r.run_ops) : fmt::format("{}/{}", r.graph_ops, r.run_ops),
         grouped(r.measured_max), grouped(r.predicted_max),
         aligned ? fmt::format("{}, {}", r.under, grouped(r.worst_under)) : "-",
         aligned ? fmt::format("{}, {}", r.over, grouped(r.worst_over)) : "-");
  }
}

int run_bench_fidelity(const BenchFidelityArgs& args) {
  if (args.threads <= 0 || args.threads > 4096) fail("--threads must be in [1, 4096]");
  if (args.device == "cuda" && args.ops) {
    fail("--ops compares the CPU profiler's scratch records; with --device cuda there are none");
  }
  if (!(args.timeout > 0) || args.timeout > 1e7) {
    fail("--timeout must be a number of seconds in (0, 10^7] (got {})", args.timeout);
  }
  const std::vector<std::string>& cases = args.cases.empty() ? kDefaultCases : args.cases;
  for (const std::string& spec : cases) (void)request_for(spec, args);  // bad names first
  std::vector<importers::FidelityCase> rows;
  for (const std::string& spec : cases) {
    // Progress for a person watching (a case takes seconds to a minute);
    // scripts and tests read stdout and one error line.
    if (!args.json && ::isatty(STDERR_FILENO) == 1) {
      std::cerr << fmt::format("memwall: bench fidelity: {}...\n", spec);
    }
    rows.push_back(importers::measure_fidelity(spec, request_for(spec, args)));
  }
  const bool all_on_target = std::all_of(
      rows.begin(), rows.end(), [](const importers::FidelityCase& r) { return r.on_target; });

  if (args.json) {
    nlohmann::json out = {{"device", args.device},
                          {"threads", args.threads},
                          {"target",
                           {{"max_above", importers::kFidelityMaxAbove},
                            {"max_below", importers::kFidelityMaxBelow}}},
                          {"cases", nlohmann::json::array()}};
    for (const importers::FidelityCase& r : rows) {
      out["cases"].push_back({{"model", r.model},
                              {"graph", r.step.graph.name},
                              {"measured_peak_bytes", r.step.measured_peak_bytes},
                              {"predicted_peak_bytes", r.predicted},
                              {"measured_over_predicted", r.ratio},
                              {"on_target", r.on_target},
                              {"baseline_bytes", r.step.baseline_bytes},
                              {"measured_peak_op", r.step.measured_peak_op},
                              {"measured_peak_node", r.step.measured_peak_node},
                              {"predicted_peak_op", r.predicted_op},
                              {"torch", r.step.graph.meta.value("torch", "")}});
      if (args.ops) out["cases"].back()["op_scratch"] = scratch_json(r.scratch);
    }
    std::cout << out.dump(2) << "\n";
    return all_on_target ? 0 : 1;
  }

  size_t width = 5;
  for (const importers::FidelityCase& r : rows) width = std::max(width, r.model.size());
  if (args.device == "cuda") {
    std::cout << "peak of one training step on the GPU: PyTorch's CUDA caching allocator "
                 "(max_memory_allocated, measured) against memwall's eager estimate "
                 "(predicted)\n";
  } else {
    std::cout << fmt::format(
        "peak of one training step on the CPU ({} thread{}): PyTorch's allocator records "
        "(measured) against memwall's eager estimate (predicted)\n",
        args.threads, args.threads == 1 ? "" : "s");
  }
  std::cout << fmt::format("{:<{}}  {:>15}  {:>15}  {:>9}  {:<6}  {}\n", "model", width,
                           "measured B", "predicted B", "meas/pred", "target", "op at each peak");
  for (const importers::FidelityCase& r : rows) {
    std::string measured_op = r.step.measured_peak_op;
    if (!r.step.measured_peak_node.empty()) measured_op += " in " + r.step.measured_peak_node;
    std::cout << fmt::format(
        "{:<{}}  {:>15}  {:>15}  {:>9.6f}  {:<6}  measured: {}; predicted: {}\n", r.model, width,
        grouped(r.step.measured_peak_bytes), grouped(r.predicted), r.ratio,
        r.on_target ? "ok" : "MISSED", measured_op, r.predicted_op);
  }
  std::cout << fmt::format(
      "target: predicted within {:g}% of measured and never more than {:g}% "
      "below it; {} of {} cases on target\n",
      importers::kFidelityMaxAbove * 100, importers::kFidelityMaxBelow * 100,
      std::count_if(rows.begin(), rows.end(),
                    [](const importers::FidelityCase& r) { return r.on_target; }),
      rows.size());
  if (args.ops) {
    for (const importers::FidelityCase& r : rows) print_scratch(r);
  }
  return all_on_target ? 0 : 1;
}

}  // namespace

void add_bench_fidelity(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "fidelity", "memwall's predicted peak of a PyTorch step against a real run on the CPU");
  auto args = std::make_shared<BenchFidelityArgs>();
  cmd->add_option("--cases", args->cases,
                  "torchvision models as NAME[:BATCH] (batch 8 unless given), built-ins "
                  "gpt-mini, gpt-mini-nodropout, linear-toy, and scripts FILE.py:FUNCTION as "
                  "for memwall trace (default: issue 20's set)")
      ->delimiter(',');
  cmd->add_option("--threads", args->threads,
                  "torch threads for the trace and the run (the CPU kernels' choices depend on it)")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout, "seconds each case may take")->capture_default_str();
  cmd->add_option("--device", args->device,
                  "where the real step runs: cpu (traced for the CPU's kernels) or cuda (traced "
                  "for CUDA's, run on the GPU torch sees)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--python", args->python,
                  "the Python (with torch) that runs the tracer (as for memwall trace)");
  cmd->add_flag("--ops", args->ops,
                "also compare kernel scratch op by op, per op type (the rules of "
                "docs/cost-model.md against the profiler)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_fidelity(*args); }; });
}

}  // namespace memwall::cli
