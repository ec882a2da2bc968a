// Buffer versions: in-place updates of activations as new versions of a
// buffer that can be dropped and regenerated (Note [Buffer versions] in
// src/graph/versions.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"

namespace memwall {

// Rewrites every in-place update of an activation or temp buffer by a
// forward or backward op into a new version: the op reads the current
// version and creates the next one (a buffer of the same size with
// `version_of` naming the previous version, named "<buffer>@v<k>"), and
// every later op refers to the new version. Updates of parameters,
// gradients, optimizer states and inputs stay updates. New buffers are
// appended, so existing ids keep their meaning. Returns the versions added.
int version_in_place_updates(Graph& graph);

// The same graph with the in-place ops rewritten out of place: every
// version a buffer of its own that never takes over its predecessor's
// storage. The reference that versioned graphs are compared with.
Graph out_of_place(Graph graph);

// True when running the op again reproduces its outputs and changes
// nothing else a plan depends on: it updates nothing in place, or it is a
// forward op whose only updates are persistent state its outputs do not
// read back (batch norm's running statistics), which a replay leaves
// alone (Note [Replaying side effects]).
bool recomputable(const Graph& graph, const Op& op);

// Per op: 1 for the ops a rematerialization replays as part of the
// forward: the forward's ops, and the collectives that re-create a buffer
// from persistent state for forward readers alone (ZeRO-3's all-gather of a
// parameter's shard before its forward users). Dropping an activation may
// replay such a collective with its readers (Note [Gathers replay with the
// forward] in src/graph/versions.cc).
std::vector<uint8_t> forward_side_ops(const Graph& graph);

}  // namespace memwall
