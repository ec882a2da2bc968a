// Several data-parallel ranks: what one rank gets of its node, and what a
// collective between ranks costs (hardware.h).
//
// Note [Ranks on a node]
// ~~~~~~~~~~~~~~~~~~~~~~
// A node is the GPUs behind one host: DGX systems have 8 (16 on a DGX-2),
// the cloud and desktop profiles 1 (profiles.cc). Its host memory, the host
// side of its PCIe (the CPUs' root ports, above any PCIe switch), its NVMe
// drives and its CPU cores are shared by the ranks on it. Ranks fill nodes
// in order, so k = min(N, gpus_per_node) ranks share the fullest node.
//
// The simulator simulates one rank. Data-parallel ranks are symmetric: each
// runs the same graph and plan on its own micro-batch, and moves the same
// bytes at the same moments. So a rank's share of each node resource is the
// node's figure divided by k, for the whole iteration:
//   host memory   host_memory_bytes / k (rounded down);
//   host<->device min(h2d_bandwidth, host_pcie_bandwidth / k), same for d2h
//                 (a rank never gets more than its own link);
//   NVMe          nvme_read_bandwidth / k, nvme_write_bandwidth / k;
//   CPU           cpu_adam_params_per_s / k (the k CPU optimizer steps run at
//                 once on the same cores and DRAM channels).
// Tensor-parallel ranks (Note [Tensor parallelism in the zoo] in
// src/models/tensor_parallel.cc) run the same way, each its own shard, so N
// counts them too: graph_gpus, data-parallel times tensor-parallel ranks.
// Device memory, compute, HBM and the GPU's own links are not shared. The
// split ignores which PCIe switch a GPU sits behind: on a DGX A100 two GPUs
// share each switch's uplink, which with all 8 ranks copying at once is the
// same 1/8; with fewer ranks it can be optimistic by up to 2x.
//
// Note [Collective time]
// ~~~~~~~~~~~~~~~~~~~~~~
// A comm op's `bytes` are what each rank sends: a ring all-reduce of M bytes
// over N ranks sends 2(N-1)/N M per rank, reduce-scatter and all-gather
// (N-1)/N M each (Patarasuk & Yuan 2009; the ZeRO paper, sec. 7). NCCL runs
// them as rings; its tuning model (NVIDIA/nccl src/graph/tuning.cc) costs a
// ring as latency per step times steps plus bytes over bus bandwidth, and
// memwall follows it (an alpha-beta model):
//
//   time = launch_latency + (s - s_net) * collective_step_latency
//          + s_net * network_step_latency + bytes / B
//
// - s = 2(N-1) steps for all-reduce, N-1 for reduce-scatter and all-gather.
// - On n = ceil(N / gpus_per_node) nodes, s_net of the steps cross nodes:
//   0 on one node, else n-1 per pass (2(n-1) for all-reduce), as NCCL
//   counts them for reduce-scatter and all-gather.
// - B is one direction of the bottleneck link: interconnect_bandwidth / 2
//   (NVLink or PCIe, stored both ways summed) on one node. Across nodes,
//   each ring enters and leaves a node once and NCCL runs one ring channel
//   per network adapter (tuning.cc: bus bandwidth = channels x per-channel
//   bandwidth), so the node's adapters together carry what one rank sends:
//   B = min(interconnect_bandwidth / 2, k_min * network_bandwidth), k_min
//   the ranks on the least populated node.
// The per-step latencies are NCCL's for its Simple protocol (the one it
// uses for large messages): 3.4 us over NVLink, 5.7 us over PCIe, 14 us over
// the network (hwLat in tuning.cc); launch_latency stands for NCCL's base
// latency. Deviations: NCCL switches all-reduce to trees and small messages
// to its LL protocols at scale, which cut the latency term; memwall's ring
// overestimates small collectives over many nodes.
//
// A ring hop (context parallelism's cp_send_recv, Note [Context parallelism
// in the zoo] in src/models/context_parallel.cc) is one step of a ring: all
// ranks send `bytes` to the next at once, over NVLink within a node; when
// the ring spans nodes, the ranks at a node's edge send over their own
// network adapter, and the hop waits for them:
//
//   time = launch_latency + step latency (the network's across nodes)
//          + bytes / (B_node, or min(B_node, network_bandwidth))
//
// An all-to-all (expert parallelism's dispatch and combine) is no ring:
// NCCL runs it as one group of send/receive pairs, every peer at once, so
// it pays one step's latency (and one network step's when it spans nodes),
// not N-1. Of the M = bytes x N/(N-1) a rank holds, (k-1)/N goes to the
// k-1 peers in its node over NVLink (interconnect_bandwidth / 2) and
// (N-k)/N to the others over the rank's own network adapter
// (network_bandwidth), at the same time:
//
//   time = launch_latency + collective_step_latency [+ network_step_latency]
//          + max(M (k-1)/N / B_node, M (N-k)/N / network_bandwidth)
#include <algorithm>
#include <string>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 20;

