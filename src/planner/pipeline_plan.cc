// A pipeline-parallel plan (memwall/planner/pipeline_plan.h): the links
// between stages from the node's profile, the partition, and the pipeline
// simulation, which alone gives the plan's figures.
#include "memwall/planner/pipeline_plan.h"

#include "memwall/base/error.h"
#include "memwall/planner/planner.h"
#include "memwall/sim/throughput.h"

namespace memwall {
namespace {

constexpr int kMaxPipelineCount = 1 << 16;

// Note [ZeRO in a pipeline stage], stages 2 and 3: a chunk's shards (its
// memory) and the collectives of every micro-batch beside its passes, one
// unit's exposed; `sync` times a collective of a whole buffer's bytes over
// the replicas.
template <typename Sync>
void zero_stage_time(ChunkCost& c, const PipelineShape& shape, ChunkRecompute recompute,
                     const Sync& sync) {
  const auto params = static_cast<double>(c.states - c.grads - c.optimizer_states);
  const auto grads = static_cast<double>(c.grads);
  const auto unit_params = static_cast<double>(c.largest_unit_params);
  const auto unit_grads = static_cast<double>(c.largest_unit_grads);
  const double reduce = sync(Collective::kReduceScatter, grads);
  const double reduce_unit = sync(Collective::kReduceScatter, unit_grads);
  if (shape.zero_stage == 3) {
    const double gather = sync(Collective::kAllGather, params);
    const double gather_unit = sync(Collective::kAllGather, unit_params);
    // The backward gathers once more for a rerun's forward.
    const double backward_gathers = recompute == ChunkRecompute::kNone ? gather : 2 * gather;
    c.forward = std::max(c.forward, gather) + gather_unit;
    c.backward = std::max(c.backward, backward_gathers + reduce) + reduce_unit;
    c.grad_sync = 0;  // every micro-batch reduced its own; the step updates the shards
  } else {
    c.backward = std::max(c.backward, reduce) + reduce_unit;
    c.grad_sync = sync(Collective::kAllGather, params);  // the updated parameters
  }
  c.optimizer /= shape.optimizer_shards;
  c = zero_stage_memory(c, shape);
}

int checked_count(int value, const char* what) {
  if (value < 1 || value > kMaxPipelineCount) {
    fail("pipeline: {} must be from 1 to {} (got {})", what, kMaxPipelineCount, value);
  }
  return value;
}

// Note [Offload in a pipeline stage]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ZeRO-Offload (Ren et al. 2021) per stage: a chunk's optimizer states
// (fp32 master weights and moments) live in host memory and the CPU steps
// them, as `--strategy zero-offload` does on one GPU (src/swap). After a
// stage's last backward and its gradients' reduction, each rank copies its
// gradients' share to the host, steps its share of the parameters on its
// share of the node's CPU (cpu_adam_params_per_s over the node's GPUs, all
// stepping at once: Note [Ranks on a node] in src/hw/ranks.cc) and copies
// the updated parameters back over its share of the host's PCIe; the share
// is 1/R under ZeRO (R the replicas), else the whole chunk. The states
// leave the device's bytes and the node's ranks hold them together in its
// host memory, which the plan checks. Serial: DeepSpeed overlaps the copy
// of one parameter group with the step of the next, which this leaves out.
void offload_optimizer(PipelinePlan& plan, const Hardware& node, int replicas) {
  const Hardware rank = rank_share(node, plan.gpus);
  if (!(rank.cpu_adam_params_per_s > 0)) {
    fail("pipeline: the profile {} gives no CPU optimizer rate, which offloading needs", node.name);
  }
  plan.offload_optimizer = true;
  const int shards = plan.zero_stage >= 1 ? replicas : 1;
  const auto share = [&](uint64_t bytes) { return shard_bytes(bytes, shards); };
  for (ChunkCost& c : plan.costs) {
    const uint64_t params = c.states - c.grads - c.optimizer_states;
    // Stages 2 and 3 hold only their shards already; stage 1 its whole
    // gradients (reduce-scattered at the step).
    const uint64_t grads = plan.zero_stage == 1 ? share(c.grads) : c.grads;
    const uint64_t updated = plan.zero_stage == 3 ? params : share(params);
    const double elements = static_cast<double>(share(c.param_elements));
    c.host_states = c.optimizer_states;
    c.states -= c.optimizer_states;
    c.optimizer_states = 0;
    c.expert_optimizer_states = 0;
    c.optimizer =
        d2h_time(rank, grads) + elements / rank.cpu_adam_params_per_s + h2d_time(rank, updated);
  }
}

// Note [Swapped activations in a pipeline stage] (src/sim/pipeline.cc),
// the copies' time: a micro-batch chunk's saved bytes go down to the host
// beside the next pass and come back up beside the pass before its
// backward, over the rank's share of the host's PCIe (all the node's GPUs
// copy at once); what a pass of the chunk's own length does not hide is
// added to its forward (down) and its backward (up).
void swap_activations(PipelinePlan& plan, const Hardware& node) {
  const Hardware rank = rank_share(node, plan.gpus);
  plan.swap_activations = true;
  for (ChunkCost& c : plan.costs) {
    c.forward += std::max(0.0, d2h_time(rank, c.saved) - c.forward);
    c.backward += std::max(0.0, h2d_time(rank, c.saved) - c.backward);
  }
}

}  // namespace

std::string_view to_string(PipelinePartition partition) {
  return partition == PipelinePartition::kTarnawski ? "tarnawski" : "even";
}

std::optional<PipelinePartition> parse_pipeline_partition(std::string_view name) {
  if (name == "tarnawski") return PipelinePartition::kTarnawski;
  if (name == "even") return PipelinePartition::kEvenLayers;
  return std::nullopt;
}

PipelinePlan plan_pipeline(const Graph& graph, const Hardware& node,
                           const PipelineRequest& request) {
  const ChunkedGraph chunked(graph, node, request.recompute, request.engine);
  return plan_pipeline(chunked, node, request);
}

PipelinePlan plan_pipeline(const ChunkedGraph& chunked, const Hardware& node,
                           const PipelineRequest& request) {
  const Graph& graph = chunked.graph();
  PipelinePlan plan;
  plan.partition = request.partition;
  if (request.recompute != chunked.recompute()) {
    fail("pipeline: the request recomputes '{}' where its chunked graph recomputes '{}'",
         to_string(request.recompute), to_string(chunked.recompute()));
  }
  plan.recompute = request.recompute;
  plan.engine = chunked.engine();
  plan.tensor_parallel = graph_tensor_parallel(graph);
  PipelineShape& shape = plan.shape;
  shape.devices = checked_count(request.devices, "the pipeline's devices");
  shape.chunks_per_device = checked_count(request.chunks_per_device, "chunks per device");
  shape.micro_batches = checked_count(request.micro_batches, "micro-batches");
  shape.schedule = request.schedule;
  plan.data_parallel = checked_count(request.data_parallel, "data-parallel replicas");
  plan.expert_parallel = graph_expert_parallel(graph);
  plan.context_parallel = graph_context_parallel(graph);
  if (plan.data_parallel % plan.expert_parallel != 0) {
    fail(
        "pipeline: {} expert-parallel ranks are data-parallel ones: give data-parallel "
        "replicas (--ranks) a multiple of {} (got {})",
        plan.expert_parallel, plan.expert_parallel, plan.data_parallel);
  }
  const int64_t gpus =
      int64_t{shape.devices} * plan.tensor_parallel * plan.context_parallel * plan.data_parallel;
  if (gpus > (1 << 20)) fail("pipeline: {} GPUs in all is more than 2^20", gpus);
  plan.gpus = static_cast<int>(gpus);
  // Megatron-LM's rank order: tensor ranks vary fastest, then context,
  // then data, then pipeline. A stage's tensor, context and data ranks fill
  // a node before the next stage's (a node holds gpus_per_node / (tensor x
  // context x data) consecutive stages), and a stage's data- and
  // context-parallel group has gpus_per_node / tensor of its ranks in each
  // node.
  const int stage_width = plan.tensor_parallel * plan.context_parallel * plan.data_parallel;
  shape.devices_per_node = std::max(1, node.gpus_per_node / stage_width);
  // NVIDIA's NVLink figure counts both directions; a transfer uses one.
  shape.in_node = {.bandwidth = node.interconnect_bandwidth / 2,
                   .latency = node.collective_step_latency};
  shape.across_nodes = {.bandwidth = node.network_bandwidth, .latency = node.network_step_latency};
  if (shape.devices > 1 && !(shape.in_node.bandwidth > 0 && shape.across_nodes.bandwidth > 0)) {
    fail("pipeline: the profile {} gives no interconnect or network bandwidth between stages",
         node.name);
  }
  plan.budget = request.budget > 0 ? request.budget : default_budget(node);
  // Note [Context parallelism in the zoo]: the parameters are whole on the
  // context-parallel ranks too, which reduce their gradients and shard
  // their optimizer states with the data-parallel ones (Megatron-LM's
  // data-parallel group "with context parallelism").
  const int replicas = plan.data_parallel * plan.context_parallel;
  if (request.zero_stage < 0 || request.zero_stage > 3) {
    fail("pipeline: ZeRO stage {} does not exist (0, 1, 2 or 3)", request.zero_stage);
  }
  // One replica shards nothing, whatever the stage (the layout search's
  // layouts of one).
  plan.distributed_optimizer =
      (request.distributed_optimizer || request.zero_stage >= 1) && replicas > 1;
  plan.zero_stage = plan.distributed_optimizer ? std::max(request.zero_stage, 1) : 0;
  if (plan.distributed_optimizer) {
    shape.optimizer_shards = replicas;
    shape.expert_optimizer_shards = plan.data_parallel / plan.expert_parallel;
    shape.zero_stage = plan.zero_stage;
  }

  shape.optimizer_on_host = request.offload_optimizer;
  shape.swap_activations = request.swap_activations;
  const int chunks = shape.devices * shape.chunks_per_device;
  if (request.partition == PipelinePartition::kEvenLayers) {
    plan.cut = even_layer_cut(chunked, chunks);
  } else {
    PartitionResult partition =
        partition_pipeline(chunked, shape, default_cut_points(chunked), plan.budget);
    if (!partition.fits && !request.allow_over_budget) {
      throw Error(partition_error(chunked, shape, plan.budget, partition));
    }
    plan.cut = std::move(partition.cut);
  }
  for (int k = 0; k < chunks; ++k) plan.chunk_names.push_back(chunk_first_op(chunked, plan.cut, k));
  plan.costs = chunk_costs(chunked, plan.cut);
  if (replicas > 1) {
    // Note [Collective time]: a ring all-reduce of M bytes sends 2(N-1)/N M
    // a rank, a reduce-scatter or all-gather (N-1)/N M. Note [Expert
    // parallelism in the zoo]: the experts' gradients and states go over the
    // d / e replicas holding the same experts (every e-th data-parallel
    // rank), the others' over all d.
    const int d = replicas, e = plan.expert_parallel, de = plan.data_parallel / e;
    const CollectiveGroup dense{d, std::max(1, node.gpus_per_node / plan.tensor_parallel)};
    const CollectiveGroup experts{de, std::max(1, node.gpus_per_node / (plan.tensor_parallel * e))};
    const auto sync = [&](Collective kind, double bytes, const CollectiveGroup& group) {
      if (group.ranks <= 1 || bytes <= 0) return 0.0;
      const double share = (group.ranks - 1.0) / group.ranks;
      return collective_time(node, kind, (kind == Collective::kAllReduce ? 2 : 1) * share * bytes,
                             group);
    };
    for (ChunkCost& c : plan.costs) {
      const auto expert_grads = static_cast<double>(c.expert_grads);
      const double grads = static_cast<double>(c.grads) - expert_grads;
      if (plan.zero_stage >= 2) {
        zero_stage_time(c, shape, plan.recompute,
                        [&](Collective kind, double bytes) { return sync(kind, bytes, dense); });
        continue;
      }
      if (!plan.distributed_optimizer) {
        c.grad_sync = sync(Collective::kAllReduce, grads, dense) +
                      sync(Collective::kAllReduce, expert_grads, experts);
        continue;
      }
      // Parameters take their gradients' bytes' share of the all-gather.
      const double params = static_cast<double>(c.states - c.grads - c.optimizer_states);
      const double expert_params =
          c.grads > 0 ? params * expert_grads / static_cast<double>(c.grads) : 0;
      const uint64_t states = sharded_states(c, d, de);
      if (c.expert_optimizer_states == 0) {
        c.optimizer /= d;
      } else if (c.optimizer_states > 0) {  // the states' share this rank steps
        c.optimizer *= static_cast<double>(states - (c.states - c.optimizer_states)) /
                       static_cast<double>(c.optimizer_states);
      }
      c.optimizer_states -= c.states - states;
      c.expert_optimizer_states = (c.expert_optimizer_states + de - 1) / de;
      c.states = states;
      c.grad_sync = sync(Collective::kReduceScatter, grads, dense) +
                    sync(Collective::kAllGather, params - expert_params, dense) +
                    sync(Collective::kReduceScatter, expert_grads, experts) +
                    sync(Collective::kAllGather, expert_params, experts);
    }
  }
  // A parameter two chunks hold (GPT-2's tied embedding, Note [Pipeline
  // chunks]) has its gradient all-reduced between their devices after the
  // last backward (Megatron-LM's embedding group of the first and the last
  // stage), in node or across nodes as the two devices sit; nothing where
  // one device holds both (Hanayo's wave comes back to device 0).
  const int last_chunk = chunks - 1;
  const int first_device = chunk_device(shape.schedule, 0, shape.devices);
  const int last_device = chunk_device(shape.schedule, last_chunk, shape.devices);
  if (first_device != last_device) {
    const bool one_node =
        first_device / shape.devices_per_node == last_device / shape.devices_per_node;
    const CollectiveGroup ends{2, one_node ? 2 : 1};
    for (ChunkCost& c : plan.costs) {
      if (c.shared_grads == 0) continue;
      c.grad_sync +=
          collective_time(node, Collective::kAllReduce, static_cast<double>(c.shared_grads), ends);
    }
  }
  if (request.offload_optimizer) offload_optimizer(plan, node, replicas);
  if (request.swap_activations) swap_activations(plan, node);
  plan.sim = simulate_pipeline(pipeline_setup(shape, plan.costs));
  plan.fits = true;
  uint64_t most_host = 0;
  for (const PipelineDevice& d : plan.sim.devices) {
    plan.fits = plan.fits && d.peak_bytes <= plan.budget;
    most_host = std::max(most_host, checked_add(d.host_states, d.host_activations, "host bytes"));
  }
  if (plan.offload_optimizer || plan.swap_activations) {
    const auto on_node = static_cast<uint64_t>(ranks_per_node(node, plan.gpus));
    plan.host_bytes_per_node = checked_mul(most_host, on_node, "a node's host states");
    plan.host_fits = plan.host_bytes_per_node <= node.host_memory_bytes;
    plan.fits = plan.fits && plan.host_fits;
  }
  // The step runs every micro-batch through the whole model once: the
  // graph's iteration, micro_batches times, over all the pipeline's GPUs.
  // (Context parallelism: c ranks, each 1/c of a micro-batch's sequences.)
  const Throughput one =
      plan_throughput(graph, plan.sim.step_time / shape.micro_batches, node, plan.context_parallel);
  plan.samples_per_s = one.samples_per_s * plan.data_parallel;
  plan.tokens_per_s = one.tokens_per_s * plan.data_parallel;
  plan.mfu = one.mfu / shape.devices;
  return plan;
}

}  // namespace memwall
