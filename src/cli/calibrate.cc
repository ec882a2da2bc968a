// `memwall calibrate`: measures the machine it runs on and writes a hardware
// profile (docs/cost-model.md, "Calibration") usable with --gpu-file. The
// compute device's FLOP/s and memory bandwidth come from torch in a
// separate process (python/memwall_calibrate.py, through the tracer's
// interpreter); host<->device copies from the runtime's copy engine between
// memwall's device allocator and the pinned pool; host memory from the OS.
// What the machine cannot show (a single node's collectives, PCIe latency)
// comes from a base profile, and the output says which fields did. On a
// GPU the built-in profile of that GPU (hw's builtin_gpu_for_device) is the
// base and is printed beside the measurement; --compare names another.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate_kernels.h"
#include "commands.h"
#include "format.h"
#include "memwall/graph/error.h"
#include "memwall/graph/output_files.h"
#include "memwall/graph/private_dir.h"
#include "memwall/hw/hardware.h"
#include "memwall/importers/torch_trace.h"
#include "options.h"
#include "memwall/runtime/probes.h"

namespace memwall::cli {
namespace {

struct CalibrateArgs {
  std::string out;
  std::string dir;  // swap directory for the NVMe probe
  std::string base = "l4";
  bool base_given = false;
  std::string compare;  // a built-in to print beside the measurement
  std::string python;
  bool quick = false;
  bool json = false;
  std::vector<std::string> graphs;  // --graph: time these graphs' kernels
  std::string keep_values;          // --keep-values (one --graph)
  std::string from;                 // --from: add kernels to this profile
  int kernel_iterations = 5;
  int kernel_rounds = 3;
};

void progress(const CalibrateArgs& args, const std::string& what) {
  if (!args.json && ::isatty(STDERR_FILENO) == 1)
    std::cerr << "memwall: calibrate: " << what << "\n";
}

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

double flops_of(const nlohmann::json& probe, const char* dtype) {
  const auto& m = probe.at("matmul");
  return m.contains(dtype) ? m.at(dtype).at("flops_per_s").get<double>() : 0.0;
}

// The measured profile beside a built-in one, field by field. A built-in's
// rates are peaks times its efficiencies: what its cost model predicts a
// kernel reaches, the same kind of figure as the measurement.
void print_side_by_side(const Hardware& measured, const Hardware& builtin) {
  std::cout << fmt::format(
      "\nbeside the built-in '{}' ({}); built-in rates are peak x "
      "efficiency, as its cost model uses them\n",
      builtin.name, builtin.description);
  std::cout << fmt::format("  {:<22} {:>14} {:>14} {:>17}\n", "", "measured", builtin.name,
                           "measured/built-in");
  const auto row = [](const char* what, double ours, double theirs, auto text) {
    const double r = theirs > 0 && ours > 0 ? ours / theirs : 0.0;
    std::cout << fmt::format("  {:<22} {:>14} {:>14} {:>17}\n", what, text(ours), text(theirs),
                             r == 0     ? std::string("-")
                             : r >= 0.1 ? fmt::format("{:.2f}", r)
                                        : fmt::format("{:.2g}", r));
  };
  const auto flops = [](double x) { return x > 0 ? human_flops(x) + "/s" : std::string("-"); };
  const auto gbps = [](double x) { return x > 0 ? fmt::format("{:.1f} GB/s", x / 1e9) : "-"; };
  const auto bytes = [](double x) { return human_bytes(static_cast<uint64_t>(x)); };
  const auto params = [](double x) { return x > 0 ? fmt::format("{:.0f} M/s", x / 1e6) : "-"; };
  const double ce = builtin.compute_efficiency, me = builtin.memory_efficiency;
  row("matmul fp32", measured.peak_flops_fp32, builtin.peak_flops_fp32 * ce, flops);
  row("matmul tf32", measured.peak_flops_tf32, builtin.peak_flops_tf32 * ce, flops);
  row("matmul bf16", measured.peak_flops_bf16, builtin.peak_flops_bf16 * ce, flops);
  row("matmul fp16", measured.peak_flops_fp16, builtin.peak_flops_fp16 * ce, flops);
  row("memory bandwidth", measured.hbm_bandwidth, builtin.hbm_bandwidth * me, gbps);
  row("device memory", static_cast<double>(measured.device_memory_bytes),
      static_cast<double>(builtin.device_memory_bytes), bytes);
  row("host -> device", measured.h2d_bandwidth, builtin.h2d_bandwidth, gbps);
  row("device -> host", measured.d2h_bandwidth, builtin.d2h_bandwidth, gbps);
  row("NVMe write", measured.nvme_write_bandwidth, builtin.nvme_write_bandwidth, gbps);
  row("NVMe read", measured.nvme_read_bandwidth, builtin.nvme_read_bandwidth, gbps);
  row("CPU AdamW step", measured.cpu_adam_params_per_s, builtin.cpu_adam_params_per_s, params);
  row("host memory", static_cast<double>(measured.host_memory_bytes),
      static_cast<double>(builtin.host_memory_bytes), bytes);
}

struct TimedGraph {
  std::string file;
  KernelMeasure measure;
};

// --graph's files and --keep-values, read and checked before any measuring
// (Note [Kept values]).
struct KernelGraphs {
  std::vector<Graph> graphs;  // args.graphs' files
  KeptValues kept;
};

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
    out.kept = KeptValues(args.keep_values);
    const Graph& graph = out.graphs.front();
    out.kept.check_model(importers::request_for(graph),
                         fmt::format("{}'s model (\"{}\")", args.graphs.front(), graph.name));
  }
  return out;
}

