// Pipeline partitioning (memwall/sim/pipeline_chunks.h).
//
// Note [Pipeline partitioning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Tarnawski et al. 2020 ("Efficient Algorithms for Device Placement of DNN
// Graph Operators", NeurIPS 2020, Section 4) place a training graph on k
// devices by a dynamic programme over contiguous subgraphs: each device's
// load is its ops' forward and backward time plus what it sends, the
// objective the largest load (the steady-state time per micro-batch of a
// pipeline), each device's memory within its capacity. On a graph whose
// forward is a sequence of layers the contiguous subgraphs are the runs of
// forward positions between two cut points (Note [Pipeline chunks]), and
// the programme is
//   best[k][j] = min over i < j of max(best[k-1][i], load_k(i, j)),
// over chunks k = 1..K and cut points j, with load_k infinite where chunk
// k's memory does not fit: its states, its forward or backward peak, and
// the saved bytes of the other micro-batches its schedule holds in flight
// (schedule_in_flight, shared evenly by a device's chunks, each of which
// then gets an even share of the budget; the optimizer states sharded over
// the replicas where ZeRO-1 shards them). O(K U^2) steps over U cut points,
// and O(U^2) chunk costs, each one pass over the graph.
// Cut points: every forward op on a graph of at most kEveryOpCuts forward
// ops (the op-level programme of the paper), else the layers' starts (Note
// [What a layer is]).
// The programme picks the cut; the pipeline simulation then judges it
// (bubble, in-flight micro-batches, peaks) like every other plan.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/planner/pipeline_partition.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Bytes of `c` with `in_flight` micro-batches held, at its highest point;
// saturates at the largest uint64 rather than wrapping (no budget is that large).
uint64_t chunk_bytes(const ChunkCost& raw, int in_flight, const PipelineShape& shape) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // Note [ZeRO in a pipeline stage]: the replica's shards and the units
  // gathered while the passes run.
  const ChunkCost c = zero_stage_memory(raw, shape);
  uint64_t others = 0;
  // Note [Swapped activations in a pipeline stage]: two a device at most.
  const int held = shape.swap_activations ? std::min(in_flight - 1, 2) : in_flight - 1;
  if (__builtin_mul_overflow(c.saved, static_cast<uint64_t>(held), &others)) return kMax;
  uint64_t top = 0;
  if (__builtin_add_overflow(others, std::max(c.forward_peak, c.backward_peak), &top)) return kMax;
  top = std::max(top, c.optimizer_peak);
  // Note [Pipeline engines]: the engine's buffers, one set a micro-batch.
  uint64_t buffers = 0;
  if (__builtin_mul_overflow(c.engine_buffers, static_cast<uint64_t>(shape.micro_batches),
                             &buffers) ||
      __builtin_add_overflow(top, buffers, &top)) {
    return kMax;
  }
  uint64_t total = 0;
  const uint64_t states = shape.optimizer_on_host ? c.states - c.optimizer_states : c.states;
  return __builtin_add_overflow(top, states, &total) ? kMax : total;
}

}  // namespace

std::vector<int> default_cut_points(const ChunkedGraph& chunked) {
  return chunked.cut_points(chunked.forward_ops() <= kEveryOpCuts);
}

