// Issue 20: the estimate of a plain PyTorch step holds to 1% and never errs
// low by more than 0.5%. Two layers:
// - the CPU kernels' scratch (python/memwall/tracer/cpu_scratch.py) per op, against
//   the scratch PyTorch's profiler recorded for the same ops (golden
//   values below: torch 2.14.1, one thread, an AVX-512 Xeon; how they were measured:
//   docs/cost-model.md, "Kernel scratch");
// - whole steps: trace_and_measure runs the real step on the CPU under
//   PyTorch's allocator records beside the trace, as `memwall bench
//   fidelity` does.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "graph_lookup.h"
#include "memwall/graph/graph.h"
#include "test_util.h"
#include "torch_env.h"

namespace memwall {
namespace {

using importers::TorchTraceRequest;

// What python/memwall/tracer/cpu_scratch.py reads to choose oneDNN's channel block.
bool cpu_has_avx512f() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string text((std::istreambuf_iterator<char>(cpuinfo)),
                         std::istreambuf_iterator<char>());
  return text.find("avx512f") != std::string::npos;
}

// A trace whose fp32 kernels take cpu_scratch.py's rules, not a measurement
// (Note [Measured fp32 scratch] in python/memwall/tracer/cpu_scratch_measured.py).
Graph trace_with_rules(const TorchTraceRequest& request) {
  ::setenv("MEMWALL_SCRATCH_RULES", "1", 1);
  try {
    Graph g = importers::trace_torch(request);
    ::unsetenv("MEMWALL_SCRATCH_RULES");
    return g;
  } catch (...) {
    ::unsetenv("MEMWALL_SCRATCH_RULES");
    throw;
  }
}

std::map<std::string, uint64_t> workspaces(const Graph& g) {
  std::map<std::string, uint64_t> out;
  for (const Op& op : g.ops) out[op.name] = op.workspace;
  return out;
}

// Scratch of resnet18 b8's kernels measured by the profiler: for each
// top-level aten op, its highest running total minus the total at its end
// (inputs and outputs excluded); `memwall bench fidelity --cases resnet18:8
// --ops` measures them again. One rule per row of docs/cost-model.md.
TEST(Fidelity, CpuKernelScratchOfResnet18MatchesTheProfiler) {
  MEMWALL_SKIP_UNDER_SANITIZERS();
  MEMWALL_REQUIRE_TORCH();
  const Graph cpu = importers::trace_torch(
      {.torchvision = "resnet18", .batch = 8, .kernels = "cpu", .threads = 1});
  const auto ws = workspaces(cpu);
  const std::map<std::string, uint64_t> golden = {
      // Forward, oneDNN: max(x' + w' + rtus, y'). An RGB input stays plain.
      {"conv1.convolution", 25'690'112},           // y' of [8,64,112,112]
      {"layer1.0.conv1.convolution", 6'569'984},   // x' + w'
      {"layer2.0.conv1.convolution", 6'717'440},   // x' + w', stride 2
      {"layer4.0.conv2.convolution", 10'240'000},  // x' + w' (w' 9.4 MB)
      // Backward, oneDNN: max(data pass - gi - gw, g' + x', w').
      {"layer1.0.conv1.convolution_backward", 12'845'056},  // g' + x'
      {"layer2.0.conv1.convolution_backward", 12'550'144},  // strided data pass: 2x - w
      {"layer2.0.downsample.0.convolution_backward", 12'812'288},
      {"layer4.0.conv2.convolution_backward", 9'437'184},  // w'
      {"layer4.0.conv1.convolution_backward", 4'718'592},  // w'
      {"conv1.convolution_backward", 25'690'112},          // g' (no input gradient)
      // Batch norm: two per-channel fp32 sums forward; an input-sized buffer backward.
      {"layer4.0.bn1.native_batch_norm", 4'096},
      {"bn1.native_batch_norm_backward", 25'690'112},
      {"layer4.0.bn1.native_batch_norm_backward", 802'816},
  };
  for (const auto& [name, bytes] : golden) {
    ASSERT_TRUE(ws.contains(name)) << name;
    EXPECT_EQ(ws.at(name), bytes) << name;
  }
  // The one rule that is short: oneDNN's "reduce to unit stride" buffer of a
  // 1x1 strided convolution measured 128 B more than one image's strided
  // input (6,656,000 B by the rule); the trace measures it (Note [Measured
  // fp32 scratch]).
  EXPECT_EQ(ws.at("layer2.0.downsample.0.convolution"), 6'656'128u);
  // Non-convolution ops carry no scratch; CUDA's kernels have no CPU rules.
  EXPECT_EQ(ws.at("fc.addmm"), 0u);
  const Graph cuda = importers::trace_torch({.torchvision = "resnet18", .batch = 8});
  for (const Op& op : cuda.ops) EXPECT_EQ(op.workspace, 0u) << op.name;
}

// The U-Net of tests/exec/models.py (8-32 channels: outputs that do not
// fill a 16-channel block, 1x1 and transposed convolutions, a logits loss).
// Each rule's workspace and span (Note [Workspace span]) beside what
// `memwall run` measured on the emulated device for the same op (torch
// 2.14.1; docs/cost-model.md, "Kernel scratch", says how): the rules leave
// out reorders of biases and small weights, under 64 KiB each (Note
// [Scratch in the workspace]). oneDNN blocks channels by 16 on CPUs with
// AVX-512 and by 8 on the others (python/memwall/tracer/cpu_scratch.py), so each has
// its own rows.
TEST(Fidelity, CpuKernelScratchAndSpansOfAUNet) {
  MEMWALL_REQUIRE_TORCH();
  const TorchTraceRequest request = {
      .script = std::string(MEMWALL_SOURCE_DIR) + "/tests/exec/models.py:unet",
      .kernels = "cpu",
      .threads = 1};
  const Graph g = trace_with_rules(request);
  struct Golden {
    const char* op;
    uint64_t workspace, span;  // the rule's (measured in the comment: workspace / span)
  };
  // Measured at 2 threads on a Xeon with AVX-512.
  const std::vector<Golden> avx512 = {
      // x' + w' + y' - y: y' and w' pad 8 channels to 16 (measured
      // 14,165,184 / 18,883,776: a bias reordered, 192 B).
      {"dec1.conv1.convolution", 14'164'992, 18'883'584},
      // A 1x1 kernel pads 8 input channels too (18,285,760 / 18,875,584).
      {"head.convolution", 18'285'568, 18'875'392},
      // Transposed: 2y with y, span the same (4,718,592 / 4,718,592).
      {"up2.convolution", 4'718'592, 4'718'592},
      // A 3x3 kernel reads one input channel plain: y' (9,437,184 / 9,437,952).
      {"down1.conv1.convolution", 9'437'184, 9'437'760},
      // g' + x' with x' padded (1x1) (18,897,248 / 18,897,284: at 2 threads,
      // 21,888 B of per-thread rows).
      {"head.convolution_backward", 18'875'360, 18'875'392},
      // gi' is twice gi: the span holds g' + gi' (14,162,656 / 18,883,584).
      {"dec1.conv2.convolution_backward", 14'158'080, 18'878'976},
      // A strided gradient of 16 channels is copied first (5,915,008 / 5,923,264);
      // of 8 channels it is not (11,796,480 / 11,798,560).
      {"up2.convolution_backward", 5'898'240, 5'906'432},
      {"up1.convolution_backward", 11'796'480, 11'798'528},
      // log_sigmoid and the unreduced loss (1,179,660 / 1,179,660).
      {"loss.binary_cross_entropy_with_logits", 1'179'648, 1'179'648},
  };
  // Measured at 1 thread on an AVX2-only AMD EPYC (2026-11-29, with
  // MEMWALL_EXEC_MEMORY_LOG and scripts/measure-scratch.py): 8 channels fill
  // a block, so nothing of 8 channels is padded.
  const std::vector<Golden> avx2 = {
      // x' + w' + y' - y, y' = y (9,441,792 / 14,160,384).
      {"dec1.conv1.convolution", 9'441'792, 14'160'384},
      // (8,847,776 / 9,437,600: a bias reordered, 160 B.)
      {"head.convolution", 8'847'616, 9'437'440},
      {"up2.convolution", 4'718'592, 4'718'592},                        // (4,718,592 / 4,718,592)
      {"down1.conv1.convolution", 4'718'592, 4'718'880},                // (4,718,592 / 4,718,880)
      {"head.convolution_backward", 9'437'408, 9'437'440},              // (9,437,568 / 9,437,604)
      {"dec1.conv2.convolution_backward", 9'437'184, 9'439'488},        // (9,437,184 / 9,439,520)
      {"up2.convolution_backward", 5'898'240, 5'906'432},               // (5,898,240 / 5,906,496)
      {"up1.convolution_backward", 11'796'480, 11'798'528},             // (11,796,480 / 11,798,560)
      {"loss.binary_cross_entropy_with_logits", 1'179'648, 1'179'648},  // (1,179,660 each)
      // The weight gradient of the 1-channel input: AVX2's kernel reads only
      // a 3-channel input plain and pads this one to 8, with its weight
      // gradient (9,439,200 / 9,439,520; 4,718,592 before that rule).
      {"down1.conv1.convolution_backward", 9'439'200, 9'439'488},
  };
  const std::vector<Golden>& golden = cpu_has_avx512f() ? avx512 : avx2;
  for (const Golden& row : golden) {
    const Op* op = find_op(g, row.op);
    ASSERT_NE(op, nullptr) << row.op;
    EXPECT_EQ(op->workspace, row.workspace) << row.op;
    EXPECT_EQ(contiguous_workspace(*op), row.span) << row.op;
  }
  // Note [Measured fp32 scratch]: the default trace measures each kernel,
  // which gives what `memwall run` measured (the comments' figures, at one
  // thread on AVX2; AVX-512's were taken at two, so there the measurement
  // must lie between the rule and the rule plus the small reorders it
  // leaves out, under 64 KiB: Note [Scratch in the workspace]).
  const std::map<std::string, std::pair<uint64_t, uint64_t>> avx2_measured = {
      {"dec1.conv1.convolution", {9'441'792, 14'160'384}},
      {"head.convolution", {8'847'776, 9'437'600}},
      {"up2.convolution", {4'718'592, 4'718'592}},
      {"down1.conv1.convolution", {4'718'592, 4'718'880}},
      {"head.convolution_backward", {9'437'568, 9'437'604}},
      {"dec1.conv2.convolution_backward", {9'437'184, 9'439'520}},
      {"up2.convolution_backward", {5'898'240, 5'906'496}},
      {"up1.convolution_backward", {11'796'480, 11'798'560}},
      {"loss.binary_cross_entropy_with_logits", {1'179'660, 1'179'660}},
      {"down1.conv1.convolution_backward", {9'439'200, 9'439'520}},
  };
  const Graph measured = importers::trace_torch(request);
  for (const Golden& row : golden) {
    const Op* op = find_op(measured, row.op);
    ASSERT_NE(op, nullptr) << row.op;
    if (cpu_has_avx512f()) {
      EXPECT_GE(contiguous_workspace(*op), row.span) << row.op;
      EXPECT_LT(contiguous_workspace(*op), row.span + 65'536) << row.op;
    } else {
      const auto [workspace, span] = avx2_measured.at(row.op);
      EXPECT_EQ(op->workspace, workspace) << row.op;
      EXPECT_EQ(contiguous_workspace(*op), span) << row.op;
    }
  }
}

// oneDNN's AVX2 depthwise kernel computes the weight gradient of a kernel
// taller than its input by GEMM (python/memwall/tracer/cpu_scratch.py,
// _gemm_weight_pass): w, then per thread 4w and one image's im2col
// columns, and 256 B. Measured with MEMWALL_EXEC_MEMORY_LOG and
// scripts/measure-scratch.py on MobileNetV2 b8 at 64x64 (its three blocks
// of 960 channels at 2x2) on an AVX2-only AMD EPYC, 2026-11-29: workspace /
// span 138,640 / 280,320 B at one thread, 277,024 / 311,584 at two and
// 553,792 / 588,352 at four; the rule before this one said 245,760 /
// 280,320 at any count. The same shape here, at one and two threads.
TEST(Fidelity, Avx2DepthwiseWeightGradientOfA2x2ImageIsAGemm) {
  MEMWALL_REQUIRE_TORCH();
  if (cpu_has_avx512f()) {
    GTEST_SKIP() << "measured with AVX2's 8-channel blocks; AVX-512's 16-channel kernels "
                    "are not modelled by this rule";
  }
  const std::pair<int, std::pair<uint64_t, uint64_t>> measured[] = {{1, {138'640, 280'320}},
                                                                    {2, {277'024, 311'584}}};
  for (const auto& [threads, expected] : measured) {
    const Graph g = importers::trace_torch(
        {.script = std::string(MEMWALL_SOURCE_DIR) + "/tests/exec/models.py:depthwise_2x2",
         .kernels = "cpu",
         .threads = threads});
    const Op* op = find_op(g, "1.convolution_backward");
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->workspace, expected.first) << threads << " threads";
    EXPECT_EQ(contiguous_workspace(*op), expected.second) << threads << " threads";
  }
}

// The measured step and the prediction agree within issue 20's target on a
// small set: the two-Linear toy (the torch Adam loop's extra denom), the
// GPT with dropout (the CPU's fp32 masks) and resnet18 b2 (convolution
// scratch at the peak). `memwall bench fidelity` measures the full set.
TEST(Fidelity, PredictedPeakIsWithinTargetOfTheMeasuredStep) {
  MEMWALL_REQUIRE_TORCH();
  const std::vector<TorchTraceRequest> cases = {
      {.builtin = "linear-toy", .kernels = "cpu", .threads = 1},
      {.builtin = "gpt-mini", .kernels = "cpu", .threads = 1},
      {.torchvision = "resnet18", .batch = 2, .kernels = "cpu", .threads = 1},
  };
  for (const TorchTraceRequest& request : cases) {
    const importers::MeasuredStep step = importers::trace_and_measure(request);
    const Graph& g = step.graph;
    const MemoryProfile eager = memory_profile(g, eager_liveness(g));
    const double measured = static_cast<double>(step.measured_peak_bytes);
    const double predicted = static_cast<double>(eager.peak_bytes);
    EXPECT_GE(predicted, measured * 0.995) << g.name;
    EXPECT_LE(predicted, measured * 1.01) << g.name;
    EXPECT_EQ(step.threads, 1);
    EXPECT_GT(step.baseline_bytes, 0u);
    // The op at both peaks is the same kind of op.
    ASSERT_NE(eager.peak_op, kNoOp);
    EXPECT_EQ(step.measured_peak_op, "aten::" + g.ops[eager.peak_op].type) << g.name;
    // Batch norm's scratch, op by op, equals what the profiler saw in this
    // very run (the rows `memwall bench fidelity --ops` prints).
    for (const char* type : {"native_batch_norm", "native_batch_norm_backward"}) {
      std::vector<uint64_t> predicted_ops, measured_ops;
      for (const Op& op : g.ops) {
        if (op.type == type) predicted_ops.push_back(op.workspace);
      }
      for (const auto& [t, bytes] : step.op_scratch) {
        if (t == type) measured_ops.push_back(bytes);
      }
      EXPECT_EQ(predicted_ops, measured_ops) << g.name << ": " << type;
    }
  }
}

TEST(Fidelity, UnknownBuiltinIsOneLine) {
  MEMWALL_REQUIRE_TORCH();
  const std::string error = testing::trace_error({.builtin = "gpt-huge"});
  EXPECT_NE(error.find("unknown built-in model 'gpt-huge' (known: gpt-mini"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace memwall
