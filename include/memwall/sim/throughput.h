// What a plan's iteration time means in work done: samples and tokens per
// second and model FLOPs utilization (Note [Throughput] in
// src/sim/throughput.cc), from the graph, the hardware and the time alone.
#pragma once

#include <cstdint>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall {

// What an iteration time means in work done (Note [Throughput]).
struct Throughput {
  int ranks = 1;
  int64_t batch = 0;  // samples per rank per iteration (the graph's meta; 0: unknown)
  int64_t seq = 0;    // tokens per sample (transformers; 0: not one)
  int context_parallel = 1;  // ranks that share each sample's sequence
  double iterations_per_s = 0;
  // ranks x batch / context_parallel / iteration time (0 when the batch is unknown)
  double samples_per_s = 0;
  double tokens_per_s = 0;    // samples_per_s x seq
  double model_flops = 0;     // per rank and iteration: forward and backward ops, each once
  DType dtype = DType::kF32;  // the dtype carrying most of model_flops
  double peak_flops = 0;      // the GPU's peak for it
  double mfu = 0;             // model_flops / (iteration time x peak_flops)
};
// `graph` is the work as given (not a rank's rewritten graph); throws Error
// for a non-positive iteration time or ranks < 1.
Throughput plan_throughput(const Graph& graph, double iteration_time, const Hardware& hardware,
                           int ranks);

}  // namespace memwall
