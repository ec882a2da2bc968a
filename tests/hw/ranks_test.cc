// Several ranks: a rank's share of its node (Note [Ranks on a node]) and the
// alpha-beta ring model of collectives (Note [Collective time]), both in
// src/hw/ranks.cc.
#include <string>

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "test_util.h"

namespace memwall {
namespace {

std::string ranks_error(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Golden values on h100-80g, by hand from the formula in Note [Collective
// time] with the profile's constants:
//   launch_latency 5 us (NVIDIA, "Getting Started with CUDA Graphs");
//   collective_step_latency 3.4 us, network_step_latency 14 us (NCCL
//     src/graph/tuning.cc, hwLat, Ring/Simple, NVLink and network);
//   NVLink 900 GB/s both ways (H100 datasheet): 450e9 B/s one way;
//   network 400 Gb/s ConnectX-7 per GPU, 8 GPUs per node (DGX H100
//     datasheet): 50e9 B/s per GPU, 8 x 50e9 = 400e9 B/s per node.
// Each rank sends 1e9 bytes.
TEST(CollectiveTime, RingOnH100Nodes) {
  const Hardware& h100 = find_gpu("h100-80g");
  const double bytes = 1e9;
  // 2 ranks, one node: all-reduce has 2(N-1) = 2 steps over NVLink.
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kAllReduce, bytes, 2),
                   5e-6 + 2 * 3.4e-6 + 1e9 / 450e9);
  // 8 ranks, one node: 14 steps.
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kAllReduce, bytes, 8),
                   5e-6 + 14 * 3.4e-6 + 1e9 / 450e9);
  // 16 ranks on 2 nodes: 30 steps, 2(n-1) = 2 of them across the network;
  // the node's 8 adapters (400e9) are the bottleneck, below NVLink's 450e9.
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kAllReduce, bytes, 16),
                   5e-6 + 28 * 3.4e-6 + 2 * 14e-6 + 1e9 / 400e9);
  // 1024 ranks on 128 nodes: 2046 steps, 254 across the network.
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kAllReduce, bytes, 1024),
                   5e-6 + 1792 * 3.4e-6 + 254 * 14e-6 + 1e9 / 400e9);
  // Reduce-scatter and all-gather make one pass: N-1 steps, n-1 across nodes.
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kReduceScatter, bytes, 1024),
                   5e-6 + 896 * 3.4e-6 + 127 * 14e-6 + 1e9 / 400e9);
  EXPECT_DOUBLE_EQ(collective_time(h100, Collective::kAllGather, bytes, 8),
                   5e-6 + 7 * 3.4e-6 + 1e9 / 450e9);
  // The old model gave 2 and 1024 ranks the same time; now 1024 costs more.
  EXPECT_GT(collective_time(h100, Collective::kAllReduce, bytes, 1024),
            4 * collective_time(h100, Collective::kAllReduce, bytes, 2));
}

TEST(CollectiveTime, BottleneckIsTheEmptiestNodesAdapters) {
  // a100-80g: NVLink 600 GB/s both ways (A100 datasheet), 300e9 one way; one
  // 200 Gb/s HDR adapter per GPU (DGX A100 datasheet), 25e9 B/s.
  const Hardware& a100 = find_gpu("a100-80g");
  // 16 ranks on 2 full nodes: min(300e9, 8 x 25e9) = 200e9; 15 steps, 1 across.
  EXPECT_DOUBLE_EQ(collective_time(a100, Collective::kAllGather, 2e9, 16),
                   5e-6 + 14 * 3.4e-6 + 14e-6 + 2e9 / 200e9);
  // 12 ranks: the second node has 4, whose adapters carry 4 x 25e9 = 100e9.
  EXPECT_DOUBLE_EQ(collective_time(a100, Collective::kAllGather, 2e9, 12),
                   5e-6 + 10 * 3.4e-6 + 14e-6 + 2e9 / 100e9);
  // One GPU per node (--gpus-per-node 1): all N - 1 steps cross the network,
  // over one adapter.
  Hardware single = a100;
  single.gpus_per_node = 1;
  EXPECT_DOUBLE_EQ(collective_time(single, Collective::kReduceScatter, 2e9, 4),
                   5e-6 + 3 * 14e-6 + 2e9 / 25e9);
  // One rank: no steps, the bytes over the link (a graph never has this, but
  // the arithmetic stays defined).
  EXPECT_DOUBLE_EQ(collective_time(a100, Collective::kAllReduce, 0, 1), 5e-6);
}

