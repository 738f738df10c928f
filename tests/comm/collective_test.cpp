// Collectives simulated as flows, checked against alpha-beta formulas written out by hand here
// (not taken from the planner), on small made-up topologies whose bandwidths are easy to reason
// about.
#include "comm/collective.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <set>
#include <string>

#include "tests/hw/fixtures.hpp"

namespace dtsim::comm {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

struct Fixture {
  explicit Fixture(hw::ClusterSpec spec) : topo(std::move(hw::Topology::build(spec)).value()), router(topo), planner(topo, router, params) {}
  Fixture(hw::ClusterSpec spec, CommParams p)
      : topo(std::move(hw::Topology::build(spec)).value()), router(topo), params(std::move(p)), planner(topo, router, params) {}
  hw::Topology topo;
  hw::Router router;
  CommParams params = CommParams::nccl_defaults();
  Planner planner;

  Plan plan(CollOp op, Bytes size, Algo a, Protocol p, std::vector<int> ranks = {}, Fidelity f = Fidelity::coupled) {
    CollectiveRequest req;
    req.op = op;
    req.size = size;
    if (ranks.empty()) {
      for (int i = 0; i < topo.gpus(); ++i) ranks.push_back(i);
    }
    req.ranks = ranks;
    req.algo = a;
    req.protocol = p;
    req.fidelity = f;
    auto pl = planner.plan(req);
    EXPECT_TRUE(pl.ok()) << (pl.ok() ? "" : pl.error().to_string());
    return std::move(pl).value();
  }
  double simulate(const Plan& p) { return simulate_alone(topo, p).seconds(); }
  // Two plans started together on one network: when each ends, in seconds.
  std::pair<double, double> simulate_together(const Plan& a, const Plan& b) {
    Simulator sim;
    FlowNetwork net(sim, std::make_unique<MaxMinSharing>());
    topo.install(net);
    Time end_a, end_b;
    execute(net, a, [&] { end_a = sim.now(); });
    execute(net, b, [&] { end_b = sim.now(); });
    sim.run();
    return {end_a.seconds(), end_b.seconds()};
  }
};

double us(double v) { return v * 1e-6; }
constexpr double GB = 1e9;

// NCCL v2.18.5 tuning constants used as the defaults (us): ring Simple base 8.4, NVLink step 3.4,
// network step 14; tree Simple base 0, NVLink step 4, network step 14; ring LL base 6.6, NVLink
// step 0.6. (The v2.9 values these tests used before: network 9.6, tree 28/50, LL 3.6/0.47.)

TEST(RingAllReduce, MatchesTheAlphaBetaFormulaInOneNode) {
  // 8 GPUs, each with 4 NVLinks of 25 GB/s to the switch: B = 100 GB/s per direction.
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  // Simple hands over 2 slices per ring step and loop; a loop is 24 channels x 8 ranks x 2 MiB =
  // 384 MiB: 1 MiB is one loop (28 handoffs), 1 GiB three (84), each a 3.4 us NVLink step.
  // The kernel cuts a loop in pieces of size / 192 rounded up to 4 KiB ((544 - 32) threads x 8),
  // 8 consecutive pieces per channel: 1 MiB makes 8 KiB pieces, so channel 0 moves 8 KiB per step
  // where an even split over 24 channels is 1 MiB / 192 (only 16 channels get data). 1 GiB is two
  // full loops of 2 MiB pieces and a last loop of 256 MiB in pieces of 1,400,832 bytes.
  const std::pair<double, double> piece[] = {{8192.0, 1048576.0 / 192}, {2 * 2097152.0 + 1400832, 1073741824.0 / 192}};
  for (int i = 0; i < 2; ++i) {
    const double S = i == 0 ? 1048576.0 : 1073741824.0;
    const int loops = i == 0 ? 1 : 3;
    const double share = piece[i].second / piece[i].first;  // even piece / channel 0's piece
    const Plan p = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::ring, Protocol::simple);
    const double expected = us(8.4) + loops * 2 * 2 * (n - 1) * us(3.4) + 2.0 * (n - 1) / n * S / (100 * GB * share);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << S;
    EXPECT_NEAR(p.estimate.seconds(), expected, 0.01 * expected) << S;
  }
}

TEST(RingAllReduce, LlProtocolTradesBandwidthForLatency) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 65536;
  const Plan p = f.plan(CollOp::allreduce, Bytes(65536), Algo::ring, Protocol::ll);
  // LL: a quarter of the bus bandwidth for all-reduce (NCCL), base 6.6 us, 0.6 us per step; the
  // 25 GB/s this gives is under LL's 87.7 GB/s ceiling. 64 KiB runs on 2 of NCCL's 24 channels
  // (65536 / (512 threads x 8 x 8 ranks) = 2), so at 2/24 of that.
  const double expected = us(6.6) + 2 * (n - 1) * us(0.6) + 2.0 * (n - 1) / n * S / (0.25 * 100 * GB * 2 / 24);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

TEST(RingAllReduce, AcrossNodesIsBoundByTheNicsItsChannelsUse) {
  // 4 nodes of 8 GPUs; 4 NICs of 10 GB/s per node (one per GPU pair). Four channels, one per NIC:
  // each NIC carries one channel, so the ring moves 2(n-1)/n S at 4 x 10 GB/s. NVLink (100 GB/s
  // per GPU) is not the bottleneck.
  Fixture f(cluster(nvswitch_node(8, false, 10), 4, hw::FabricKind::single_switch));
  const int n = 32, m = 4;
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::ring, Protocol::simple);
  EXPECT_EQ(p.channels, 4);
  // NCCL opens 8 channels (comm/channels.hpp: one per NIC at 10 GB/s, under 25 GB/s so the search
  // keeps them, ncclTopoPostset doubles them). A Simple loop is 8 channels x 32 ranks x 2 MiB =
  // 512 MiB: 1 GiB runs 2 loops of 2(n - 1) steps x 2 slices, each handed over at a Simple NVLink
  // step (3.4 us), which outlasts NCCL's chain of step latencies.
  const double slices = 2.0 * 2 * (n - 1) * 2;
  const double latency = std::max(us(8.4) + (2 * (n - 1) - 2 * (m - 1)) * us(3.4) + 2 * (m - 1) * us(14.0), us(8.4) + slices * us(3.4));
  const double expected = latency + 2.0 * (n - 1) / n * S / (4 * 10 * GB);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

TEST(RingAllGatherAndReduceScatter, MoveNMinusOneOverNOfTheBuffer) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 268435456;
  for (CollOp op : {CollOp::allgather, CollOp::reducescatter}) {
    const Plan p = f.plan(op, Bytes(268435456), Algo::ring, Protocol::simple);
    // One loop of n - 1 steps, 2 slices each. Each rank's 32 MiB is one loop of 24 channels x
    // 2 MiB; its pieces are 32 MiB / 24 rounded up to 4 KiB: 1,400,832 bytes on channel 0.
    const double share = 33554432.0 / 24 / 1400832;
    const double expected = us(8.4) + 2 * (n - 1) * us(3.4) + (n - 1.0) / n * S / (100 * GB * share);
    EXPECT_NEAR(f.simulate(p), expected, 0.001 * expected) << to_string(op);
  }
}

TEST(Broadcast, IsAPipelinedChain) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 268435456, chunk = 512 * 1024;
  const Plan p = f.plan(CollOp::broadcast, Bytes(268435456), Algo::ring, Protocol::simple);
  // (n-1) hops of latency; each of NCCL's 24 channels (max_channels on one node) moves S / 24 at
  // B / 24 through its own chain, which fills in n-2 chunks before its last hop starts.
  ASSERT_EQ(p.nccl_channels, 24);
  const double expected = us(8.4) + (n - 1) * us(3.4) + (S / 24 + (n - 2) * chunk) / (100 * GB / 24);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

TEST(Broadcast, LlForwardsEachLineWithoutFillingThePipeline) {
  // LL flags every 16-byte line (8 bytes of data) and each thread forwards its line once read
  // (prims_ll.h recvCopySend), so the chain costs its hops' latency and one pass of the data,
  // not n - 2 chunks more. 1 MiB runs on all 24 channels (1 MiB / (512 threads x 8 x 8 ranks) = 32).
  // LL's fraction of the bus bandwidth: 1/3 for broadcast in one node, 1/4 for reduce (NCCL's
  // tuner); base 6.6 us, 0.6 us per NVLink hop.
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 1048576;
  for (const auto& [op, factor] : {std::pair{CollOp::broadcast, 1.0 / 3.0}, std::pair{CollOp::reduce, 0.25}}) {
    const Plan p = f.plan(op, Bytes(1048576), Algo::ring, Protocol::ll);
    const double expected = us(6.6) + (n - 1) * us(0.6) + S / (factor * 100 * GB);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << to_string(op);
  }
}

