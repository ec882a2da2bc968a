// A training graph cut into pipeline chunks (memwall/sim/pipeline_chunks.h).
//
// Note [Pipeline chunks]
// ~~~~~~~~~~~~~~~~~~~~~~
// The graph is one micro-batch's iteration. Its forward (the ops before the
// first backward op, collectives among them) is cut into contiguous runs of
// positions; every other op goes with the forward position it is anchored
// to, and a chunk holds the ops anchored in its run:
//   - a backward op (or a collective after the first backward op) goes
//     where its forward op was: not before the activations it reads were
//     made, not after the ops that made the gradients it reads, and, when
//     it touches parameters (reads them, makes or adds to their
//     gradients), at a forward position that reads them all, the latest
//     such (a ResNet's convolution backward reads the block's input, made
//     one layer earlier, and goes with the convolution through its
//     weight; GPT-2's head backward goes with the head, not with the
//     embedding that shares its weight); touching none, with the latest
//     activation it reads, else with the gradients' makers (a gradient sum
//     goes with the layer whose gradient it adds to), else at the end (the
//     loss's seed gradient);
//   - an optimizer step goes with the first forward position that reads its
//     parameter.
// A chunk's states are every parameter its ops read or update, with the
// parameter's gradient and optimizer states (the optimizer steps' reads and
// updates), resident all step: Megatron-LM keeps gradients in one
// contiguous buffer for the whole step. A parameter two chunks read (GPT-2's
// tied word embedding, in the first chunk's embedding and the last chunk's
// head) is held by both, as Megatron-LM keeps a copy on the first and last
// stage, its gradient's bytes each chunk's shared_grads (the plan times
// their all-reduce); its step runs on the first.
// Every other buffer lives on the chunk from the first to the last of the
// chunk's ops that touch it (one that crosses from another chunk was
// received before its first use there), its versions as one storage; an
// op's workspace lives while the op runs. So one micro-batch's bytes above
// the states follow the chunk's ops in order: `saved` is what is live
// across the end of its forward, `forward_peak` and `backward_peak` the
// highest points on each side. Seconds are the cost model's (op_time),
// collectives included: Megatron-LM's tensor-parallel all-reduces block;
// context parallelism's ring exchanges run beside the next kernel and cost
// what it does not hide (hide_ring_exchanges).
// What crosses a cut: the non-state buffers made before it and read by the
// forward after it (or by backward ops anchored after it, in the other
// direction, their gradients), the batch's inputs left out.
//
// Note [Pipeline recomputation] (src/sim/pipeline_recompute.cc) says what a
// chunk reruns under Megatron-LM's full and selective recomputation.
//
// Note [Pipeline engines]
// ~~~~~~~~~~~~~~~~~~~~~~~
// The notes above are Megatron-LM's pipeline (the default engine): what a
// chunk receives is a tensor like its own, alive while its ops use it, and
// what it sends dies after its last use there. torch.distributed.pipelining
// (torch 2.x, torch/distributed/pipelining/stage.py), which runs a
// `--torchrun` layout (python/memwall/parallel.py), keeps more:
//   - a stage that receives activations allocates one receive buffer per
//     micro-batch at its first step and keeps them all (_make_tensor_from_
//     meta under _setup_forward_recv_info), and a stage that receives its
//     output's gradient likewise (_create_grad_recv_info). The chunk's ops
//     read them in place, so received storages are not the chunk's: they
//     are ChunkCost::engine_buffers, a micro-batch's (what crosses the
//     chunk's start plus what crosses its end), which the simulation and
//     the partition count once for every micro-batch, resident all step;
//   - a stage keeps its outputs (fwd_cache) from its forward until its
//     backward, which needs them: what crosses the chunk's end lives until
//     its backward is done.
// docs/torch-layout.md measures the difference on a 4-process run.
#include "memwall/sim/pipeline_chunks.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/layers.h"

