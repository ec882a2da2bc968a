// `memwall bench cpu-adam`: memwall's CPU AdamW step (runtime/cpu_optimizer.h)
// against torch.optim.AdamW (foreach=True and fused=True, run by the
// interpreter `memwall trace` uses) and against the memory-bandwidth bound:
// bytes an update moves over the bandwidth memcpy reaches, per thread count.
// DeepSpeed's DeepSpeedCPUAdam (AdamW mode) too when it is installed
// (scripts/install-deps.sh --deepspeed).
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/graph/error.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/offload_step.h"
#include "runtime_probes.h"

namespace memwall::cli {
namespace {

struct BenchCpuAdamArgs {
  std::vector<int64_t> sizes = {10'000'000, 100'000'000};
  int repeats = 3;
  std::string python;
  bool no_torch = false;
  bool bf16_copy = false;
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

// torch.optim.AdamW on one tensor of n parameters: best seconds per step
// for each implementation, or an "error" entry.
constexpr const char* kTorchScript = R"PY(
import json, sys, time
n, threads, repeats = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
try:
    import torch
except ImportError:
    print(json.dumps({"error": "torch is not importable"})); sys.exit(0)
torch.set_num_threads(threads)
out = {"torch": torch.__version__}
try:
    import contextlib, io, os
    with contextlib.redirect_stdout(io.StringIO()):  # its accelerator notice
        import deepspeed
    out["deepspeed"] = "deepspeed " + deepspeed.__version__
except Exception:
    out["deepspeed"] = ("not installed (scripts/install-deps.sh --deepspeed installs it into "
                        "memwall's environment)")
    deepspeed = None
if deepspeed is not None:
    # DeepSpeedCPUAdam in AdamW mode (decoupled weight decay, as torch's
    # AdamW), fp32 parameters; its C++ op compiles on first use.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            p = torch.nn.Parameter(torch.full((n,), 0.5))
            p.grad = torch.full((n,), 0.01)
            opt = DeepSpeedCPUAdam([p], lr=1e-3, weight_decay=1e-2, adamw_mode=True)
            opt.step()
            best = 1e30
            for _ in range(repeats):
                t0 = time.perf_counter(); opt.step(); best = min(best, time.perf_counter() - t0)
        out["deepspeed_cpu_adam"] = best
        del p, opt
    except Exception as e:
        out["deepspeed_error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
for name, kw in [("foreach", dict(foreach=True)), ("fused", dict(fused=True))]:
    p = torch.full((n,), 0.5, requires_grad=True)
    p.grad = torch.full((n,), 0.01)
    try:
        opt = torch.optim.AdamW([p], lr=1e-3, **kw)
        opt.step()
        best = 1e30
        for _ in range(repeats):
            t0 = time.perf_counter(); opt.step(); best = min(best, time.perf_counter() - t0)
        out[name] = best
    except Exception as e:
        out[name] = None
        out[name + "_error"] = str(e).splitlines()[0]
    del p, opt
print(json.dumps(out))
)PY";

nlohmann::json torch_seconds(const std::string& python, int64_t n, unsigned threads, int repeats) {
  // The script goes in through a file: no quoting of its text for the shell.
  char path[] = "/tmp/memwall-cpu-adam-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {{"error", "cannot create a temporary file"}};
  const std::string text = kTorchScript;
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  nlohmann::json result = {{"error", "cannot write the torch script"}};
  if (written) {
    const std::string command =
        fmt::format("'{}' '{}' {} {} {} 2>/dev/null", python, path, n, threads, repeats);
    std::string out;
    if (FILE* pipe = popen(command.c_str(), "r")) {
      char chunk[4096];
      size_t got;
      while ((got = fread(chunk, 1, sizeof chunk, pipe)) > 0) out.append(chunk, got);
      pclose(pipe);
    }
    result = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    if (result.is_discarded()) result = {{"error", "the torch script failed under " + python}};
  }
  std::remove(path);
  return result;
}

std::string ratio(double a, double b) { return b > 0 ? fmt::format("{:.2f}", a / b) : "-"; }

int run_bench_cpu_adam(const BenchCpuAdamArgs& args) {
  if (args.repeats < 1) fail("--repeats must be >= 1");
  for (int64_t n : args.sizes) {
    if (n < 1) fail("--sizes must be >= 1");
  }
  const unsigned all = std::max(1u, std::thread::hardware_concurrency());
  std::vector<unsigned> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  const std::string python = args.no_torch ? "" : importers::tracer_python(args.python);
  const int64_t bytes = adam_bytes(args.bf16_copy);

  nlohmann::json rows = nlohmann::json::array();
  std::string deepspeed = "not checked";
  for (unsigned threads : thread_counts) {
    // The better of two ways to move bytes: the bound an update could reach.
    // 1 GiB buffers, well past any last-level cache (a server's can hold a
    // 10M-parameter step's 280 MB in part).
    const double copy_bw = memcpy_bandwidth(size_t{1} << 30, threads, args.repeats);
    const double triad_bw = triad_bandwidth(size_t{1} << 30, threads, args.repeats);
    const double bw = std::max(copy_bw, triad_bw);
    for (int64_t n : args.sizes) {
      const double ours = cpu_adam_seconds(n, threads, args.bf16_copy, args.repeats);
      nlohmann::json row = {{"params", n},
                            {"threads", threads},
                            {"isa", runtime::isa_name(runtime::best_isa())},
                            {"memcpy_bytes_per_s", copy_bw},
                            {"triad_bytes_per_s", triad_bw},
                            {"at_bandwidth_updates_per_s", bw / static_cast<double>(bytes)},
                            {"memwall_updates_per_s", static_cast<double>(n) / ours}};
      if (!python.empty()) {
        const nlohmann::json t = torch_seconds(python, n, threads, args.repeats);
        if (t.contains("deepspeed")) deepspeed = t["deepspeed"];
        for (const char* impl : {"foreach", "fused"}) {
          if (t.contains(impl) && t[impl].is_number()) {
            row[std::string("torch_") + impl + "_updates_per_s"] =
                static_cast<double>(n) / t[impl].get<double>();
          }
        }
        if (t.contains("deepspeed_cpu_adam") && t["deepspeed_cpu_adam"].is_number()) {
          row["deepspeed_updates_per_s"] =
              static_cast<double>(n) / t["deepspeed_cpu_adam"].get<double>();
        }
        if (t.contains("deepspeed_error"))
          deepspeed += " (its CPU Adam failed: " + t["deepspeed_error"].get<std::string>() + ")";
        if (t.contains("error")) row["torch_error"] = t["error"];
      }
      rows.push_back(row);
    }
  }

  nlohmann::json overlaps = nlohmann::json::array();
  for (int64_t n : args.sizes) {
    const auto [sequential, overlapped] = overlap_seconds(n, args.repeats);
    overlaps.push_back({{"params", n}, {"sequential_s", sequential}, {"overlapped_s", overlapped}});
  }
  if (args.json) {
    std::cout << nlohmann::json{{"bytes_per_update", bytes},
                                {"deepspeed", deepspeed},
                                {"rows", rows},
                                {"overlap", overlaps}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "AdamW step, fp32 master weights{}: parameter updates per second (M/s), bandwidth in GB/s; "
      "at-bw = bandwidth (the better of memcpy and STREAM triad) / {} bytes per update, "
      "a reference, not a ceiling: a core's bandwidth is bounded by its misses in flight, and "
      "AdamW's seven streams keep more in flight than memcpy's two\n",
      args.bf16_copy ? " + bf16 copy" : "", bytes);
  std::cout << fmt::format(
      "{:>11} {:>7} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
      "params", "threads", "memcpy", "triad", "at-bw", "memwall", "foreach", "fused", "deepspeed",
      "mw/at-bw", "mw/foreach", "mw/fused", "mw/ds");
  for (const auto& r : rows) {
    const double ours = r["memwall_updates_per_s"];
    const double bound = r["at_bandwidth_updates_per_s"];
    const double foreach = r.value("torch_foreach_updates_per_s", 0.0);
    const double fused = r.value("torch_fused_updates_per_s", 0.0);
    const double ds = r.value("deepspeed_updates_per_s", 0.0);
    auto mps = [](double x) { return x > 0 ? fmt::format("{:.0f}", x / 1e6) : "-"; };
    auto gbs = [](double x) { return fmt::format("{:.1f}", x / 1e9); };
    std::cout << fmt::format(
        "{:>11} {:>7} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
        r["params"].get<int64_t>(), r["threads"].get<unsigned>(), gbs(r["memcpy_bytes_per_s"]),
        gbs(r["triad_bytes_per_s"]), mps(bound), mps(ours), mps(foreach), mps(fused), mps(ds),
        ratio(ours, bound), ratio(ours, foreach), ratio(ours, fused), ratio(ours, ds));
    if (r.contains("torch_error")) {
      std::cout << "  torch: " << r["torch_error"].get<std::string>() << "\n";
    }
  }
  if (args.bf16_copy) std::cout << "torch's steps write no bf16 copy\n";
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
  cmd->add_option("--python", args->python, "interpreter with torch (default: as memwall trace)");
  cmd->add_flag("--no-torch", args->no_torch, "memwall and the bound only");
  cmd->add_flag("--bf16-copy", args->bf16_copy, "also write a bf16 copy of the weights");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_cpu_adam(*args); }; });
}

}  // namespace memwall::cli