TEST(Broadcast, TheChoiceIgnoresTheFillAsNcclsTunerDoes) {
  // NCCL's tuner times a broadcast as latency + S / bandwidth. At 128 MiB on 8 GPUs of 100 GB/s:
  // Simple 8.4 + 7 x 3.4 + 1,342 us; LL128 14 + 7 x 1.9 + 1,342 / 0.92 us: it picks Simple, though
  // Simple's chain fill (6 chunks of 512 KiB on each of 24 channels, 755 us more) makes it the
  // slower of the two here.
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  CollectiveRequest req;
  req.op = CollOp::broadcast;
  req.size = Bytes::MiB(128);
  for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
  auto p = f.planner.plan(req);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->algo, Algo::ring);
  EXPECT_EQ(p->protocol, Protocol::simple);
  EXPECT_GT(f.simulate(*p), f.simulate(f.plan(CollOp::broadcast, Bytes::MiB(128), Algo::ring, Protocol::ll128)));
}

TEST(Broadcast, EachNetworkHopHoldsOneStepOfLl128) {
  // 4 nodes of one GPU, one NIC of 10 GB/s each: the chain 0 -> 1 -> 2 -> 3 crosses the network
  // at every hop, and the proxy sends an LL128 step (576,000 data bytes) only once all of it is
  // written. The root writes its step at copy speed, so hops 2 and 3 each hold one step. Each of
  // NCCL's channels (2 here: the search's one at 10 GB/s, doubled by ncclTopoPostset;
  // comm/channels.hpp) moves S / 2 through its own chain; the channels share the one NIC at
  // LL128's .7 with one GPU per node (NCCL's tuner, tuning.cc). Latency: base 14 us + 3 network
  // hops of 4 us.
  auto c = cluster(nvswitch_node(8, true, 10), 4, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = 1;
  Fixture f(c);
  // A reduce runs the same chain backwards: its data starts at rank 3, whose hop writes at copy
  // speed, and hops 2 -> 1 and 1 -> 0 each hold one step.
  const double S = 16777216.0;
  for (CollOp op : {CollOp::broadcast, CollOp::reduce}) {
    const Plan p = f.plan(op, Bytes(16777216), Algo::ring, Protocol::ll128);
    ASSERT_EQ(p.nccl_channels, 2);
    const double expected = us(14) + 3 * us(4) + (S / 2 + 2 * 576000.0) / (0.7 * 10 * GB / 2);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << to_string(op);
  }
}

TEST(TreeAllReduce, DoubleBinaryTreeSendsTwoBuffersPerRank) {
  // 8 nodes of one GPU on one switch, NIC 10 GB/s. In each of the two trees a rank is inner
  // (parent + 2 children) or a leaf (parent), and inner in only one: at most 4 edges of S/2 leave
  // a rank, i.e. 2S, at 92% of the bus bandwidth (NCCL's tree refinement).
  auto c = cluster(nvswitch_node(8, true, 10), 8, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = 1;
  Fixture f(c);
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::tree, Protocol::simple);
  // NCCL cuts it in 512 KiB pieces, one per channel and loop of 24 (tree depth 3 keeps the full
  // step): 85 loops and 4 MiB, of which channel 0 takes a whole piece: 86 x 512 KiB on the busiest
  // channel against 1 GiB / 24.
  const double share = S / 24 / (86 * 524288.0);
  const double expected = 0 + 2 * (0 * us(4) + 3 * us(14)) + 2 * S / (0.92 * 10 * GB * share);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

TEST(Nvls, EachGpuLinkMovesSTimesOnePlusOneOverN) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::nvls, Protocol::simple);
  // 1 GiB: chunk 128 KiB, loops of 16 channels x 8 GPUs x 128 KiB = 16 MiB, 64 of them, each
  // synchronised (3.4 us), two more to fill the scatter / reduce / gather pipeline, whose fill and
  // drain also move 2 (n - 1) / n of one loop's 16 MiB.
  const double fill_drain = 2.0 * (n - 1) / n * 16 * 1048576.0 / (0.887 * 100 * GB);
  const double expected = us(23) + (64 + 2) * us(3.4) + fill_drain + S * (1 + 1.0 / n) / (0.887 * 100 * GB);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
  EXPECT_EQ(p.channels, 16);
}

// NCCL v2.18.5 enqueue.cc computeColl: the NVLS chunk is 128 KiB, 64 KiB below 64 x (channels x
// heads) x 128 KiB, 32 KiB below 8 x ... x 64 KiB, 16 KiB below 2 x ... x 32 KiB. With 16 channels
// and 8 GPUs (128 heads in all): 1 GiB, 64 MiB and 8 MiB are the switch points.
TEST(Nvls, ChunkShrinksWithTheMessageAndLoopsCountIt) {
  const CommParams p = CommParams::nccl_defaults();
  EXPECT_EQ(p.nvls_chunk(Bytes::GiB(8), 8), Bytes::KiB(128));
  EXPECT_EQ(p.nvls_chunk(Bytes::GiB(1), 8), Bytes::KiB(128));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(1023), 8), Bytes::KiB(64));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(64), 8), Bytes::KiB(64));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(63), 8), Bytes::KiB(32));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(8), 8), Bytes::KiB(32));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(7), 8), Bytes::KiB(16));
  EXPECT_EQ(p.nvls_chunk(Bytes::KiB(1), 8), Bytes::KiB(16));
  // Loops of 16 x 8 x chunk: 8 GiB / 16 MiB, 64 MiB / 8 MiB, 32 MiB / 4 MiB, 4 MiB / 2 MiB.
  EXPECT_EQ(p.nvls_loops(Bytes::GiB(8), 8), 512);
  EXPECT_EQ(p.nvls_loops(Bytes::MiB(64), 8), 8);
  EXPECT_EQ(p.nvls_loops(Bytes::MiB(32), 8), 8);
  EXPECT_EQ(p.nvls_loops(Bytes::MiB(4), 8), 2);
  EXPECT_EQ(p.nvls_loops(Bytes::KiB(64), 8), 1);
  // Four GPUs: 64 heads, so each switch point halves: 4 MiB = 2 x 64 x 32 KiB keeps 32 KiB, 3 MiB
  // drops to 16 KiB.
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(4), 4), Bytes::KiB(32));
  EXPECT_EQ(p.nvls_chunk(Bytes::MiB(3), 4), Bytes::KiB(16));
}

// The ramp with size: time = 23 us + (loops + 2) x 3.4 us + 2 (n - 1) / n min(S, loop) / (0.887 B)
// + S(1 + 1/n) / (0.887 B), loops as above, on the 100 GB/s test switch. 64 KiB and 1 MiB are one
// loop (of 2 MiB); 4 MiB two (of 2 MiB); 32 MiB eight (of 4 MiB). Channel b takes the block at
// b x 8 heads x chunk of a loop: with 16 KiB chunks, 64 KiB is all on channel 0 (1 of 16 channels
// busy, at 1/16 of the rate) and 1 MiB on 8 channels of 128 KiB (at 8/16).
TEST(Nvls, TimeRampsWithTheLoopCount) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  struct Case {
    double S;
    int loops;
    double busy;  // channels carrying data, of 16
    double loop;  // bytes of one loop
  };
  const Case cases[] = {{65536.0, 1, 1, 2097152.0}, {1048576.0, 1, 8, 2097152.0}, {4194304.0, 2, 16, 2097152.0}, {33554432.0, 8, 16, 4194304.0}};
  for (const auto& [S, loops, busy, loop] : cases) {
    const Plan p = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::nvls, Protocol::simple);
    const double fill_drain = 2.0 * (n - 1) / n * std::min(S, loop) / (0.887 * 100 * GB);
    const double expected = us(23) + (loops + 2) * us(3.4) + fill_drain + S * (1 + 1.0 / n) / (0.887 * 100 * GB * busy / 16);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << S;
    EXPECT_NEAR(p.estimate.seconds(), expected, 0.01 * expected) << S;
  }
}

