// What pipeline chunks recompute (memwall/sim/pipeline_chunks.h).
//
// Note [Pipeline recomputation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Megatron-LM trains its large pipelines with full recomputation
// (Narayanan et al. 2021, sec. 3.5; --recompute-granularity full, one
// layer a checkpoint): each layer keeps only its input from its forward to
// its backward, and reruns its forward just before its backward. In a
// chunk this is a different order of the same ops, measured by the same
// sweep over it:
//   - a storage is dropped when a layer's forward makes it and no forward
//     op of another layer, nor one outside every layer, touches it (so a
//     layer's output, the next layer's input, is kept; so are the
//     activations of the embedding and the head, which Megatron does not
//     checkpoint). Its forward instance dies after its last forward use;
//   - a layer whose forward ops are all in the chunk is rerun just before
//     the first backward op that touches one of its dropped storages. The
//     rerun's ops make second instances of every storage the layer makes,
//     from the kept inputs; the backward reads the dropped storages' second
//     instances, and the others die after the rerun's last use. A layer
//     split by a cut is not recomputed (every-op cuts can split one);
//   - the rerun's seconds, its tensor-parallel all-reduces among them, are
//     backward seconds; its bytes count in the backward peak.
// So `saved` is the layers' inputs plus what is outside every layer, and
// the backward peak is one layer's activations over that, as Korthikanti
// et al. 2022 (sec. 4.2, "full activation recomputation") count it.
// Selective recomputation (their sec. 5) drops less and reruns less: the
// dropped storages are a layer's attention s x s tensors (what softmax and
// dropout ops make, shaped [b, heads, s, s], as docs/remat-selective.md
// finds them), and a layer reruns only the ops that make them and, from
// there back, the makers of what those read that its forward made and no
// backward op reads (QK^T's scores): second instances of their outputs
// only, from the kept q and k. A layer then saves 34sbh/t with sequence
// parallelism (Korthikanti et al., Table 2).
#include <algorithm>
#include <optional>
#include <string_view>

#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {

// Note [Pipeline recomputation]: the layers' forward ops, and the storages
// a layer makes that nothing outside it touches in the forward.
void ChunkedGraph::find_droppable() {
  const Layers& layers = layers_;
  const size_t buffers = graph_.buffers.size();
  layer_of_op_ = layers.of_op;
  // A layer's tensor-parallel collectives (its all-gathers and
  // reduce-scatters under sequence parallelism) are comm ops, which
  // find_layers leaves outside every layer; one between two forward ops of
  // the same layer is that layer's, and reruns with it as Megatron-LM's
  // recomputation gathers again.
  for (size_t pos = 0; pos < forward_.size(); ++pos) {
    const OpId id = forward_[pos];
    if (graph_.ops[id].phase != Phase::kComm || layer_of_op_[id] >= 0) continue;
    int before = -1, after = -1;
    for (size_t k = pos; k-- > 0;) {
      if (graph_.ops[forward_[k]].phase != Phase::kComm) {
        before = layer_of_op_[forward_[k]];
        break;
      }
    }
    for (size_t k = pos + 1; k < forward_.size(); ++k) {
      if (graph_.ops[forward_[k]].phase != Phase::kComm) {
        after = layer_of_op_[forward_[k]];
        break;
      }
    }
    if (before >= 0 && before == after) layer_of_op_[id] = before;
  }
  layer_forward_.assign(layers.names.size(), {});
  made_in_layer_.assign(buffers, -1);
  std::vector<uint8_t> escapes(buffers, 0);
  std::vector<uint8_t> seen(buffers, 0);
  for (const OpId id : forward_) {
    const Op& op = graph_.ops[id];
    const int layer = layer_of_op_[id];
    if (layer >= 0) layer_forward_[layer].push_back(id);
    for (const auto* list : {&op.in, &op.updates, &op.out}) {
      for (const BufferId b : *list) {
        const BufferId s = storage_[b];
        if (!seen[s]) {
          seen[s] = 1;
          // Made here, or an input or state the forward first reads here.
          if (list == &op.out) made_in_layer_[s] = layer;
        }
        if (layer < 0 || made_in_layer_[s] != layer) escapes[s] = 1;
      }
    }
  }
  droppable_.assign(buffers, 0);
  for (size_t s = 0; s < buffers; ++s) {
    droppable_[s] = made_in_layer_[s] >= 0 && !escapes[s] && !is_state_[s] &&
                    graph_.buffers[s].kind != BufferKind::kInput;
  }
  remade_.assign(buffers, 0);
  if (recompute_ != ChunkRecompute::kSelective) {
    layer_rerun_ = layer_forward_;
    for (size_t s = 0; s < buffers; ++s) remade_[s] = made_in_layer_[s] >= 0;
  } else {
    find_selective();
  }
  drops_anything_ = std::find(droppable_.begin(), droppable_.end(), uint8_t{1}) != droppable_.end();
}

