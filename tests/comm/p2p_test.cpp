// NCCL's channels for a send/recv inside a node (comm/p2p.hpp), worked by hand from v2.18.5's
// rules, and what they allow a send/recv plan to move.
#include "comm/p2p.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "comm/collective.hpp"
#include "tests/hw/fixtures.hpp"

namespace dtsim::comm {
namespace {

constexpr std::int64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

int channels(const P2pChannelRule& r, std::int64_t bytes) { return nccl_p2p_channels(r, Bytes(bytes)); }
std::vector<int> first(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// 8 GPUs on NVSwitch with 12 links each (an HGX A100): 24 ring channels, so 32 p2p channels and
// nextPow2(min(24, 2 x 12)) = 32 per peer. Minimum per operation: 32 halved while x 8 ranks > 32:
// 4. Maximum: 32 halved while x 8 > 4 x 32: 16. Chunks of 64 KiB to 16 MiB (512 KiB / 8 and x 32),
// doubling the channels from 4 while the chunk is over 16 MiB.
TEST(NcclP2pChannels, EightRanksOnAnNvswitchNode) {
  const P2pChannelRule r{24, 8, 24, true, 4};
  EXPECT_EQ(channels(r, 1 * KiB), 1);      // one 64 KiB chunk
  EXPECT_EQ(channels(r, 100 * KiB), 2);    // two 64 KiB chunks
  EXPECT_EQ(channels(r, 16 * MiB), 4);     // 4 chunks of 4 MiB
  EXPECT_EQ(channels(r, 64 * MiB), 4);     // 4 chunks of 16 MiB
  EXPECT_EQ(channels(r, 128 * MiB), 8);    // 32 MiB is over 16: 8 of 16 MiB
  EXPECT_EQ(channels(r, 256 * MiB), 16);   // 16 of 16 MiB
  EXPECT_EQ(channels(r, 1 * GiB), 16);     // 16 is the maximum: 16 of 64 MiB
  // NCCL v2.20 and later: no maximum below the peer's 32.
  const P2pChannelRule newer{24, 8, 24, true, 64};
  EXPECT_EQ(channels(newer, 256 * MiB), 16);
  EXPECT_EQ(channels(newer, 512 * MiB), 32);  // 32 of 16 MiB
  EXPECT_EQ(channels(newer, 1 * GiB), 32);    // 32 of 32 MiB
}

// Two ranks: minimum 32 halved while x 2 > 32: 16; maximum 32 (32 x 2 is not over 4 x 32).
TEST(NcclP2pChannels, TwoRanksStartAtSixteen) {
  const P2pChannelRule r{24, 2, 24, true, 4};
  EXPECT_EQ(channels(r, 8 * MiB), 16);   // 16 chunks of 512 KiB
  EXPECT_EQ(channels(r, 256 * MiB), 16);  // 16 of 16 MiB
  EXPECT_EQ(channels(r, 1 * GiB), 32);    // 64 MiB is over 16: 32 of 32 MiB
}

// Without NVLink every pair counts 2 channels: 2 per peer; the PCIe step is 128 KiB (chunks of
// 16 KiB to 4 MiB). NCCL takes the PCIe step only when no two GPUs share NVLink.
TEST(NcclP2pChannels, PcieNodesGetTwoPerPeer) {
  const P2pChannelRule r{24, 8, 2, false, 4};
  EXPECT_EQ(channels(r, 10 * KiB), 1);  // one 16 KiB chunk
  EXPECT_EQ(channels(r, 1 * MiB), 2);   // 2 of 512 KiB
  EXPECT_EQ(channels(r, 1 * GiB), 2);
}

// An NVLink mesh (no switch): the communicator's own pairs count, 2 x their links, and a pair
// without NVLink 2; one pair on NVLink is enough for the 512 KiB step. Four Volta GPUs, 0-1 and 2-3
// joined by 2 links, 0-2 by 1, 1-3 unjoined.
TEST(NcclP2pChannels, OnAMeshTheCommunicatorsOwnPairsCount) {
  hw::NodeSpec mesh = hw::testing::pcie_node();
  mesh.gpus = 4;
  mesh.gpu.compute_capability = "7.0";
  mesh.nvlink_topology = hw::NvlinkTopology::mesh;
  mesh.nvlink_mesh = {{0, 1, 2}, {2, 3, 2}, {0, 2, 1}};
  const CommParams p = CommParams::nccl_defaults();
  // Ranks 0 and 1: 4 per peer; minimum 4 (4 x 2 is not over 32); 8 MiB in 4 chunks of 2 MiB.
  EXPECT_EQ(nccl_p2p_node_rate(mesh, p, {0, 1}, Bytes(8 * MiB)).channels, 4);
  // Ranks 0 and 2: one link, 2 per peer.
  EXPECT_EQ(nccl_p2p_node_rate(mesh, p, {0, 2}, Bytes(8 * MiB)).channels, 2);
  // All four: the unjoined pair 1-3 counts 2; 64 KiB is one 64 KiB chunk (the NVLink step's
  // eighth; with the PCIe step it would be 2 of 32 KiB).
  EXPECT_EQ(nccl_p2p_node_rate(mesh, p, {0, 1, 2, 3}, Bytes(8 * MiB)).channels, 2);
  EXPECT_EQ(nccl_p2p_node_rate(mesh, p, {0, 1, 2, 3}, Bytes(64 * KiB)).channels, 1);
  EXPECT_NEAR(nccl_p2p_node_rate(mesh, p, {0, 1}, Bytes(8 * MiB)).cap.GBps(), 4 * 13.25, 1e-9);
}

hw::NodeSpec a100_like(int links) {
  hw::NodeSpec node = hw::testing::nvswitch_node(8, true, 25);
  node.gpu.compute_capability = "8.0";
  node.nvlink_links_per_gpu = links;
  return node;
}

// A channel moves half of NCCL's per-channel tree rate on one node (tuning.cc perChMaxTreeBws:
// Volta 26.5, Ampere 24.0, Hopper 38.7 GB/s) each way; the node's links set the channels.
TEST(NcclP2pChannels, RatePerChannelIsHalfTheTreeRate) {
  CommParams p = CommParams::nccl_defaults();
  // 4 links: 8 per peer; minimum 8 halved while x 8 > 32: 4; maximum 8. 1 GiB: 8 of 128 MiB.
  const P2pNodeRate four = nccl_p2p_node_rate(a100_like(4), p, first(8), Bytes(GiB));
  EXPECT_EQ(four.channels, 8);
  EXPECT_NEAR(four.cap.GBps(), 8 * 12.0, 1e-9);
  const P2pNodeRate twelve = nccl_p2p_node_rate(a100_like(12), p, first(8), Bytes(GiB));
  EXPECT_EQ(twelve.channels, 16);
  EXPECT_NEAR(twelve.cap.GBps(), 16 * 12.0, 1e-9);
  hw::NodeSpec hopper = a100_like(18);
  hopper.gpu.compute_capability = "9.0";
  EXPECT_NEAR(nccl_p2p_node_rate(hopper, p, first(8), Bytes(GiB)).cap.GBps(), 16 * 19.35, 1e-9);
  hw::NodeSpec volta = a100_like(6);
  volta.gpu.compute_capability = "7.0";
  EXPECT_NEAR(nccl_p2p_node_rate(volta, p, first(2), Bytes(8 * MiB)).cap.GBps(), 16 * 13.25, 1e-9);  // 2 x 6 links -> 16 per peer, 16 of 512 KiB
  // No known rate: a GPU without a compute capability, and Blackwell.
  hw::NodeSpec unknown = a100_like(12);
  unknown.gpu.compute_capability.clear();
  EXPECT_TRUE(nccl_p2p_node_rate(unknown, p, first(8), Bytes(GiB)).cap.is_zero());
  hw::NodeSpec blackwell = a100_like(18);
  blackwell.gpu.compute_capability = "10.0";
  EXPECT_TRUE(nccl_p2p_node_rate(blackwell, p, first(8), Bytes(GiB)).cap.is_zero());
  // The v2.20 rule: all 32 of the peer's channels.
  p.p2p_channel_load = 64;
  EXPECT_EQ(nccl_p2p_node_rate(a100_like(12), p, first(8), Bytes(GiB)).channels, 32);
}

// A send/recv plan on one node is held to its channels' rate where the links are faster: 8 GPUs
// with 12 links of 25 GB/s (300 GB/s each way) send 1 GiB on 16 channels (192 GB/s) and 64 MiB on
// 4 (48 GB/s). Across two nodes no ceiling is set (NCCL's channels per network peer changed in
// v2.21): the NIC's 25 GB/s alone.
TEST(NcclP2pChannels, SendRecvPlansMoveAtTheirChannelsRate) {
  auto data_seconds = [](const hw::ClusterSpec& spec, std::int64_t bytes, int nodes_expected) {
    auto topo = hw::Topology::build(spec).value();
    hw::Router router(topo);
    Planner planner(topo, router, CommParams::nccl_defaults());
    CollectiveRequest req;
    req.op = CollOp::sendrecv;
    req.size = Bytes(bytes);
    for (int i = 0; i < topo.gpus(); ++i) req.ranks.push_back(i);
    auto plan = planner.plan(req);
    EXPECT_TRUE(plan.ok());
    EXPECT_EQ(plan->nodes, nodes_expected);
    EXPECT_EQ(plan->protocol, Protocol::simple);
    const Time latency = plan->phases.at(0).groups.at(0).latency;
    return std::pair{(simulate_alone(topo, *plan) - latency).seconds(), plan->nccl_channels};
  };
  const hw::ClusterSpec one = hw::testing::cluster(a100_like(12), 1, hw::FabricKind::single_switch);
  const auto [big, big_ch] = data_seconds(one, GiB, 1);
  EXPECT_EQ(big_ch, 16);
  EXPECT_NEAR(big, GiB / 192e9, 1e-3 * big);
  const auto [mid, mid_ch] = data_seconds(one, 64 * MiB, 1);
  EXPECT_EQ(mid_ch, 4);
  EXPECT_NEAR(mid, 64 * MiB / 48e9, 1e-3 * mid);
  // Two nodes: 16 ranks, the hops between nodes over one 25 GB/s NIC each.
  const hw::ClusterSpec two = hw::testing::cluster(a100_like(12), 2, hw::FabricKind::single_switch);
  const auto [net, net_ch] = data_seconds(two, 256 * MiB, 2);
  EXPECT_EQ(net_ch, 0);
  EXPECT_NEAR(net, 256 * MiB / 25e9, 0.01 * net);
}

}  // namespace
}  // namespace dtsim::comm