// Across nodes NVLS is NCCL's NVLS tree (v2.18.5 all_reduce.h NCCL_ALGO_NVLS_TREE): the switch
// reduces each node's data into 8 head shards, each head all-reduces its shard with the other
// node's head through its own NIC (two trees, half the shard each, up and down), and the switch
// multicasts the result; scatter, reduce, tree and broadcast run at once on every loop, so the
// time is the slower of the NVLink stage and the network stage, not their sum. Both move at
// nvls.tree_factor 0.84 (NCCL's tuning ratio .70 / (5/6)): of the NIC, and of one node's NVLS
// (0.887 of the 100 GB/s test link). 2 nodes, 1 GiB: 64 loops of 16 MiB, latency 23 us + 2 log2(2)
// x 19 us, and the first scatter and last gather as on one node.
TEST(Nvls, AcrossNodesIsOnePipelinedTreeOfHeads) {
  const int g = 8;
  const double S = 1073741824.0;
  const double intra_rate = 0.887 * 0.84 * 100 * GB;
  const double intra = S * (1 + 1.0 / g) / intra_rate;
  const double fixed = us(23) + 2 * us(19) + (64 + 2) * us(3.4) + 2.0 * (g - 1) / g * 16 * 1048576.0 / intra_rate;
  // Each NIC carries S/16 of each tree each way: S/8.
  for (const double nic : {50.0, 5.0}) {
    Fixture f(cluster(nvswitch_node(g, true, nic), 2, hw::FabricKind::single_switch));
    const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::nvls, Protocol::simple);
    const double net = S / 8 / (0.84 * nic * GB);
    const double expected = fixed + std::max(intra, net);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << nic;
    EXPECT_EQ(p.channels, 16);
    EXPECT_EQ(p.phases.size(), 1u);
  }
}

// The same with one NIC per pair of GPUs: 4 heads per node (GPUs 0, 2, 4, 6, each owning a NIC).
// A head's switch link carries S(1 + 1/4), the others' S; each head's shard is S/4, so each NIC
// moves S/8 per tree each way, S/4 in all. 1 GiB: loops of 16 channels x 4 heads x 128 KiB = 8 MiB,
// 128 of them; the fill and drain is one loop's 2 (g - 1)/g with g = 8 GPUs.
TEST(Nvls, AcrossNodesWithFewerHeadsThanGpus) {
  const double S = 1073741824.0;
  const double intra_rate = 0.887 * 0.84 * 100 * GB;
  Fixture f(cluster(nvswitch_node(8, false, 50), 2, hw::FabricKind::single_switch));
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::nvls, Protocol::simple);
  const double intra = S * (1 + 1.0 / 4) / intra_rate;
  const double net = S / 4 / (0.84 * 50 * GB);
  const double fixed = us(23) + 2 * us(19) + (128 + 2) * us(3.4) + 2.0 * 7 / 8 * 8 * 1048576.0 / intra_rate;
  const double expected = fixed + std::max(intra, net);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

// NCCL v2.18.5 (transport/nvls.cc ncclNvlsInit) runs NVLS only with more than 2 GPUs of the
// communicator on a node: a pair of GPUs per node never gets it, even when asked for.
TEST(Nvls, NeedsMoreThanTwoGpusPerNode) {
  Fixture f(cluster(nvswitch_node(), 2, hw::FabricKind::single_switch));
  CollectiveRequest req;
  req.op = CollOp::allreduce;
  req.size = Bytes::MiB(64);
  req.ranks = {0, 1, 8, 9};
  req.algo = Algo::nvls;
  EXPECT_FALSE(f.planner.plan(req).ok());
  req.ranks = {0, 1, 2, 8, 9};  // 3 GPUs on one node, 2 on the other
  const auto uneven = f.planner.plan(req);
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.error().message.find("more than 2 GPUs on every node"), std::string::npos) << uneven.error().message;
  req.ranks = {0, 1, 2, 8, 9, 10};
  EXPECT_TRUE(f.planner.plan(req).ok());
}

// NCCL v2.18.5 enqueue.cc getAlgoInfo: while nBytes < nc x threads x threshold, one channel fewer.
// Threads 512 (LL, Simple) or 640 (LL128); threshold 64 (Simple), 8 (LL128), 8 x nRanks (ring LL),
// 8 (tree LL). So nc = floor(bytes / (threads x threshold)), between 1 and 24.
TEST(Channels, SmallMessagesRunOnFewerChannels) {
  const CommParams p = CommParams::nccl_defaults();
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::simple, Bytes(786432), 8), 24);  // 24 x 512 x 64
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::simple, Bytes(786431), 8), 23);
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::simple, Bytes::KiB(64), 8), 2);
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::simple, Bytes::KiB(100), 8), 3);
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::simple, Bytes(1024), 8), 1);
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::ll, Bytes::KiB(64), 8), 2);    // 512 x 8 x 8
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::ll, Bytes::KiB(64), 2), 8);    // 512 x 8 x 2
  EXPECT_EQ(p.channels_used(Algo::tree, Protocol::ll, Bytes::KiB(64), 8), 16);   // 512 x 8
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::ll128, Bytes::KiB(64), 8), 12);  // 640 x 8 = 5120
  EXPECT_EQ(p.channels_used(Algo::ring, Protocol::ll128, Bytes::GiB(1), 8), 24);
}

// The same ring at 64 KiB, 256 KiB and 1 MiB with Simple: 2, 8, then all 24 channels. The time is
// the alpha-beta form with the bandwidth scaled by channels carrying data / 24. The kernel's
// pieces are bytes / (channels x 8 ranks) rounded up to 4 KiB, 8 per channel: 4 KiB at 64 and
// 256 KiB (even), 8 KiB at 1 MiB, which fills only 16 of the 24 channels.
TEST(Channels, ARingOnFewerChannelsMovesAtTheirShare) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const std::pair<double, int> cases[] = {{65536.0, 2}, {262144.0, 8}, {1048576.0, 16}};
  for (const auto& [S, c] : cases) {
    const Plan p = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::ring, Protocol::simple);
    // One loop: 2(n-1) steps x 2 slices handed over at 3.4 us each.
    const double expected = us(8.4) + 4 * (n - 1) * us(3.4) + 2.0 * (n - 1) / n * S / (100 * GB * c / 24);
    EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected) << S;
    EXPECT_NEAR(p.estimate.seconds(), expected, 0.01 * expected) << S;
  }
  // All-gather uses the same rule: 64 KiB, (n-1)/n of it, on 2 channels.
  const Plan ag = f.plan(CollOp::allgather, Bytes::KiB(64), Algo::ring, Protocol::simple);
  const double ag_expected = us(8.4) + 2 * (n - 1) * us(3.4) + (n - 1.0) / n * 65536 / (100 * GB * 2 / 24);
  EXPECT_NEAR(f.simulate(ag), ag_expected, 0.01 * ag_expected);
}

// What a plan reports as NCCL's channels (the `ch` column of dtsim collective), worked out by
// NCCL's launch rule by hand: Simple rings use nc = bytes / (512 threads x 64) channels, at most
// the 24 NCCL opens on this node; trees the same with their own threshold; NVLS its 16 channels at
// every size; dtsim's own direct all-to-all reports none (NCCL's peer-to-peer channels are not
// modelled). The model's ring paths (`channels`) stay 1 on one node.
TEST(Channels, APlanReportsTheChannelsNcclLaunches) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const Plan small = f.plan(CollOp::allreduce, Bytes::KiB(64), Algo::ring, Protocol::simple);
  EXPECT_EQ(small.nccl_channels, 2);   // 65,536 / 32,768
  EXPECT_EQ(small.channels, 1);
  EXPECT_EQ(f.plan(CollOp::allreduce, Bytes::KiB(256), Algo::ring, Protocol::simple).nccl_channels, 8);
  EXPECT_EQ(f.plan(CollOp::allreduce, Bytes::GiB(1), Algo::ring, Protocol::simple).nccl_channels, 24);
  EXPECT_EQ(f.plan(CollOp::reducescatter, Bytes::KiB(100), Algo::ring, Protocol::simple).nccl_channels, 3);  // 102,400 / 32,768
  EXPECT_EQ(f.plan(CollOp::broadcast, Bytes::KiB(64), Algo::ring, Protocol::simple).nccl_channels, 2);
  EXPECT_EQ(f.plan(CollOp::allreduce, Bytes::KiB(64), Algo::tree, Protocol::ll).nccl_channels, 16);  // 65,536 / (512 x 8)
  EXPECT_EQ(f.plan(CollOp::alltoall, Bytes::MiB(1), Algo::direct, Protocol::simple).nccl_channels, 0);
}

