// Each parameter's optimizer step, however many ops make it: the zoo emits
// one op per parameter, a traced torch.optim step several (Note [Traced
// optimizer steps] in src/swap/optimizer_steps.cc). The ZeRO and offload
// rewrites (zero.h, offload.h) work from these.
#pragma once

#include <vector>

#include "memwall/graph/types.h"

namespace memwall {

// One parameter's model states and the ops that step them.
struct ModelState {
  BufferId param = -1;
  BufferId grad = -1;            // the gradient the step reads
  std::vector<BufferId> states;  // optimizer states it updates, in first-update order
  OpId step = kNoOp;             // its last op, the last to update the parameter
  std::vector<OpId> ops;         // its ops in order, ending with `step`
  std::vector<BufferId> temps;   // buffers its ops create, used only inside it
};

// Every parameter that has an optimizer step, in step order. A step is the
// run of consecutive optimizer-phase ops up to the last one that updates
// its parameter; ops of other phases are ignored. Throws Error naming the
// op for an optimizer phase that is not one such run per parameter (a
// multi-tensor foreach step, interleaved parameters, an op after the last
// parameter update, a step that reads no gradient or shares a state or a
// temporary with another op).
std::vector<ModelState> model_states(const Graph& graph);

// True when `s` is one op that reads only its gradient, creates nothing and
// updates only its parameter and states: the form the rewrites synthesize.
bool is_single_op_step(const Graph& graph, const ModelState& s);

// `graph` with every step that is not a single op (is_single_op_step)
// replaced by one op at its last op's place: it reads the gradient, updates
// the states and the parameter, takes the most memory its temporaries hold
// at once as workspace, and sums its ops' flops, bytes and (when every op
// has one) measured time. The temporaries are dropped and buffer and op ids
// renumbered; `graph` itself is returned when nothing needs fusing. Throws
// as model_states does.
Graph fuse_optimizer_steps(const Graph& graph);

}  // namespace memwall
