// The layout search (memwall/planner/pipeline_layout.h).
//
// Note [Layout search]
// ~~~~~~~~~~~~~~~~~~~~
// A layout of N GPUs is tensor x context x pipeline x data parallelism
// (t x c x p x d = N), a micro-batch size b and count m (b x m x d = the global batch) and
// a schedule. The search tries every one such that:
//   - t divides N and fits in a node (Megatron-LM keeps tensor parallelism
//     on NVLink), and the model splits t ways (its heads; the zoo's GPT-2
//     and Llama models: others run t = 1), with sequence parallelism on
//     whenever t > 1 (Korthikanti et al. 2022: less activation memory for
//     the same communication volume);
//   - p divides N / t, and d = N / (t p) divides the global batch;
//   - context parallelism c (Note [Context parallelism in the zoo]) for
//     GPT-2 and Llama with flash attention, where the sequence splits into
//     2c chunks and each rank keeps at least kLeastContextPositions (4,096)
//     of it: c divides N / (t p), and d = N / (t c p). Its ring exchanges
//     hide behind a step's kernel only when the step is long enough: the
//     kernel grows with (s/c)^2 and the exchange with s/c, and across
//     nodes (a 400 Gb/s adapter against an H100's bf16 rate, Llama-70B's 8
//     query heads a key-value head) they break even near 3,500 positions;
//     shorter splits cost more than they save, and the bound keeps the
//     search of short sequences as it was;
//   - for a mixture of experts, expert parallelism e dividing both d and
//     the experts (Note [Expert parallelism in the zoo]): e of the d
//     replicas share out each layer's experts;
//   - b is a power of two dividing the batch of a replica;
//   - 1F1B, and interleaved 1F1B with 2, 3 or 4 chunks a device where
//     p > 1 and p divides m (Megatron-LM's requirement; an even split also
//     needs the layers to divide into p v chunks). GPipe has 1F1B's bubble with
//     more micro-batches held, and memwall's Hanayo more bubble than
//     interleaved (docs/pipeline.md), so neither can win here;
//   - every activation kept, and, only where that does not fit, per-layer
//     recomputation (Note [Pipeline recomputation]), which adds a forward
//     to every backward and so cannot be faster where keeping fits (unless
//     the request fixes one or the other);
//   - where no recomputation fits and the request leaves ZeRO to the
//     search, the most frugal recomputation again under ZeRO-3 (Note
//     [ZeRO in a pipeline stage]), and where that does not fit either, with
//     the optimizer states offloaded (Note [Offload in a pipeline stage]):
//     each only where the one before does not fit, since each adds
//     communication or a CPU step.
// Each is a pipeline plan (Tarnawski et al.'s partition of the graph of one
// micro-batch and one tensor-parallel rank, the schedule simulated over the
// devices, the optimizer states sharded over the d replicas as Megatron-LM's
// distributed optimizer shards them: ZeRO-1, the same bytes sent as an
// all-reduce for a d-th of the states), and the fastest
// simulated step whose every device fits the budget wins. A layout where no
// cut fits is planned at the cut needing least memory, so that its row
// says how far over the budget it is (its time is that cut's, not a
// balanced one's). A graph is built once per (t, c, b, e) and its chunk costs
// once per graph, recomputation and cut.
#include "memwall/planner/pipeline_layout.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/stopwatch.h"
#include "memwall/planner/planner.h"

namespace memwall {
namespace {

constexpr int kMaxGpus = 1 << 20;
// Interleaved 1F1B's chunks a device, 2 to this: Narayanan et al. 2021 ran
// their 530B model's 105 layers on 35 stages, 3 a stage.
constexpr int kMostChunksPerDevice = 4;

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k) {
    if (n % k == 0) out.push_back(k);
  }
  return out;
}

}  // namespace

std::string layout_label(const LayoutCandidate& c) {
  std::string schedule(to_string(c.schedule));
  if (c.chunks_per_device > 1) schedule += fmt::format(" ({} chunks)", c.chunks_per_device);
  return fmt::format("tp {}{} x pp {} x dp {}{}, micro-batch {} x {}, {}{}", c.tensor_parallel,
                     c.context_parallel > 1 ? fmt::format(" x cp {}", c.context_parallel) : "",
                     c.pipeline_parallel, c.data_parallel,
                     c.expert_parallel > 1 ? fmt::format(" (ep {})", c.expert_parallel) : "",
                     c.micro_batch, c.micro_batches, schedule,
                     c.recompute == ChunkRecompute::kNone
                         ? ""
                         : fmt::format(", {} recompute", to_string(c.recompute))) +
         (c.zero_stage >= 2 ? fmt::format(", ZeRO-{}", c.zero_stage) : "") +
         (c.offload_optimizer ? ", optimizer offloaded" : "");
}

