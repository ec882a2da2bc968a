// The host memory DeepSpeed holds beside the model states when it offloads
// them (ZeRO-Offload, ZeRO-Infinity): CPU-side fp32 gradients and pinned
// staging buffers, sized from DeepSpeed's own configuration fields (Note
// [Host buffers of the published systems] in src/swap/deepspeed_buffers.cc).
// The single techniques that reproduce those systems reserve them in their
// plans (Plan::host_reserved), so that their host limits are the ones the
// papers met.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/plan/plan.h"
#include "memwall/swap/offload.h"

namespace memwall {

// DeepSpeed's fields (zero_optimization and its offload_param /
// offload_optimizer blocks), with DeepSpeed's defaults
// (deepspeed/runtime/zero/config.py and offload_config.py, 0.19.8).
struct DeepSpeedOffloadConfig {
  uint64_t sub_group_size = 1'000'000'000;  // elements per optimizer sub-group
  uint64_t param_buffer_count = 5;           // offload_param.buffer_count
  uint64_t param_buffer_size = 100'000'000;  // offload_param.buffer_size, elements
  uint64_t param_max_in_cpu = 1'000'000'000;  // offload_param.max_in_cpu, elements
  uint64_t optimizer_buffer_count = 4;        // offload_optimizer.buffer_count
};

// The host buffers one rank of DeepSpeed holds for og's offloaded states
// under `options` (stage > 0: og's states are already the rank's
// partitions), named for the plan's breakdown; none when nothing is
// offloaded. Throws Error on size overflow.
std::vector<HostReserve> deepspeed_host_buffers(const OffloadGraph& og,
                                                const OffloadOptions& options, int stage,
                                                const DeepSpeedOffloadConfig& config = {});

}  // namespace memwall