namespace memwall {
namespace {

constexpr int kNoPosition = -1;

bool is_storage_kind_state(BufferKind kind) {
  return kind == BufferKind::kParam || kind == BufferKind::kOptimState;
}

// An optimizer step goes with its parameter's first forward reader.
int optimizer_anchor(const Op& op, const std::vector<std::vector<int>>& read_at, int last) {
  for (const BufferId p : op.updates) {
    if (static_cast<size_t>(p) < read_at.size() && !read_at[p].empty()) return read_at[p].front();
  }
  return last;
}

}  // namespace

// A backward op (Note [Pipeline chunks]) goes where its forward op was: at
// or after the activations it reads were made (lo), at or before the ops
// that made the gradients it reads (hi), and, where it touches parameters
// (reading them, or making or adding to their gradients), at a forward
// position that reads each of them: the latest such within [lo, hi].
int ChunkedGraph::backward_anchor(const Op& op, const std::vector<int>& made_at,
                                  const std::vector<int>& made_by_anchor,
                                  const std::vector<std::vector<int>>& read_at,
                                  const std::vector<BufferId>& param_of, int last) const {
  int lo = kNoPosition;
  int hi = kNoPosition;
  std::vector<int> candidates;
  bool touches_params = false;
  const auto touch_param = [&](BufferId p) {
    if (read_at[p].empty()) return;
    if (!touches_params) {
      candidates = read_at[p];
      touches_params = true;
      return;
    }
    std::vector<int> both;
    std::set_intersection(candidates.begin(), candidates.end(), read_at[p].begin(),
                          read_at[p].end(), std::back_inserter(both));
    candidates = std::move(both);
  };
  for (const auto* list : {&op.in, &op.updates, &op.out}) {
    const bool reads = list != &op.out;
    for (const BufferId b : *list) {
      const BufferId s = storage_[b];
      if (graph_.buffers[s].kind == BufferKind::kParam) {
        touch_param(s);
      } else if (param_of[s] != kNoBuffer) {
        touch_param(param_of[s]);
      } else if (reads && made_at[b] != kNoPosition && !is_state_[s]) {
        lo = std::max(lo, made_at[b]);
      } else if (reads && made_by_anchor[b] != kNoPosition) {
        hi = hi == kNoPosition ? made_by_anchor[b] : std::min(hi, made_by_anchor[b]);
      }
    }
  }
  const int top = hi == kNoPosition ? last : hi;
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (*it <= top && *it >= lo) return *it;
  }
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    if (*it <= top) return *it;
  }
  if (lo != kNoPosition) return lo;
  return top;
}

