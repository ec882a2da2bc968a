// Pipeline partitioning: where to cut a graph into pipeline chunks
// (Note [Pipeline partitioning] in src/planner/pipeline_partition.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memwall/sim/pipeline_chunks.h"

namespace memwall {

// Cut points for partition_pipeline: every forward op on graphs of at most
// kEveryOpCuts forward ops, else the layers' starts (Note [Pipeline
// partitioning]).
inline constexpr int kEveryOpCuts = 256;
std::vector<int> default_cut_points(const ChunkedGraph& chunked);

// Tarnawski et al. 2020's dynamic programme for contiguous splits (Note
// [Pipeline partitioning] in src/planner/pipeline_partition.cc): the cut of the
// forward into devices x chunks_per_device chunks at `cut_points`
// minimizing the slowest chunk's forward, backward and transfer seconds per
// micro-batch, such that each chunk fits its device's budget with the
// micro-batches its schedule holds in flight. When no cut fits, the cut
// needing least memory on its fullest device. Throws Error on counts no cut
// allows (more chunks than cut points).
struct PartitionResult {
  PipelineCut cut;
  bool fits = false;
  double slowest = 0;  // the objective, where it fits: the slowest chunk's seconds per micro-batch
  uint64_t least_bytes = 0;  // where none fits: the least bytes a cut needs on its fullest device
};
PartitionResult partition_pipeline(const ChunkedGraph& chunked, const PipelineShape& shape,
                                   const std::vector<int>& cut_points, uint64_t budget);
// The one-line error of a partition that does not fit.
std::string partition_error(const ChunkedGraph& chunked, const PipelineShape& shape,
                            uint64_t budget, const PartitionResult& result);

}  // namespace memwall