PartitionResult partition_pipeline(const ChunkedGraph& chunked, const PipelineShape& shape,
                                   const std::vector<int>& cut_points, uint64_t budget) {
  const int chunks = shape.devices * shape.chunks_per_device;
  const int units = static_cast<int>(cut_points.size());
  if (shape.devices < 1 || shape.chunks_per_device < 1) fail("pipeline: no devices to place on");
  if (units < chunks) {
    fail("pipeline: {} cannot be cut into {} chunks: it has {} places to cut", chunked.graph().name,
         chunks, units);
  }
  const auto position = [&](int unit) {
    return unit < units ? cut_points[unit] : chunked.forward_ops();
  };
  // Chunk costs of unit runs [i, j): the ChunkedGraph measures each once.
  const auto cost = [&](int i, int j) { return chunked.cost(position(i), position(j)); };
  std::vector<int> in_flight(chunks);
  std::vector<int> device(chunks);
  for (int k = 0; k < chunks; ++k) {
    device[k] = chunk_device(shape.schedule, k, shape.devices);
    const int held = schedule_in_flight(shape.schedule, shape.devices, shape.chunks_per_device,
                                        shape.micro_batches, device[k]);
    in_flight[k] = (held + shape.chunks_per_device - 1) / shape.chunks_per_device;
  }
  const uint64_t share = budget / static_cast<uint64_t>(shape.chunks_per_device);
  const PipelineSetup links = pipeline_setup(shape, {});
  const auto load = [&](int k, int i, int j) {
    const ChunkCost c = cost(i, j);
    if (chunk_bytes(c, in_flight[k], shape) > share) return kInfinite;
    double seconds = c.forward + c.backward;
    if (k + 1 < chunks && c.send_forward > 0) {
      seconds += transfer_seconds(links, device[k], device[k + 1], c.send_forward);
    }
    if (k > 0 && c.send_backward > 0) {
      seconds += transfer_seconds(links, device[k], device[k - 1], c.send_backward);
    }
    return seconds;
  };
  // best[k][j]: the least largest value of chunks 0..k-1 over units [0, j),
  // and where chunk k-1 starts.
  struct Table {
    std::vector<std::vector<double>> best;
    std::vector<std::vector<int>> from;
  };
  const auto solve = [&](const auto& value_of) {
    Table t{std::vector<std::vector<double>>(chunks + 1, std::vector<double>(units + 1, kInfinite)),
            std::vector<std::vector<int>>(chunks + 1, std::vector<int>(units + 1, -1))};
    t.best[0][0] = 0;
    for (int k = 1; k <= chunks; ++k) {
      // Chunk k-1 takes units [i, j); the chunks after it need one unit each.
      for (int j = k; j <= units - (chunks - k); ++j) {
        for (int i = k - 1; i < j; ++i) {
          if (t.best[k - 1][i] == kInfinite) continue;
          const double value = std::max(t.best[k - 1][i], value_of(k - 1, i, j));
          if (value < t.best[k][j]) {
            t.best[k][j] = value;
            t.from[k][j] = i;
          }
        }
      }
    }
    return t;
  };
  const Table table = solve(load);
  const auto& best = table.best;
  const auto cut_of = [&](const Table& t) {
    PipelineCut cut(chunks);
    for (int k = chunks, j = units; k > 0; --k) {
      j = t.from[k][j];
      cut[k - 1] = position(j);
    }
    return cut;
  };
  PartitionResult result;
  if (best[chunks][units] != kInfinite) {
    result.fits = true;
    result.slowest = best[chunks][units];
    result.cut = cut_of(table);
    return result;
  }
  // None fits: the cut needing least memory on its fullest device.
  const Table least = solve([&](int k, int i, int j) {
    return static_cast<double>(chunk_bytes(cost(i, j), in_flight[k], shape));
  });
  result.cut = cut_of(least);
  // Saturated at the largest uint64, as chunk_bytes saturates (2^64 itself
  // is out of a uint64's range).
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  const double least_chunk = least.best[chunks][units];
  const uint64_t per_chunk = least_chunk >= 0x1p64 ? kMax : static_cast<uint64_t>(least_chunk);
  if (__builtin_mul_overflow(per_chunk, static_cast<uint64_t>(shape.chunks_per_device),
                             &result.least_bytes)) {
    result.least_bytes = kMax;
  }
  return result;
}

std::string partition_error(const ChunkedGraph& chunked, const PipelineShape& shape,
                            uint64_t budget, const PartitionResult& result) {
  return fmt::format(
      "pipeline: no cut of {} into {} chunks fits {} bytes a device: under {} the first device "
      "holds up to {} micro-batch chunks at once, and the cut needing least memory needs {} bytes "
      "on its fullest device (fewer micro-batches in flight, more devices or a smaller "
      "micro-batch need less)",
      chunked.graph().name, result.cut.size(), budget, to_string(shape.schedule),
      schedule_in_flight(shape.schedule, shape.devices, shape.chunks_per_device,
                         shape.micro_batches, 0),
      result.least_bytes);
}

}  // namespace memwall