TEST(Channels, NvlsReportsItsChannelsAtEverySize) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  for (const Bytes s : {Bytes::KiB(64), Bytes::GiB(1)}) {
    EXPECT_EQ(f.plan(CollOp::allreduce, s, Algo::nvls, Protocol::simple).nccl_channels, 16) << s.count();
  }
}

TEST(AllToAll, EachRankSendsNMinusOneOverNOfItsBuffer) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 268435456;
  const Plan p = f.plan(CollOp::alltoall, Bytes(268435456), Algo::direct, Protocol::simple);
  const double expected = us(8.4) + us(3.4) + (n - 1.0) / n * S / (100 * GB);
  EXPECT_NEAR(f.simulate(p), expected, 0.01 * expected);
}

TEST(PeerToPeer, ProtocolIsLlUpToSixteenKibPerPeerElseSimpleNeverLl128) {
  // NCCL v2.18.5 enqueue.cc addP2pToPlan: LL when a peer's bytes are at most
  // NCCL_P2P_LL_THRESHOLD (16,384), else Simple. An all-to-all of S on 8 ranks sends S / 8 to
  // each peer; nccl-tests' send/recv sends S to one.
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  struct Case {
    CollOp op;
    std::int64_t bytes;
    Protocol expected;
  };
  for (const Case& c : {Case{CollOp::alltoall, 8 * 16384, Protocol::ll}, Case{CollOp::alltoall, 8 * 16384 + 8, Protocol::simple},
                        Case{CollOp::alltoall, 64 << 20, Protocol::simple}, Case{CollOp::sendrecv, 16384, Protocol::ll},
                        Case{CollOp::sendrecv, 16392, Protocol::simple}}) {
    CollectiveRequest req;
    req.op = c.op;
    req.size = Bytes(c.bytes);
    req.ranks = ranks;
    auto p = f.planner.plan(req);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->protocol, c.expected) << to_string(c.op) << " " << c.bytes;
  }
  for (CollOp op : {CollOp::alltoall, CollOp::sendrecv}) {
    CollectiveRequest req;
    req.op = op;
    req.size = Bytes::MiB(1);
    req.ranks = ranks;
    req.protocol = Protocol::ll128;
    auto p = f.planner.plan(req);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().to_string().find("direct/Simple"), std::string::npos) << p.error().to_string();
  }
}

TEST(Fidelity, PerStepPerEdgeAndCoupledRingsAgreeWithoutContention) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  const Plan coupled = f.plan(CollOp::allreduce, Bytes(67108864), Algo::ring, Protocol::simple);
  const Plan edge = f.plan(CollOp::allreduce, Bytes(67108864), Algo::ring, Protocol::simple, {}, Fidelity::per_edge);
  const Plan step = f.plan(CollOp::allreduce, Bytes(67108864), Algo::ring, Protocol::simple, {}, Fidelity::per_step);
  EXPECT_EQ(step.phases.size(), 14u);  // 2(n-1) steps
  const double t = f.simulate(coupled);
  EXPECT_NEAR(f.simulate(edge), t, 0.001 * t);
  EXPECT_NEAR(f.simulate(step), t, 0.01 * t);
}

TEST(Contention, TwoRingsSharingANicTakeTwiceTheBandwidthTime) {
  // Two nodes; GPUs 0 and 1 of a node share NIC 0. A ring over {GPU0 of each node} alone, then
  // two such rings ({GPU0s}, {GPU1s}) at once: the NIC is shared, the data phase doubles.
  auto c = cluster(nvswitch_node(8, false, 10), 2, hw::FabricKind::single_switch);
  Fixture f(c);
  const Bytes size(1073741824);
  const Plan a = f.plan(CollOp::allreduce, size, Algo::ring, Protocol::simple, {0, 8});
  const Plan b = f.plan(CollOp::allreduce, size, Algo::ring, Protocol::simple, {1, 9});
  const double alone = f.simulate(a);
  const auto [end_a, end_b] = f.simulate_together(a, b);
  // One GPU per node: NCCL's search finds one channel, ncclTopoPostset makes it 2 (comm/channels.hpp).
  // Simple loops of 2 channels x 2 ranks x 2 MiB: 128 loops of 2 steps x 2 slices. dtsim charges
  // every slice handoff a Simple intra-node step (3.4 us) on any ring, this one too, though its
  // steps cross the network (docs/model.md, the Simple slice handoffs).
  const double latency = std::max(us(8.4) + 2 * us(14.0), us(8.4) + 128 * 2 * 2 * us(3.4));
  const double data = 1.0 * 1073741824.0 / (10 * GB);  // 2(n-1)/n = 1 for n = 2
  EXPECT_NEAR(alone, latency + data, 0.01 * alone);
  EXPECT_NEAR(end_a, latency + 2 * data, 0.01 * alone);
  EXPECT_EQ(end_a, end_b);
}

TEST(Contention, StridedGroupsLeaveThroughTheirOwnGpusNics) {
  // Two nodes; 4 NICs of 10 GB/s per node, NIC k owned by GPUs 2k and 2k + 1. Tensor parallelism
  // 2 x 2 leaves two data-parallel groups per node, {GPU 0, GPU 4} and {GPU 2, GPU 6}: the first
  // owns NICs 0 and 2, the second NICs 1 and 3. Each ring moves 2(n-1)/n S over its own two NICs
  // (n = 4), so the two groups at once take as long as one alone. (dtsim used to give every
  // group NICs 0 and 1, whichever GPUs it held: the two groups then shared them, twice as slow.)
  Fixture f(cluster(nvswitch_node(8, false, 10), 2, hw::FabricKind::single_switch));
  const double S = 1073741824.0;
  const Plan a = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::ring, Protocol::simple, {0, 4, 8, 12});
  const Plan b = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::ring, Protocol::simple, {2, 6, 10, 14});
  EXPECT_EQ(a.channels, 2);
  const double alone = f.simulate(a);
  const double data = 2.0 * 3 / 4 * S / (2 * 10 * GB);
  EXPECT_GT(alone, data);
  EXPECT_LT(alone, data + 0.002);  // latency and slice handoffs: well under 2 ms here
  const auto [end_a, end_b] = f.simulate_together(a, b);
  EXPECT_NEAR(end_a, alone, 0.01 * alone);
  EXPECT_NEAR(end_b, alone, 0.01 * alone);
}

TEST(Contention, EachNodeSendsAndReceivesThroughItsOwnGpusNics) {
  // GPUs 0-3 of node 0 and GPUs 4-7 of node 1 (NIC k beside GPUs 2k, 2k + 1): node 0's own NICs
  // are 0 and 1, node 1's are 2 and 3. Both channels of the ring must enter and leave each node
  // through that node's own NICs, never through the other node's NIC numbers.
  Fixture f(cluster(nvswitch_node(8, false, 10), 2, hw::FabricKind::single_switch));
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::ring, Protocol::simple, {0, 1, 2, 3, 12, 13, 14, 15});
  EXPECT_EQ(p.channels, 2);
  std::set<std::string> nics;
  for (const auto& ph : p.phases) {
    for (const auto& g : ph.groups) {
      for (const auto& u : g.uses) {
        const std::string name = f.topo.link_name(u.link);
        for (const char* nic : {"n0.nic0", "n0.nic1", "n0.nic2", "n0.nic3", "n1.nic0", "n1.nic1", "n1.nic2", "n1.nic3"}) {
          if (name.find(nic) != std::string::npos) nics.insert(nic);
        }
      }
    }
  }
  EXPECT_EQ(nics, (std::set<std::string>{"n0.nic0", "n0.nic1", "n1.nic2", "n1.nic3"}));
}

