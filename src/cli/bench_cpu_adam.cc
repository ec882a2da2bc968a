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
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "cpu_adam_contenders.h"
#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/base/error.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/offload_step.h"
#include "options.h"
#include "runtime_probes.h"

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

// Per parameter: AdamW reads param, grad, exp_avg, exp_avg_sq and writes
// param, exp_avg, exp_avg_sq (+2 bytes for a bf16 copy).
int64_t adam_bytes(bool copy) { return 16 + 12 + (copy ? 2 : 0); }

// Bytes read + written per second by memcpy of `bytes`, on `threads`
// threads each copying its share.
double memcpy_bandwidth(size_t bytes, unsigned threads, int repeats) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const double s = best_seconds(repeats, [&] {
    std::vector<std::thread> pool;
    const size_t share = bytes / threads;
    for (unsigned t = 0; t < threads; ++t) {
      const size_t len = t + 1 == threads ? bytes - t * share : share;
      pool.emplace_back(
          [&, t, len] { std::memcpy(dst.data() + t * share, src.data() + t * share, len); });
    }
    for (std::thread& th : pool) th.join();
  });
  return 2.0 * static_cast<double>(bytes) / s;
}

// Bytes read + written per second by STREAM's triad a = b + s * c on
// floats (12 bytes per element), `threads` threads each on its share: the
// compiler's plain stores, which memcpy's large-size path may not use.
double triad_bandwidth(size_t bytes, unsigned threads, int repeats) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 0.0f), b(n, 1.0f), c(n, 2.0f);
  const double s = best_seconds(repeats, [&] {
    std::vector<std::thread> pool;
    const size_t share = n / threads;
    for (unsigned t = 0; t < threads; ++t) {
      const size_t end = t + 1 == threads ? n : (t + 1) * share;
      pool.emplace_back([&, t, end] {
        for (size_t i = t * share; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
      });
    }
    for (std::thread& th : pool) th.join();
  });
  return 3.0 * static_cast<double>(bytes) / s;
}

// Note [Overlapped offload step]: the step with its bf16 copy followed by
// the copy to the (emulated) device, against the tiled step that overlaps
// the two; one thread for the step, the copy engine's own for the copy.
// Best seconds of each.
std::pair<double, double> overlap_seconds(int64_t n, int repeats) {
  const auto size = static_cast<size_t>(n);
  std::vector<float> param(size, 0.5f), grad(size, 0.01f), m(size, 0.0f), v(size, 0.0f);
  std::vector<uint16_t> half(size);
  auto device = alloc::make_host_vmm(size * sizeof(uint16_t) + (uint64_t{64} << 20));
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(size * sizeof(uint16_t), 0);
  if (!on_device) fail("bench cpu-adam: the emulated device cannot hold {} bf16 weights", n);
  runtime::HostPool pool(uint64_t{64} << 20);
  auto engine = runtime::make_emulated_copy_engine();
  const runtime::AdamWState state{param, grad, m, v};
  const runtime::HalfCopy out{runtime::HalfType::bf16, half};
  int64_t step = 1;
  const runtime::StepOptions one{.threads = 1};
  const double sequential = best_seconds(repeats, [&] {
    runtime::adamw_step({}, step++, state, out, one);
    engine
        ->copy_async(on_device.ptr, half.data(), size * sizeof(uint16_t),
                     runtime::CopyDirection::kHostToDevice)
        .wait();
  });
  const double overlapped = best_seconds(repeats, [&] {
    runtime::adamw_step_to_device({}, step++, state, runtime::HalfType::bf16, on_device.ptr,
                                  *engine, pool, size_t{1} << 20, one);
  });
  allocator->free(on_device.ptr);
  return {sequential, overlapped};
}

std::string ratio(double a, double b) { return b > 0 ? fmt::format("{:.2f}", a / b) : "-"; }

// One case's figures over the rounds: updates per second per round, per
// contender ("memwall", "torch_foreach", ...), and why a contender has none.
struct CaseRounds {
  std::map<std::string, std::vector<double>> per_s;
  std::map<std::string, std::string> why;
};

// Python's answer for one round into `rounds` (seconds -> updates/s).
void add_contenders(CaseRounds& rounds, const nlohmann::json& t, int64_t n,
                    const std::string& deepspeed) {
  const std::string torch_why = t.value("error", "");
  const std::pair<const char*, const char*> names[] = {
      {"foreach", "torch_foreach"}, {"fused", "torch_fused"}, {"deepspeed_cpu_adam", "deepspeed"}};
  for (const auto& [key, contender] : names) {
    if (t.contains(key) && t[key].is_number()) {
      rounds.per_s[contender].push_back(static_cast<double>(n) / t[key].get<double>());
    } else if (!torch_why.empty()) {
      rounds.why[contender] = torch_why;
    } else if (t.contains(std::string(key) + "_error")) {
      rounds.why[contender] = "failed: " + t[std::string(key) + "_error"].get<std::string>();
    } else {
      rounds.why[contender] = deepspeed;  // the only contender that can be absent
    }
  }
}

