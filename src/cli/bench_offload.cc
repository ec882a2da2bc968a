// `memwall bench offload`: the NVMe engine's sequential write and read
// bandwidth against fio's on the same directory, the same block size and
// the same queue depth (fio --direct=1 --ioengine=io_uring --bs=... --iodepth=D),
// so that the engine's overhead (bounce copies, CRC32C, one ring) shows as
// a ratio; the target is >= 0.95x fio. A shared or virtual disk varies more
// from run to run than the two differ, so each depth runs the engine and
// fio --repeats times, alternating, and reports the medians and the median
// of the paired ratios (each engine run against the fio run right after it).
// Then host<->device copies through the copy engine against the plain
// synchronous copy of the same bytes: memcpy on the emulated device,
// cuMemcpyHtoD/DtoH (what cudaMemcpy calls) on a GPU.
#include <stdlib.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/interrupt_cleanup.h"
#include "memwall/base/private_dir.h"
#include "memwall/runtime/nvme_engine.h"
#include "memwall/runtime/probes.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchOffloadArgs {
  std::string dir;
  std::string size = "1GiB";
  std::string block = "1MiB";
  std::string tensor = "64MiB";
  std::vector<int> depths = {8, 16, 32};
  int repeats = 3;
  bool no_fio = false;
  bool json = false;
};

// --json: a case per depth and operation, then one per copy direction.
void print_offload_json(const runtime::NvmeBenchSpec& spec, const runtime::OffloadBench& bench) {
  const runtime::CopyRates& copies = bench.copies;
  const std::string reference_key = copies.reference == "memcpy" ? "memcpy" : "cuda_memcpy";
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& row : bench.nvme) {
    nlohmann::json j = {{"kind", "nvme"},
                        {"op", row.op},
                        {"dir", spec.dir},
                        {"size", spec.size},
                        {"block", spec.block},
                        {"tensor", spec.tensor},
                        {"depth", row.depth},
                        {"repeats", spec.repeats},
                        {"memwall_gbps", runtime::median(row.engine_gbps)},
                        {"memwall_runs_gbps", row.engine_gbps}};
    if (row.fio_gbps.empty()) {
      j["fio_gbps"] = nullptr;
      j["why"] = "not run (--no-fio)";
    } else {
      j["fio_gbps"] = runtime::median(row.fio_gbps);
      j["fio_runs_gbps"] = row.fio_gbps;
      j["ratio"] = runtime::median_ratio(row);
    }
    cases.push_back(j);
  }
  for (const auto& [op, rate, reference] :
       {std::tuple{"host_to_device", copies.h2d_gbps, copies.reference_h2d_gbps},
        std::tuple{"device_to_host", copies.d2h_gbps, copies.reference_d2h_gbps}}) {
    cases.push_back({{"kind", "copy"},
                     {"op", op},
                     {"bytes", bench.copy_bytes},
                     {"engine", copies.engine},
                     {"reference", copies.reference},
                     {"memwall_gbps", rate},
                     {reference_key + "_gbps", reference},
                     {"ratio", reference > 0 ? rate / reference : 0.0}});
  }
  std::cout << nlohmann::json{{"cases", cases}}.dump(2) << "\n";
}

