// Non-contiguous pipeline placement: Tarnawski et al. 2020's integer
// programme, solved with CBC under a deadline (Note [Non-contiguous
// placement] in src/planner/pipeline_placement.cc).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "memwall/base/deadline.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {

// One unit of placement (a segment between two cut points): what it costs
// one micro-batch, and the bytes it keeps on whichever device holds it.
struct SegmentCost {
  double seconds = 0;   // forward + backward
  uint64_t states = 0;  // resident the whole step: states (sharded), engine buffers
  uint64_t saved = 0;   // held per micro-batch in flight
  uint64_t peak = 0;    // above the rest while its forward, backward or optimizer step runs
};

// The programme's input: segments in model order, and per boundary between
// segments u and u+1 the seconds of its transfers (forward activation and
// backward gradient), which each of the two devices pays when they differ.
struct PlacementProblem {
  std::vector<SegmentCost> segments;
  std::vector<double> boundary_seconds;  // segments - 1 of them
  int devices = 1;
  int in_flight = 1;    // micro-batches a segment holds at once (placement_in_flight)
  uint64_t budget = 0;  // bytes a device
};

struct PlacementResult {
  std::vector<int> device;    // per segment
  std::vector<double> loads;  // per device: seconds per micro-batch, transfers included
  double max_load = 0;        // the objective: the largest load
  double bound = 0;           // the least max_load CBC proved possible
  bool optimal = false;       // proven optimal
  // CBC was stopped at the deadline before it answered: the result is the
  // best contiguous placement (its warm start), bound the trivial one.
  bool timed_out = false;
  // The best contiguous placement under the same model (the dynamic
  // programme's answer restricted to it); infinity where none fits.
  double contiguous_load = std::numeric_limits<double>::infinity();
  std::vector<int> contiguous_device;  // per segment; empty where none fits
};

// The integer programme over plain segment costs. Throws Error (one line)
// on fewer segments than devices, a segment that fits no device alone, a
// budget no placement fits (CBC's proof), or no placement by the deadline.
PlacementResult solve_placement_ip(const PlacementProblem& problem, Deadline deadline);

// Each device's load and whether every device fits, for a placement.
std::vector<double> placement_loads(const PlacementProblem& problem,
                                    const std::vector<int>& device);
bool placement_fits(const PlacementProblem& problem, const std::vector<int>& device);

// The segments between consecutive `cut_points` of `chunked` (the first 0)
// on shape.devices devices, their transfers over the in-node link, in
// flight as placement_in_flight gives (memwall/sim/pipeline.h).
PlacementProblem placement_problem(const ChunkedGraph& chunked, const PipelineShape& shape,
                                   const std::vector<int>& cut_points, uint64_t budget);
PlacementResult place_noncontiguous(const ChunkedGraph& chunked, const PipelineShape& shape,
                                    const std::vector<int>& cut_points, uint64_t budget,
                                    Deadline deadline);

// A pipeline plan placed by the programme on the layers' segments:
// consecutive segments on one device merge into a chunk, and the
// simulation runs the placement (PipelineSetup::chunk_devices).
struct PlacementPlan {
  PipelinePlan plan;               // its cut the merged chunks' starts; shape.chunks_per_device 1
  std::vector<int> chunk_devices;  // per merged chunk
  std::vector<int> cut_points;     // the segments' starts
  PlacementResult placement;
};
// Throws Error for what plan_pipeline refuses, several chunks a device
// asked for (the programme chooses them), data-parallel replicas or a
// graph whose ranks all-reduce gradients (plan_pipeline's, per contiguous
// chunk), an interleaved or
// Hanayo schedule, and what solve_placement_ip throws.
PlacementPlan plan_placement(const Graph& graph, const Hardware& node,
                             const PipelineRequest& request, Deadline deadline);

}  // namespace memwall
