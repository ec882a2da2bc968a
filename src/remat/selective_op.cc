// selective-op: torchtitan's op-level selective activation checkpointing
// (activation_checkpoint.mode "selective", selective_ac_option "op";
// _apply_ac_to_transformer_block in torchtitan/parallelisms/
// parallelize_llama.py, commit 9dec370 of 2024-12-26, the one its published
// Llama 3.1 benchmarks ran). Each transformer block is checkpointed with a
// policy that saves the outputs of the ops in its save list, the matmuls
// (aten.mm: the linear layers') and the fused attention kernels (scaled_dot_product flash or
// memory-efficient), except every second matmul of the block, counted in
// forward order from 1; everything else the block saves is recomputed in
// backward. For a Llama block that keeps q, v, gate (w1) and down (w2)
// projections and the attention output, and recomputes k, o and up (w3),
// the norms, the rotary embedding and the SwiGLU product.
//
// Layers are found as per-layer finds them (Note [What a layer is] in
// src/graph/layers.cc); what a layer hands to another region (its
// output, the next layer's input) is kept, as a checkpoint's input is.
// Embeddings, the final norm, the head and the loss are not checkpointed.
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/plan/builders.h"
#include "planner_common.h"

namespace memwall {
namespace {

// The kernels torchtitan's list saves: SDPA's flash and memory-efficient
// ATen ops in a trace, the zoo's fused attention.
bool is_fused_attention(std::string_view type) {
  return type == "_scaled_dot_product_flash_attention" ||
         type == "_scaled_dot_product_efficient_attention" || type == "flash_attention";
}

// A linear layer's matmul (aten.mm in torchtitan's blocks): a matmul one of
// whose inputs is a weight, a parameter or its ZeRO all-gather. The
// attention's own batched matmuls (QK^T, AV) read only activations.
bool is_weight_matmul(const Graph& graph, const BufferUses& uses, const Op& op) {
  if (op.type != "mm" && op.type != "addmm" && op.type != "matmul" && op.type != "linear") {
    return false;
  }
  for (const BufferId b : op.in) {
    if (graph.buffers[b].kind == BufferKind::kParam) return true;
    const OpId producer = uses.producer(b);
    if (producer != kNoOp && graph.ops[producer].phase == Phase::kComm) return true;
  }
  return false;
}

}  // namespace

RematResult plan_selective_op(const Graph& graph, const Hardware& hardware, uint64_t budget,
                              const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  const Layers layers = find_layers(graph);
  const std::vector<int>& layer_of = layers.of_op;
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  const std::vector<int> producer_layer = buffer_layers(graph, layers);
  std::vector<uint8_t> keep(graph.buffers.size(), 1);
  const BufferUses uses(graph);
  std::vector<uint8_t> hold(graph.buffers.size(), 0);
  std::vector<int> matmuls(layers.names.size(), 0);  // per layer, in forward order
  size_t saved_matmuls = 0, attention = 0;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward || layer_of[op.id] < 0) continue;
    bool save = false;
    if (is_weight_matmul(graph, uses, op)) {
      save = ++matmuls[layer_of[op.id]] % 2 == 1;  // every second one is recomputed
      saved_matmuls += save ? 1 : 0;
    } else if (is_fused_attention(op.type)) {
      save = true;
      ++attention;
    }
    if (save) {
      // Saved for the recompute as much as for backward: torch's selective
      // checkpoint caches these outputs and the recompute reads them there
      // (Note [Checkpoints are held]).
      for (const BufferId b : op.out) hold[b] = 1;
      continue;
    }
    for (const BufferId b : op.out) {
      if (droppable[b] && producer_layer[b] == layer_of[op.id]) keep[b] = 0;
    }
  }
  remat_detail::keep_layer_inputs(graph, layer_of, producer_layer, keep, hold);
  Plan plan = remat_detail::checkpoint_plan(graph, hardware, budget, keep, hold);
  std::string note = fmt::format(
      "{} layers: saves {} matmul and {} attention outputs, {} bytes dropped after forward",
      layers.names.size(), saved_matmuls, attention, dropped_bytes(graph, keep));
  return remat_detail::finish(graph, hardware, budget, std::move(plan), "selective-op",
                              std::move(note), clock);
}

}  // namespace memwall