TEST(CollectiveTime, BadRankCountsAndNodes) {
  const Hardware& a100 = find_gpu("a100-80g");
  EXPECT_EQ(ranks_error([&] { collective_time(a100, Collective::kAllReduce, 1, 0); }),
            "the number of ranks must be in [1, 1048576] (got 0)");
  Hardware bad = a100;
  bad.gpus_per_node = 0;
  EXPECT_EQ(ranks_error([&] { collective_time(bad, Collective::kAllReduce, 1, 2); }),
            "hardware profile 'a100-80g': gpus_per_node must be in [1, 1024] (got 0)");
  Hardware no_network = a100;
  no_network.network_bandwidth = 0;  // code-built profiles may leave it out
  EXPECT_EQ(collective_time(no_network, Collective::kAllReduce, 0, 8),
            collective_time(a100, Collective::kAllReduce, 0, 8));  // one node: not needed
  EXPECT_EQ(ranks_error([&] { collective_time(no_network, Collective::kAllReduce, 1, 16); }),
            "hardware profile 'a100-80g' gives no network bandwidth, which a collective over 16 "
            "ranks needs");
}

TEST(RankShare, EightRanksShareADgxA100) {
  // DGX A100 640GB: 2 TiB host, four gen4 switch uplinks (100e9 B/s), one
  // Intel D7-P5500 (7.0 / 4.3 GB/s), 8 GPUs (profiles.cc).
  const Hardware& node = find_gpu("a100-80g");
  const Hardware rank = rank_share(node, 8);
  EXPECT_EQ(rank.host_memory_bytes, 256 * kGiB);
  EXPECT_EQ(rank.h2d_bandwidth, 12.5e9);  // min(25e9, 100e9 / 8)
  EXPECT_EQ(rank.d2h_bandwidth, 12.5e9);
  EXPECT_DOUBLE_EQ(rank.nvme_read_bandwidth, 7.0e9 / 8);
  EXPECT_DOUBLE_EQ(rank.nvme_write_bandwidth, 4.3e9 / 8);
  EXPECT_DOUBLE_EQ(rank.cpu_adam_params_per_s, node.cpu_adam_params_per_s / 8);
  // What is the GPU's own does not change.
  EXPECT_EQ(rank.device_memory_bytes, node.device_memory_bytes);
  EXPECT_EQ(rank.interconnect_bandwidth, node.interconnect_bandwidth);
  EXPECT_EQ(rank.network_bandwidth, node.network_bandwidth);
  // 2 ranks: half the host, but each keeps its own 25e9 link (100e9 / 2 > 25e9).
  EXPECT_EQ(rank_share(node, 2).host_memory_bytes, 1024 * kGiB);
  EXPECT_EQ(rank_share(node, 2).h2d_bandwidth, 25e9);
  // More ranks than GPUs per node fill more nodes: still 8 per node.
  EXPECT_EQ(rank_share(node, 64).host_memory_bytes, 256 * kGiB);
  // One rank, or one GPU per node: the whole host.
  EXPECT_EQ(rank_share(node, 1).host_memory_bytes, node.host_memory_bytes);
  EXPECT_EQ(rank_share(find_gpu("l4"), 8).host_memory_bytes, 64 * kGiB);
  EXPECT_EQ(ranks_per_node(node, 3), 3);
  EXPECT_EQ(ranks_per_node(node, 20), 8);
}

TEST(GraphRanks, FromZeroMeta) {
  Graph g;
  g.name = "g";
  EXPECT_EQ(graph_ranks(g), 1);
  g.meta = {{"zero", {{"stage", 2}, {"ranks", 16}}}};
  EXPECT_EQ(graph_ranks(g), 16);
  g.meta["zero"]["ranks"] = 0;
  EXPECT_EQ(ranks_error([&] { graph_ranks(g); }),
            "graph 'g': meta.zero.ranks must be an integer in [1, 1048576], got 0");
  g.meta["zero"]["ranks"] = "8";
  EXPECT_EQ(ranks_error([&] { graph_ranks(g); }),
            "graph 'g': meta.zero.ranks must be an integer in [1, 1048576], got \"8\"");
}

TEST(GraphRanks, CommOpsAreTimedOverTheGraphsRanks) {
  Graph g;
  g.name = "g";
  g.meta = {{"zero", {{"stage", 3}, {"ranks", 16}}}};
  Op op;
  op.id = 0;
  op.name = "w.all_gather";
  op.type = "all_gather";
  op.phase = Phase::kComm;
  op.bytes = 1e9;
  const Hardware& h100 = find_gpu("h100-80g");
  EXPECT_EQ(op_time(h100, g, op), collective_time(h100, Collective::kAllGather, 1e9, 16));
  op.type = "broadcast";
  EXPECT_EQ(ranks_error([&] { op_time(h100, g, op); }),
            "op 0 ('w.all_gather') is of phase comm but its type 'broadcast' is no collective "
            "memwall times (all_reduce, reduce_scatter, all_gather, their tensor-parallel "
            "tp_ forms, ep_all_to_all and cp_send_recv)");
}

}  // namespace
}  // namespace memwall
