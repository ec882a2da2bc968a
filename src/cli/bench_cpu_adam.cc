// `memwall bench cpu-adam`: memwall's CPU AdamW step (runtime/cpu_optimizer.h)
// against torch.optim.AdamW (foreach=True and fused=True, run by the
// interpreter `memwall trace` uses) and against the memory-bandwidth bound:
// bytes an update moves over the bandwidth memcpy reaches, per thread count.
// DeepSpeed's DeepSpeedCPUAdam (AdamW mode) too when it is installed
// (scripts/install-deps.sh --deepspeed). Every case runs twice: the step
// alone, and the step with the bf16 copy of the weights that ZeRO-Offload
// sends to the device. memwall writes that copy in the same pass; torch and
// DeepSpeed (whose ZeRO-Offload copies after the step) make it with a
// second pass, `half.copy_(param)`, timed with their step.
#include <algorithm>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/importers/cpu_adam_contenders.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/runtime/cpu_adam_contest.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchCpuAdamArgs {
  std::vector<int64_t> sizes = {10'000'000, 100'000'000};
  int repeats = 3;
  int rounds = 3;
  std::string bandwidth_size = "1GiB";
  std::string python;
  bool no_torch = false;
  std::string copy = "both";      // none, bf16, both
  std::vector<unsigned> threads;  // empty: 1 and every hardware thread
  bool json = false;
};

std::string ratio(double a, double b) { return b > 0 ? fmt::format("{:.2f}", a / b) : "-"; }

// What the options ask for, checked before any measuring.
struct CpuAdamCases {
  std::vector<bool> copies;
  std::vector<unsigned> thread_counts;
  uint64_t bandwidth_bytes = 0;
  std::string python;  // "" with --no-torch
};

CpuAdamCases parse_cases(const BenchCpuAdamArgs& args) {
  if (args.repeats < 1 || args.repeats > 1000)
    fail("--repeats: {} is out of range 1..1000", args.repeats);
  if (args.rounds < 1 || args.rounds > 100)
    fail("--rounds: {} is out of range 1..100", args.rounds);
  for (int64_t n : args.sizes) {
    // Four fp32 arrays and a bf16 copy, 18 bytes a parameter, here and in Python.
    if (n < 1 || n > (int64_t{1} << 40)) fail("--sizes: {} is out of range 1..2^40", n);
  }
  CpuAdamCases c;
  if (args.copy == "none" || args.copy == "both") c.copies.push_back(false);
  if (args.copy == "bf16" || args.copy == "both") c.copies.push_back(true);
  if (c.copies.empty()) fail("--copy must be none, bf16 or both, not '{}'", args.copy);
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  c.thread_counts = args.threads;
  if (c.thread_counts.empty()) {
    c.thread_counts.push_back(1);
    if (all > 1) c.thread_counts.push_back(all);
  }
  for (unsigned t : c.thread_counts) {
    if (t < 1 || t > 4096) fail("--threads: {} is out of range 1..4096", t);
  }
  c.bandwidth_bytes = parse_bytes(args.bandwidth_size, "--bandwidth-size", 0);
  c.python = args.no_torch ? "" : importers::tracer_python(args.python);
  return c;
}

// The Python contenders as the contest takes them.
class PythonContenders : public runtime::AdamContenders {
 public:
  PythonContenders(const std::string& python, unsigned threads) : python_(python, threads) {}
  std::string deepspeed() const override { return python_.deepspeed(); }
  runtime::ContenderSeconds time_step(int64_t n, int repeats, bool bf16_copy) override {
    importers::CpuAdamTimes t = python_.time_step(n, repeats, bf16_copy);
    return {.seconds = std::move(t.seconds), .why = std::move(t.why)};
  }

 private:
  importers::CpuAdamContenders python_;
};