// NCCL v2.18.5 tuning.cc sets two host costs by the CPU's maker. getNetOverhead: posting a network
// operation takes 1 us on Intel (and other) CPUs, 2 us on AMD, and a multi-node ring's
// intra-node step is never faster. 8 bytes, ring LL, 2 nodes x 8 GPUs: 30 steps, 2 of them across
// nodes (2.7 us), 28 in the nodes at max(0.6 us, the post): 6.6 + 28 x 1 + 2 x 2.7 = 40.0 us on
// Intel, 6.6 + 28 x 2 + 5.4 = 68.0 us on AMD.
TEST(HostCpu, NetworkPostsCostTwiceAsMuchOnAmd) {
  // The inter-node steps pay their path's latency where it exceeds 2.7 us (3.6 us here, through
  // NVLink to the NIC's GPU, PCIe, the NIC and the switch), the same on both hosts: the difference
  // is the intra-node steps' extra microsecond, 30 steps less NCCL's 2 x 2 nodes over the network.
  std::map<hw::CpuVendor, double> t;
  for (const hw::CpuVendor vendor : {hw::CpuVendor::intel, hw::CpuVendor::amd}) {
    auto node = nvswitch_node();
    node.cpu_vendor = vendor;
    Fixture f(cluster(node, 2, hw::FabricKind::single_switch));
    t[vendor] = f.simulate(f.plan(CollOp::allreduce, Bytes(8), Algo::ring, Protocol::ll));
  }
  EXPECT_GE(t[hw::CpuVendor::intel], us(40.0));
  EXPECT_NEAR(t[hw::CpuVendor::amd] - t[hw::CpuVendor::intel], us(26.0), us(0.05));
}

// llMaxBws: LL's bus bandwidth across nodes is capped by the host CPU and the node count: 39.0
// GB/s on 2 Intel nodes, 20.4 on more; 22.5 and 19.0 on AMD. 256 MiB over 2 or 4 nodes of 8 GPUs
// (8 NICs of 50 GB/s each, NVLink made fast enough not to bind: LL at a quarter of the NICs would
// be 100 GB/s): busbw at the cap, the latency (under 0.2 ms against 11-27 ms of data) aside.
TEST(HostCpu, LlAcrossNodesStaysUnderNcclsCeilingForTheHost) {
  struct Case {
    hw::CpuVendor vendor;
    int nodes;
    double cap;
  };
  for (const Case& c : {Case{hw::CpuVendor::intel, 2, 39.0}, Case{hw::CpuVendor::intel, 4, 20.4}, Case{hw::CpuVendor::amd, 2, 22.5},
                        Case{hw::CpuVendor::amd, 4, 19.0}, Case{hw::CpuVendor::other, 4, 20.4}}) {
    auto node = nvswitch_node();
    node.cpu_vendor = c.vendor;
    node.nvlink = hw::testing::link("nvl", hw::LinkKind::nvlink, 250, Time::ns(300));
    Fixture f(cluster(node, c.nodes, hw::FabricKind::single_switch));
    const double S = 268435456.0;
    const int n = 8 * c.nodes;
    const Plan p = f.plan(CollOp::allreduce, Bytes(268435456), Algo::ring, Protocol::ll);
    const double busbw = 2.0 * (n - 1) / n * S / f.simulate(p) / GB;
    EXPECT_LT(busbw, c.cap) << hw::to_string(c.vendor) << " " << c.nodes;
    EXPECT_GT(busbw, 0.98 * c.cap) << hw::to_string(c.vendor) << " " << c.nodes;
  }
}

// NCCL's tuner caps trees, and LL128 rings, at graph channels x a per-channel rate (v2.18.5
// tuning.cc perChMax*Bws); here a Hopper node whose search gives 8 graph channels at 48 GB/s (8
// NICs, 18 NVLinks of 20 GB/s in NCCL's count: 8 x 48 x 7/8 fits, 8 x 48 reaches 360:
// comm/channels.hpp), with links fast enough that the caps bind (NICs of 100 GB/s behind 64 GB/s
// PCIe links). Data time = simulated time - the plan's latency.
hw::NodeSpec hopper_node() {
  auto node = nvswitch_node(8, true, 100);
  node.gpu.compute_capability = "9.0";
  node.nvlink_links_per_gpu = 18;
  node.pcie = hw::testing::link("pcie", hw::LinkKind::pcie, 64, Time::ns(500));
  return node;
}

// Sizes that fill whole loops, so that no channel carries more than its share (comm/split.hpp):
// 1 GiB for Simple trees; for LL128 1,179,648,000 bytes, 64 loops of 32 channels x 576,000 data
// bytes on the tree, 4 of 32 channels x 16 ranks x 576,000 on the ring.
constexpr std::int64_t kWholeLoopsLl128 = 1179648000;

TEST(PerChannelCaps, TreeAcrossNodesMovesAtGraphChannelsTimesNcclsRate) {
  struct Case {
    int nodes;
    Protocol proto;
    double algbw_GBps;  // half of NCCL's capped bus bandwidth
  };
  // 2 nodes: 8 x 41.4; more: 8 x 36.0; LL128 on 4: min(8 x 36.0 x 120/128, 8 x 29.0) = 232.
  for (const Case& c : {Case{2, Protocol::simple, 0.5 * 8 * 41.4}, Case{4, Protocol::simple, 0.5 * 8 * 36.0},
                        Case{4, Protocol::ll128, 0.5 * 8 * 29.0}}) {
    Fixture f(cluster(hopper_node(), c.nodes, hw::FabricKind::single_switch));
    const std::int64_t bytes = c.proto == Protocol::ll128 ? kWholeLoopsLl128 : std::int64_t{1073741824};
    const double S = static_cast<double>(bytes);
    const Plan p = f.plan(CollOp::allreduce, Bytes(bytes), Algo::tree, c.proto);
    // The message's own bytes, without the pipeline's fill (tuner_bytes_fraction: the share of
    // the moved bytes that is data), move at the cap.
    const double data = (f.simulate(p) - p.phases.front().groups.front().latency.seconds()) * p.tuner_bytes_fraction;
    EXPECT_LT(p.tuner_bytes_fraction, 1.0);
    EXPECT_NEAR(S / data / GB, c.algbw_GBps, 0.002 * c.algbw_GBps) << c.nodes << " " << to_string(c.proto);
  }
}

TEST(PerChannelCaps, RingLl128StaysUnderItsCapAndRunsAtPoint7WithOneGpuPerNode) {
  const double S = static_cast<double>(kWholeLoopsLl128);
  Fixture f(cluster(hopper_node(), 2, hw::FabricKind::single_switch));
  // 16 GPUs: bus bandwidth 8 x 36.7 (0.92 x the 8 PCIe links' 512 would be 471).
  const Plan p = f.plan(CollOp::allreduce, Bytes(kWholeLoopsLl128), Algo::ring, Protocol::ll128);
  const double data = f.simulate(p) - p.phases.front().groups.front().latency.seconds();
  EXPECT_NEAR(2.0 * 15 / 16 * S / data / GB, 8 * 36.7, 0.002 * 8 * 36.7);
  // GPU 0 of each node: one ring through GPU 0's 64 GB/s PCIe link to its NIC, at .7 (NCCL: ppn
  // < 2); the lone GPU's graph (2 channels at 48, doubled to 4 at 24; 4 x 36.7) does not bind.
  const Plan lone = f.plan(CollOp::allreduce, Bytes(kWholeLoopsLl128), Algo::ring, Protocol::ll128, {0, 8});
  const double lone_data = f.simulate(lone) - lone.phases.front().groups.front().latency.seconds();
  EXPECT_NEAR(S / lone_data / GB, 0.7 * 64, 0.002 * 0.7 * 64);
}