ChunkedGraph::ChunkedGraph(const Graph& graph, const Hardware& hardware, ChunkRecompute recompute,
                           PipelineEngine engine)
    : graph_(graph), hardware_(hardware), recompute_(recompute), engine_(engine) {
  const size_t ops = graph.ops.size();
  const size_t buffers = graph.buffers.size();
  OpId first_backward = kNoOp;
  for (const Op& op : graph.ops) {
    if (op.phase == Phase::kBackward) {
      first_backward = op.id;
      break;
    }
  }
  if (first_backward == kNoOp) {
    fail("pipeline: {} has no backward: only a training iteration is pipelined", graph.name);
  }
  for (OpId id = 0; id < first_backward; ++id) {
    if (graph.ops[id].phase != Phase::kOptimizer) forward_.push_back(id);
  }
  if (forward_.empty()) fail("pipeline: {} has no forward op", graph.name);
  const int last = forward_ops() - 1;

  storage_.resize(buffers);
  for (size_t b = 0; b < buffers; ++b) {
    BufferId root = static_cast<BufferId>(b);
    for (size_t hops = 0; graph.buffers[root].version_of != kNoBuffer && hops < buffers; ++hops) {
      root = graph.buffers[root].version_of;
    }
    storage_[b] = root;
  }
  // States: parameters, optimizer states, and what the optimizer steps read
  // and update beside them (the parameters' gradients).
  // A gradient's parameter: what the optimizer step reading it updates.
  std::vector<BufferId> param_of(buffers, kNoBuffer);
  is_state_.assign(buffers, 0);
  states_of_param_.assign(buffers, {});
  for (size_t b = 0; b < buffers; ++b) {
    is_state_[b] = is_storage_kind_state(graph.buffers[b].kind);
  }
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kOptimizer) continue;
    std::vector<BufferId> touched(op.in.begin(), op.in.end());
    touched.insert(touched.end(), op.updates.begin(), op.updates.end());
    for (const BufferId b : touched) is_state_[storage_[b]] = 1;
    for (const BufferId p : op.updates) {
      if (graph.buffers[p].kind != BufferKind::kParam) continue;
      for (const BufferId b : touched) {
        if (storage_[b] != storage_[p]) states_of_param_[storage_[p]].push_back(storage_[b]);
      }
      for (const BufferId g : op.in) param_of[storage_[g]] = storage_[p];
    }
  }
  // Note [Expert parallelism in the zoo]: an expert's parameters (the zoo
  // names them "<layer>.moe.experts.<j>.") and their states are one rank's
  // of e, replicated over d / e.
  is_expert_state_.assign(buffers, 0);
  if (graph_expert_parallel(graph) > 1) {
    for (size_t b = 0; b < buffers; ++b) {
      if (graph.buffers[b].kind != BufferKind::kParam ||
          graph.buffers[b].name.find(".moe.experts.") == std::string::npos) {
        continue;
      }
      is_expert_state_[storage_[b]] = 1;
      for (const BufferId t : states_of_param_[storage_[b]]) is_expert_state_[t] = 1;
    }
  }

  // Note [ZeRO in a pipeline stage]: a parameter's unit is the layer of
  // its first forward reader, or itself outside every layer.
  layers_ = find_layers(graph);
  {
    const Layers& layers = layers_;
    unit_of_param_.assign(buffers, -1);
    int next_unit = static_cast<int>(layers.names.size());
    for (const Op& op : graph.ops) {
      if (op.phase != Phase::kForward) continue;
      for (const BufferId b : op.in) {
        const BufferId s = storage_[b];
        if (graph.buffers[s].kind != BufferKind::kParam || unit_of_param_[s] >= 0) continue;
        unit_of_param_[s] = layers.of_op[op.id] >= 0 ? layers.of_op[op.id] : next_unit++;
      }
    }
    units_ = next_unit;
  }

  // Anchors (Note [Pipeline chunks]).
  std::vector<int> made_at(buffers, kNoPosition);  // forward position that made it
  std::vector<std::vector<int>> read_at(buffers);  // per parameter: forward positions reading it
  anchor_.assign(ops, last);
  for (int pos = 0; pos <= last; ++pos) {
    const Op& op = graph.ops[forward_[pos]];
    anchor_[op.id] = pos;
    for (const BufferId b : op.out) made_at[b] = pos;
    for (const auto* list : {&op.in, &op.updates}) {
      for (const BufferId b : *list) {
        const BufferId s = storage_[b];
        if (graph.buffers[s].kind != BufferKind::kParam) continue;
        if (read_at[s].empty() || read_at[s].back() != pos) read_at[s].push_back(pos);
      }
    }
  }
  param_reads_.assign(buffers, {kNoPosition, kNoPosition});
  for (size_t s = 0; s < buffers; ++s) {
    if (!read_at[s].empty()) param_reads_[s] = {read_at[s].front(), read_at[s].back()};
  }
  std::vector<int> made_by_anchor(buffers, kNoPosition);
  for (OpId id = first_backward; id < static_cast<OpId>(ops); ++id) {
    const Op& op = graph.ops[id];
    anchor_[id] = op.phase == Phase::kOptimizer
                      ? optimizer_anchor(op, read_at, last)
                      : backward_anchor(op, made_at, made_by_anchor, read_at, param_of, last);
    for (const BufferId b : op.out) made_by_anchor[b] = anchor_[id];
  }

  seconds_.resize(ops);
  for (const Op& op : graph.ops) seconds_[op.id] = op_time(hardware, graph, op);
  hide_ring_exchanges();
  if (recompute_ != ChunkRecompute::kNone) find_droppable();

  // What crosses each cut, by difference arrays over positions: a buffer
  // made at position a and read last (forward) at position z crosses every
  // cut in (a, z].
  std::vector<int64_t> forward_delta(forward_ops() + 2, 0);
  std::vector<int64_t> backward_delta(forward_ops() + 2, 0);
  std::vector<int> last_forward_read(buffers, kNoPosition);
  std::vector<int> lowest_reader(buffers, kNoPosition);
  for (const Op& op : graph.ops) {
    const int at = anchor_[op.id];
    const bool forward = op.id < first_backward;
    for (const auto* list : {&op.in, &op.updates}) {
      for (const BufferId b : *list) {
        if (forward) last_forward_read[b] = std::max(last_forward_read[b], at);
        if (!forward) {
          lowest_reader[b] = lowest_reader[b] == kNoPosition ? at : std::min(lowest_reader[b], at);
        }
      }
    }
  }
  for (size_t b = 0; b < buffers; ++b) {
    const Buffer& buf = graph.buffers[b];
    if (is_state_[storage_[b]] || buf.kind == BufferKind::kInput) continue;
    if (made_at[b] != kNoPosition && last_forward_read[b] > made_at[b]) {
      forward_delta[made_at[b] + 1] += static_cast<int64_t>(buf.bytes);
      forward_delta[last_forward_read[b] + 1] -= static_cast<int64_t>(buf.bytes);
    }
    // A gradient made by a backward op anchored at a and read by one
    // anchored at z < a crosses every cut in (z, a].
    if (made_by_anchor[b] != kNoPosition && lowest_reader[b] != kNoPosition &&
        lowest_reader[b] < made_by_anchor[b]) {
      backward_delta[lowest_reader[b] + 1] += static_cast<int64_t>(buf.bytes);
      backward_delta[made_by_anchor[b] + 1] -= static_cast<int64_t>(buf.bytes);
    }
  }
  // Note [Pipeline engines]: who made each buffer, and how far forward it
  // is read.
  maker_anchor_.assign(buffers, kNoPosition);
  for (size_t b = 0; b < buffers; ++b) {
    maker_anchor_[b] = made_at[b] != kNoPosition ? made_at[b] : made_by_anchor[b];
  }
  last_forward_read_ = std::move(last_forward_read);
  forward_crossing_.assign(forward_ops() + 1, 0);
  backward_crossing_.assign(forward_ops() + 1, 0);
  int64_t forward_now = 0;
  int64_t backward_now = 0;
  for (int cut = 0; cut <= forward_ops(); ++cut) {
    forward_now += forward_delta[cut];
    backward_now += backward_delta[cut];
    forward_crossing_[cut] = static_cast<uint64_t>(forward_now);
    backward_crossing_[cut] = static_cast<uint64_t>(backward_now);
  }
}