LayoutSearch search_layouts(std::string_view model, const ModelOptions& options,
                            const Hardware& node, const LayoutRequest& request) {
  const Stopwatch clock;
  if (request.gpus < 1 || request.gpus > kMaxGpus) {
    fail("--gpus must be from 1 to {} (got {})", kMaxGpus, request.gpus);
  }
  if (request.global_batch < 1) fail("--global-batch must be at least 1");
  const uint64_t budget = request.budget > 0 ? request.budget : default_budget(node);
  LayoutSearch search;
  const ModelInfo& info = find_model(model);
  const int64_t experts = info.experts;
  const int64_t seq = options.seq > 0 ? options.seq : info.default_seq;
  // Context parallelism's ranks worth trying: the fixed one, else those
  // that split the sequence into 2c chunks of at least the least positions.
  const auto context_ranks = [&](int c) {
    if (request.context_parallel > 0) return c == request.context_parallel;
    if (c == 1) return true;
    const bool splits =
        options.flash && seq % (2 * int64_t{c}) == 0 && seq / c >= kLeastContextPositions;
    return splits && (info.name.starts_with("gpt2") || info.name.starts_with("llama"));
  };
  // Each (t, b, e)'s graph, chunked once: its chunk costs carry over to every
  // layout of it. Map nodes stay put, so the ChunkedGraph's reference to
  // its graph does too.
  struct Built {
    std::optional<Graph> graph;
    std::unique_ptr<ChunkedGraph> chunked[3];  // by ChunkRecompute, made when first asked
    std::string error;
  };
  std::map<std::tuple<int, int64_t, int, int>, Built> graphs;
  const auto built = [&](int tp, int cp, int64_t b, int ep,
                         ChunkRecompute recompute) -> const Built& {
    Built& entry = graphs[std::make_tuple(tp, cp, b, ep)];
    std::unique_ptr<ChunkedGraph>& chunked = entry.chunked[static_cast<int>(recompute)];
    if (!entry.error.empty() || chunked) return entry;
    try {
      if (!entry.graph) {
        ModelOptions o = options;
        o.batch = b;
        o.tensor_parallel = tp;
        o.sequence_parallel = tp > 1 && request.sequence_parallel.value_or(true);
        o.expert_parallel = ep;
        o.context_parallel = cp;
        entry.graph = build_model(model, o);
      }
      chunked = std::make_unique<ChunkedGraph>(*entry.graph, node, recompute, request.engine);
    } catch (const Error& e) {
      entry.error = e.what();
    }
    return entry;
  };
  const Graph* best_graph = nullptr;  // in `graphs`, copied out at the end
  // Plans one layout into its row; true when it fits.
  const auto try_layout = [&](LayoutCandidate& c, const Built& graph) {
    const std::unique_ptr<ChunkedGraph>& chunked = graph.chunked[static_cast<int>(c.recompute)];
    if (!chunked) {
      c.why_not = graph.error;
      return false;
    }
    try {
      PipelinePlan plan = plan_pipeline(*chunked, node,
                                        {.devices = c.pipeline_parallel,
                                         .data_parallel = c.data_parallel,
                                         .distributed_optimizer = request.distributed_optimizer,
                                         .zero_stage = c.zero_stage,
                                         .offload_optimizer = c.offload_optimizer,
                                         .chunks_per_device = c.chunks_per_device,
                                         .micro_batches = c.micro_batches,
                                         .schedule = c.schedule,
                                         .partition = request.partition,
                                         .budget = budget,
                                         .recompute = c.recompute,
                                         .engine = request.engine,
                                         .allow_over_budget = true});
      c.fits = plan.fits;
      c.zero_stage = plan.zero_stage;
      c.step_time = plan.sim.step_time;
      c.tokens_per_s = plan.tokens_per_s;
      c.mfu = plan.mfu;
      for (const PipelineDevice& d : plan.sim.devices) {
        c.peak_bytes = std::max(c.peak_bytes, d.peak_bytes);
      }
      if (!c.fits) {
        c.why_not = plan.host_fits ? fmt::format("a device needs {}", human_bytes(c.peak_bytes))
                                   : fmt::format("a node's host needs {}",
                                                 human_bytes(plan.host_bytes_per_node));
      }
      if (c.fits && (!search.best || c.step_time < search.best->sim.step_time)) {
        search.best = std::move(plan);
        best_graph = &*graph.graph;
      }
    } catch (const Error& e) {
      c.why_not = e.what();
    }
    return c.fits;
  };
  if (request.tensor_parallel < 0 || request.pipeline_parallel < 0 ||
      request.context_parallel < 0 ||
      (request.tensor_parallel > 0 && request.gpus % request.tensor_parallel != 0) ||
      (request.pipeline_parallel > 0 &&
       request.gpus % (std::max(1, request.tensor_parallel) * request.pipeline_parallel) != 0)) {
    fail("layout search: the fixed tensor ({}) and pipeline ({}) parallelism do not divide {} GPUs",
         request.tensor_parallel, request.pipeline_parallel, request.gpus);
  }
  for (const int tp : divisors(request.gpus)) {
    if (request.tensor_parallel > 0 ? tp != request.tensor_parallel : tp > node.gpus_per_node) {
      continue;
    }
    for (const int pp : divisors(request.gpus / tp)) {
      if (request.pipeline_parallel > 0 && pp != request.pipeline_parallel) continue;
      for (const int cp : divisors(request.gpus / (tp * pp))) {
        if (!context_ranks(cp)) continue;
        const int dp = request.gpus / (tp * pp * cp);
        if (request.global_batch % dp != 0) continue;  // dp = 1 always divides
        const int64_t replica_batch = request.global_batch / dp;
        for (const int ep : divisors(dp)) {
          if (request.expert_parallel > 0 ? ep != request.expert_parallel
                                          : ep > 1 && (experts == 0 || experts % ep != 0)) {
            continue;
          }
          for (int64_t b = 1; b <= replica_batch; b *= 2) {
            if (replica_batch % b != 0) continue;
            const int64_t m = replica_batch / b;
            if (m > (1 << 16)) continue;  // past pipeline_plan's micro-batch count
            std::vector<std::pair<PipelineSchedule, int>> schedules = {
                {PipelineSchedule::kOneFOneB, 1}};
            for (int v = 2; v <= kMostChunksPerDevice && pp > 1 && m % pp == 0; ++v) {
              schedules.emplace_back(PipelineSchedule::kInterleaved, v);
            }
            for (const auto& [schedule, chunks] : schedules) {
              const std::vector<ChunkRecompute> choices =
                  request.recompute ? std::vector<ChunkRecompute>{*request.recompute}
                                    : std::vector<ChunkRecompute>{ChunkRecompute::kNone,
                                                                  ChunkRecompute::kSelective,
                                                                  ChunkRecompute::kFullLayers};
              bool fitted = false;
              for (const ChunkRecompute recompute : choices) {
                LayoutCandidate c{.tensor_parallel = tp,
                                  .pipeline_parallel = pp,
                                  .data_parallel = dp,
                                  .expert_parallel = ep,
                                  .context_parallel = cp,
                                  .micro_batch = b,
                                  .micro_batches = static_cast<int>(m),
                                  .chunks_per_device = chunks,
                                  .schedule = schedule,
                                  .recompute = recompute,
                                  .zero_stage = request.zero_stage,
                                  .offload_optimizer = request.offload_optimizer};
                const Built& graph = built(tp, cp, b, ep, recompute);
                const auto& chunked = graph.chunked[static_cast<int>(recompute)];
                // Selective recomputation of a graph without s x s attention
                // tensors (flash attention) keeps everything: nothing to try.
                if (recompute == ChunkRecompute::kSelective && !request.recompute && chunked &&
                    !chunked->drops_anything()) {
                  continue;
                }
                const bool fits = try_layout(c, graph);
                search.candidates.push_back(std::move(c));
                fitted = fits;
                if (fits) break;  // recomputing where keeping fits is only slower
              }
              // Where no recomputation fits: ZeRO-3, then optimizer offload
              // per stage, with the last (the most frugal) recomputation.
              if (!fitted && request.distributed_optimizer && request.zero_stage == 0 &&
                  !request.offload_optimizer && dp * cp > 1 && !search.candidates.empty() &&
                  search.candidates.back().step_time > 0) {
                const LayoutCandidate last = search.candidates.back();
                for (const auto& [stage, offload] : {std::pair{3, false}, std::pair{1, true}}) {
                  LayoutCandidate c = last;
                  c.fits = false;
                  c.why_not.clear();
                  c.peak_bytes = 0;
                  c.zero_stage = stage;
                  c.offload_optimizer = offload;
                  const bool fits = try_layout(c, built(tp, cp, b, ep, c.recompute));
                  search.candidates.push_back(std::move(c));
                  if (fits) break;  // offloading where ZeRO-3 fits is only slower
                }
              }
            }
          }
        }
      }
    }
  }
  std::stable_sort(search.candidates.begin(), search.candidates.end(),
                   [](const LayoutCandidate& a, const LayoutCandidate& b) {
                     if (a.fits != b.fits) return a.fits;
                     if ((a.step_time > 0) != (b.step_time > 0)) return a.step_time > 0;
                     if (!a.fits && a.peak_bytes != b.peak_bytes)
                       return a.peak_bytes < b.peak_bytes;
                     return a.step_time < b.step_time;
                   });
  if (best_graph != nullptr) {
    search.best_graph_name = best_graph->name;
    search.best_graph = *best_graph;
  }
  search.seconds = clock.seconds();
  return search;
}

}  // namespace memwall
