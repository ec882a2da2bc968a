// `memwall bench offload`: the NVMe engine's sequential write and read
// bandwidth against fio's on the same directory, the same block size and
// the same queue depth (fio --direct=1 --ioengine=io_uring --bs=... --iodepth=D),
// so that the engine's overhead (bounce copies, CRC32C, one ring) shows as
// a ratio; the target is >= 0.95x fio.
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "format.h"
#include "memwall/graph/error.h"
#include "memwall/runtime/nvme_engine.h"
#include "options.h"
#include "runtime_probes.h"

namespace memwall::cli {
namespace {

struct BenchOffloadArgs {
  std::string dir;
  std::string size = "1GiB";
  std::string block = "1MiB";
  std::string tensor = "64MiB";
  std::vector<int> depths = {8, 16, 32};
  bool no_fio = false;
  bool json = false;
};

struct OffloadRow {
  int depth = 0;
  std::string op;  // "write" or "read"
  double engine_gbps = 0;
  double fio_gbps = 0;  // 0: not measured
};

// fio's bandwidth in GB/s for one job, or fails naming the command.
double offload_fio(const std::string& file, uint64_t size, uint64_t block, int depth,
                   const char* rw) {
  std::string cmd = fmt::format(
      "fio --name=memwall --filename='{}' --size={} --bs={} --iodepth={} --rw={} --direct=1 "
      "--ioengine=io_uring --output-format=json 2>&1",
      file, size, block, depth, rw);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) fail("bench offload: cannot run fio: {}", cmd);
  std::string out;
  char chunk[4096];
  while (size_t n = fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  int status = pclose(pipe);
  if (status != 0) {
    fail("bench offload: fio exited with status {} ({}): {}", status, cmd,
         out.substr(0, out.find('\n')));
  }
  // fio may print notes before the JSON object.
  size_t brace = out.find('{');
  nlohmann::json j =
      nlohmann::json::parse(brace == std::string::npos ? "" : out.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    fail("bench offload: no JSON from fio ({})", cmd);
  }
  return static_cast<double>(j["jobs"][0][rw]["bw_bytes"].get<uint64_t>()) / 1e9;
}

int run_bench_offload(const BenchOffloadArgs& args) {
  const uint64_t size = parse_bytes(args.size, "--size", 0);
  const uint64_t block = parse_bytes(args.block, "--block", 0);
  const uint64_t tensor = parse_bytes(args.tensor, "--tensor", 0);
  if (tensor > size) fail("--tensor {} is larger than --size {}", args.tensor, args.size);
  std::string dir = args.dir;
  std::string made;  // a temporary directory of ours, removed at the end
  if (dir.empty()) dir = made = make_temp_dir("memwall-offload");
  std::vector<OffloadRow> rows;
  const std::string fio_file = fmt::format("{}/memwall-fio-{}.bin", dir, getpid());
  try {
    for (int depth : args.depths) {
      if (depth <= 0 || depth > 4096) fail("--depths: {} is out of range 1..4096", depth);
      const NvmeRates rates = measure_nvme_engine(dir, size, block, tensor, depth);
      if (!rates.warning.empty() && !args.json) {
        std::cerr << "memwall: note: " << rates.warning << "\n";
      }
      OffloadRow wr{depth, "write", rates.write_gbps, 0}, rd{depth, "read", rates.read_gbps, 0};
      if (!args.no_fio) {
        // A fresh file per depth, as the engine's: writing into
        // fallocated-but-unwritten extents costs more than overwriting.
        std::filesystem::remove(fio_file);
        wr.fio_gbps = offload_fio(fio_file, size, block, depth, "write");
        rd.fio_gbps = offload_fio(fio_file, size, block, depth, "read");
      }
      rows.push_back(wr);
      rows.push_back(rd);
    }
  } catch (const runtime::NvmeError& e) {
    std::filesystem::remove(fio_file);
    if (!made.empty()) std::filesystem::remove(made);
    throw Error(e.what());
  } catch (...) {
    std::filesystem::remove(fio_file);
    if (!made.empty()) std::filesystem::remove(made);
    throw;
  }
  std::filesystem::remove(fio_file);
  if (!made.empty()) std::filesystem::remove(made);
  // Host<->device copies through the copy engine against a plain memcpy of
  // the same bytes between the same buffers (the emulated device's limit).
  const uint64_t copy_bytes = std::min<uint64_t>(size, uint64_t{256} << 20);
  const CopyRates copies = measure_copies(copy_bytes, 3);

  if (args.json) {
    nlohmann::json out = {{"dir", dir},
                          {"size", size},
                          {"block", block},
                          {"tensor", tensor},
                          {"rows", nlohmann::json::array()}};
    for (const auto& row : rows) {
      nlohmann::json j = {{"depth", row.depth}, {"op", row.op}, {"engine_gbps", row.engine_gbps}};
      if (row.fio_gbps > 0) {
        j["fio_gbps"] = row.fio_gbps;
        j["ratio"] = row.engine_gbps / row.fio_gbps;
      }
      out["rows"].push_back(j);
    }
    out["copies"] = {{"engine", copies.engine},
                     {"h2d_gbps", copies.h2d_gbps},
                     {"d2h_gbps", copies.d2h_gbps},
                     {"memcpy_gbps", copies.memcpy_gbps}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "NVMe engine vs fio (io_uring, O_DIRECT): {} in {} blocks, {} tensors, {}\n",
      human_bytes(size), human_bytes(block), human_bytes(tensor), dir);
  std::cout << fmt::format("{:>5}  {:<5}  {:>12}  {:>12}  {:>6}\n", "depth", "op", "engine GB/s",
                           "fio GB/s", "ratio");
  for (const auto& row : rows) {
    std::cout << fmt::format("{:>5}  {:<5}  {:>12.3f}  ", row.depth, row.op, row.engine_gbps);
    if (row.fio_gbps > 0) {
      std::cout << fmt::format("{:>12.3f}  {:>5.3f}x\n", row.fio_gbps,
                               row.engine_gbps / row.fio_gbps);
    } else {
      std::cout << fmt::format("{:>12}  {:>6}\n", "-", "-");
    }
  }
  std::cout << fmt::format("\nhost<->device copies, {} ({}), against memcpy of the same bytes\n",
                           human_bytes(copy_bytes), copies.engine);
  std::cout << fmt::format("{:<14}  {:>12}  {:>12}  {:>6}\n", "direction", "engine GB/s",
                           "memcpy GB/s", "ratio");
  for (const auto& [name, rate] :
       {std::pair{"host->device", copies.h2d_gbps}, std::pair{"device->host", copies.d2h_gbps}}) {
    std::cout << fmt::format("{:<14}  {:>12.3f}  {:>12.3f}  {:>5.3f}x\n", name, rate,
                             copies.memcpy_gbps,
                             copies.memcpy_gbps > 0 ? rate / copies.memcpy_gbps : 0.0);
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
  cmd->add_flag("--no-fio", args->no_fio, "the engine alone");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_offload(*args); }; });
}

}  // namespace memwall::cli
