// The checkpointing schedule most rematerialization planners share: keep a
// chosen set of activations on the device from forward to backward, drop
// every other saved activation after its last forward use, and recompute
// what the backward needs just before it needs it, from the nearest
// resident ancestors. A forward-only program (no backward op) has the same
// schedule over its own gaps: a dropped activation goes after the use
// before its largest gap and comes back for the use after it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall {

// Per buffer: 1 when the buffer can be dropped and recomputed before its
// next use: an activation read again later (read_again_later: saved for
// backward in a training iteration; read again after a gap of other ops in
// a forward-only program) whose producer does not update a buffer in place.
// Everything else stays where the default schedule has it.
std::vector<uint8_t> droppable_activations(const Graph& graph);

// The default plan in which every droppable activation b with keep[b] == 0
// is freed after its last forward use and recomputed before its first
// backward use (plan_with_evictions, Note [Applying evictions]): a backward
// op needing a dropped buffer recomputes its producer, regenerating first
// any missing input back to resident buffers (kept checkpoints, params,
// inputs); each segment between checkpoints is thus recomputed once, and
// its recomputed activations stay until their last backward use.
// `keep` is indexed by buffer id (size = buffers) and only matters for
// droppable buffers: a buffer that is not saved for backward is freed after
// forward whatever `keep` says, so checkpoints are saved activations.
// In a forward-only program each dropped activation is freed after the use
// before its largest gap between consecutive uses and recomputed before the
// use after it (Note [Forward-only gaps] in checkpoints.cc).
// `hold` (empty, or indexed by buffer id): region inputs a recompute reads,
// held until it does even when backward itself does not read them, as
// torch.utils.checkpoint saves its region's inputs (Note [Checkpoints are
// held] in checkpoints.cc); per-layer and selective-op hold each layer's
// inputs.
// Throws Error when `keep` or `hold` has the wrong size.
Plan plan_with_checkpoints(const Graph& graph, std::span<const uint8_t> keep, std::string hardware,
                           uint64_t budget, std::span<const uint8_t> hold = {});

// Bytes of droppable activations with keep[b] == 0 (what the checkpoints
// save at the boundary between forward and backward).
uint64_t dropped_bytes(const Graph& graph, std::span<const uint8_t> keep);

// The forward's articulation points on its linearization (forward ops in
// execution order): droppable activations that are, alone, everything the
// forward carries across the cut after some forward op. Keeping one splits
// the forward into independent segments (Chen et al. 2016, sec. 4.1's
// "candidate stage splitting points"). In forward order, no duplicates.
std::vector<BufferId> candidate_checkpoints(const Graph& graph);

// FLOPs of the plan's recompute steps (the extra work a remat plan adds).
double recomputed_flops(const Graph& graph, const Plan& plan);

}  // namespace memwall