// --graph: each graph's kernels timed on this machine and added to `hw`'s
// measured kernels (a later graph's time for a shared kernel wins).
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
    for (const auto& [signature, seconds] : m.kernels) hw.kernel_seconds[signature] = seconds;
    // Note [Copy contention]: what the emulated device's copies and kernels
    // do to each other (a GPU's DMA engines leave its kernels alone).
    if (hw.device_is_host_cpu) {
      hw.copy_contention = m.contention;
      hw.op_overhead = m.op_overhead;  // Note [Op overhead]
    }
    timed.push_back({file, std::move(m)});
  }
  return timed;
}

nlohmann::json timed_json(const std::vector<TimedGraph>& timed) {
  nlohmann::json out = nlohmann::json::array();
  for (const TimedGraph& t : timed) {
    out.push_back(
        {{"graph", t.file},
         {"ops", t.measure.ops},
         {"kernels", t.measure.kernels.size()},
         {"seconds", t.measure.seconds},
         {"copy_contention",
          {{"compute", t.measure.contention.compute}, {"copy", t.measure.contention.copy}}},
         {"op_overhead", t.measure.op_overhead}});
  }
  return out;
}

void print_timed(const std::vector<TimedGraph>& timed) {
  for (const TimedGraph& t : timed) {
    std::cout << fmt::format("  {:<28} {} ops, {} kernels, {:.2f} ms in all ({})\n",
                             "measured kernels", t.measure.ops, t.measure.kernels.size(),
                             t.measure.seconds * 1e3, t.file);
    std::cout << fmt::format(
        "  {:<28} kernels {:.2f}x as long beside host<->device copies, copies {:.2f}x\n",
        "copy contention", t.measure.contention.compute, t.measure.contention.copy);
    std::cout << fmt::format("  {:<28} {:.2f} us per op outside its kernel (the executor's)\n",
                             "op overhead", t.measure.op_overhead * 1e6);
  }
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

int run_calibrate(const CalibrateArgs& args) {
  if (!args.from.empty()) return calibrate_kernels_only(args);
  (void)find_gpu(args.base);  // an unknown name fails before any measuring
  const Hardware* compare = args.compare.empty() ? nullptr : &find_gpu(args.compare);
  OutputFiles outputs;
  if (!args.out.empty()) outputs.declare(args.out);
  KernelGraphs graphs = kernel_graphs(args);

  progress(args, "compute device (torch matmul, convolution, memory copy)...");
  std::vector<std::string> probe_args = {"--calibrate"};
  if (args.quick) probe_args.push_back("--quick");
  const std::string text = importers::run_torch_tracer(probe_args, 600, args.python);
  nlohmann::json probe;
  try {
    probe = nlohmann::json::parse(text);
    (void)probe.at("matmul").at("fp32").at("flops_per_s");
  } catch (const std::exception& e) {
    fail("calibrate: the compute probe's output is invalid: {}", e.what());
  }
  progress(args, "host<->device copies (copy engine, pinned pool)...");
  const uint64_t copy_bytes = args.quick ? uint64_t{16} << 20 : uint64_t{256} << 20;
  const runtime::CopyRates copies = runtime::measure_copies(copy_bytes, args.quick ? 2 : 5);
  progress(args, "NVMe write and read (the NVMe engine, io_uring)...");
  std::string dir = args.dir;
  runtime::NvmeRates nvme;
  {
    std::optional<PrivateDir> made;  // gone after the probe, or an interrupt
    if (dir.empty()) dir = made.emplace("memwall-calibrate").path();
    try {
      nvme = runtime::measure_nvme_engine(dir, args.quick ? uint64_t{32} << 20 : uint64_t{1} << 30,
                                 uint64_t{1} << 20,
                                 args.quick ? uint64_t{8} << 20 : uint64_t{64} << 20, 16);
    } catch (const std::exception& e) {
      fail("calibrate: NVMe: {}", e.what());
    }
  }
  if (!nvme.note.empty()) std::cerr << "memwall: note: " << nvme.note << "\n";
  progress(args, "the CPU optimizer step (AdamW, every thread)...");
  const int64_t adam_params = args.quick ? int64_t{1} << 20 : int64_t{1} << 25;
  const double adam = static_cast<double>(adam_params) /
                      runtime::cpu_adam_seconds(adam_params, /*threads=*/0, false, args.quick ? 2 : 5);

  const bool gpu = probe.value("device", "cpu") == "cuda";
  if (gpu && !args.graphs.empty()) {
    fail(
        "calibrate: --graph times kernels on the emulated device (this CPU); the executor "
        "has no CUDA path yet, so a GPU's kernels cannot be timed");
  }
  // On a GPU its own built-in profile, when memwall has one, is the
  // comparison and (unless --base says otherwise) the base.
  const Hardware* builtin =
      gpu ? builtin_gpu_for_device(probe.value("name", ""),
                                   probe.value("device_memory_bytes", uint64_t{0}))
          : nullptr;
  if (compare == nullptr) compare = builtin;
  const Hardware& base = builtin != nullptr && !args.base_given ? *builtin : find_gpu(args.base);
  Hardware hw = base;
  hw.name = gpu ? "calibrated-gpu" : "calibrated-cpu";
  hw.description = fmt::format("measured by memwall calibrate on {} ({}, torch {})",
                               gpu ? probe.value("name", "a GPU") : "the CPU",
                               gpu ? "CUDA" : fmt::format("{} threads", probe.value("threads", 0)),
                               probe.value("torch", "?"));
  const uint64_t host = host_memory_bytes();
  hw.host_memory_bytes = host;
  hw.device_memory_bytes = gpu ? probe.at("device_memory_bytes").get<uint64_t>() : host;
  // Achieved rates stand for the peaks, with efficiencies of 1: the cost
  // model then predicts what was measured (Note [Calibrated profiles] in
  // docs/cost-model.md).
  hw.peak_flops_fp32 = flops_of(probe, "fp32");
  hw.peak_flops_tf32 = flops_of(probe, "tf32");
  hw.peak_flops_fp16 = flops_of(probe, "fp16");
  hw.peak_flops_bf16 = flops_of(probe, "bf16");
  hw.hbm_bandwidth = probe.at("memory_bytes_per_s").get<double>();
  hw.compute_efficiency = 1.0;
  hw.memory_efficiency = 1.0;
  hw.h2d_bandwidth = copies.h2d_gbps * 1e9;
  hw.d2h_bandwidth = copies.d2h_gbps * 1e9;
  hw.pcie_latency = copies.latency_s;  // Note [Copy latency]
  hw.gpus_per_node = 1;
  hw.host_pcie_bandwidth = std::max(hw.h2d_bandwidth, hw.d2h_bandwidth);
  hw.nvme_write_bandwidth = nvme.write_gbps * 1e9;
  hw.nvme_read_bandwidth = nvme.read_gbps * 1e9;
  hw.cpu_adam_params_per_s = adam;
  hw.device_is_host_cpu = !gpu;
  // What one machine cannot show (Note [Calibrated profiles]).
  const std::vector<std::string> from_base = {"interconnect_bandwidth", "network_bandwidth",
                                              "collective_step_latency", "network_step_latency",
                                              "launch_latency"};
  const std::vector<TimedGraph> timed = add_kernels(args, graphs, hw);
  const nlohmann::json profile = hardware_to_json(hw);
  (void)hardware_from_json(profile);  // what --gpu-file will read must validate
  if (!args.out.empty()) {
    outputs.set(args.out, profile.dump(2) + "\n");
    outputs.commit();
  }

  if (args.json) {
    nlohmann::json out = {{"profile", profile},
                          {"base", base.name},
                          {"from_base", from_base},
                          {"copy_engine", copies.engine},
                          {"compared_with", compare != nullptr ? nlohmann::json(compare->name)
                                                               : nlohmann::json(nullptr)},
                          {"nvme_dir", dir},
                          {"conv2d_fp32_flops_per_s", probe.at("conv2d_fp32").at("flops_per_s")},
                          {"probe", probe},
                          {"timed", timed_json(timed)}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}\n", hw.description);
  const auto row = [](const char* what, const std::string& value) {
    std::cout << fmt::format("  {:<28} {}\n", what, value);
  };
  row("matmul fp32", human_flops(hw.peak_flops_fp32) + "/s");
  if (hw.peak_flops_tf32 > 0) row("matmul tf32", human_flops(hw.peak_flops_tf32) + "/s");
  row("matmul bf16", human_flops(hw.peak_flops_bf16) + "/s");
  row("matmul fp16", human_flops(hw.peak_flops_fp16) + "/s");
  row("conv2d fp32 (3x3)",
      human_flops(probe.at("conv2d_fp32").at("flops_per_s").get<double>()) + "/s");
  row("memory bandwidth", fmt::format("{:.1f} GB/s", hw.hbm_bandwidth / 1e9));
  row("host -> device", fmt::format("{:.1f} GB/s ({})", hw.h2d_bandwidth / 1e9, copies.engine));
  row("device -> host", fmt::format("{:.1f} GB/s", hw.d2h_bandwidth / 1e9));
  row("copy latency",
      fmt::format("{:.1f} us (a 64-byte copy, issued and waited for)", hw.pcie_latency * 1e6));
  row("NVMe write / read", fmt::format("{:.2f} / {:.2f} GB/s ({}{})", nvme.write_gbps,
                                       nvme.read_gbps, args.dir.empty() ? "$TMPDIR" : args.dir,
                                       nvme.warning.empty() ? "" : "; " + nvme.warning));
  row("CPU AdamW step", fmt::format("{:.0f} M parameters/s", adam / 1e6));
  row("host memory", human_bytes(hw.host_memory_bytes));
  print_timed(timed);
  std::string fields;
  for (const std::string& f : from_base) fields += (fields.empty() ? "" : ", ") + f;
  row("from the base profile", fmt::format("{} ({})", base.name, fields));
  if (!args.out.empty()) row("profile written to", args.out + " (use with --gpu-file)");
  if (compare != nullptr) print_side_by_side(hw, *compare);
  return 0;
}

}  // namespace

void add_calibrate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("calibrate",
                                 "measure this machine and write a hardware profile (--gpu-file)");
  auto args = std::make_shared<CalibrateArgs>();
  cmd->add_option("--out", args->out, "where to write the profile (JSON, as --gpu-file reads)");
  cmd->add_option("--dir", args->dir,
                  "directory on the drive to measure (default: a new one under $TMPDIR or /tmp)");
  cmd->add_option("--base", args->base,
                  "built-in profile for what one machine cannot measure (collectives, "
                  "latencies); on a GPU memwall has a profile of, that profile")
      ->capture_default_str()
      ->each([args](const std::string&) { args->base_given = true; });
  cmd->add_option("--compare", args->compare,
                  "built-in profile printed beside the measurement (on a GPU: its own)");
  cmd->add_option("--python", args->python,
                  "the Python (with torch) that runs the compute probe (as for memwall trace)");
  cmd->add_option("--graph", args->graphs,
                  "also time this traced graph's kernels on this machine (repeatable; the "
                  "profile's measured kernels, which predictions for it then use)");
  cmd->add_option("--keep-values", args->keep_values,
                  "--graph's values: reuse DIR's (memwall run --keep-values), or trace and keep "
                  "them there");
  cmd->add_option("--kernel-iterations", args->kernel_iterations,
                  "--graph: iterations timed after a first one (each op's median counts; "
                  "default 5)");
  cmd->add_option("--kernel-rounds", args->kernel_rounds,
                  "--graph: runs of those iterations; each op's median in the run of the "
                  "median step counts (default 3)");
  cmd->add_option("--from", args->from,
                  "add --graph's kernels to this profile instead of measuring the machine "
                  "(written back unless --out names another file)");
  cmd->add_flag("--quick", args->quick, "small sizes (seconds; for tests)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_calibrate(*args); }; });
}

}  // namespace memwall::cli