void check_node(const Hardware& hw) {
  if (hw.gpus_per_node < 1 || hw.gpus_per_node > kMaxGpusPerNode) {
    fail("hardware profile '{}': gpus_per_node must be in [1, {}] (got {})", hw.name,
         kMaxGpusPerNode, hw.gpus_per_node);
  }
}

void check_ranks(int ranks) {
  if (ranks < 1 || ranks > kMaxRanks) {
    fail("the number of ranks must be in [1, {}] (got {})", kMaxRanks, ranks);
  }
}

// The graph's meta.<key>, a count of ranks; 1 when absent.
int meta_ranks(const Graph& graph, const char* key) {
  const auto it = graph.meta.find(key);
  if (it == graph.meta.end()) return 1;
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > kMaxRanks) {
    fail("graph '{}': meta.{} must be an integer in [1, {}], got {}", graph.name, key, kMaxRanks,
         it->dump());
  }
  return static_cast<int>(it->get<int64_t>());
}

// Note [Collective time], the all-to-all.
double all_to_all_time(const Hardware& hw, double bytes, int ranks) {
  if (ranks == 1) return hw.launch_latency;
  const double n = ranks;
  const double k = std::min(ranks, hw.gpus_per_node);  // peers in the fullest node, self included
  const double whole = bytes * n / (n - 1);
  const double one_way = hw.interconnect_bandwidth / 2;
  const bool spans_nodes = ranks > hw.gpus_per_node;
  if (!(one_way > 0) || (spans_nodes && !(hw.network_bandwidth > 0))) {
    fail("hardware profile '{}' gives no {} bandwidth, which an all-to-all over {} ranks needs",
         hw.name, one_way > 0 ? "network" : "interconnect", ranks);
  }
  const double in_node = whole * (k - 1) / n / one_way;
  const double off_node = spans_nodes ? whole * (n - k) / n / hw.network_bandwidth : 0;
  return hw.launch_latency + hw.collective_step_latency +
         (spans_nodes ? hw.network_step_latency : 0) + std::max(in_node, off_node);
}

// Note [Collective time], one hop of a ring.
double ring_hop_time(const Hardware& hw, double bytes, int ranks) {
  if (ranks == 1) return hw.launch_latency;
  const bool spans_nodes = ranks > hw.gpus_per_node;
  const double one_way = hw.interconnect_bandwidth / 2;
  if (!(one_way > 0) || (spans_nodes && !(hw.network_bandwidth > 0))) {
    fail("hardware profile '{}' gives no {} bandwidth, which a ring over {} ranks needs", hw.name,
         one_way > 0 ? "network" : "interconnect", ranks);
  }
  if (!spans_nodes) return hw.launch_latency + hw.collective_step_latency + bytes / one_way;
  return hw.launch_latency + hw.network_step_latency +
         bytes / std::min(one_way, hw.network_bandwidth);
}

}  // namespace

int graph_ranks(const Graph& graph) {
  const auto zero = graph.meta.find("zero");
  if (zero == graph.meta.end() || !zero->is_object()) return 1;
  const auto ranks = zero->find("ranks");
  if (ranks == zero->end()) return 1;
  if (!ranks->is_number_integer() || ranks->get<int64_t>() < 1 ||
      ranks->get<int64_t>() > kMaxRanks) {
    fail("graph '{}': meta.zero.ranks must be an integer in [1, {}], got {}", graph.name, kMaxRanks,
         ranks->dump());
  }
  return static_cast<int>(ranks->get<int64_t>());
}

int ranks_per_node(const Hardware& hw, int ranks) {
  check_node(hw);
  check_ranks(ranks);
  return std::min(ranks, hw.gpus_per_node);
}

Hardware rank_share(const Hardware& node, int ranks) {
  const int k = ranks_per_node(node, ranks);
  if (k == 1) return node;
  const double share = 1.0 / k;
  Hardware rank = node;
  rank.host_memory_bytes = node.host_memory_bytes / static_cast<uint64_t>(k);
  rank.h2d_bandwidth = std::min(node.h2d_bandwidth, node.host_pcie_bandwidth * share);
  rank.d2h_bandwidth = std::min(node.d2h_bandwidth, node.host_pcie_bandwidth * share);
  rank.nvme_read_bandwidth = node.nvme_read_bandwidth * share;
  rank.nvme_write_bandwidth = node.nvme_write_bandwidth * share;
  rank.cpu_adam_params_per_s = node.cpu_adam_params_per_s * share;
  return rank;
}

