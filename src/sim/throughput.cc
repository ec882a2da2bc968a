// What a plan's iteration time means in work done (throughput.h).
//
// Note [Throughput]
// ~~~~~~~~~~~~~~~~~
// Samples per second are ranks x batch / iteration time: every
// data-parallel rank runs the graph's batch (a rank's micro-batch) each
// iteration; with context parallelism c ranks share each sample, each
// holding 1/c of its sequence (Note [Context parallelism in the zoo] in
// src/models/context_parallel.cc), so the sum is over ranks / c. Tokens
// per second multiply by the sequence length, for
// transformers (graphs whose meta carries "seq"). Model FLOPs utilization
// follows PaLM (Chowdhery et al. 2022, arXiv:2204.02311, Section 4.1 and
// Appendix B): the FLOPs the model needs per iteration, without the
// recomputation a plan adds, over the iteration time times the hardware's
// peak. The FLOPs are the graph's own: the forward and backward ops, each
// counted once (optimizer steps and collectives left out, as in PaLM's
// count), per rank, against one GPU's peak for the dtype that carries most
// of them (bf16 for the zoo's mixed-precision graphs).
#include <array>
#include <cmath>

#include "memwall/base/error.h"
#include "memwall/sim/throughput.h"

namespace memwall {
namespace {

int64_t meta_count(const Graph& graph, const char* key) {
  const auto it = graph.meta.find(key);
  if (it == graph.meta.end() || !it->is_number_integer()) return 0;
  const auto value = it->get<int64_t>();
  return value > 0 ? value : 0;
}

}  // namespace

Throughput plan_throughput(const Graph& graph, double iteration_time, const Hardware& hardware,
                           int ranks) {
  if (!(iteration_time > 0) || !std::isfinite(iteration_time)) {
    fail("throughput of {}: the iteration time must be positive (got {})", graph.name,
         iteration_time);
  }
  if (ranks < 1) fail("throughput of {}: ranks must be at least 1 (got {})", graph.name, ranks);
  Throughput t;
  t.ranks = ranks;
  t.iterations_per_s = 1 / iteration_time;
  t.batch = meta_count(graph, "batch");
  t.seq = meta_count(graph, "seq");
  // Note [Context parallelism in the zoo]: c of the ranks share each
  // sample (its sequence split c ways).
  t.context_parallel = graph_context_parallel(graph);
  const double samples = static_cast<double>(ranks) * static_cast<double>(t.batch) /
                         static_cast<double>(t.context_parallel);
  t.samples_per_s = samples / iteration_time;
  t.tokens_per_s = t.samples_per_s * static_cast<double>(t.seq);
  std::array<double, 9> by_dtype{};
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward && op.phase != Phase::kBackward) continue;
    t.model_flops += op.flops;
    by_dtype[static_cast<size_t>(op_compute_dtype(graph, op))] += op.flops;
  }
  size_t most = static_cast<size_t>(DType::kF32);
  for (size_t d = 0; d < by_dtype.size(); ++d) {
    if (by_dtype[d] > by_dtype[most]) most = d;
  }
  t.dtype = static_cast<DType>(most);
  t.peak_flops = peak_flops(hardware, t.dtype);
  t.mfu = t.peak_flops > 0 ? t.model_flops / (iteration_time * t.peak_flops) : 0;
  return t;
}

}  // namespace memwall