// One row of --json's cases.
nlohmann::json case_row(const runtime::CpuAdamCase& c) {
  nlohmann::json row = {{"params", c.params},
                        {"threads", c.threads},
                        {"bf16_copy", c.bf16_copy},
                        {"isa", runtime::isa_name(runtime::best_isa())},
                        {"bytes_per_update", c.bytes_per_update},
                        {"rounds", c.rounds},
                        {"memcpy_bytes_per_s", c.memcpy_bytes_per_s},
                        {"triad_bytes_per_s", c.triad_bytes_per_s},
                        {"bandwidth_limit_per_s", c.bandwidth_limit_per_s}};
  std::vector<std::string> names = {"memwall"};
  names.insert(names.end(), runtime::kAdamContenders.begin(), runtime::kAdamContenders.end());
  for (const std::string& name : names) {
    const auto it = c.figures.find(name);
    if (it == c.figures.end()) {
      row[name + "_per_s"] = nullptr;
      row["why"][name] = c.why.at(name);
      continue;
    }
    row[name + "_per_s"] = it->second.median_per_s;
    row["rounds_per_s"][name] = it->second.per_s;
    if (name != "memwall") row["memwall_over"][name] = it->second.memwall_over;
  }
  return row;
}

// runtime's contest as --json says it; the table is printed from the same rows.
struct CpuAdamResults {
  std::string deepspeed;
  nlohmann::json cases = nlohmann::json::array();
  nlohmann::json overlaps = nlohmann::json::array();
};

// The contest with the Python contenders, or with none under --no-torch.
CpuAdamResults run_contest(const BenchCpuAdamArgs& args, const CpuAdamCases& c) {
  const runtime::CpuAdamContest contest{.sizes = args.sizes,
                                        .copies = c.copies,
                                        .thread_counts = c.thread_counts,
                                        .bandwidth_bytes = c.bandwidth_bytes,
                                        .repeats = args.repeats,
                                        .rounds = args.rounds};
  const runtime::CpuAdamContestResults results = runtime::run_cpu_adam_contest(
      contest, [&](unsigned threads) -> std::unique_ptr<runtime::AdamContenders> {
        if (c.python.empty()) {
          return std::make_unique<runtime::NoContenders>("not run (--no-torch)");
        }
        return std::make_unique<PythonContenders>(c.python, threads);
      });
  CpuAdamResults out{.deepspeed = results.deepspeed};
  for (const runtime::CpuAdamCase& row : results.cases) out.cases.push_back(case_row(row));
  for (const auto& [n, o] : results.overlaps) {
    out.overlaps.push_back(
        {{"params", n}, {"sequential_s", o.sequential}, {"overlapped_s", o.overlapped}});
  }
  return out;
}

