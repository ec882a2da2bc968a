// `memwall run`'s options, checked before any work (run_options.h).
#include "run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/exec/ranks.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/runnable_plan.h"
#include "memwall/report/plan_figures.h"
#include "memwall/runtime/nvme_faults.h"

namespace memwall::cli {
namespace {

// Every --nvme-dir must take swap files: checked before any work (a
// missing one failed the run once it first swapped, exit 1).
void check_nvme_dirs(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      fail("run: --nvme-dir {}: {}", dir,
           std::filesystem::exists(dir, ec) ? "not a directory" : "no such directory");
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      fail("run: --nvme-dir {}: cannot write into it: {}", dir, std::strerror(errno));
    }
  }
}

}  // namespace

void parse_options(const RunArgs& args, RunSetup& s) {
  const TracedModel& model = args.model;
  const int sources = int{!args.graph_file.empty()} + int{!model.torchvision.empty()} +
                      int{!model.script.empty()} + int{!args.builtin.empty()} +
                      int{!model.hf.empty()} + int{!model.hf_config.empty()};
  if (sources != 1) {
    fail(
        "run: give --graph G --plan P, or one of --torchvision NAME, --script FILE.py:FUNCTION, "
        "--builtin NAME, --hf NAME and --hf-config FILE");
  }
  if (!args.graph_file.empty() && args.plan_file.empty()) fail("run: --graph needs --plan");
  if (args.graph_file.empty() && !args.plan_file.empty()) fail("run: --plan needs --graph");
  if (!args.graph_file.empty() && (args.ranks || args.zero_stage)) {
    fail("run: --ranks and --zero-stage plan a traced model; a --graph says its own (meta.zero)");
  }
  s.ranks = args.ranks
                ? static_cast<int>(std::min<int64_t>(parse_count(*args.ranks, "--ranks"), 1024))
                : 1;
  if (s.ranks < 1) fail("run: --ranks must be 1 or more");
  exec::check_run_ranks(s.ranks);
  if (args.zero_stage && (*args.zero_stage < 0 || *args.zero_stage > 3)) {
    fail("run: ZeRO stage {} does not exist (0, 1, 2 or 3)", *args.zero_stage);
  }
  if (args.zero_stage && *args.zero_stage > 0 && s.ranks == 1) {
    fail(
        "run: --zero-stage {} shards model states across data-parallel ranks: give --ranks 2 "
        "or more",
        *args.zero_stage);
  }
  if (args.steps) {
    s.steps_given =
        static_cast<int>(std::min<int64_t>(parse_count(*args.steps, "--steps"), 1000000));
  }
  if (args.seed) s.seed_given = parse_count(*args.seed, "--seed");
  try {
    (void)runtime::parse_nvme_faults(args.nvme_faults);
  } catch (const std::invalid_argument& e) {
    fail("run: --nvme-faults: {}", e.what());
  }
  s.policy = args.policy.value_or("stitching");
  if (s.policy != "stitching" && s.policy != "caching" && s.policy != "expandable") {
    fail("run: unknown --policy '{}' (stitching, caching or expandable)", s.policy);
  }
  check_nvme_dirs(args.nvme_dirs);
  s.device = args.device.value_or("emulated");
  if (s.device != "emulated" && s.device != "cuda") {
    fail("run: unknown --device '{}' (emulated or cuda)", s.device);
  }
  // Note [The CUDA run] in src/exec/cuda_run.cc: what it does not do yet.
  if (s.device == "cuda" && s.ranks > 1) {
    fail("run: --device cuda runs one process on one GPU; --ranks runs on the emulated device");
  }
}

void given_plan(const RunArgs& args, RunSetup& s) {
  if (const std::string given = args.model.options_given(); !given.empty()) {
    fail(
        "run: {} {} not apply to --graph {}, whose model was traced with its own options "
        "(meta.origin)",
        given, given.find(',') == std::string::npos ? "does" : "do", args.graph_file);
  }
  s.graph = read_graph_file(args.graph_file);
  s.plan = read_plan_file(args.plan_file);
  try {
    check_plan_graph(s.plan, s.graph);
    validate_plan(s.plan, s.graph);
  } catch (const Error& e) {
    fail("{}: {}", args.plan_file, e.what());
  }
  s.hw = args.gpu.load_for_plan(s.plan);
  if (!s.graph.meta.contains("calls")) {
    fail(
        "{}: graph \"{}\" carries no call records, so it can be planned and simulated but "
        "not run: trace the model with `memwall trace` (zoo graphs are not runnable)",
        args.graph_file, s.graph.name);
  }
  s.request = importers::request_for(s.graph);
  s.request.ranks = exec::ranks_of(s.graph);
  exec::check_run_ranks(s.request.ranks);
  apply_profile_kernels(s.hw, s.graph);
  if (!args.budget.empty()) {
    s.plan.budget = parse_budget(args.budget, s.hw, [&] { return keep_all_peak(s.graph, s.hw); });
  }
  if (s.device == "cuda" && !s.plan.offsets.empty()) {
    fail(
        "run: {} places its buffers at a layout's offsets, which a CUDA run does not do yet "
        "(docs/exec.md, \"A CUDA path\"; memwall plan --no-layout writes a plan without)",
        args.plan_file);
  }
  if (args.policy && !s.plan.offsets.empty()) {
    fail(
        "run: --policy chooses the allocator of a plan without offsets; {} pins every buffer "
        "in its arena (memwall plan --no-layout writes one without)",
        args.plan_file);
  }
  if ((!args.nvme_dirs.empty() || !args.nvme_faults.empty()) &&
      exec::run_nvme_reservation(s.graph, s.plan).buffers == 0) {
    fail("run: --nvme-dir and --nvme-faults apply to plans that use NVMe; {} puts nothing there",
         args.plan_file);
  }
  // Note [Plans that run]: refused before the trace, not out of memory
  // mid-run.
  if (s.plan.offsets.empty()) {
    const AllocatorFit fit = allocator_fit(s.graph, s.plan, s.hw, s.policy);
    if (!fit.fits) {
      fail(
          "{}: the plan has no offsets and its allocations do not fit the budget of {}: {} "
          "(Note [Plans that run]; `memwall plan --out` lays plans out)",
          args.plan_file, exact_bytes(s.plan.budget), fit.text());
    }
  }
  s.kept.check_model(s.request, fmt::format("{}'s model (\"{}\")", args.graph_file, s.graph.name));
}

void model_to_trace(const RunArgs& args, RunSetup& s) {
  if (!args.gpu.given()) {
    fail(
        "run: name the profile that predicts this run: --gpu-file FILE from `memwall "
        "calibrate` on this machine (the emulated device is this CPU), or --gpu NAME");
  }
  s.hw = args.gpu.load();
  if (!args.budget.empty()) {
    (void)budget_before_peak(args.budget, s.hw, "the traced model's, known once it is traced");
  }
  if (const std::string given = args.model.options_given();
      !args.builtin.empty() && !given.empty()) {
    fail("run: {} {} not apply to --builtin {}, which builds its own model and batch", given,
         given.find(',') == std::string::npos ? "does" : "do", args.builtin);
  }
  args.model.apply(s.request, "run: ");
  s.request.builtin = args.builtin;
  s.request.ranks = s.ranks;
  s.kept.check_model(s.request, "the model asked for");
}

}  // namespace memwall::cli
