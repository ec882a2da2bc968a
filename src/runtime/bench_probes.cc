// The probes `memwall bench cpu-adam` and `memwall bench offload` hold the
// runtime's engines against (memwall/runtime/probes.h): memory bandwidth,
// the offload step overlapped with its copy, fio on the NVMe engine's
// directory, and `bench offload` whole.
#include <stdio.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"
#include "memwall/runtime/copy_engine.h"
#include "memwall/runtime/cpu_optimizer.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/offload_step.h"
#include "memwall/runtime/probes.h"
#include "probe_fail.h"

namespace memwall::runtime {

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

OverlapSeconds overlap_seconds(int64_t n, int repeats) {
  const auto size = static_cast<size_t>(n);
  std::vector<float> param(size, 0.5f), grad(size, 0.01f), m(size, 0.0f), v(size, 0.0f);
  std::vector<uint16_t> half(size);
  auto device = alloc::make_host_vmm(size * sizeof(uint16_t) + (uint64_t{64} << 20));
  auto allocator = alloc::make_allocator("stitching", *device, {});
  const alloc::Allocation on_device = allocator->allocate(size * sizeof(uint16_t), 0);
  if (!on_device) probe_fail("bench cpu-adam: the emulated device cannot hold {} bf16 weights", n);
  HostPool pool(uint64_t{64} << 20);
  auto engine = make_emulated_copy_engine();
  const AdamWState state{param, grad, m, v};
  const HalfCopy out{HalfType::bf16, half};
  int64_t step = 1;
  const StepOptions one{.threads = 1};
  const double sequential = best_seconds(repeats, [&] {
    adamw_step({}, step++, state, out, one);
    engine
        ->copy_async(on_device.ptr, half.data(), size * sizeof(uint16_t),
                     CopyDirection::kHostToDevice)
        .wait();
  });
  const double overlapped = best_seconds(repeats, [&] {
    adamw_step_to_device({}, step++, state, HalfType::bf16, on_device.ptr, *engine, pool,
                         size_t{1} << 20, one);
  });
  allocator->free(on_device.ptr);
  return {sequential, overlapped};
}

double median_ratio(const NvmeAgainstFio& row) {
  std::vector<double> ratios;
  for (size_t i = 0; i < row.fio_gbps.size() && i < row.engine_gbps.size(); ++i) {
    if (row.fio_gbps[i] > 0) ratios.push_back(row.engine_gbps[i] / row.fio_gbps[i]);
  }
  return median(ratios);
}

double fio_gbps(const std::string& file, uint64_t size, uint64_t block, int depth, const char* rw) {
  std::string cmd = fmt::format(
      "fio --name=memwall --filename='{}' --size={} --bs={} --iodepth={} --rw={} --direct=1 "
      "--ioengine=io_uring --output-format=json 2>&1",
      file, size, block, depth, rw);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) probe_fail("bench offload: cannot run fio: {}", cmd);
  std::string out;
  char chunk[4096];
  while (size_t n = fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
  int status = pclose(pipe);
  if (status != 0) {
    probe_fail("bench offload: fio exited with status {} ({}): {}", status, cmd,
               out.substr(0, out.find('\n')));
  }
  // fio may print notes before the JSON object.
  size_t brace = out.find('{');
  nlohmann::json j =
      nlohmann::json::parse(brace == std::string::npos ? "" : out.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    probe_fail("bench offload: no JSON from fio ({})", cmd);
  }
  return static_cast<double>(j["jobs"][0][rw]["bw_bytes"].get<uint64_t>()) / 1e9;
}

std::vector<NvmeAgainstFio> nvme_against_fio(
    const NvmeBenchSpec& spec, const std::function<void(const NvmeRates&, int)>& each_run) {
  std::vector<NvmeAgainstFio> rows;
  try {
    for (int depth : spec.depths) {
      NvmeAgainstFio wr{depth, "write", {}, {}}, rd{depth, "read", {}, {}};
      for (int r = 0; r < spec.repeats; ++r) {
        const NvmeRates rates =
            measure_nvme_engine(spec.dir, spec.size, spec.block, spec.tensor, depth);
        each_run(rates, r);
        wr.engine_gbps.push_back(rates.write_gbps);
        rd.engine_gbps.push_back(rates.read_gbps);
        if (spec.fio) {
          if (spec.fio_file.empty()) probe_fail("bench offload: no file for fio");
          // A fresh file per run, as the engine's: writing into
          // fallocated-but-unwritten extents costs more than overwriting.
          std::filesystem::remove(spec.fio_file);
          wr.fio_gbps.push_back(fio_gbps(spec.fio_file, spec.size, spec.block, depth, "write"));
          rd.fio_gbps.push_back(fio_gbps(spec.fio_file, spec.size, spec.block, depth, "read"));
        }
      }
      rows.push_back(wr);
      rows.push_back(rd);
    }
  } catch (...) {
    if (!spec.fio_file.empty()) std::filesystem::remove(spec.fio_file);
    throw;
  }
  if (!spec.fio_file.empty()) std::filesystem::remove(spec.fio_file);
  return rows;
}

OffloadBench measure_offload(const NvmeBenchSpec& spec,
                             const std::function<void(const NvmeRates&, int)>& each_run) {
  OffloadBench out;
  out.nvme = nvme_against_fio(spec, each_run);
  out.copy_bytes = std::min<uint64_t>(spec.size, uint64_t{256} << 20);
  out.copies = measure_copies(out.copy_bytes, 3);
  return out;
}

}  // namespace memwall::runtime