void print_offload_table(const runtime::NvmeBenchSpec& spec, const runtime::OffloadBench& bench) {
  const runtime::CopyRates& copies = bench.copies;
  std::cout << fmt::format(
      "NVMe engine vs fio (io_uring, O_DIRECT): {} in {} blocks, {} tensors, {}; median of {} "
      "alternating runs each, ratio the median of paired runs\n",
      human_bytes(spec.size), human_bytes(spec.block), human_bytes(spec.tensor), spec.dir,
      spec.repeats);
  std::cout << fmt::format("{:>5}  {:<5}  {:>12}  {:>12}  {:>6}  {}\n", "depth", "op",
                           "engine GB/s", "fio GB/s", "ratio", "runs (engine / fio)");
  for (const auto& row : bench.nvme) {
    std::string runs;
    for (size_t i = 0; i < row.engine_gbps.size(); ++i) {
      runs += fmt::format("{}{:.2f}", i == 0 ? "" : " ", row.engine_gbps[i]);
      if (i < row.fio_gbps.size()) runs += fmt::format("/{:.2f}", row.fio_gbps[i]);
    }
    std::cout << fmt::format("{:>5}  {:<5}  {:>12.3f}  ", row.depth, row.op,
                             runtime::median(row.engine_gbps));
    if (!row.fio_gbps.empty()) {
      std::cout << fmt::format("{:>12.3f}  {:>5.3f}x  {}\n", runtime::median(row.fio_gbps),
                               runtime::median_ratio(row), runs);
    } else {
      std::cout << fmt::format("{:>12}  {:>6}  {}\n", "-", "-", runs);
    }
  }
  std::cout << fmt::format("\nhost<->device copies, {} ({}), against {} of the same bytes\n",
                           human_bytes(bench.copy_bytes), copies.engine, copies.reference);
  if (!copies.warning.empty()) std::cout << "memwall: note: " << copies.warning << "\n";
  std::cout << fmt::format("{:<14}  {:>12}  {:>15}  {:>6}\n", "direction", "engine GB/s",
                           "reference GB/s", "ratio");
  for (const auto& [name, rate, reference] :
       {std::tuple{"host->device", copies.h2d_gbps, copies.reference_h2d_gbps},
        std::tuple{"device->host", copies.d2h_gbps, copies.reference_d2h_gbps}}) {
    std::cout << fmt::format("{:<14}  {:>12.3f}  {:>15.3f}  {:>5.3f}x\n", name, rate, reference,
                             reference > 0 ? rate / reference : 0.0);
  }
}

int run_bench_offload(const BenchOffloadArgs& args) {
  const uint64_t size = parse_bytes(args.size, "--size", 0);
  const uint64_t block = parse_bytes(args.block, "--block", 0);
  const uint64_t tensor = parse_bytes(args.tensor, "--tensor", 0);
  if (tensor > size) fail("--tensor {} is larger than --size {}", args.tensor, args.size);
  if (args.repeats < 1 || args.repeats > 100)
    fail("--repeats: {} is out of range 1..100", args.repeats);
  for (int depth : args.depths) {
    if (depth <= 0 || depth > 4096) fail("--depths: {} is out of range 1..4096", depth);
  }
  std::string dir = args.dir;
  std::optional<PrivateDir> made;  // a directory of ours: gone at the end, or on an interrupt
  if (dir.empty()) dir = made.emplace("memwall-offload").path();
  const std::string fio_file = fmt::format("{}/memwall-fio-{}.bin", dir, getpid());
  const RemoveOnInterrupt fio_cleanup(fio_file, RemoveOnInterrupt::Kind::kFile);
  const runtime::NvmeBenchSpec spec{.dir = dir,
                                    .size = size,
                                    .block = block,
                                    .tensor = tensor,
                                    .depths = args.depths,
                                    .repeats = args.repeats,
                                    .fio = !args.no_fio,
                                    .fio_file = fio_file};
  runtime::OffloadBench bench;
  try {
    bench = runtime::measure_offload(spec, [&](const runtime::NvmeRates& rates, int r) {
      if (!rates.warning.empty() && !args.json && r == 0) {
        std::cerr << "memwall: note: " << rates.warning << "\n";
      }
      if (!rates.note.empty()) std::cerr << "memwall: note: " << rates.note << "\n";
    });
  } catch (const runtime::NvmeError& e) {
    throw Error(e.what());
  }
  made.reset();
  if (args.json) {
    print_offload_json(spec, bench);
  } else {
    print_offload_table(spec, bench);
  }
  return 0;
}

}  // namespace

void add_bench_offload(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "offload", "the NVMe engine's write and read bandwidth against fio's on the same directory");
  auto args = std::make_shared<BenchOffloadArgs>();
  cmd->add_option("--dir", args->dir, "swap directory (default: a new one under $TMPDIR or /tmp)");
  cmd->add_option("--size", args->size, "bytes written and read per run")->capture_default_str();
  cmd->add_option("--block", args->block, "I/O block size (fio --bs)")->capture_default_str();
  cmd->add_option("--tensor", args->tensor, "bytes per engine request")->capture_default_str();
  cmd->add_option("--depths", args->depths, "queue depths (fio --iodepth)")->capture_default_str();
  cmd->add_option("--repeats", args->repeats,
                  "runs of the engine and of fio per depth, alternating (medians reported)")
      ->capture_default_str();
  cmd->add_flag("--no-fio", args->no_fio, "the engine alone");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_offload(*args); }; });
}

}  // namespace memwall::cli