void print_cases(const BenchCpuAdamArgs& args, const CpuAdamResults& results,
                 const std::string& python) {
  const nlohmann::json& cases = results.cases;
  std::cout << fmt::format(
      "AdamW step over fp32 master weights: parameter updates per second (M/s, the median of {} "
      "rounds, each the best of {} steps, memwall and the others alternating); mw/x = the median "
      "of memwall / x round by round; bandwidth in GB/s; copy = also a bf16 copy of the weights "
      "(memwall: in the same pass; torch and "
      "DeepSpeed: half.copy_(param) after the step, timed with it); limit = bandwidth (the "
      "better of memcpy and STREAM triad) / bytes per update (28, 30 with the copy), a "
      "reference, not a ceiling: a core's bandwidth is bounded by its misses in flight, and "
      "AdamW's seven streams keep more in flight than memcpy's two\n",
      args.rounds, args.repeats);
  std::cout << fmt::format(
      "{:>11} {:>7} {:>4} {:>6} {:>6} {:>7} {:>8} {:>8} {:>8} {:>9} {:>8} {:>10} {:>8} {:>8}\n",
      "params", "threads", "copy", "memcpy", "triad", "limit", "memwall", "foreach", "fused",
      "deepspeed", "mw/limit", "mw/foreach", "mw/fused", "mw/ds");
  auto rate = [](const nlohmann::json& row, const char* key) {
    return row[key].is_number() ? row[key].get<double>() : 0.0;
  };
  for (const auto& r : cases) {
    const double ours = rate(r, "memwall_per_s");
    const double bound = rate(r, "bandwidth_limit_per_s");
    const double foreach = rate(r, "torch_foreach_per_s");
    const double fused = rate(r, "torch_fused_per_s");
    const double ds = rate(r, "deepspeed_per_s");
    auto mps = [](double x) { return x > 0 ? fmt::format("{:.0f}", x / 1e6) : "-"; };
    auto gbs = [](double x) { return fmt::format("{:.1f}", x / 1e9); };
    auto over = [&](const char* c) {
      return r.contains("memwall_over") && r["memwall_over"].contains(c)
                 ? fmt::format("{:.2f}", r["memwall_over"][c].get<double>())
                 : std::string("-");
    };
    std::cout << fmt::format(
        "{:>11} {:>7} {:>4} {:>6} {:>6} {:>7} {:>8} {:>8} {:>8} {:>9} {:>8} {:>10} {:>8} {:>8}\n",
        r["params"].get<int64_t>(), r["threads"].get<unsigned>(),
        r["bf16_copy"].get<bool>() ? "bf16" : "-", gbs(r["memcpy_bytes_per_s"]),
        gbs(r["triad_bytes_per_s"]), mps(bound), mps(ours), mps(foreach), mps(fused), mps(ds),
        ratio(ours, bound), over("torch_foreach"), over("torch_fused"), over("deepspeed"));
  }
  if (!cases.empty() && cases[0].contains("why") && cases[0]["why"].contains("torch_fused")) {
    std::cout << "torch: " << cases[0]["why"]["torch_fused"].get<std::string>() << "\n";
  }
  std::cout << "(with the copy memwall also streams it past the cache: Note [Streamed copies])\n";
  for (const auto& o : results.overlaps) {
    std::cout << fmt::format(
        "step + bf16 copy to the emulated device, {} params, 1 thread: sequential {:.1f} ms, "
        "overlapped by tiles {:.1f} ms ({:.2f}x)\n",
        o["params"].get<int64_t>(), o["sequential_s"].get<double>() * 1e3,
        o["overlapped_s"].get<double>() * 1e3,
        o["sequential_s"].get<double>() / o["overlapped_s"].get<double>());
  }
  std::cout << fmt::format("isa {}; torch via {}; DeepSpeed: {}\n",
                           runtime::isa_name(runtime::best_isa()),
                           python.empty() ? "(not run)" : python, results.deepspeed);
}

int run_bench_cpu_adam(const BenchCpuAdamArgs& args) {
  const CpuAdamCases cases = parse_cases(args);
  const CpuAdamResults results = run_contest(args, cases);
  if (args.json) {
    std::cout << nlohmann::json{{"deepspeed", results.deepspeed},
                                {"cases", results.cases},
                                {"overlap", results.overlaps}}
                     .dump(2)
              << "\n";
    return 0;
  }
  print_cases(args, results, cases.python);
  return 0;
}

}  // namespace

void add_bench_cpu_adam(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "cpu-adam", "the CPU AdamW step against torch.optim.AdamW and memory bandwidth");
  auto args = std::make_shared<BenchCpuAdamArgs>();
  cmd->add_option("--sizes", args->sizes, "parameter counts")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "timed steps per measurement (best is kept)")
      ->capture_default_str();
  cmd->add_option("--rounds", args->rounds,
                  "measurements per contender, alternating with memwall's (medians reported)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "thread counts (default: 1 and all)")->delimiter(',');
  cmd->add_option("--bandwidth-size", args->bandwidth_size,
                  "bytes memcpy and STREAM triad move for the bandwidth limit")
      ->capture_default_str();
  cmd->add_option("--python", args->python, "interpreter with torch (default: as memwall trace)");
  cmd->add_flag("--no-torch", args->no_torch, "memwall and the bound only");
  cmd->add_option("--copy", args->copy,
                  "none: the step alone; bf16: with a bf16 copy of the weights; both")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_cpu_adam(*args); }; });
}

}  // namespace memwall::cli