std::vector<int> ChunkedGraph::cut_points(bool every_op) const {
  std::vector<int> points;
  if (every_op) {
    for (int pos = 0; pos < forward_ops(); ++pos) points.push_back(pos);
    return points;
  }
  const Layers& layers = layers_;
  points.push_back(0);
  int previous = -1;
  for (int pos = 0; pos < forward_ops(); ++pos) {
    const int layer = layers.of_op[forward_[pos]];
    if (layer >= 0 && layer != previous) {
      if (previous >= 0) points.push_back(pos);
      previous = layer;
    }
  }
  return points;
}

ChunkCost ChunkedGraph::cost(int begin, int end) const {
  if (begin < 0 || end > forward_ops() || begin >= end) {
    fail("pipeline: no chunk of forward positions [{}, {}) in {}", begin, end, forward_ops());
  }
  const int64_t key = int64_t{begin} * (forward_ops() + 1) + end;
  if (const auto it = costs_.find(key); it != costs_.end()) return it->second;
  return costs_[key] = measure(begin, end);
}

// Note [Pipeline chunks]: a run of ring exchanges (cp_send_recv, Note
// [Context parallelism in the zoo] in src/models/context_parallel.cc) runs
// on the comm stream beside the kernel after it, one after another: they
// cost only what that kernel does not hide, shared in proportion.
void ChunkedGraph::hide_ring_exchanges() {
  const auto ops = static_cast<OpId>(graph_.ops.size());
  OpId run_start = 0;
  double run = 0;
  for (OpId id = 0; id < ops; ++id) {
    const Op& op = graph_.ops[id];
    if (op.type == "cp_send_recv") {
      if (run == 0) run_start = id;
      run += seconds_[id];
      continue;
    }
    if (run > 0) {
      const double exposed = std::max(0.0, run - seconds_[id]);
      for (OpId c = run_start; c < id; ++c) seconds_[c] *= exposed / run;
    }
    run = 0;
  }
}

