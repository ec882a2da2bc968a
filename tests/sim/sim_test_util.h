// Helpers shared by the simulator tests.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "../graph/graph_builder.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"

namespace memwall {

// 1024 bytes/s each way, no latency; NVMe 512 bytes/s; CPU Adam 256 params/s.
inline Hardware test_hardware() {
  Hardware hw;
  hw.name = "test";
  hw.device_memory_bytes = 1 << 20;
  hw.h2d_bandwidth = 1024;
  hw.d2h_bandwidth = 1024;
  hw.pcie_latency = 0;
  hw.nvme_read_bandwidth = 512;
  hw.nvme_write_bandwidth = 512;
  hw.host_memory_bytes = 1 << 30;
  hw.cpu_adam_params_per_s = 256;
  hw.peak_flops_fp32 = 1e12;
  hw.hbm_bandwidth = 1e12;
  return hw;
}

inline void set_times(Graph& graph, std::initializer_list<double> times) {
  size_t i = 0;
  for (const double t : times) graph.ops.at(i++).time = t;
}

inline Plan make_plan(std::vector<Step> steps, uint64_t budget = 1 << 20) {
  return Plan{.graph = "g", .hardware = "test", .budget = budget, .steps = std::move(steps)};
}

// a (1024 B) made by op 0, read back by op 2; op 1 runs in between.
struct SwapGraph {
  Graph graph;
  BufferId a, b;
};
inline SwapGraph swap_graph(double t0, double t1, double t2) {
  testing::GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);
  const BufferId b = g.buffer("b", 8, BufferKind::kActivation);
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {b});
  g.op("bwd", Phase::kBackward, {a, b}, {});
  set_times(g.graph, {t0, t1, t2});
  return {g.graph, a, b};
}

}  // namespace memwall
