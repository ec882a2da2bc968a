// Golden tests: per-rank model-state memory equals DeepSpeed's estimators on
// the configurations DeepSpeed documents.
//
// Source: DeepSpeed, docs/code-docs/source/memory.rst ("Memory
// Requirements"), the "cold" examples for a 2851M-parameter model (t5-3b)
// with a 32M-parameter largest layer on 1 node with 8 GPUs:
//   estimate_zero2_model_states_mem_needs_all_cold(total_params=2851e6,
//       num_gpus_per_node=8, num_nodes=1)
//   estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6,
//       largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1)
// DeepSpeed prints GB as bytes / 2^30 with two decimals; so do these tests.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/swap/model_states.h"

namespace memwall {
namespace {

constexpr uint64_t kParams = 2851000000;  // 2851e6
constexpr uint64_t kLargest = 32000000;   // 32e6

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1 << 30));
}

struct Row {
  int stage;
  bool offload_params;
  bool offload_optimizer;
  bool zero_init;
  const char* per_cpu;
  const char* per_gpu;
};

TEST(ZeroModelStates, EqualsDeepSpeedsDocumentedEstimates) {
  const Row rows[] = {
      // ZeRO-2: offload_optimizer=cpu, then none.
      {2, false, true, true, "127.45", "5.31"},
      {2, false, false, true, "127.45", "15.93"},
      // ZeRO-3: (offload_param, offload_optimizer, zero_init).
      {3, true, true, true, "71.69", "0.12"},
      {3, true, true, false, "127.45", "0.12"},
      {3, false, true, true, "63.72", "0.78"},
      {3, false, true, false, "127.45", "0.78"},
      {3, false, false, true, "1.43", "6.09"},
      {3, false, false, false, "127.45", "6.09"},
  };
  for (const Row& row : rows) {
    ZeroSetup setup;
    setup.stage = row.stage;
    setup.gpus_per_node = 8;
    setup.nodes = 1;
    setup.offload_params = row.offload_params;
    setup.offload_optimizer = row.offload_optimizer;
    setup.zero_init = row.zero_init;
    const ModelStateMemory m = zero_model_state_memory(kParams, kLargest, setup);
    SCOPED_TRACE(fmt::format("stage {} offload_param {} offload_optimizer {} zero_init {}",
                             row.stage, row.offload_params, row.offload_optimizer, row.zero_init));
    EXPECT_EQ(gib(m.host_bytes), row.per_cpu);
    EXPECT_EQ(gib(m.gpu_bytes), row.per_gpu);
    uint64_t sum = 0;
    for (const StateItem& item : m.gpu_items) sum += item.bytes;
    EXPECT_EQ(sum, m.gpu_bytes);
  }
}

// The formulas behind the table, in exact bytes (memory.rst, "GPU RAM"):
// ZeRO-2 without offload 4P + 16P/N; ZeRO-3 4L + 18P/N, 4L + 2P/N, 4L.
TEST(ZeroModelStates, ExactBytesOfTheGpuFormulas) {
  ZeroSetup s{.stage = 2, .gpus_per_node = 8};
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).gpu_bytes,
            4 * kParams + 16 * kParams / 8);
  s.stage = 1;  // DeepSpeed estimates stages 1 and 2 alike
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).gpu_bytes,
            4 * kParams + 16 * kParams / 8);
  s.stage = 3;
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).gpu_bytes,
            4 * kLargest + 18 * kParams / 8);
  s.offload_optimizer = true;
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).gpu_bytes,
            4 * kLargest + 2 * kParams / 8);
  s.offload_params = true;
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).gpu_bytes, 4 * kLargest);
  // Stage 0: the ZeRO paper's 16 bytes per parameter (Rajbhandari et al.
  // 2020, sec. 3.1: 7.5B parameters need 120 GB).
  EXPECT_EQ(zero_model_state_memory(7500000000, 0, {.stage = 0}).gpu_bytes, 120000000000u);
}

// Two nodes: stage 3 host memory is per node, so it halves; the ZeRO-2
// estimator does not divide by nodes (DeepSpeed's formula, kept as is).
TEST(ZeroModelStates, HostMemoryIsPerNode) {
  ZeroSetup s{.stage = 3,
              .gpus_per_node = 8,
              .nodes = 2,
              .offload_optimizer = true,
              .offload_params = true};
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, s).host_bytes,
            static_cast<uint64_t>(kParams * 18 * 0.5 * 1.5));
  ZeroSetup two{.stage = 2, .gpus_per_node = 8, .nodes = 2, .offload_optimizer = true};
  EXPECT_EQ(zero_model_state_memory(kParams, kLargest, two).host_bytes,
            static_cast<uint64_t>(kParams * 32 * 1.5));
}

TEST(ZeroModelStates, RejectsSetupsThatDoNotExist) {
  const auto message = [](ZeroSetup s, uint64_t params = kParams) {
    try {
      zero_model_state_memory(params, kLargest, s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.stage = 4}), "ZeRO stage 4 does not exist (0, 1, 2 or 3)");
  EXPECT_EQ(message({.stage = 2, .offload_params = true}),
            "parameter offload needs ZeRO stage 3 (got stage 2)");
  EXPECT_EQ(message({.stage = 1, .gpus_per_node = 0}),
            "ZeRO needs at least one GPU on at least one node (got 1 x 0)");
  EXPECT_EQ(message({.stage = 1, .buffer_factor = 0}),
            "the host buffer factor must be positive (got 0)");
  EXPECT_EQ(message({.stage = 1}, uint64_t{1} << 62),
            "4611686018427387904 parameters are too many to account for");
}

}  // namespace
}  // namespace memwall