// On one node of A100s (compute capability 8.0) over NVLink, a ring LL128 all-reduce moves its
// data at ring.LL128.achieved_ratio.sm80_nvlink (0.685) of NCCL's model's rate
// (ring.LL128.bandwidth_factor, 0.92; measured on 8 A100: data/registry.yaml). With choice nccl
// the tuner still sees the model's rate (tuner_speedup), so the automatic choice is the one
// NCCL's model makes; with choice fastest it compares the simulated times. Hopper (9.0) and
// all-gathers keep the model's rate. Same fixture, only the compute capability differs: the
// data times (simulated - latency) are in the ratio 1 / 0.685.
TEST(RingLl128, A100NvlinkRunsAtTheMeasuredFractionAndNcclsTunerStillSeesItsModel) {
  auto node = [](const char* cc) {
    auto n = nvswitch_node();
    n.gpu.compute_capability = cc;
    n.nvls = false;
    return n;
  };
  auto data_time = [](Fixture& f, CollOp op) {
    const Plan p = f.plan(op, Bytes(std::int64_t{1} << 30), Algo::ring, Protocol::ll128);
    return std::pair{f.simulate(p) - p.phases.front().groups.front().latency.seconds(), p.tuner_speedup};
  };
  Fixture ampere(cluster(node("8.0"), 1, hw::FabricKind::single_switch));
  Fixture hopper(cluster(node("9.0"), 1, hw::FabricKind::single_switch));
  const auto [a, a_speedup] = data_time(ampere, CollOp::allreduce);
  const auto [h, h_speedup] = data_time(hopper, CollOp::allreduce);
  EXPECT_NEAR(a / h, 1 / 0.685, 1e-6);
  EXPECT_NEAR(a_speedup, 1 / 0.685, 1e-12);
  EXPECT_EQ(h_speedup, 1.0);
  EXPECT_NEAR(data_time(ampere, CollOp::allgather).first, data_time(hopper, CollOp::allgather).first, 1e-9);
  auto request = [](std::int64_t bytes) {
    CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes(bytes);
    for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
    return req;
  };
  // choice nccl: the same choice as with the achieved ratio at 1 (NCCL's model).
  CommParams model_params = ampere.params;
  model_params.ring_ll128_achieved_ratio_sm80_nvlink = 1.0;
  Planner as_modelled(ampere.topo, ampere.router, model_params);
  // choice fastest compares what dtsim simulates: against the same choice at ratio 1, it leaves
  // ring LL128 somewhere, and only there.
  CommParams fastest_params = ampere.params;
  fastest_params.choice = CommParams::Choice::fastest;
  Planner fastest(ampere.topo, ampere.router, fastest_params);
  fastest_params.ring_ll128_achieved_ratio_sm80_nvlink = 1.0;
  Planner fastest_as_modelled(ampere.topo, ampere.router, fastest_params);
  int ll128 = 0, left = 0;
  for (std::int64_t bytes = 1024; bytes <= (std::int64_t{1} << 30); bytes *= 2) {
    auto measured = ampere.planner.plan(request(bytes));
    auto model = as_modelled.plan(request(bytes));
    ASSERT_TRUE(measured.ok() && model.ok());
    EXPECT_EQ(measured->algo, model->algo) << bytes;
    EXPECT_EQ(measured->protocol, model->protocol) << bytes;
    ll128 += measured->protocol == Protocol::ll128 ? 1 : 0;
    auto quick = fastest.plan(request(bytes));
    auto quick_model = fastest_as_modelled.plan(request(bytes));
    ASSERT_TRUE(quick.ok() && quick_model.ok());
    if (quick->algo != quick_model->algo || quick->protocol != quick_model->protocol) {
      ++left;
      EXPECT_EQ(quick_model->algo, Algo::ring) << bytes;
      EXPECT_EQ(quick_model->protocol, Protocol::ll128) << bytes;
    }
  }
  EXPECT_GT(left, 0);
  EXPECT_GT(ll128, 0);  // this fixture has sizes where NCCL's model picks LL128
}

TEST(Auto, Ll128OnlyWhereNcclEnablesItByDefault) {
  // v2.18.5 tuning.cc: LL128 by default only on compute capability 7.0, 8.0 and 9.0 (all GPUs
  // alike) with NVLink inside the node; a request naming it still runs it (NCCL_PROTO=LL128).
  auto picks_ll128 = [](hw::NodeSpec node, int nodes) {
    Fixture f(cluster(node, nodes, hw::FabricKind::single_switch));
    bool any = false;
    for (std::int64_t bytes = 1024; bytes <= (std::int64_t{1} << 30); bytes *= 4) {
      CollectiveRequest req;
      req.op = CollOp::allreduce;
      req.size = Bytes(bytes);
      for (int i = 0; i < f.topo.gpus(); ++i) req.ranks.push_back(i);
      auto p = f.planner.plan(req);
      EXPECT_TRUE(p.ok());
      any = any || p->protocol == Protocol::ll128;
    }
    return any;
  };
  auto with_cc = [](hw::NodeSpec node, const char* cc) {
    node.gpu.compute_capability = cc;
    node.nvls = false;  // with it the NVLS tree (Simple only) takes the sizes where LL128 would win
    return node;
  };
  // Two nodes of the NVSwitch fixture, where LL128 wins somewhere between 1 KiB and 1 GiB.
  EXPECT_TRUE(picks_ll128(with_cc(nvswitch_node(), "8.0"), 2));
  EXPECT_TRUE(picks_ll128(with_cc(nvswitch_node(), "9.0"), 2));
  EXPECT_FALSE(picks_ll128(with_cc(nvswitch_node(), "8.6"), 2));  // Ampere consumer parts
  EXPECT_FALSE(picks_ll128(with_cc(nvswitch_node(), "6.0"), 2));  // Pascal
  EXPECT_FALSE(picks_ll128(with_cc(hw::testing::pcie_node(), "8.0"), 2));  // no NVLink
  auto staged = with_cc(nvswitch_node(), "8.0");
  staged.gpudirect_rdma = false;  // across nodes through host memory
  EXPECT_FALSE(picks_ll128(staged, 2));
  auto unknown = nvswitch_node();
  unknown.nvls = false;
  EXPECT_TRUE(picks_ll128(unknown, 2));  // a GPU of unknown capability is not held to it
  // An A100 node beside an H100 node: the GPUs differ, so no LL128 (2.18.5 requires them alike).
  {
    hw::ClusterSpec mixed = cluster(with_cc(nvswitch_node(), "9.0"), 1, hw::FabricKind::single_switch);
    mixed.groups.push_back(hw::NodeGroup{with_cc(nvswitch_node(), "8.0"), 1, 0});
    Fixture f(mixed);
    CollectiveRequest req;
    req.size = Bytes::MiB(8);
    for (int i = 0; i < 16; ++i) req.ranks.push_back(i);
    const auto cands = f.planner.candidates(req);
    EXPECT_FALSE(cands.empty());
    EXPECT_TRUE(std::none_of(cands.begin(), cands.end(), [](const auto& c) { return c.second == Protocol::ll128; }));
  }
  Fixture f(cluster(with_cc(hw::testing::pcie_node(), "8.9"), 1, hw::FabricKind::single_switch));
  EXPECT_EQ(f.plan(CollOp::allreduce, Bytes::MiB(64), Algo::ring, Protocol::ll128).protocol, Protocol::ll128);
}

TEST(Auto, PicksLowLatencyProtocolsForSmallMessagesAndBandwidthForLarge) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  CollectiveRequest req;
  req.op = CollOp::allreduce;
  for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
  req.size = Bytes(1024);
  auto small = f.planner.plan(req);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->protocol, Protocol::ll);
  req.size = Bytes::GiB(1);
  auto large = f.planner.plan(req);
  ASSERT_TRUE(large.ok());
  EXPECT_NE(large->protocol, Protocol::ll);
  // Auto is never slower than any explicit choice (by the closed form it compares).
  for (const auto& [a, p] : f.planner.candidates(req)) {
    EXPECT_LE(large->estimate, f.plan(CollOp::allreduce, Bytes::GiB(1), a, p).estimate) << to_string(a) << "/" << to_string(p);
  }
}

// comm.choice: `fastest` takes the smallest closed form at every size (what a fitted profile
// wants); `nccl` compares as NCCL's tuner does (tree correction factors, the NVLS tree's tuner
// latency), so across nodes it takes the NVLS tree at some medium size where the tree is faster
// in the simulation (and between tree protocols at others), and only ever moves off a tree.
TEST(Auto, ChoiceAsNcclOrFastest) {
  CommParams fastest = CommParams::nccl_defaults();
  EXPECT_TRUE(fastest.choice_as_nccl(1));
  EXPECT_TRUE(fastest.choice_as_nccl(4));
  ASSERT_TRUE(set_comm_param(fastest, "choice", "fastest-on-one-node").ok());
  EXPECT_FALSE(fastest.choice_as_nccl(1));
  EXPECT_TRUE(fastest.choice_as_nccl(4));
  ASSERT_TRUE(set_comm_param(fastest, "choice", "fastest").ok());
  EXPECT_FALSE(fastest.choice_as_nccl(1));
  EXPECT_FALSE(fastest.choice_as_nccl(4));
  EXPECT_FALSE(set_comm_param(fastest, "choice", "quickest").ok());
  const auto spec = cluster(nvswitch_node(), 4, hw::FabricKind::fat_tree);
  Fixture as_nccl(spec);
  auto topo = hw::Topology::build(spec).value();
  hw::Router router(topo);
  Planner by_time(topo, router, fastest);
  int nvls_instead = 0;
  for (std::int64_t bytes = 64 << 10; bytes <= (std::int64_t{64} << 20); bytes *= 2) {
    CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes(bytes);
    for (int i = 0; i < as_nccl.topo.gpus(); ++i) req.ranks.push_back(i);
    auto a = as_nccl.planner.plan(req);
    auto b = by_time.plan(req);
    ASSERT_TRUE(a.ok() && b.ok());
    if (a->algo == b->algo && a->protocol == b->protocol) continue;
    // Only a tree's pick moves (its bandwidth is corrected, the NVLS tree's latency lowered).
    EXPECT_EQ(b->algo, Algo::tree) << bytes;
    nvls_instead += a->algo == Algo::nvls ? 1 : 0;
  }
  EXPECT_GT(nvls_instead, 0);
}

