// `memwall bench published`: memwall's predicted step time against
// published measured runs (bench/published_runs.json, compiled in;
// docs/cost-model.md, "Fitted to published runs"). Zoo models are built;
// Hugging Face configurations are traced on the meta device, one Python
// process each. The comparison and the fit are the planner's
// (memwall/planner/published.h); this file reads the options and prints.
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/private_dir.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/published.h"
#include "memwall/planner/published_fit.h"
#include "memwall/swap/optimizer_impl.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchPublishedArgs {
  std::string file;  // another memwall.published/1 document
  std::vector<std::string> rows;
  bool fit = false;
  bool unfitted = false;
  bool no_deepspeed = false;
  std::string python;
  double timeout = 600;
  bool json = false;
};

std::vector<PublishedRun> load_runs(const BenchPublishedArgs& args) {
  nlohmann::json document = builtin_published_runs();
  if (!args.file.empty()) {
    std::ifstream in(args.file, std::ios::binary);
    if (!in) fail("cannot open published runs '{}'", args.file);
    std::ostringstream text;
    text << in.rdbuf();
    try {
      document = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      fail("published runs '{}': invalid JSON: {}", args.file, e.what());
    }
  }
  std::vector<PublishedRun> runs = parse_published_runs(document);
  if (args.rows.empty()) return runs;
  std::vector<PublishedRun> chosen;
  for (const std::string& id : args.rows) {
    bool found = false;
    for (const PublishedRun& r : runs) {
      if (r.id == id) {
        chosen.push_back(r);
        found = true;
      }
    }
    if (!found) fail("--rows: no published run '{}'", id);
  }
  return chosen;
}

Graph graph_of(const PublishedRun& run, const BenchPublishedArgs& args) {
  if (!run.zoo_model.empty()) {
    // The published zoo rows ran SDPA's fused kernels (torchtitan) unless
    // the row says otherwise; a layout row's graph is the whole model at
    // one sequence, for its parameter count (the prediction builds its
    // own, Note [Published layouts]).
    ModelOptions o = published_model_options(run);
    o.batch = run.batch;
    return optimizer_as_run(build_model(run.zoo_model, o),
                            parse_optimizer_impl(run.optimizer_impl));
  }
  PrivateDir dir("memwall-published");
  const std::string config = dir.file("config.json");
  {
    std::ofstream out(config, std::ios::binary);
    out << run.hf_config.dump(2);
    if (!out) fail("cannot write the configuration of '{}' to {}", run.id, config);
  }
  importers::TorchTraceRequest request;
  request.hf_config = config;
  request.batch = run.batch;
  request.seq = run.seq;
  request.dtype = run.dtype;
  request.optimizer = run.optimizer;
  request.python = args.python;
  request.timeout_s = args.timeout;
  try {
    return optimizer_as_run(importers::trace_torch(request),
                            parse_optimizer_impl(run.optimizer_impl));
  } catch (const Error& e) {
    fail("published run '{}': {}", run.id, e.what());
  }
}

std::string ratio_text(double r) { return r > 0 ? fmt::format("{:.2f}", r) : "-"; }

// DeepSpeed's estimators on the ZeRO rows' models (python/memwall/
// deepspeed_estimates.py, one interpreter for all): their answers, or each
// row's reason for none, go into the rows.
void ask_deepspeed(PublishedTable& table, const BenchPublishedArgs& args) {
  nlohmann::json requests = nlohmann::json::array();
  std::vector<PublishedRow*> asked;
  for (PublishedRow& r : table.rows) {
    nlohmann::json request = deepspeed_request(r.run, published_hardware(r.run));
    if (request.is_null()) continue;
    requests.push_back(std::move(request));
    asked.push_back(&r);
  }
  if (requests.empty()) return;
  nlohmann::json answer;
  try {
    PrivateDir dir("memwall-deepspeed");
    const std::string file = dir.file("requests.json");
    {
      std::ofstream out(file, std::ios::binary);
      out << requests.dump();
      if (!out) fail("cannot write {}", file);
    }
    answer = nlohmann::json::parse(
        importers::run_torch_tracer({"deepspeed-estimates", file}, args.timeout, args.python));
  } catch (const std::exception& e) {
    answer = {{"error", e.what()}};
  }
  for (PublishedRow* r : asked) {
    if (answer.contains("error")) {
      r->deepspeed = {{"error", answer["error"]}};
    } else if (answer.contains("rows") && answer["rows"].contains(r->run.id)) {
      r->deepspeed = answer["rows"][r->run.id];
      r->deepspeed["version"] = answer.value("deepspeed", "?");
    }
  }
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
}