void ChunkedGraph::find_selective() {
  const size_t buffers = graph_.buffers.size();
  const OpId last_forward = forward_.back();
  std::vector<OpId> maker(buffers, kNoOp);
  for (const OpId id : forward_) {
    for (const BufferId b : graph_.ops[id].out) {
      if (maker[storage_[b]] == kNoOp) maker[storage_[b]] = id;
    }
  }
  std::vector<uint8_t> read_backward(buffers, 0);
  for (const Op& op : graph_.ops) {
    if (op.id <= last_forward || op.phase == Phase::kOptimizer) continue;
    for (const auto* list : {&op.in, &op.updates}) {
      for (const BufferId b : *list) read_backward[storage_[b]] = 1;
    }
  }
  // Dropped: the attention's s x s tensors (src/remat/selective.cc's rule).
  for (size_t s = 0; s < buffers; ++s) {
    if (!droppable_[s]) continue;
    const Dims& shape = graph_.buffers[s].shape;
    const std::string& type = graph_.ops[maker[s]].type;
    droppable_[s] =
        (type == "softmax" || type == "dropout") && shape.size() == 4 && shape[2] == shape[3];
  }
  // Rerun: their makers, and back from there the makers of what they read
  // that the layer made and no backward op reads.
  std::vector<uint8_t> rerun(graph_.ops.size(), 0);
  std::vector<OpId> work;
  for (size_t s = 0; s < buffers; ++s) {
    if (droppable_[s] && !rerun[maker[s]]) {
      rerun[maker[s]] = 1;
      work.push_back(maker[s]);
    }
  }
  while (!work.empty()) {
    const Op& op = graph_.ops[work.back()];
    work.pop_back();
    for (const BufferId b : op.in) {
      const BufferId s = storage_[b];
      if (made_in_layer_[s] != layer_of_op_[op.id] || made_in_layer_[s] < 0 || read_backward[s] ||
          maker[s] == kNoOp || rerun[maker[s]]) {
        continue;
      }
      rerun[maker[s]] = 1;
      work.push_back(maker[s]);
    }
  }
  layer_rerun_.assign(layer_forward_.size(), {});
  for (size_t l = 0; l < layer_forward_.size(); ++l) {
    for (const OpId id : layer_forward_[l]) {
      if (!rerun[id]) continue;
      layer_rerun_[l].push_back(id);
      for (const BufferId b : graph_.ops[id].out) remade_[storage_[b]] = 1;
    }
  }
}

std::vector<std::pair<OpId, bool>> ChunkedGraph::run_order(const std::vector<OpId>& ops, int begin,
                                                           int end) const {
  std::vector<std::pair<OpId, bool>> order;
  if (recompute_ == ChunkRecompute::kNone) {
    for (const OpId id : ops) order.emplace_back(id, false);
    return order;
  }
  // Layers whose whole forward is in the chunk, not yet rerun.
  std::vector<uint8_t> pending(layer_forward_.size(), 0);
  for (size_t l = 0; l < layer_forward_.size(); ++l) {
    pending[l] = !layer_forward_[l].empty();
    for (const OpId id : layer_forward_[l]) {
      if (anchor_[id] < begin || anchor_[id] >= end) pending[l] = 0;
    }
  }
  const OpId last_forward = forward_.back();
  for (const OpId id : ops) {
    const Op& op = graph_.ops[id];
    if (id > last_forward && op.phase != Phase::kOptimizer) {
      for (const auto* list : {&op.in, &op.updates, &op.out}) {
        for (const BufferId b : *list) {
          const BufferId s = storage_[b];
          if (!droppable_[s] || !pending[made_in_layer_[s]]) continue;
          const int layer = made_in_layer_[s];
          pending[layer] = 0;
          for (const OpId f : layer_rerun_[layer]) order.emplace_back(f, true);
        }
      }
    }
    order.emplace_back(id, false);
  }
  return order;
}

std::string_view to_string(ChunkRecompute recompute) {
  switch (recompute) {
    case ChunkRecompute::kFullLayers:
      return "per-layer";
    case ChunkRecompute::kSelective:
      return "selective";
    case ChunkRecompute::kNone:
      break;
  }
  return "keep-all";
}

std::optional<ChunkRecompute> parse_chunk_recompute(std::string_view name) {
  if (name == "keep-all") return ChunkRecompute::kNone;
  if (name == "per-layer") return ChunkRecompute::kFullLayers;
  if (name == "selective") return ChunkRecompute::kSelective;
  return std::nullopt;
}

}  // namespace memwall
