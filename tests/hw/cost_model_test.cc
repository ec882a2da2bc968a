// Cost model arithmetic on hand-built ops.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

// A round-numbered device so every expected value is easy to check by hand.
Hardware toy() {
  Hardware hw;
  hw.name = "toy";
  hw.device_memory_bytes = 1 << 20;
  hw.peak_flops_fp32 = 10e12;
  hw.peak_flops_tf32 = 0;
  hw.peak_flops_fp16 = 100e12;
  hw.peak_flops_bf16 = 0;  // like V100: no bf16 tensor cores
  hw.hbm_bandwidth = 1e12;
  hw.h2d_bandwidth = 20e9;
  hw.d2h_bandwidth = 10e9;
  hw.pcie_latency = 10e-6;
  hw.compute_efficiency = 0.5;
  hw.memory_efficiency = 0.8;
  hw.launch_latency = 5e-6;
  return hw;
}

Buffer buf(BufferId id, DType dtype) {
  Buffer b;
  b.id = id;
  b.bytes = 1024;
  b.dtype = dtype;
  return b;
}

// Buffers: 0 f16, 1 bf16, 2 f32, 3 i64, 4 bool, 5 f64.
Graph graph() {
  Graph g;
  g.buffers = {buf(0, DType::kF16), buf(1, DType::kBF16), buf(2, DType::kF32),
               buf(3, DType::kI64), buf(4, DType::kBool), buf(5, DType::kF64)};
  return g;
}

Op op(std::vector<BufferId> in, std::vector<BufferId> out, double flops, double bytes) {
  Op o;
  o.name = "op";
  o.in = std::move(in);
  o.out = std::move(out);
  o.flops = flops;
  o.bytes = bytes;
  return o;
}

