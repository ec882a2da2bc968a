// Test helpers for the activation-swapping tests: a small training chain
// with measured op times and a profile whose copies take exact times.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"

namespace memwall::testing {

// Copies move `bandwidth` bytes per second each way with no latency; NVMe
// at half that. Ops carry measured times, so compute needs no rates.
inline Hardware copy_profile(double bandwidth) {
  Hardware hw;
  hw.name = "test-gpu";
  hw.device_memory_bytes = uint64_t{1} << 30;
  hw.peak_flops_fp32 = hw.peak_flops_fp16 = hw.peak_flops_bf16 = 1e12;
  hw.hbm_bandwidth = 1e12;
  hw.h2d_bandwidth = hw.d2h_bandwidth = bandwidth;
  hw.nvme_read_bandwidth = hw.nvme_write_bandwidth = bandwidth / 2;
  hw.host_memory_bytes = uint64_t{1} << 30;
  hw.compute_efficiency = hw.memory_efficiency = 1;
  return hw;
}

// A four-layer chain, conv-style backward (input gradient, then weight
// gradient reading the layer's input):
//   buffers: w param 8, x input 10, y0..y3 activation 100 each, l 4,
//            g3..g1 temp 100, dw3..dw0 temp 4
//   op  0 f0 (conv2d)   in [x, w]   out [y0]
//   op  1 f1 (relu)     in [y0]     out [y1]
//   op  2 f2 (conv2d)   in [y1, w]  out [y2]
//   op  3 f3 (linear)   in [y2, w]  out [y3]
//   op  4 loss          in [y3]     out [l]
//   op  5 loss.bwd      in [y3, l]  out [g3]
//   op  6 f3.bwd_in     in [g3, w]  out [g2]   op  7 f3.bwd_w  in [g3, y2] out [dw3]
//   op  8 f2.bwd_in     in [g2, w]  out [g1]   op  9 f2.bwd_w  in [g2, y1] out [dw2]
//   op 10 f1.bwd_in     in [g1, y0] out [g0]   op 11 f1.bwd_w  in [g1, y0] out [dw1]
//   op 12 f0.bwd_w      in [g0, x]  out [dw0]
// Every op takes `seconds[i]` (default 1 s).
inline Graph layer_chain(std::vector<double> seconds = {}) {
  GraphBuilder g;
  g.graph.name = "layer-chain";
  const BufferId w = g.buffer("w", 8, BufferKind::kParam);
  const BufferId x = g.buffer("x", 10, BufferKind::kInput);
  std::vector<BufferId> y;
  for (int i = 0; i < 4; ++i)
    y.push_back(g.buffer(fmt::format("y{}", i), 100, BufferKind::kActivation));
  const BufferId l = g.buffer("l", 4, BufferKind::kActivation);
  const BufferId g3 = g.buffer("g3", 100, BufferKind::kTemp);
  const BufferId g2 = g.buffer("g2", 100, BufferKind::kTemp);
  const BufferId g1 = g.buffer("g1", 100, BufferKind::kTemp);
  const BufferId g0 = g.buffer("g0", 100, BufferKind::kTemp);
  std::vector<BufferId> dw;
  for (int i = 3; i >= 0; --i) dw.push_back(g.buffer(fmt::format("dw{}", i), 4, BufferKind::kTemp));
  const auto op = [&](const char* name, const char* type, Phase phase, std::vector<BufferId> in,
                      BufferId out) {
    const OpId id = g.op(name, phase, std::move(in), {out});
    g.graph.ops[id].type = type;
  };
  op("f0", "conv2d", Phase::kForward, {x, w}, y[0]);
  op("f1", "relu", Phase::kForward, {y[0]}, y[1]);
  op("f2", "conv2d", Phase::kForward, {y[1], w}, y[2]);
  op("f3", "linear", Phase::kForward, {y[2], w}, y[3]);
  op("loss", "loss", Phase::kForward, {y[3]}, l);
  op("loss.bwd", "loss_backward", Phase::kBackward, {y[3], l}, g3);
  op("f3.bwd_in", "linear_backward", Phase::kBackward, {g3, w}, g2);
  op("f3.bwd_w", "linear_backward", Phase::kBackward, {g3, y[2]}, dw[0]);
  op("f2.bwd_in", "conv2d_backward_input", Phase::kBackward, {g2, w}, g1);
  op("f2.bwd_w", "conv2d_backward_weight", Phase::kBackward, {g2, y[1]}, dw[1]);
  op("f1.bwd_in", "relu_backward", Phase::kBackward, {g1, y[0]}, g0);
  op("f1.bwd_w", "relu_backward", Phase::kBackward, {g1, y[0]}, dw[2]);
  op("f0.bwd_w", "conv2d_backward_weight", Phase::kBackward, {g0, x}, dw[3]);
  for (size_t i = 0; i < g.graph.ops.size(); ++i) {
    g.graph.ops[i].time = i < seconds.size() ? seconds[i] : 1.0;
  }
  return g.graph;
}

// What a plan swaps, as "<buffer> out after <op> in after <op>", in the
// order of the swap-outs (the op is the latest compute before the step).
inline std::vector<std::string> swaps(const Graph& graph, const Plan& plan) {
  std::vector<std::string> out;
  std::vector<std::string> in(graph.buffers.size());
  std::vector<BufferId> order;
  std::string last_op = "start";
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kCompute) last_op = graph.ops[step.op].name;
    if (step.kind == StepKind::kSwapOut) {
      order.push_back(step.buf);
      in[step.buf] = fmt::format("{} out after {}", graph.buffers[step.buf].name, last_op);
    }
    if (step.kind == StepKind::kSwapIn) in[step.buf] += " in after " + last_op;
  }
  for (const BufferId b : order) out.push_back(in[b]);
  return out;
}

// The ops a plan recomputes, in order.
inline std::vector<std::string> recomputes(const Graph& graph, const Plan& plan) {
  std::vector<std::string> out;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) out.push_back(graph.ops[step.op].name);
  }
  return out;
}

}  // namespace memwall::testing
