// `memwall calibrate`: measures the machine it runs on and writes a hardware
// profile (docs/cost-model.md, "Calibration") usable with --gpu-file. The
// compute device's FLOP/s and memory bandwidth come from torch in a
// separate process (python/memwall/calibrate.py, through the tracer's
// interpreter); host<->device copies, NVMe and the CPU optimizer step from
// the runtime's probes (memwall/runtime/probes.h); host memory from the OS.
// hw assembles them into a profile (memwall/hw/calibration.h): what the
// machine cannot show (a single node's collectives, PCIe latency) comes
// from a base profile, and the output says which fields did. On a GPU the
// built-in profile of that GPU (hw's builtin_gpu_for_device) is the base
// and is printed beside the measurement; --compare names another. --graph
// adds a traced graph's kernels (calibrate_kernels.cc).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "calibrate_kernels.h"
#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/output_files.h"
#include "memwall/base/private_dir.h"
#include "memwall/hw/calibration.h"
#include "memwall/hw/hardware.h"
#include "memwall/importers/kept_values.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/report/hardware_tables.h"
#include "memwall/runtime/probes.h"
#include "options.h"

namespace memwall::cli {
namespace {

// ---- The work ----------------------------------------------------------------------------

// What `memwall calibrate` measured, and the profile made of it.
struct Calibration {
  nlohmann::json probe;  // the compute probe's own figures
  runtime::CopyRates copies;
  runtime::NvmeRates nvme;
  std::string nvme_dir;
  double adam = 0;  // CPU AdamW parameters per second
  const Hardware* base = nullptr;
  const Hardware* compare = nullptr;  // printed beside, when any
  Hardware hw;
  std::vector<TimedGraph> timed;
};

// The machine measured in turn (the compute probe, copies, NVMe, the CPU
// step), assembled over the base profile, and --graph's kernels added.
Calibration calibrate(const CalibrateArgs& args, KernelGraphs& graphs, const Hardware* compare) {
  Calibration c;
  progress(args, "compute device (torch matmul, convolution, memory copy)...");
  std::vector<std::string> probe_args = {"--calibrate"};
  if (args.quick) probe_args.push_back("--quick");
  c.probe = parse_compute_probe(importers::run_torch_tracer(probe_args, 600, args.python));
  progress(args, "host<->device copies (copy engine, pinned pool)...");
  const uint64_t copy_bytes = args.quick ? uint64_t{16} << 20 : uint64_t{256} << 20;
  c.copies = runtime::measure_copies(copy_bytes, args.quick ? 2 : 5);
  progress(args, "NVMe write and read (the NVMe engine, io_uring)...");
  c.nvme_dir = args.dir;
  {
    std::optional<PrivateDir> made;  // gone after the probe, or an interrupt
    if (c.nvme_dir.empty()) c.nvme_dir = made.emplace("memwall-calibrate").path();
    try {
      c.nvme = runtime::measure_nvme_engine(
          c.nvme_dir, args.quick ? uint64_t{32} << 20 : uint64_t{1} << 30, uint64_t{1} << 20,
          args.quick ? uint64_t{8} << 20 : uint64_t{64} << 20, 16);
    } catch (const std::exception& e) {
      fail("calibrate: NVMe: {}", e.what());
    }
  }
  if (!c.nvme.note.empty()) std::cerr << "memwall: note: " << c.nvme.note << "\n";
  progress(args, "the CPU optimizer step (AdamW, every thread)...");
  const int64_t adam_params = args.quick ? int64_t{1} << 20 : int64_t{1} << 25;
  c.adam = static_cast<double>(adam_params) /
           runtime::cpu_adam_seconds(adam_params, /*threads=*/0, false, args.quick ? 2 : 5);

  // On a GPU its own built-in profile, when memwall has one, is the
  // comparison and (unless --base says otherwise) the base.
  const Hardware* builtin = builtin_for_probe(c.probe);
  c.compare = compare != nullptr ? compare : builtin;
  c.base = builtin != nullptr && !args.base_given ? builtin : &find_gpu(args.base);
  c.hw = calibrated_profile(*c.base, c.probe,
                            {.h2d_gbps = c.copies.h2d_gbps,
                             .d2h_gbps = c.copies.d2h_gbps,
                             .copy_latency_s = c.copies.latency_s,
                             .nvme_write_gbps = c.nvme.write_gbps,
                             .nvme_read_gbps = c.nvme.read_gbps,
                             .cpu_adam_params_per_s = c.adam,
                             .host_memory_bytes = host_memory_bytes()});
  c.timed = add_kernels(args, graphs, c.hw);
  return c;
}

// ---- Printing -----------------------------------------------------------------------------

// The profile and the figures behind it, in a table.
void print_calibration(const CalibrateArgs& args, const Calibration& c) {
  const Hardware& hw = c.hw;
  const runtime::NvmeRates& nvme = c.nvme;
  std::cout << fmt::format("{}\n", hw.description);
  const auto row = [](const char* what, const std::string& value) {
    std::cout << fmt::format("  {:<28} {}\n", what, value);
  };
  row("matmul fp32", human_flops(hw.peak_flops_fp32) + "/s");
  if (hw.peak_flops_tf32 > 0) row("matmul tf32", human_flops(hw.peak_flops_tf32) + "/s");
  row("matmul bf16", human_flops(hw.peak_flops_bf16) + "/s");
  row("matmul fp16", human_flops(hw.peak_flops_fp16) + "/s");
  row("conv2d fp32 (3x3)",
      human_flops(c.probe.at("conv2d_fp32").at("flops_per_s").get<double>()) + "/s");
  row("memory bandwidth", fmt::format("{:.1f} GB/s", hw.hbm_bandwidth / 1e9));
  row("host -> device", fmt::format("{:.1f} GB/s ({})", hw.h2d_bandwidth / 1e9, c.copies.engine));
  row("device -> host", fmt::format("{:.1f} GB/s", hw.d2h_bandwidth / 1e9));
  row("copy latency",
      fmt::format("{:.1f} us (a 64-byte copy, issued and waited for)", hw.pcie_latency * 1e6));
  row("NVMe write / read", fmt::format("{:.2f} / {:.2f} GB/s ({}{})", nvme.write_gbps,
                                       nvme.read_gbps, args.dir.empty() ? "$TMPDIR" : args.dir,
                                       nvme.warning.empty() ? "" : "; " + nvme.warning));
  row("CPU AdamW step", fmt::format("{:.0f} M parameters/s", c.adam / 1e6));
  row("host memory", human_bytes(hw.host_memory_bytes));
  print_timed(c.timed);
  std::string fields;
  for (const std::string& f : calibration_fields_from_base()) {
    fields += (fields.empty() ? "" : ", ") + f;
  }
  row("from the base profile", fmt::format("{} ({})", c.base->name, fields));
  if (!args.out.empty()) row("profile written to", args.out + " (use with --gpu-file)");
  if (c.compare != nullptr) std::cout << profiles_side_by_side(hw, *c.compare);
}

int run_calibrate(const CalibrateArgs& args) {
  if (!args.from.empty()) return calibrate_kernels_only(args);
  (void)find_gpu(args.base);  // an unknown name fails before any measuring
  const Hardware* compare = args.compare.empty() ? nullptr : &find_gpu(args.compare);
  OutputFiles outputs;
  if (!args.out.empty()) outputs.declare(args.out);
  KernelGraphs graphs = kernel_graphs(args);
  const Calibration c = calibrate(args, graphs, compare);
  const nlohmann::json profile = hardware_to_json(c.hw);
  (void)hardware_from_json(profile);  // what --gpu-file will read must validate
  if (!args.out.empty()) {
    outputs.set(args.out, profile.dump(2) + "\n");
    outputs.commit();
  }
  if (args.json) {
    nlohmann::json out = {{"profile", profile},
                          {"base", c.base->name},
                          {"from_base", calibration_fields_from_base()},
                          {"copy_engine", c.copies.engine},
                          {"compared_with", c.compare != nullptr ? nlohmann::json(c.compare->name)
                                                                 : nlohmann::json(nullptr)},
                          {"nvme_dir", c.nvme_dir},
                          {"conv2d_fp32_flops_per_s", c.probe.at("conv2d_fp32").at("flops_per_s")},
                          {"probe", c.probe},
                          {"timed", timed_json(c.timed)}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  print_calibration(args, c);
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