ChunkCost ChunkedGraph::measure(int begin, int end) const {
  ChunkCost cost;
  const size_t buffers = graph_.buffers.size();
  std::vector<OpId> ops;
  for (const Op& op : graph_.ops) {
    if (anchor_[op.id] >= begin && anchor_[op.id] < end) ops.push_back(op.id);
  }
  // The chunk's ops in the order they run, reruns among them (Note
  // [Pipeline recomputation]); per instance (a storage, or its rerun's
  // second instance at storage + buffers), its first and last of them.
  const std::vector<std::pair<OpId, bool>> order = run_order(ops, begin, end);
  const int steps = static_cast<int>(order.size());
  std::vector<int> first(2 * buffers, -1);
  std::vector<int> last(2 * buffers, -1);
  std::vector<uint8_t> held(buffers, 0);                 // states the chunk holds
  std::vector<uint8_t> rerun(layer_forward_.size(), 0);  // layers rerun so far
  const OpId last_forward_op = forward_.back();
  int last_forward = -1;
  for (int i = 0; i < steps; ++i) {
    const auto [id, again] = order[i];
    const Op& op = graph_.ops[id];
    const bool backward = id > last_forward_op && op.phase != Phase::kOptimizer;
    if (!again && !backward && op.phase != Phase::kOptimizer) last_forward = i;
    if (op.phase == Phase::kOptimizer)
      cost.optimizer += seconds_[id];
    else if (again || backward)
      cost.backward += seconds_[id];
    else
      cost.forward += seconds_[id];
    const int layer = again ? layer_of_op_[id] : -1;
    if (again) rerun[layer] = 1;
    for (const auto* list : {&op.in, &op.out, &op.updates}) {
      for (const BufferId b : *list) {
        const BufferId s = storage_[b];
        if (is_state_[s]) {
          held[s] = 1;
          if (graph_.buffers[s].kind == BufferKind::kParam) {
            for (const BufferId t : states_of_param_[s]) held[t] = 1;
          }
          continue;
        }
        // A rerun makes and reads its layer's storages anew; the backward
        // reads the dropped ones' second instances.
        const bool second = again ? made_in_layer_[s] == layer && remade_[s]
                                  : backward && recompute_ != ChunkRecompute::kNone &&
                                        droppable_[s] && rerun[made_in_layer_[s]];
        // Note [Pipeline engines]: torch's receive buffers are the engine's.
        if (engine_ == PipelineEngine::kTorch && maker_anchor_[s] != kNoPosition &&
            (maker_anchor_[s] < begin || maker_anchor_[s] >= end)) {
          continue;
        }
        const size_t at = second ? s + buffers : s;
        if (first[at] < 0) first[at] = i;
        last[at] = i;
      }
    }
  }
  // Per unit: parameter and gradient bytes.
  std::vector<std::pair<uint64_t, uint64_t>> units(static_cast<size_t>(units_));
  for (size_t s = 0; s < buffers; ++s) {
    if (!held[s]) continue;
    if (graph_.buffers[s].kind == BufferKind::kParam) {
      cost.param_elements += element_count(graph_.buffers[s]);
      // Read by forward positions outside the chunk too: another chunk's
      // copy (GPT-2's tied embedding on the first and the last stage).
      const auto [first_read, last_read] = param_reads_[s];
      if (first_read != kNoPosition && (first_read < begin || last_read >= end)) {
        for (const BufferId t : states_of_param_[s]) {
          if (graph_.buffers[t].kind == BufferKind::kGrad)
            cost.shared_grads += graph_.buffers[t].bytes;
        }
      }
    }
    if (graph_.buffers[s].kind == BufferKind::kParam && unit_of_param_[s] >= 0) {
      auto& [params, grads] = units[static_cast<size_t>(unit_of_param_[s])];
      params += graph_.buffers[s].bytes;
      for (const BufferId t : states_of_param_[s]) {
        if (graph_.buffers[t].kind == BufferKind::kGrad) grads += graph_.buffers[t].bytes;
      }
    }
    cost.states += graph_.buffers[s].bytes;
    const uint64_t bytes = graph_.buffers[s].bytes;
    if (graph_.buffers[s].kind == BufferKind::kGrad) {
      cost.grads += bytes;
      if (is_expert_state_[s]) cost.expert_grads += bytes;
    }
    if (graph_.buffers[s].kind == BufferKind::kOptimState) {
      cost.optimizer_states += bytes;
      if (is_expert_state_[s]) cost.expert_optimizer_states += bytes;
    }
  }
  for (const auto& bytes : units) {
    cost.largest_unit_params = std::max(cost.largest_unit_params, bytes.first);
    cost.largest_unit_grads = std::max(cost.largest_unit_grads, bytes.second);
  }
  if (engine_ == PipelineEngine::kTorch && end < forward_ops()) {
    // Note [Pipeline engines]: the outputs sent on stay cached until the
    // chunk's backward is done.
    int last_backward = last_forward;
    for (int i = 0; i < steps; ++i) {
      if (graph_.ops[order[i].first].phase != Phase::kOptimizer) last_backward = i;
    }
    // What its forward ops make and a later chunk's forward reads (only
    // the chunk's ops: Tarnawski's programme measures many chunks).
    for (int i = 0; i <= last_forward; ++i) {
      if (order[i].second) continue;
      for (const BufferId b : graph_.ops[order[i].first].out) {
        const BufferId s = storage_[b];
        if (!is_state_[s] && last_forward_read_[b] >= end) {
          last[s] = std::max(last[s], last_backward);
        }
      }
    }
  }
  if (engine_ == PipelineEngine::kTorch) {  // a micro-batch's receive buffers
    cost.engine_buffers = forward_crossing_[begin] + forward_crossing_[end];
  }
  // Live bytes per step: +bytes at first, -bytes after last.
  std::vector<int64_t> delta(order.size() + 1, 0);
  for (size_t at = 0; at < 2 * buffers; ++at) {
    if (first[at] < 0) continue;
    const uint64_t bytes = graph_.buffers[at % buffers].bytes;
    delta[first[at]] += static_cast<int64_t>(bytes);
    delta[last[at] + 1] -= static_cast<int64_t>(bytes);
    if (first[at] <= last_forward && last[at] > last_forward) cost.saved += bytes;
  }
  int64_t live = 0;
  for (int i = 0; i < steps; ++i) {
    live += delta[i];
    const Op& op = graph_.ops[order[i].first];
    const uint64_t now = static_cast<uint64_t>(live) + op.workspace;
    uint64_t& peak = op.phase == Phase::kOptimizer ? cost.optimizer_peak
                     : i <= last_forward           ? cost.forward_peak
                                                   : cost.backward_peak;
    peak = std::max(peak, now);
  }
  cost.send_forward = end < forward_ops() ? forward_crossing_[end] : 0;
  cost.send_backward = backward_crossing_[begin];
  return cost;
}