// NCCL's treeCorrectionFactor, read by hand off NCCL v2.18.5 src/graph/tuning.cc (rows LL, LL128,
// Simple; column log2i(bytes / 64)): 1 MiB is column 14, 4 MiB 16, 8 MiB 17, 128 MiB 21, 256 MiB
// 22; 512 MiB is past the table.
TEST(Auto, TreeCorrectionIsNcclsTable) {
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll128, Bytes::MiB(1)), 0.6);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll128, Bytes::MiB(2) - Bytes(1)), 0.6);  // still column 14
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll128, Bytes::MiB(4)), 0.8);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll128, Bytes::MiB(8)), 0.9);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll128, Bytes::MiB(128)), 1.0);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll, Bytes::KiB(256)), 0.4);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::ll, Bytes(64)), 1.0);  // column 0
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::simple, Bytes(64)), 0.9);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::simple, Bytes::MiB(1)), 0.5);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::simple, Bytes::MiB(256)), 0.9);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::simple, Bytes::MiB(512)), 1.0);
  EXPECT_DOUBLE_EQ(nccl_tree_correction(Protocol::simple, Bytes(63)), 1.0);  // under 64 B: no column
}

// Issue 18 item 2: path latency must show up in collectives. A ring all-reduce runs 2(n-1)
// dependent steps, 2(m-1) of which cross the network; a step cannot end before its data arrives,
// so the collective takes at least (network steps) x (one NIC-to-NIC path's latency).
TEST(Latency, ACollectiveIsNeverFasterThanItsPathLatencyTimesItsSequentialSteps) {
  const Time nic_latency = Time::ms(10);
  auto node = nvswitch_node(8, true, 50);
  node.nic->latency = nic_latency;
  Fixture f(cluster(node, 2, hw::FabricKind::single_switch));
  // One inter-node path: two adapters (10 ms each) and the switch between them.
  const Time path = nic_latency * 2;
  const int m = 2;
  std::vector<int> all;
  for (int i = 0; i < 16; ++i) all.push_back(i);
  for (Bytes size : {Bytes(8), Bytes::KiB(256), Bytes::MiB(64)}) {
    // Every algorithm and protocol dtsim may pick, and its automatic choice.
    CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = size;
    req.ranks = all;
    for (const auto& [a, p] : f.planner.candidates(req)) {
      const Plan pl = f.plan(CollOp::allreduce, size, a, p, all);
      // Ring: 2(m-1) network steps; tree, hierarchical and NVLS: at least one crossing each way.
      const int steps = a == Algo::ring ? 2 * (m - 1) : 2;
      EXPECT_GE(f.simulate(pl), (path * steps).seconds()) << to_string(a) << "/" << to_string(p) << " " << to_string(size);
    }
    for (CollOp op : {CollOp::allgather, CollOp::reducescatter, CollOp::broadcast, CollOp::alltoall, CollOp::sendrecv}) {
      req.op = op;
      auto pl = f.planner.plan(req);
      ASSERT_TRUE(pl.ok());
      EXPECT_GE(f.simulate(*pl), path.seconds()) << to_string(op) << " " << to_string(size);
    }
  }
}

TEST(Latency, ALongerPathIsNeverFaster) {
  // The same collectives with NIC latency and switch latency raised step by step: never faster,
  // and 10 ms of switch latency costs at least 10 ms per network step.
  std::vector<double> last(3, 0.0);
  for (double ms : {0.0, 0.001, 0.1, 10.0}) {
    auto node = nvswitch_node(8, true, 50);
    node.nic->latency = Time::from_seconds(ms * 1e-3);
    node.nic->switch_latency = Time::from_seconds(ms * 1e-3);
    Fixture f(cluster(node, 2, hw::FabricKind::single_switch));
    std::size_t k = 0;
    for (Bytes size : {Bytes(1024), Bytes::MiB(1), Bytes::GiB(1)}) {
      CollectiveRequest req;
      req.op = CollOp::allreduce;
      req.size = size;
      for (int i = 0; i < 16; ++i) req.ranks.push_back(i);
      auto pl = f.planner.plan(req);
      ASSERT_TRUE(pl.ok());
      const double t = f.simulate(*pl);
      EXPECT_GE(t, last[k]) << ms << " ms, " << to_string(size);
      if (ms == 10.0) {
        EXPECT_GE(t, 2 * 10e-3) << to_string(size);
      }
      last[k++] = t;
    }
  }
}

TEST(Latency, NvlinkLatencyIsPaidPerRingStepInsideANode) {
  auto node = nvswitch_node();
  // Every link inside the node 1 ms (PCIe too, else routing would go around NVLink): any
  // GPU-to-GPU path crosses at least two.
  node.nvlink->latency = Time::ms(1);
  node.pcie.latency = Time::ms(1);
  Fixture f(cluster(node, 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const Plan p = f.plan(CollOp::allreduce, Bytes::KiB(64), Algo::ring, Protocol::ll);
  EXPECT_GE(f.simulate(p), 2 * (n - 1) * 2e-3);
  const Plan nvls = f.plan(CollOp::allreduce, Bytes::KiB(64), Algo::nvls, Protocol::simple);
  EXPECT_GE(f.simulate(nvls), 2 * 2e-3);  // the reduce and the multicast each cross twice
}

TEST(NcclTests, AnIterationIsNeverShorterThanTheHostsLaunches) {
  CommParams p = CommParams::nccl_defaults();
  p.launch_overhead = Time::us(4);
  EXPECT_EQ(nccl_tests_iteration(Time::us(10), 1, p), Time::us(10));
  EXPECT_EQ(nccl_tests_iteration(Time::us(10), 8, p), Time::us(32));
  EXPECT_EQ(nccl_tests_iteration(Time::us(100), 8, p), Time::us(100));
  EXPECT_EQ(nccl_tests_iteration(Time::us(1), 0, p), Time::us(4));  // at least one launch
}

TEST(LlCeiling, LlBusBandwidthStaysUnderNcclsCeilingOnOneNode) {
  // 8 GPUs with 12 x 25 GB/s to the switch: a quarter of the link is 75 GB/s, under 87.7; with
  // 24 links it would be 150, and NCCL's LL ceiling holds it at 87.7 GB/s bus bandwidth.
  auto node = nvswitch_node();
  node.nvlink_links_per_gpu = 24;
  Fixture f(cluster(node, 1, hw::FabricKind::fat_tree));
  const int n = 8;
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(1073741824), Algo::ring, Protocol::ll);
  const double busbw = 2.0 * (n - 1) / n * S / f.simulate(p);
  EXPECT_NEAR(busbw, 87.7 * GB, 0.01 * 87.7 * GB);
}

TEST(Errors, ImpossibleRequestsNameTheField) {
  Fixture f(cluster(nvswitch_node(), 1, hw::FabricKind::fat_tree));
  CollectiveRequest req;
  req.op = CollOp::allgather;
  req.size = Bytes(1024);
  req.ranks = {0, 1, 2};
  req.algo = Algo::nvls;
  auto p = f.planner.plan(req);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().field, "algo");
  EXPECT_NE(p.error().message.find("ring/"), std::string::npos);  // lists what would work
  req.algo.reset();
  req.ranks = {0, 0};
  EXPECT_EQ(f.planner.plan(req).error().field, "ranks");
  req.ranks = {0, 99};
  EXPECT_EQ(f.planner.plan(req).error().field, "ranks");
}