int run_bench_cpu_adam(const BenchCpuAdamArgs& args) {
  if (args.repeats < 1 || args.repeats > 1000)
    fail("--repeats: {} is out of range 1..1000", args.repeats);
  if (args.rounds < 1 || args.rounds > 100)
    fail("--rounds: {} is out of range 1..100", args.rounds);
  for (int64_t n : args.sizes) {
    // Four fp32 arrays and a bf16 copy, 18 bytes a parameter, here and in Python.
    if (n < 1 || n > (int64_t{1} << 40)) fail("--sizes: {} is out of range 1..2^40", n);
  }
  std::vector<bool> copies;
  if (args.copy == "none" || args.copy == "both") copies.push_back(false);
  if (args.copy == "bf16" || args.copy == "both") copies.push_back(true);
  if (copies.empty()) fail("--copy must be none, bf16 or both, not '{}'", args.copy);
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> thread_counts = args.threads;
  if (thread_counts.empty()) {
    thread_counts.push_back(1);
    if (all > 1) thread_counts.push_back(all);
  }
  for (unsigned t : thread_counts) {
    if (t < 1 || t > 4096) fail("--threads: {} is out of range 1..4096", t);
  }
  const uint64_t bandwidth_bytes = parse_bytes(args.bandwidth_size, "--bandwidth-size", 0);
  const std::string python = args.no_torch ? "" : importers::tracer_python(args.python);

  nlohmann::json cases = nlohmann::json::array();
  std::string deepspeed = "not run (--no-torch)";
  for (unsigned threads : thread_counts) {
    std::unique_ptr<CpuAdamContenders> contenders;
    if (!python.empty()) {
      contenders = std::make_unique<CpuAdamContenders>(python, threads);
      const nlohmann::json& about = contenders->about();
      deepspeed = about.contains("error") ? about["error"].get<std::string>()
                                          : about.value("deepspeed", "?");
    }
    // The better of two ways to move bytes: the bound an update could reach.
    // 1 GiB buffers by default, well past any last-level cache (a server's
    // can hold a 10M-parameter step's 280 MB in part).
    const double copy_bw = memcpy_bandwidth(bandwidth_bytes, threads, args.repeats);
    const double triad_bw = triad_bandwidth(bandwidth_bytes, threads, args.repeats);
    const double bw = std::max(copy_bw, triad_bw);
    for (int64_t n : args.sizes) {
      for (const bool copy : copies) {
        const int64_t bytes = adam_bytes(copy);
        CaseRounds rounds;
        for (int r = 0; r < args.rounds; ++r) {
          rounds.per_s["memwall"].push_back(static_cast<double>(n) /
                                            cpu_adam_seconds(n, threads, copy, args.repeats));
          if (contenders != nullptr) {
            add_contenders(rounds, contenders->time_step(n, args.repeats, copy), n, deepspeed);
          } else {
            for (const char* c : {"torch_foreach", "torch_fused", "deepspeed"})
              rounds.why[c] = "not run (--no-torch)";
          }
        }
        nlohmann::json row = {{"params", n},
                              {"threads", threads},
                              {"bf16_copy", copy},
                              {"isa", runtime::isa_name(runtime::best_isa())},
                              {"bytes_per_update", bytes},
                              {"rounds", args.rounds},
                              {"memcpy_bytes_per_s", copy_bw},
                              {"triad_bytes_per_s", triad_bw},
                              {"bandwidth_limit_per_s", bw / static_cast<double>(bytes)}};
        const std::vector<double>& ours = rounds.per_s["memwall"];
        for (const char* c : {"memwall", "torch_foreach", "torch_fused", "deepspeed"}) {
          const auto it = rounds.per_s.find(c);
          if (it != rounds.per_s.end() && it->second.size() == ours.size()) {
            row[std::string(c) + "_per_s"] = median(it->second);
            row["rounds_per_s"][c] = it->second;
            // memwall over the contender, round by round (each pair ran
            // back to back), then the median.
            std::vector<double> ratios;
            for (size_t i = 0; i < ours.size(); ++i) ratios.push_back(ours[i] / it->second[i]);
            if (std::string(c) != "memwall") row["memwall_over"][c] = median(ratios);
          } else {
            row[std::string(c) + "_per_s"] = nullptr;
            row["why"][c] = rounds.why.count(c) != 0 ? rounds.why[c] : "failed in some rounds";
          }
        }
        cases.push_back(row);
      }
    }
  }

  nlohmann::json overlaps = nlohmann::json::array();
  for (int64_t n : args.sizes) {
    const auto [sequential, overlapped] = overlap_seconds(n, args.repeats);
    overlaps.push_back({{"params", n}, {"sequential_s", sequential}, {"overlapped_s", overlapped}});
  }
  if (args.json) {
    std::cout
        << nlohmann::json{{"deepspeed", deepspeed}, {"cases", cases}, {"overlap", overlaps}}.dump(2)
        << "\n";
    return 0;
  }
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
  for (const auto& o : overlaps) {
    std::cout << fmt::format(
        "step + bf16 copy to the emulated device, {} params, 1 thread: sequential {:.1f} ms, "
        "overlapped by tiles {:.1f} ms ({:.2f}x)\n",
        o["params"].get<int64_t>(), o["sequential_s"].get<double>() * 1e3,
        o["overlapped_s"].get<double>() * 1e3,
        o["sequential_s"].get<double>() / o["overlapped_s"].get<double>());
  }
  std::cout << fmt::format("isa {}; torch via {}; DeepSpeed: {}\n",
                           runtime::isa_name(runtime::best_isa()),
                           python.empty() ? "(not run)" : python, deepspeed);
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
