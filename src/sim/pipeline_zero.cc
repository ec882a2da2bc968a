// ZeRO over a pipeline stage's replicas (memwall/sim/pipeline_chunks.h).
//
// Note [ZeRO in a pipeline stage]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A pipeline chunk's states are replicated over R ranks: the data-parallel
// replicas times the context-parallel ranks (Note [Context parallelism in
// the zoo] in src/models/context_parallel.cc). ZeRO (Rajbhandari et al.
// 2020) shards them over those R, as it does on one GPU (src/swap/zero.cc):
//   - stage 1 (Megatron-LM's distributed optimizer): the optimizer states;
//     gradients reduce-scattered and parameters all-gathered once a step
//     (src/planner/pipeline_plan.cc times it);
//   - stage 2: the gradients too. A stage runs m micro-batches before its
//     step, so a whole gradient cannot wait for the last one: each
//     micro-batch's backward reduce-scatters its gradients into the rank's
//     shard as they are made, a unit at a time (DeepSpeed's buckets; FSDP2
//     with gradient sync on every micro-batch), so a unit's whole gradient
//     is the only one alive, beside the backward's own bytes. The updated
//     parameters are all-gathered after the step;
//   - stage 3: the parameters too. Each micro-batch's forward all-gathers a
//     unit's parameters before its ops and frees them after, prefetching
//     the next (FSDP's reshard after forward, one unit ahead), and its
//     backward gathers them again (again for a per-layer rerun) and
//     reduce-scatters each unit's gradient: two units' parameters alive in
//     the forward, two and a unit's gradient in the backward.
// A unit is a layer (Note [What a layer is]) or a parameter outside every
// layer (the embedding, the head: torchtitan shards each block and those
// apart), and the peaks add the largest unit's bytes
// (ChunkCost::largest_unit_params, largest_unit_grads). The pipeline plan
// adds their time: the per-micro-batch collectives run beside the passes
// on the comm stream, one unit's gather or reduction exposed. Not
// modelled: the experts of expert parallelism under stages 2 and 3 (the
// plan refuses them), and bucket sizes other than a unit.
#include <algorithm>

#include "memwall/base/error.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {

uint64_t shard_bytes(uint64_t bytes, int shards) {
  const auto r = static_cast<uint64_t>(std::max(shards, 1));
  return bytes / r + (bytes % r != 0 ? 1 : 0);
}

ChunkCost zero_stage_memory(ChunkCost c, const PipelineShape& shape) {
  if (shape.zero_stage < 0 || shape.zero_stage > 3) {
    fail("pipeline: ZeRO stage {} does not exist (0, 1, 2 or 3)", shape.zero_stage);
  }
  if (shape.zero_stage <= 1) {
    const uint64_t states =
        sharded_states(c, shape.optimizer_shards, shape.expert_optimizer_shards);
    c.optimizer_states -= c.states - states;
    c.states = states;
    return c;
  }
  if (c.expert_grads > 0) {
    fail("pipeline: ZeRO stage {} with expert parallelism is not built (stage 0 or 1)",
         shape.zero_stage);
  }
  const int r = shape.optimizer_shards;
  const uint64_t params = c.states - c.grads - c.optimizer_states;
  const uint64_t grads = shard_bytes(c.grads, r), optimizer = shard_bytes(c.optimizer_states, r);
  const uint64_t kept = shape.zero_stage == 3 ? shard_bytes(params, r) : params;
  c.states = kept + grads + optimizer;
  c.grads = grads;
  c.optimizer_states = optimizer;
  uint64_t gathered = 0;  // stage 3: the unit running and the one prefetched
  if (shape.zero_stage == 3)
    gathered = saturating_add(c.largest_unit_params, c.largest_unit_params);
  c.forward_peak = saturating_add(c.forward_peak, gathered);
  c.backward_peak = saturating_add(c.backward_peak, saturating_add(gathered, c.largest_unit_grads));
  return c;
}

}  // namespace memwall
