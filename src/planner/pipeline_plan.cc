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

int checked_count(int value, const char* what) {
  if (value < 1 || value > kMaxPipelineCount) {
    fail("pipeline: {} must be from 1 to {} (got {})", what, kMaxPipelineCount, value);
  }
  return value;
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
  plan.distributed_optimizer = request.distributed_optimizer && replicas > 1;
  if (plan.distributed_optimizer) {
    shape.optimizer_shards = replicas;
    shape.expert_optimizer_shards = plan.data_parallel / plan.expert_parallel;
  }

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
  plan.sim = simulate_pipeline(pipeline_setup(shape, plan.costs));
  plan.fits = true;
  for (const PipelineDevice& d : plan.sim.devices)
    plan.fits = plan.fits && d.peak_bytes <= plan.budget;
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