std::string_view to_string(PipelineEngine engine) {
  return engine == PipelineEngine::kTorch ? "torch" : "megatron";
}

std::vector<ChunkCost> chunk_costs(const ChunkedGraph& chunked, const PipelineCut& cut) {
  if (cut.empty() || cut.front() != 0 || !std::is_sorted(cut.begin(), cut.end()) ||
      std::adjacent_find(cut.begin(), cut.end()) != cut.end() ||
      cut.back() >= chunked.forward_ops()) {
    fail("pipeline: a cut starts at 0 and rises strictly within the {} forward ops",
         chunked.forward_ops());
  }
  std::vector<ChunkCost> costs;
  for (size_t k = 0; k < cut.size(); ++k) {
    const int end = k + 1 < cut.size() ? cut[k + 1] : chunked.forward_ops();
    costs.push_back(chunked.cost(cut[k], end));
  }
  return costs;
}

PipelineCut even_layer_cut(const ChunkedGraph& chunked, int chunks) {
  const std::vector<int> starts = chunked.cut_points(false);
  const int layers = static_cast<int>(starts.size());
  if (chunks < 1 || layers % chunks != 0 || find_layers(chunked.graph()).names.empty()) {
    fail(
        "pipeline: {} has {} layers, which do not split evenly into {} chunks (Megatron-LM's "
        "even split needs a multiple)",
        chunked.graph().name, find_layers(chunked.graph()).names.size(), chunks);
  }
  PipelineCut cut;
  for (int k = 0; k < chunks; ++k) cut.push_back(starts[k * (layers / chunks)]);
  return cut;
}

std::string chunk_first_op(const ChunkedGraph& chunked, const PipelineCut& cut, int chunk) {
  return chunked.graph().ops[chunked.forward_op(cut.at(chunk))].name;
}

uint64_t sharded_states(const ChunkCost& c, int shards, int expert_shards) {
  if (expert_shards <= 0) expert_shards = shards;
  if (shards <= 1 && expert_shards <= 1) return c.states;
  const uint64_t dense = c.optimizer_states - c.expert_optimizer_states;
  return c.states - c.optimizer_states + shard_bytes(dense, shards) +
         shard_bytes(c.expert_optimizer_states, expert_shards);
}

PipelineSetup pipeline_setup(const PipelineShape& shape, std::vector<ChunkCost> chunks) {
  PipelineSetup setup;
  setup.chunks = std::move(chunks);
  setup.devices = shape.devices;
  setup.micro_batches = shape.micro_batches;
  setup.schedule = shape.schedule;
  setup.devices_per_node = shape.devices_per_node;
  setup.in_node = shape.in_node;
  setup.across_nodes = shape.across_nodes;
  setup.swap_activations = shape.swap_activations;
  return setup;
}

}  // namespace memwall