int graph_tensor_parallel(const Graph& graph) { return meta_ranks(graph, "tensor_parallel"); }

int graph_gpus(const Graph& graph) {
  // Expert-parallel ranks are data-parallel ones: a graph of one of e has
  // at least e. So a graph of one of c context-parallel ranks has at least
  // c (the ZeRO ranks count them: Note [Context parallelism in the zoo]).
  const int64_t gpus = int64_t{std::max({graph_ranks(graph), graph_expert_parallel(graph),
                                         graph_context_parallel(graph)})} *
                       graph_tensor_parallel(graph);
  if (gpus > kMaxRanks) {
    fail("graph '{}': {} data-parallel x {} tensor-parallel ranks exceed {} GPUs", graph.name,
         graph_ranks(graph), graph_tensor_parallel(graph), kMaxRanks);
  }
  return static_cast<int>(gpus);
}

int graph_expert_parallel(const Graph& graph) { return meta_ranks(graph, "expert_parallel"); }

int graph_context_parallel(const Graph& graph) { return meta_ranks(graph, "context_parallel"); }

bool is_tensor_parallel_collective(const Op& op) { return op.type.starts_with("tp_"); }

Collective collective_of(const Op& op) {
  if (op.type == "ep_all_to_all") return Collective::kAllToAll;
  if (op.type == "cp_send_recv") return Collective::kSendRecv;
  const std::string_view type = is_tensor_parallel_collective(op)
                                    ? std::string_view(op.type).substr(3)
                                    : std::string_view(op.type);
  if (type == "all_reduce") return Collective::kAllReduce;
  if (type == "reduce_scatter") return Collective::kReduceScatter;
  if (type == "all_gather") return Collective::kAllGather;
  fail(
      "op {} ('{}') is of phase comm but its type '{}' is no collective memwall times "
      "(all_reduce, reduce_scatter, all_gather, their tensor-parallel tp_ forms, "
      "ep_all_to_all and cp_send_recv)",
      op.id, op.name, op.type);
}

CollectiveGroup collective_group(const Hardware& hw, const Graph& graph, const Op& op) {
  if (is_tensor_parallel_collective(op)) return {graph_tensor_parallel(graph), hw.gpus_per_node};
  if (op.type.starts_with("cp_")) {
    return {graph_context_parallel(graph),
            std::max(1, hw.gpus_per_node / graph_tensor_parallel(graph))};
  }
  if (!op.type.starts_with("ep_")) return {graph_ranks(graph), hw.gpus_per_node};
  return {graph_expert_parallel(graph),
          std::max(1, hw.gpus_per_node / graph_tensor_parallel(graph))};
}

double collective_time(const Hardware& hw, Collective kind, double bytes,
                       const CollectiveGroup& group) {
  if (group.gpus_per_node == hw.gpus_per_node) {
    return collective_time(hw, kind, bytes, group.ranks);
  }
  Hardware node = hw;  // rare: expert-parallel groups under tensor parallelism
  node.gpus_per_node = group.gpus_per_node;
  return collective_time(node, kind, bytes, group.ranks);
}

double collective_time(const Hardware& hw, Collective kind, double bytes, int ranks) {
  check_node(hw);
  check_ranks(ranks);
  const int64_t n = ranks;
  const int64_t per_node = hw.gpus_per_node;
  const int64_t nodes = (n + per_node - 1) / per_node;
  if (kind == Collective::kAllToAll) return all_to_all_time(hw, bytes, ranks);
  if (kind == Collective::kSendRecv) return ring_hop_time(hw, bytes, ranks);
  const int64_t passes = kind == Collective::kAllReduce ? 2 : 1;
  const int64_t steps = passes * (n - 1);
  const int64_t net_steps = passes * (nodes - 1);
  const double one_way = hw.interconnect_bandwidth / 2;
  double bandwidth = one_way;
  if (!(one_way > 0) || (nodes > 1 && !(hw.network_bandwidth > 0))) {
    fail("hardware profile '{}' gives no {} bandwidth, which a collective over {} ranks needs",
         hw.name, one_way > 0 ? "network" : "interconnect", ranks);
  }
  if (nodes > 1) {
    const int64_t fewest = n - (nodes - 1) * per_node;  // ranks on the last node
    bandwidth = std::min(one_way, static_cast<double>(fewest) * hw.network_bandwidth);
  }
  return hw.launch_latency + static_cast<double>(steps - net_steps) * hw.collective_step_latency +
         static_cast<double>(net_steps) * hw.network_step_latency + bytes / bandwidth;
}

}  // namespace memwall
