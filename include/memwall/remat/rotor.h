// The pieces of the Rotor and Checkmate planners that tests and other
// planners reuse (docs/remat-rotor.md, docs/remat-checkmate.md): the
// linearization of a training graph into a chain of stages, Rotor's dynamic
// program over that chain, and the plan of an explicit op sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memwall/base/deadline.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"

namespace memwall::rotor {

// One stage of the chain: the forward ops between two consecutive cut
// points and the backward ops that differentiate them. Byte counts leave out
// the baseline (params, optimizer states, inputs) and the stage's input X_i,
// which the caller holds; param grads count from the backward creating them.
struct Stage {
  std::vector<OpId> fwd;
  std::vector<OpId> bwd;
  double fwd_time = 0;
  double bwd_time = 0;
  uint64_t x = 0;                 // X_i: what this stage reads from the previous one
  uint64_t xbar = 0;              // what F_all keeps: the backward's inputs and X_{i+1}
  uint64_t delta_in = 0;          // gradients B_i receives from B_{i+1}
  uint64_t peak_fwd_none = 0;     // peak while the forward keeps only X_{i+1}
  uint64_t peak_fwd_all = 0;      // peak while the forward keeps xbar
  uint64_t peak_bwd = 0;          // peak of B_i, from its inputs to its gradients
  uint64_t grads = 0;             // param grads B_i creates (resident from then on)
  bool recomputable = true;       // no forward op updates a buffer in place
  bool bwd_reads_input = false;   // B_i reads some of X_i
  bool bwd_reads_output = false;  // B_i reads some of X_{i+1}
};

struct Chain {
  std::vector<Stage> stages;  // the last one holds the loss
  std::vector<OpId> tail;     // ops after the backward (optimizer), run once
  uint64_t baseline = 0;      // params, optimizer states and inputs
};

// Cuts the forward after every op where the chain conditions hold (see Note
// [Linearization] in rotor_chain.cc), then merges neighbouring stages down
// to max_stages (balanced by time). Throws Error for a graph that is not
// forward ops, then backward ops, then others reading only baseline buffers.
Chain linearize(const Graph& graph, const Hardware& hardware, size_t max_stages);

// One move of a Rotor schedule.
struct Move {
  enum class Kind : uint8_t { kForwardNone, kForwardCheck, kForwardAll, kBackward };
  Kind kind = Kind::kForwardAll;
  int stage = 0;
};

struct DpResult {
  bool feasible = false;
  double cost = 0;  // seconds of compute, recomputation included
  std::vector<Move> moves;
  uint64_t slot_bytes = 0;  // the discretization unit every size was rounded up to
};

// Rotor's dynamic program (Beaumont et al. 2019, section 4) over `memory`
// bytes above the baseline, discretized into `slots` slots (sizes rounded
// up, so the model never undercounts). Throws Error once `deadline` passes.
// frees_inputs: a stage's input goes after its last forward where no
// backward reads it (Note [Inputs freed after their last forward] in
// rotor.cc; memwall's proposer); false: the paper's model.
DpResult solve_chain(const Chain& chain, uint64_t memory, int slots, Deadline deadline = {},
                     bool frees_inputs = false);

// The same recurrence enumerated over every Rotor schedule, in exact bytes
// (no slots, no table): the optimal cost, or infinity when nothing fits.
// Exponential; for tests on short chains.
double exhaustive_cost(const Chain& chain, uint64_t memory, bool frees_inputs = false);

// The ops of a move sequence followed by the tail.
std::vector<OpId> expand_moves(const Chain& chain, std::span<const Move> moves);

// The plan running `sequence` (first occurrence: compute, later ones:
// recompute) that keeps each buffer only while it is read again before its
// producer runs again (Note [Minimal liveness] in rotor_chain.cc). Throws
// Error when an op never runs, an in-place op runs twice, or an op would
// read a buffer that is gone.
Plan plan_from_sequence(const Graph& graph, std::span<const OpId> sequence, std::string hardware,
                        uint64_t budget);

}  // namespace memwall::rotor
