// Per-rank memory of model states (parameters, gradients, optimizer states)
// under ZeRO data parallelism and CPU offload, itemized the way DeepSpeed's
// memory estimators account for them (docs/swap-zero.md).
//
// DeepSpeed documents these estimators (estimate_zero2_model_states_mem_needs
// in deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero3_... in
// stage3.py; docs/code-docs/source/memory.rst) for mixed-precision Adam:
// 2-byte parameters and gradients on the device, and 16 bytes per parameter
// of fp32 state (master weights, momentum, variance, fp32 gradients) that
// ZeRO partitions and ZeRO-Offload moves to the host. Host figures include
// DeepSpeed's `additional_buffer_factor` and its model-initialization term
// (each process on a node first builds the whole model in fp32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memwall {

struct ZeroSetup {
  int stage = 0;  // 0 (plain data parallelism) to 3
  int gpus_per_node = 1;
  int nodes = 1;
  bool offload_optimizer = false;  // ZeRO-Offload: fp32 states and the Adam step on the CPU
  bool offload_params = false;     // stage 3 only: 16-bit parameters on the CPU too
  bool zero_init = true;           // stage 3: the model is built partitioned (deepspeed.zero.Init)
  double buffer_factor = 1.5;      // DeepSpeed's additional_buffer_factor (host memory)

  int total_gpus() const { return gpus_per_node * nodes; }
};

// One line of the breakdown: what it is and its bytes per GPU or per node.
struct StateItem {
  std::string what;
  uint64_t bytes = 0;
};

struct ModelStateMemory {
  uint64_t gpu_bytes = 0;             // per GPU
  uint64_t host_bytes = 0;            // per node (all its processes), buffer factor included
  uint64_t largest_layer_bytes = 0;   // stage 3: gathering the largest layer (16-bit param + grad)
  std::vector<StateItem> gpu_items;   // sums to gpu_bytes
  std::vector<StateItem> host_items;  // before the buffer factor; see host_bytes
};

// Throws Error for a setup that does not exist (stage outside 0..3, fewer
// than one GPU, parameter offload below stage 3, a non-positive buffer
// factor) or sizes that overflow 64 bits.
ModelStateMemory zero_model_state_memory(uint64_t params, uint64_t largest_layer_params,
                                         const ZeroSetup& setup);

}  // namespace memwall