TEST(Metrics, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::allreduce, 8), 14.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::allgather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::reducescatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::alltoall, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollOp::sendrecv, 8), 1.0);
  EXPECT_DOUBLE_EQ(algbw_GBps(1e9, 0.01), 100.0);
}

// A Simple tree all-reduce on one node of 8 GPUs is a chain up and down again: a 512 KiB chunk
// crosses 2 x 7 hops one after another (all_reduce.h runTreeSplit, ProtoSimple<1, 1>; from NCCL
// v2.20 a chunk is one step). Every hop shares the same NVLink ports, but while the first chunk
// climbs only chunks going up are on them, and while the last comes down only chunks coming
// down: half the steady load, so each of the 14 hops takes half a chunk's steady time, 7 chunks,
// 6 more than the data's own pass. The plan moves 6 chunks per used channel on top of the
// message, and the automatic choice's key leaves them out.
TEST(TreeFill, SimpleChainOnOneNodeFillsInSixChunksPerChannel) {
  Fixture f(cluster(hopper_node(), 1, hw::FabricKind::single_switch));
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::tree, Protocol::simple);
  // 1 GiB is 2,048 steps of 512 KiB dealt channel-major over 24 channels: channels 0-7 move 86,
  // the rest 85. The busiest channel's time is its 86 chunks plus 14 / 2 - 1 = 6 chunks of fill,
  // so the fill is 6/86 of the message.
  ASSERT_EQ(p.nccl_channels, 24);
  EXPECT_NEAR(p.tuner_bytes_fraction, S / (S + 6.0 * S / 86.0), 1e-9);
  // LL and LL128 forward each line as it arrives: no fill inside a node.
  const Plan ll = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::tree, Protocol::ll128);
  EXPECT_DOUBLE_EQ(ll.tuner_bytes_fraction, 1.0);
}

// NCCL_BUFFSIZE sets the Simple step, and with it the tree's chunk (enqueue.cc computeColl: one
// step). With 8 MiB, 1 GiB is 1,024 chunks of 1 MiB over 24 channels: channels 0-15 move 43, the
// rest 42, and the fill is 6 chunks of 1 MiB: 6/43 of the message.
TEST(TreeFill, TheChunkIsOneStepOfNcclsBuffer) {
  CommParams params = CommParams::nccl_defaults();
  ASSERT_TRUE(set_comm_param(params, "buffsize", "8M").ok());
  EXPECT_EQ(params.simple_step(), Bytes::MiB(1));
  Fixture f(cluster(hopper_node(), 1, hw::FabricKind::single_switch), params);
  const double S = 1073741824.0;
  const Plan p = f.plan(CollOp::allreduce, Bytes(static_cast<std::int64_t>(S)), Algo::tree, Protocol::simple);
  ASSERT_EQ(p.nccl_channels, 24);
  EXPECT_NEAR(p.tuner_bytes_fraction, S / (S + 6.0 * S / 43.0), 1e-9);
}

// NCCL_ALGO's syntax (v2.18.5 parseList): commas, any case, '^' for the complement of NCCL's own.
TEST(Selection, ParsesNcclsListSyntax) {
  const auto listed = parse_algo_list("Ring,TREE");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<Algo>{Algo::ring, Algo::tree}));
  const auto rest = parse_algo_list("^nvls");
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(*rest, (std::vector<Algo>{Algo::ring, Algo::tree, Algo::direct}));  // hierarchical is not NCCL's
  EXPECT_EQ(*parse_algo_list("NVLSTree"), std::vector<Algo>{Algo::nvls});
  EXPECT_FALSE(parse_algo_list("ring,").ok());
  EXPECT_FALSE(parse_algo_list("^ring,tree,nvls,direct").ok());
  EXPECT_EQ(*parse_protocol_list("^ll"), (std::vector<Protocol>{Protocol::ll128, Protocol::simple}));
  const auto one = parse_selection("tree", "auto");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->algo, Algo::tree);
  EXPECT_TRUE(one->algos.empty());
  const auto among = parse_selection("^ring,nvls,direct", "LL128,Simple");  // one left, still the tuner's
  ASSERT_TRUE(among.ok());
  EXPECT_FALSE(among->algo.has_value());
  EXPECT_EQ(among->algos, std::vector<Algo>{Algo::tree});
  EXPECT_EQ(among->protocols, (std::vector<Protocol>{Protocol::ll128, Protocol::simple}));
  const auto bad = parse_selection("auto", "LL256");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "proto");
  const auto any = parse_selection("AUTO", "Auto");
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE(any->algo || any->protocol || !any->algos.empty() || !any->protocols.empty());
  for (const char* empty : {"", "^"}) {
    const auto e = parse_algo_list(empty);
    ASSERT_FALSE(e.ok()) << empty;
    EXPECT_NE(e.error().message.find("empty value"), std::string::npos) << e.error().message;
  }
}

// All-to-all keeps NCCL's protocol rule by size (LL up to p2p_ll_threshold, else Simple) whatever
// a protocol list says, as NCCL's peer-to-peer path ignores NCCL_PROTO.
TEST(Selection, PeerToPeerKeepsItsSizeRuleUnderAProtocolList) {
  Fixture f(cluster(hopper_node(), 1, hw::FabricKind::single_switch));
  CollectiveRequest req;
  req.op = CollOp::alltoall;
  for (int i = 0; i < f.topo.gpus(); ++i) req.ranks.push_back(i);
  req.protocols = {Protocol::ll128, Protocol::simple};
  req.size = Bytes(8 * 1024);  // 1 KiB per peer: LL
  const auto small = f.planner.plan(req);
  ASSERT_TRUE(small.ok()) << small.error().to_string();
  EXPECT_EQ(small->protocol, Protocol::ll);
  req.size = Bytes(std::int64_t{1} << 30);
  const auto large = f.planner.plan(req);
  ASSERT_TRUE(large.ok()) << large.error().to_string();
  EXPECT_EQ(large->protocol, Protocol::simple);
}

// The tuner's choice among a list is the fastest (by its key) of the listed pairs: never one left
// out, and the same as the unrestricted choice when that one is listed.
TEST(Selection, TheTunerChoosesAmongTheListedPairsOnly) {
  Fixture f(cluster(hopper_node(), 2, hw::FabricKind::fat_tree));
  for (std::int64_t s : {std::int64_t{1} << 16, std::int64_t{1} << 20, std::int64_t{1} << 26}) {
    CollectiveRequest req;
    req.size = Bytes(s);
    for (int i = 0; i < f.topo.gpus(); ++i) req.ranks.push_back(i);
    const auto free = f.planner.plan(req);
    ASSERT_TRUE(free.ok());
    req.algos = {Algo::ring, Algo::tree};
    req.protocols = {Protocol::simple};
    const auto listed = f.planner.plan(req);
    ASSERT_TRUE(listed.ok());
    EXPECT_NE(listed->algo, Algo::nvls);
    EXPECT_EQ(listed->protocol, Protocol::simple);
    req.algos = {free->algo};
    req.protocols = {free->protocol, Protocol::ll};
    const auto same = f.planner.plan(req);
    ASSERT_TRUE(same.ok());
    EXPECT_EQ(same->algo, free->algo);
    EXPECT_EQ(same->protocol, free->protocol);
  }
}

// A larger message never finishes sooner (up to rounding: sizes whose busiest channel moves the
// same pieces take the same time). The channel pieces slow a message that leaves some channels a
// chunk more than others; that must not slow its fill as well (16 MiB on one node took longer
// than 32 MiB when it did).
TEST(TreeFill, TimeGrowsWithTheMessageOnOneAndTwoNodes) {
  for (int nodes : {1, 2}) {
    Fixture f(cluster(hopper_node(), nodes, nodes == 1 ? hw::FabricKind::single_switch : hw::FabricKind::fat_tree));
    for (Protocol proto : {Protocol::simple, Protocol::ll128}) {
      double last = 0;
      for (std::int64_t s = 1 << 20; s <= (std::int64_t{1} << 30); s += s / 4) {
        const double t = f.simulate(f.plan(CollOp::allreduce, Bytes(s), Algo::tree, proto));
        EXPECT_GE(t, last * (1 - 1e-6)) << std::setprecision(9) << t << " < " << last << ", " << nodes << " node(s), " << to_string(proto) << ", " << s << " bytes";
        last = t;
      }
    }
  }
}

}  // namespace
}  // namespace dtsim::comm
