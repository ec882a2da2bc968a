#include "memwall/swap/deepspeed_buffers.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "memwall/base/error.h"

namespace memwall {

// Note [Host buffers of the published systems]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A plan counts on the host what its steps put there: the offloaded states,
// the 16-bit gradients on their way to the CPU step, the bounce buffers of
// NVMe copies. DeepSpeed holds more, for the whole run, and those bytes set
// the model sizes its papers report: without them memwall fitted a 101B GPT
// on a DGX-2's 1.5 TB host with the states on the CPU, where ZeRO-Infinity
// (Rajbhandari et al. 2021) reports 70B as the CPU-only limit. What
// DeepSpeed 0.19.8 allocates on the host, per rank (the version memwall's
// environment installs; `scripts/install-deps.sh --deepspeed`):
// - optimizer on the CPU: an fp32 gradient for every element the CPU steps,
//   since its CPU Adam reads fp32 gradients (stage 1/2:
//   single_partition_of_fp32_groups[i].grad in stage_1_and_2.py; stage 3:
//   fp32_partitioned_groups_flat[i].grad in stage3.py, both pinned). Stage
//   1/2 also pins temp_grad_buffer_for_cpu_offload, one 16-bit buffer of the
//   largest parameter. Stage 3's 16-bit grad_partitions_flat_buffer is the
//   16-bit gradient copies the plan already counts.
// - optimizer on NVMe: buffer_count pinned fp32 swap buffers, each of the
//   largest sub-group (at most sub_group_size elements)
//   (PartitionedOptimizerSwapper's SwapBufferManager, optimizer_utils.py).
//   The fp32 gradients go to NVMe with the states; the plan sends its
//   16-bit gradients there too (OffloadOptions::as_deepspeed).
// - parameters on NVMe: buffer_count buffers of buffer_size 16-bit
//   elements (AsyncPartitionedParameterSwapper, partitioned_param_swapper.py)
//   and the first max_in_cpu elements kept in host memory
//   (param_groups_fp16_flat_cpu_memory in stage3.py).
// The aio handle reads and writes those pinned buffers in place (O_DIRECT);
// its block_size and queue_depth shape the requests, not the memory. The
// reserves are per rank; a node's are its ranks' together, as the plan
// reports host memory. The single techniques zero-offload and zero-infinity
// reserve them (Plan::host_reserved, counted by the simulator and held by
// the executor); memwall's own plans do not, since its runtime steps the
// 16-bit gradients it moved and stages NVMe through its bounce buffers.

namespace {

uint64_t elements(const Graph& graph, BufferId b) {
  const Buffer& buf = graph.buffers[b];
  return buf.bytes / std::max<uint64_t>(dtype_size(buf.dtype), 1);
}

}  // namespace

std::vector<HostReserve> deepspeed_host_buffers(const OffloadGraph& og,
                                                const OffloadOptions& options, int stage,
                                                const DeepSpeedOffloadConfig& config) {
  std::vector<HostReserve> out;
  if (!options.any() || options.paged) return out;
  uint64_t on_host = 0, on_nvme = 0;  // optimizer elements the CPU steps
  uint64_t largest_param = 0, params = 0;
  uint32_t param_bytes = 2;  // the parameters' element size
  for (size_t k = 0; k < og.states.size(); ++k) {
    const OffloadedState& s = og.states[k];
    if (s.on_device || s.states.empty()) continue;
    // The states' element count (their largest: Adam's step count is one).
    uint64_t n = 0;
    for (const BufferId b : s.states) n = std::max(n, elements(og.graph, b));
    uint64_t& tier = options.optimizer_tier(k) == Tier::kNvme ? on_nvme : on_host;
    tier = checked_add(tier, n, "optimizer elements");
    const uint64_t p = elements(og.graph, s.param);
    largest_param = std::max(largest_param, p);
    params = checked_add(params, p, "parameter elements");
    param_bytes = static_cast<uint32_t>(dtype_size(og.graph.buffers[s.param].dtype));
  }
  const auto bytes = [](uint64_t n, uint64_t size, const char* what) {
    return checked_mul(n, size, what);
  };
  if (on_host > 0) {
    out.push_back({"DeepSpeed's fp32 gradients for CPU Adam", bytes(on_host, 4, "host bytes")});
    if (stage < 3) {
      out.push_back({"DeepSpeed's pinned gradient staging (largest parameter, 16-bit)",
                     bytes(largest_param, param_bytes, "host bytes")});
    }
  }
  if (on_nvme > 0) {
    const uint64_t sub_group = std::min(on_nvme, config.sub_group_size);
    out.push_back(
        {fmt::format("DeepSpeed's pinned optimizer swap buffers ({} x {} fp32 elements)",
                     config.optimizer_buffer_count, sub_group),
         bytes(bytes(config.optimizer_buffer_count, sub_group, "host bytes"), 4, "host bytes")});
  }
  if (options.params == Tier::kNvme && params > 0) {
    out.push_back(
        {fmt::format("DeepSpeed's pinned parameter swap buffers ({} x {} elements)",
                     config.param_buffer_count, config.param_buffer_size),
         bytes(bytes(config.param_buffer_count, config.param_buffer_size, "host bytes"),
               param_bytes, "host bytes")});
    out.push_back({fmt::format("DeepSpeed's parameters kept in host memory (max_in_cpu {})",
                               config.param_max_in_cpu),
                   bytes(std::min(params, config.param_max_in_cpu), param_bytes, "host bytes")});
  }
  return out;
}

}  // namespace memwall