void print_deepspeed(const PublishedTable& table) {
  bool header = false;
  for (const PublishedRow& r : table.rows) {
    if (r.deepspeed.is_null()) continue;
    if (!header) {
      std::cout << fmt::format(
          "\nmodel states per GPU (GiB): DeepSpeed's estimators against memwall's plan\n"
          "{:<34} {:>12} {:>12} {:>12} {:>12}\n",
          "row", "DS gpu", "memwall gpu", "DS cpu", "memwall cpu");
      header = true;
    }
    if (r.deepspeed.contains("error")) {
      std::cout << fmt::format("{:<34} {}\n", r.run.id, r.deepspeed["error"].get<std::string>());
      continue;
    }
    const bool planned = r.prediction.fits;
    std::cout << fmt::format("{:<34} {:>12} {:>12} {:>12} {:>12}\n", r.run.id,
                             gib(r.deepspeed.value("gpu_bytes", uint64_t{0})),
                             planned ? gib(r.prediction.state_device_bytes) : "-",
                             gib(r.deepspeed.value("cpu_bytes", uint64_t{0})),
                             planned ? gib(r.prediction.state_host_bytes) : "-");
  }
}

int run_bench_published(const BenchPublishedArgs& args) {
  if (args.fit && args.unfitted) fail("--fit and --unfitted exclude each other");
  const std::vector<PublishedRun> runs = load_runs(args);
  std::vector<PublishedCase> cases;
  for (const PublishedRun& run : runs) {
    (void)published_hardware(run);  // an unknown GPU or field is refused before any trace
    if (!args.json) std::cerr << fmt::format("{}: building the model\n", run.id);
    // A row whose model cannot be built says why; the others still run.
    try {
      cases.push_back({run, graph_of(run, args), {}});
    } catch (const Error& e) {
      cases.push_back({run, Graph{}, e.what()});
    }
  }
  PublishedTable table = args.fit ? fit_published(cases) : evaluate_published(cases, args.unfitted);
  if (!args.no_deepspeed) ask_deepspeed(table, args);
  if (args.json) {
    std::cout << published_table_json(table).dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{:<30} {:<9} {:>5} {:>12} {:>12} {:>6} {:>6}  {}\n", "row", "gpu",
                           "gpus", "published", "predicted", "ratio", "fitted", "plan");
  for (const PublishedRow& r : table.rows) {
    std::cout << fmt::format(
        "{:<30} {:<9} {:>5} {:>12.4g} {:>12} {:>6} {:>6}  {}\n", r.run.id, r.run.gpu, published_gpus(r.run),
        r.run.value, r.prediction.fits ? fmt::format("{:.4g}", r.predicted) : "-",
        ratio_text(r.ratio), r.run.fitted ? "yes" : (r.run.unmatched.empty() ? "no" : "unmatched"),
        !r.prediction.fits ? r.prediction.why
        : r.prediction.over_memory.empty()
            ? r.prediction.plan
            : r.prediction.plan + " (over the GPU's memory: Note [Published runs over memory])");
  }
  std::cout << fmt::format(
      "held-out rows: {} within 0.80-1.25 of {}; median absolute error {:.1f}%; fitted rows' "
      "median absolute error {:.1f}%\n",
      table.held_out_within, table.held_out, 100 * table.held_out_median_error,
      100 * table.fitted_median_error);
  for (const PublishedRow& r : table.rows) {
    if (!r.run.unmatched.empty()) {
      std::cout << fmt::format("unmatched {} (ratio {}): {}\n", r.run.id, ratio_text(r.ratio),
                               r.run.unmatched);
    }
  }
  if (!table.fit_text.empty()) std::cout << table.fit_text;
  print_deepspeed(table);
  return 0;
}

}  // namespace

void add_bench_published(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "published", "memwall's predicted step time against published measured training runs");
  auto args = std::make_shared<BenchPublishedArgs>();
  cmd->add_option("--file", args->file,
                  "a memwall.published/1 file instead of the runs compiled in "
                  "(bench/published_runs.json)");
  cmd->add_option("--rows", args->rows, "only these rows (their ids)")->delimiter(',');
  cmd->add_flag("--fit", args->fit,
                "fit the cost model's efficiencies to the rows marked fitted, then predict "
                "every row with the fit (docs/cost-model.md)");
  cmd->add_flag("--unfitted", args->unfitted,
                "predict with the built-in profiles without their fitted efficiencies "
                "(compute_efficiency for every kernel, as before the fit)");
  cmd->add_flag("--no-deepspeed", args->no_deepspeed,
                "leave out DeepSpeed's model-state estimators (run beside the ZeRO rows when "
                "deepspeed imports: scripts/install-deps.sh --deepspeed)");
  cmd->add_option("--python", args->python,
                  "the Python (with torch and transformers) that traces Hugging Face rows");
  cmd->add_option("--timeout", args->timeout, "seconds each trace may take")->capture_default_str();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_published(*args); }; });
}

}  // namespace memwall::cli
