// ZeRO data parallelism as a graph transform (docs/swap-zero.md): the
// iteration one of N data-parallel ranks executes, with its shards of the
// model states and the collectives each stage adds as ops of phase comm,
// which the simulator runs on the interconnect (collective_time).
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/swap/optimizer_steps.h"  // ModelState, model_states

namespace memwall {

struct ZeroOptions {
  int ranks = 1;  // data-parallel ranks (GPUs) sharing the model states
  int stage = 0;  // 0: replicated (all-reduce of gradients); 1, 2, 3: ZeRO
  // Stage 3: a parameter's all-gather is placed this many ops ahead of its
  // first user, so that it overlaps compute (DeepSpeed's prefetching).
  int prefetch_ops = 2;
  // Stage 3: users of a parameter more than this many ops apart gather it
  // again rather than hold it in between (a tied embedding used at both ends
  // of the forward).
  int regather_gap = 32;
};

// The graph of one rank (see Note [ZeRO as a graph] in zero.cc). With one
// rank it is `graph` itself. Throws Error for ranks < 1, a stage outside
// 0..3, or a graph whose optimizer ops are not per-parameter steps
// (model_states); a step of several ops keeps them, each doing 1/N of its
// work from stage 1 on.
Graph zero_rank_graph(const Graph& graph, const ZeroOptions& options);

}  // namespace memwall
