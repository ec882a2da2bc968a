// Test helper: a training step whose optimizer is traced the way `memwall
// trace` records torch.optim.Adam(foreach=False): several ops per parameter
// (Note [Traced optimizer steps] in src/swap/optimizer_steps.cc).
#pragma once

#include <string>
#include <vector>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall::testing {

struct TracedAdam {
  Graph graph;
  std::vector<BufferId> params, grads;
  std::vector<std::vector<BufferId>> states;  // per parameter: step, exp_avg, exp_avg_sq
  std::vector<std::vector<BufferId>> temps;   // per parameter: sqrt, div
  std::vector<std::vector<OpId>> steps;       // per parameter: its optimizer ops
  BufferId running_mean = -1;                 // batch norm's statistic, updated in forward
};

// Three fp32 linear layers of [width, width] weights over a [rows, width]
// input, a batch-norm-like op after the first (it updates its running mean,
// an optim_state, in forward), a loss, backward, then per parameter, in
// parameter order, Adam as torch.optim runs it (`adamw` adds the decoupled
// weight decay, a second update of the parameter):
//   op  0 f0 matmul  in [x, w0] out [y1]     op  1 bn      in [y1] out [z1] updates [rm]
//   op  2 f1         in [z1, w1] out [y2]    op  3 f2      in [y2, w2] out [y3]
//   op  4 loss       in [y3] out [l]         op  5 loss.bwd in [y3, l] out [g3]
//   op  6 f2.bwd_w   in [g3, y2] out [w2.grad]   op  7 f2.bwd_in in [g3, w2] out [g2]
//   op  8 f1.bwd_w   in [g2, z1] out [w1.grad]   op  9 f1.bwd_in in [g2, w1] out [gz1]
//   op 10 bn.bwd     in [gz1, y1] out [gy1]      op 11 f0.bwd_w  in [gy1, x] out [w0.grad]
//   ops 12-19 (w0), 20-27 (w1), 28-35 (w2), each (AdamW: 9 ops, mul_ second):
//     add_ updates [step]; lerp_ in [grad] updates [exp_avg];
//     mul_ updates [exp_avg_sq]; addcmul_ in [grad] updates [exp_avg_sq];
//     sqrt in [exp_avg_sq] out [sqrt]; div in [sqrt] out [div];
//     add_ updates [div]; addcdiv_ in [exp_avg, div] updates [w]
inline TracedAdam traced_adam(uint64_t rows = 256, uint64_t width = 512, bool adamw = false) {
  TracedAdam t;
  GraphBuilder g;
  g.graph.name = adamw ? "traced-adamw" : "traced-adam";
  g.graph.meta["optimizer"] = adamw ? "adamw" : "adam";
  const uint64_t act = rows * width * 4, weight = width * width * 4;
  const double mm = 2.0 * static_cast<double>(rows * width * width);
  for (int i = 0; i < 3; ++i) {
    t.params.push_back(g.buffer("w" + std::to_string(i), weight, BufferKind::kParam));
  }
  const BufferId x = g.buffer("x", act, BufferKind::kInput);
  t.running_mean = g.buffer("bn.running_mean", width * 4, BufferKind::kOptimState);
  for (int i = 0; i < 3; ++i) {
    const std::string w = "w" + std::to_string(i);
    t.states.push_back({g.buffer(w + ".step", 4, BufferKind::kOptimState),
                        g.buffer(w + ".exp_avg", weight, BufferKind::kOptimState),
                        g.buffer(w + ".exp_avg_sq", weight, BufferKind::kOptimState)});
  }
  const auto activation = [&](const char* name) {
    return g.buffer(name, act, BufferKind::kActivation);
  };
  const BufferId y1 = activation("y1"), z1 = activation("z1"), y2 = activation("y2"),
                 y3 = activation("y3");
  const BufferId l = g.buffer("l", 4, BufferKind::kActivation);
  const auto temp = [&](const char* name) { return g.buffer(name, act, BufferKind::kTemp); };
  const BufferId g3 = temp("g3"), g2 = temp("g2"), gz1 = temp("gz1"), gy1 = temp("gy1");
  t.grads.resize(3);
  for (int i = 2; i >= 0; --i) {
    t.grads[i] = g.buffer("w" + std::to_string(i) + ".grad", weight, BufferKind::kGrad);
  }
  const auto op = [&](const char* name, Phase phase, std::vector<BufferId> in,
                      std::vector<BufferId> out, double flops, std::vector<BufferId> updates = {}) {
    const OpId id = g.op(name, phase, std::move(in), std::move(out), std::move(updates));
    g.graph.ops[id].flops = flops;
    g.graph.ops[id].bytes = 3.0 * static_cast<double>(act);
    return id;
  };
  const std::vector<BufferId>& w = t.params;
  op("f0", Phase::kForward, {x, w[0]}, {y1}, mm);
  op("bn", Phase::kForward, {y1}, {z1}, 4.0 * static_cast<double>(rows * width), {t.running_mean});
  op("f1", Phase::kForward, {z1, w[1]}, {y2}, mm);
  op("f2", Phase::kForward, {y2, w[2]}, {y3}, mm);
  op("loss", Phase::kForward, {y3}, {l}, static_cast<double>(rows * width));
  op("loss.bwd", Phase::kBackward, {y3, l}, {g3}, static_cast<double>(rows * width));
  op("f2.bwd_w", Phase::kBackward, {g3, y2}, {t.grads[2]}, mm);
  op("f2.bwd_in", Phase::kBackward, {g3, w[2]}, {g2}, mm);
  op("f1.bwd_w", Phase::kBackward, {g2, z1}, {t.grads[1]}, mm);
  op("f1.bwd_in", Phase::kBackward, {g2, w[1]}, {gz1}, mm);
  op("bn.bwd", Phase::kBackward, {gz1, y1}, {gy1}, 4.0 * static_cast<double>(rows * width));
  op("f0.bwd_w", Phase::kBackward, {gy1, x}, {t.grads[0]}, mm);
  const double n = static_cast<double>(width * width);
  for (int i = 0; i < 3; ++i) {
    const std::string p = "w" + std::to_string(i);
    const BufferId step = t.states[i][0], avg = t.states[i][1], sq = t.states[i][2],
                   grad = t.grads[i];
    const BufferId sqrt = g.buffer(p + ".sqrt", weight, BufferKind::kTemp);
    const BufferId div = g.buffer(p + ".div", weight, BufferKind::kTemp);
    t.temps.push_back({sqrt, div});
    std::vector<OpId> ops;
    const auto opt = [&](const char* what, std::vector<BufferId> in, std::vector<BufferId> out,
                         std::vector<BufferId> updates, double flops) {
      const OpId id = g.op(p + "." + what, Phase::kOptimizer, std::move(in), std::move(out),
                           std::move(updates));
      g.graph.ops[id].type = what;
      g.graph.ops[id].flops = flops;
      g.graph.ops[id].bytes = 12.0 * flops;
      ops.push_back(id);
    };
    opt("add_", {}, {}, {step}, 1);
    if (adamw) opt("mul_", {}, {}, {w[i]}, n);
    opt("lerp_", {grad}, {}, {avg}, n);
    opt("mul_", {}, {}, {sq}, n);
    opt("addcmul_", {grad}, {}, {sq}, n);
    opt("sqrt", {sq}, {sqrt}, {}, n);
    opt("div", {sqrt}, {div}, {}, n);
    opt("add_", {}, {}, {div}, n);
    opt("addcdiv_", {avg, div}, {}, {w[i]}, n);
    t.steps.push_back(std::move(ops));
  }
  t.graph = std::move(g.graph);
  return t;
}

}  // namespace memwall::testing