TEST(PeakFlops, PerDtype) {
  Hardware hw = toy();
  EXPECT_EQ(peak_flops(hw, DType::kF32), 10e12);  // plain fp32, never tf32
  EXPECT_EQ(peak_flops(hw, DType::kF16), 100e12);
  // No bf16 arithmetic: an error, not the fp32 rate (which made V100
  // estimates of bf16 models 5x too slow instead of impossible).
  EXPECT_FALSE(computes_in(hw, DType::kBF16));
  std::string message;
  try {
    peak_flops(hw, DType::kBF16);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_EQ(message,
            "toy cannot compute in bf16 (its profile gives 0 bf16 FLOP/s; it computes in fp32, "
            "fp16)");
  EXPECT_EQ(peak_flops(hw, DType::kF64), 10e12);
  EXPECT_EQ(peak_flops(hw, DType::kI32), 10e12);
  EXPECT_EQ(peak_flops(hw, DType::kBool), 10e12);
  hw.peak_flops_bf16 = 80e12;
  EXPECT_EQ(peak_flops(hw, DType::kBF16), 80e12);
  hw.peak_flops_tf32 = 50e12;
  EXPECT_EQ(peak_flops(hw, DType::kF32), 10e12);
  // A100-80G: 312 TFLOPS BF16 dense (NVIDIA A100 datasheet, 2021).
  EXPECT_EQ(peak_flops(find_gpu("a100-80g"), DType::kBF16), 312e12);
  // V100 and T4 have fp16 tensor cores but no bf16 (NVIDIA V100 and T4
  // datasheets list FP16/mixed precision only).
  for (const char* name : {"v100-16g", "v100-32g", "t4"}) {
    EXPECT_FALSE(computes_in(find_gpu(name), DType::kBF16)) << name;
    EXPECT_TRUE(computes_in(find_gpu(name), DType::kF16)) << name;
    EXPECT_EQ(float_dtypes_of(find_gpu(name)), "fp32, fp16") << name;
  }
  EXPECT_EQ(float_dtypes_of(find_gpu("a100-80g")), "fp32, fp16, bf16");
}

// Note [Fitted efficiencies]: a [m, k] x [k, n] fp16 matmul of m = n = k =
// 3000 does 2 * 3000^3 = 5.4e10 FLOPs on 2 * 3 * 3000^2 = 5.4e7 bytes: its
// effective dimension 1 / (1/m + 1/n + 1/k) is 1000, and with a half
// dimension of 1000 it runs at half the matmul efficiency.
TEST(OpComputeEfficiency, MatmulShapeAttentionAndTheRest) {
  Hardware hw = toy();
  Graph g = graph();
  Op mm = op({0}, {0}, 5.4e10, 5.4e7);
  mm.type = "mm";
  EXPECT_EQ(op_compute_efficiency(hw, g, mm), 0.5);  // no fit: compute_efficiency
  hw.matmul_efficiency = 0.8;
  EXPECT_DOUBLE_EQ(op_compute_efficiency(hw, g, mm), 0.8);  // no half dimension: no size effect
  hw.matmul_half_dim = 1000;
  EXPECT_DOUBLE_EQ(op_compute_efficiency(hw, g, mm), 0.4);
  // The same shape in fp32: 4-byte elements, the same effective dimension.
  Op mm32 = op({2}, {2}, 5.4e10, 1.08e8);
  mm32.type = "addmm";
  EXPECT_DOUBLE_EQ(op_compute_efficiency(hw, g, mm32), 0.4);
  // 5.4e10 FLOPs at 100e12 * 0.4 = 1.35 ms, plus the launch.
  EXPECT_DOUBLE_EQ(op_time(hw, g, mm), 1.35e-3 + 5e-6);
  Op attention = op({0}, {0}, 1e12, 1e6);
  attention.type = "_scaled_dot_product_flash_attention_backward";
  EXPECT_EQ(op_compute_efficiency(hw, g, attention), 0.5);
  hw.attention_efficiency = 0.6;
  EXPECT_EQ(op_compute_efficiency(hw, g, attention), 0.6);
  Op other = op({0}, {0}, 1e12, 1e6);
  other.type = "gelu";
  EXPECT_EQ(op_compute_efficiency(hw, g, other), 0.5);
  EXPECT_TRUE(is_matmul_type("matmul"));
  EXPECT_TRUE(is_matmul_type("baddbmm"));
  EXPECT_FALSE(is_matmul_type("conv2d"));
  EXPECT_TRUE(is_attention_type("attention_backward"));
}

TEST(OpComputeDtype, FirstFloatingOutputThenInputThenUpdate) {
  Graph g = graph();
  EXPECT_EQ(op_compute_dtype(g, op({0}, {3, 1}, 0, 0)), DType::kBF16);  // skips i64 output
  EXPECT_EQ(op_compute_dtype(g, op({4, 0}, {3}, 0, 0)), DType::kF16);   // integer output: input
  Op update = op({3}, {}, 0, 0);
  update.updates = {5};
  EXPECT_EQ(op_compute_dtype(g, update), DType::kF64);  // inputs before updates
  update.in = {2};
  EXPECT_EQ(op_compute_dtype(g, update), DType::kF32);
  EXPECT_EQ(op_compute_dtype(g, op({3, 4}, {3}, 0, 0)), DType::kF32);  // nothing floating
  EXPECT_EQ(op_compute_dtype(g, op({}, {}, 0, 0)), DType::kF32);
}

TEST(OpComputeDtype, UnknownBufferIsAnError) {
  Graph g = graph();
  EXPECT_THROW(op_compute_dtype(g, op({}, {6}, 0, 0)), Error);
  EXPECT_THROW(op_compute_dtype(g, op({-1}, {}, 0, 0)), Error);
}

TEST(OpTime, ComputeBound) {
  // 1e12 fp16 FLOPs at 100e12 * 0.5 = 20 ms; 1e9 bytes at 0.8e12 B/s = 1.25 ms.
  Graph g = graph();
  EXPECT_DOUBLE_EQ(op_time(toy(), g, op({0}, {0}, 1e12, 1e9)), 20e-3 + 5e-6);
  // The same op in bf16 cannot run on this GPU (no bf16 arithmetic).
  EXPECT_THROW(op_time(toy(), g, op({1}, {1}, 1e12, 1e9)), Error);
}

TEST(OpTime, FirstOpNotComputableIsFound) {
  Graph g = graph();
  g.ops = {op({0}, {0}, 1e12, 1e9), op({1}, {1}, 0, 1e9), op({1}, {1}, 1e9, 1e9)};
  for (size_t i = 0; i < g.ops.size(); ++i) g.ops[i].id = static_cast<OpId>(i);
  // Op 1 moves bf16 bytes but computes nothing; op 2 computes in bf16.
  EXPECT_EQ(first_op_not_computable(toy(), g), 2);
  g.ops[2].time = 1e-3;  // a measured op needs no rate
  EXPECT_EQ(first_op_not_computable(toy(), g), kNoOp);
}

TEST(OpTime, MemoryBound) {
  // 1e9 FLOPs in fp32: 0.2 ms; 8e9 bytes at 0.8e12 B/s: 10 ms.
  Graph g = graph();
  EXPECT_DOUBLE_EQ(op_time(toy(), g, op({2}, {2}, 1e9, 8e9)), 10e-3 + 5e-6);
}

TEST(OpTime, EmptyOpCostsOneLaunch) {
  Graph g = graph();
  EXPECT_DOUBLE_EQ(op_time(toy(), g, op({}, {}, 0, 0)), 5e-6);
}

TEST(OpTime, MeasuredTimeOverrides) {
  Graph g = graph();
  Op o = op({0}, {0}, 1e15, 1e12);
  o.time = 1.5e-3;
  EXPECT_EQ(op_time(toy(), g, o), 1.5e-3);  // no launch latency added
  o.time = 0.0;
  EXPECT_EQ(op_time(toy(), g, o), 0.0);
}

TEST(IterationTime, SumsOps) {
  Graph g = graph();
  g.ops = {op({0}, {0}, 1e12, 1e9), op({2}, {2}, 1e9, 8e9)};
  g.ops[1].time = 1e-3;
  EXPECT_DOUBLE_EQ(iteration_time(toy(), g), 20e-3 + 5e-6 + 1e-3);
  EXPECT_EQ(iteration_time(toy(), Graph{}), 0.0);
}

TEST(TransferTime, LatencyPlusBytesOverBandwidth) {
  Hardware hw = toy();
  EXPECT_DOUBLE_EQ(h2d_time(hw, 20'000'000'000), 10e-6 + 1.0);
  EXPECT_DOUBLE_EQ(d2h_time(hw, 20'000'000'000), 10e-6 + 2.0);
  EXPECT_DOUBLE_EQ(h2d_time(hw, 0), 10e-6);
  // A100-80G: 1 GiB over PCIe gen4 at 25 GB/s.
  EXPECT_DOUBLE_EQ(h2d_time(find_gpu("a100-80g"), 1 << 30), 10e-6 + 1073741824 / 25e9);
}

}  // namespace
}  // namespace memwall
