// `memwall bench alloc`: the runtime allocator's policies side by side on
// the zoo models' default schedules and on the lifetimes CSVs of
// ../shared/data/layout: peak reserved over the most bytes live at once
// (1 is perfect: no policy can reserve less), on a simulated device of
// twice that size, so that every replay runs to the end.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "alloc_runner.h"
#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchAllocArgs {
  std::string data_dir;
  std::vector<std::string> models;  // empty: every zoo model
  AllocFlags flags;
  bool no_models = false;
  bool json = false;
};

struct AllocRow {
  std::string name;
  bool zoo = false;
  uint64_t allocations = 0;
  uint64_t live = 0;
  std::vector<PolicyReplay> runs;
};

double reserved_over_live(const PolicyReplay& r, uint64_t live) {
  return live == 0
             ? 0
             : static_cast<double>(r.result.stats.peak_reserved_bytes) / static_cast<double>(live);
}

// The device holds twice the trace's live peak (at least 1 GiB, at most
// 2^62 bytes): room for any policy's overhead without an unbounded device,
// whose address ranges (expandable segments reserve one of the device's
// size) would be absurd.
AllocRow bench_trace(AllocTrace trace, std::string name, bool zoo, AllocSetup setup) {
  AllocRow row{.name = std::move(name), .zoo = zoo, .allocations = trace.allocations.size()};
  row.live = peak_live_bytes(trace);
  setup.capacity = std::clamp<uint64_t>(row.live, uint64_t{1} << 29, kMaxBytes / 2) * 2;
  row.runs = replay_policies(trace, setup);
  return row;
}

int run_bench_alloc(const BenchAllocArgs& args) {
  if (!args.flags.capacity.empty()) fail("--capacity: bench alloc sizes the device per input");
  Hardware sized;  // a placeholder: bench_trace sets each input's capacity
  sized.name = "twice the live peak";
  sized.device_memory_bytes = kMaxBytes;
  const AllocSetup setup = args.flags.parse(sized);

  std::vector<AllocRow> rows;
  if (!args.no_models) {
    std::vector<std::string> names = args.models;
    if (names.empty()) {
      for (const ModelInfo& m : model_zoo()) names.push_back(m.name);
    }
    for (const std::string& name : names) {
      rows.push_back(bench_trace(graph_alloc_trace(build_model(name, {})), name, true, setup));
    }
  }
  const std::string dir = find_data_dir(args.data_dir, "layout");
  if (dir.empty()) {
    std::cerr << "memwall: note: no data directory (../shared/data/layout or --data): zoo models "
                 "only\n";
  } else {
    for (const std::string& path : csv_files(dir)) {
      const std::string stem = std::filesystem::path(path).stem().string();
      rows.push_back(bench_trace(csv_alloc_trace(read_lifetimes_csv(path, "replay"), stem), stem,
                                 false, setup));
    }
  }

  if (args.json) {
    nlohmann::json out = {{"granularity", setup.granularity}, {"inputs", nlohmann::json::array()}};
    for (const AllocRow& row : rows) {
      nlohmann::json in = {{"name", row.name},
                           {"zoo", row.zoo},
                           {"allocations", row.allocations},
                           {"peak_live", row.live},
                           {"policies", nlohmann::json::array()}};
      for (const PolicyReplay& r : row.runs) {
        const alloc::Stats& s = r.result.stats;
        in["policies"].push_back({{"policy", r.policy},
                                  {"peak_allocated", s.peak_allocated_bytes},
                                  {"peak_reserved", s.peak_reserved_bytes},
                                  {"reserved_over_live", reserved_over_live(r, row.live)},
                                  {"fragmentation", s.fragmentation()},
                                  {"segments", s.segments_created},
                                  {"maps", s.maps},
                                  {"stitches", s.stitches}});
      }
      out["inputs"].push_back(in);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  size_t width = 5;
  for (const AllocRow& row : rows) width = std::max(width, row.name.size());
  std::cout << fmt::format(
      "peak reserved / peak live bytes ({} chunks; 1.0000 is the least possible)\n",
      human_bytes(setup.granularity));
  std::cout << fmt::format("{:<{}}  {:>8}  {:>10}", "input", width, "allocs", "peak live");
  for (const std::string& p : setup.policies) std::cout << fmt::format("  {:>10}", p);
  std::cout << "\n";
  // Worst and geometric mean over the zoo models, per policy.
  std::vector<double> worst(setup.policies.size(), 0), log_sum(setup.policies.size(), 0);
  size_t zoo_rows = 0;
  for (const AllocRow& row : rows) {
    std::cout << fmt::format("{:<{}}  {:>8}  {:>10}", row.name, width, grouped(row.allocations),
                             human_bytes(row.live));
    for (size_t p = 0; p < row.runs.size(); ++p) {
      const double ratio = reserved_over_live(row.runs[p], row.live);
      std::cout << fmt::format("  {:>10.4f}", ratio);
      if (row.zoo) {
        worst[p] = std::max(worst[p], ratio);
        log_sum[p] += std::log(ratio);
      }
    }
    zoo_rows += row.zoo ? 1 : 0;
    std::cout << "\n";
  }
  if (zoo_rows > 0) {
    std::cout << fmt::format("{:<{}}  {:>8}  {:>10}", "zoo: worst", width, "", "");
    for (const double w : worst) std::cout << fmt::format("  {:>10.4f}", w);
    std::cout << "\n" << fmt::format("{:<{}}  {:>8}  {:>10}", "zoo: geomean", width, "", "");
    for (const double s : log_sum) {
      std::cout << fmt::format("  {:>10.4f}", std::exp(s / static_cast<double>(zoo_rows)));
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_bench_alloc(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "alloc", "the allocator's policies on the zoo models and ../shared/data/layout");
  auto args = std::make_shared<BenchAllocArgs>();
  cmd->add_option("--data", args->data_dir, "directory of lifetimes CSVs")->capture_default_str();
  cmd->add_option("--models", args->models, "zoo models (default: all)");
  cmd->add_flag("--no-models", args->no_models, "only the CSVs of the data directory");
  args->flags.add_options(*cmd);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_alloc(*args); }; });
}

}  // namespace memwall::cli
