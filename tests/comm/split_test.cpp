// How NCCL's kernels cut a message between channels (comm/split.hpp), checked against cases worked
// out by hand from NCCL v2.18.5's arithmetic (all_reduce.h, all_gather.h, enqueue.cc), and the
// effect on a simulated ring: the busiest channel sets the time.
#include "comm/split.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "comm/channels.hpp"
#include "comm/collective.hpp"
#include "tests/hw/fixtures.hpp"

namespace dtsim::comm {
namespace {

const CommParams kNccl = CommParams::nccl_defaults();  // 24 channels, 16 NVLS channels

// getAlgoInfo: one channel fewer while bytes < nc x nt x threshold; at one channel the threads
// halve while they are a multiple of 128. Ring LL on 8 ranks: threshold 8 x 8 = 64 bytes per
// thread. 1 KiB: 1 channel; 512 -> 256 -> 128 -> 64 threads (1024 < 64 x 64 x ... stops at 64,
// which is no multiple of 128).
TEST(Split, LaunchHalvesTheThreadsOfOneChannel) {
  const Launch a = nccl_launch(kNccl, Algo::ring, Protocol::ll, Bytes(1024), 8);
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.threads, 64);
  const Launch b = nccl_launch(kNccl, Algo::ring, Protocol::ll, Bytes::KiB(64), 8);  // 65536 / (512 x 64)
  EXPECT_EQ(b.channels, 2);
  EXPECT_EQ(b.threads, 512);
  const Launch c = nccl_launch(kNccl, Algo::ring, Protocol::ll128, Bytes::MiB(8), 8);
  EXPECT_EQ(c.channels, 24);
  EXPECT_EQ(c.threads, 640);
}

// Ring LL128 all-reduce, 8 ranks, 24 channels, 640 threads. A loop would be 24 x 8 x 576,000
// bytes; shorter messages use pieces of whole minChunkSize units, 640 x 60 / 2 = 19,200 bytes,
// laid out chunk-major: piece (chunk c, channel b) at (24c + b) x size.
//  - 8 MiB: 8,388,608 / (192 x 19,200) = 2.28 -> 3 units = 57,600 bytes. Channel 0's pieces start
//    at c x 1,382,400: c = 0..6 are whole (the 7th starts at 8,294,400 with 94,208 left), c = 7
//    is empty. Rank r's edge carries every piece but r's and (r+1)'s: at most 14 x 57,600 less
//    the smallest adjacent pair (57,600 + 0) = 13 x 57,600 = 748,800.
//  - 4 MiB: 2 units = 38,400 bytes; pieces at c x 921,600: c = 0..4 whole, 5..7 empty, so the
//    busiest edge skips two empty pieces: 10 x 38,400 = 384,000.
// An even split over 24 channels would be 14 x bytes / 192 per edge.
TEST(Split, Ll128RingPiecesLeaveTheFirstChannelTheMost) {
  EXPECT_EQ(ring_busiest_edge_bytes(kNccl, CollOp::allreduce, Protocol::ll128, Bytes::MiB(8), 8), 748800);
  EXPECT_EQ(ring_busiest_edge_bytes(kNccl, CollOp::allreduce, Protocol::ll128, Bytes::MiB(4), 8), 384000);
  EXPECT_NEAR(ring_split_fraction(kNccl, CollOp::allreduce, Protocol::ll128, Bytes::MiB(8), 8), 14.0 * 8388608 / 192 / 748800, 1e-12);
  EXPECT_NEAR(ring_split_fraction(kNccl, CollOp::allreduce, Protocol::ll128, Bytes::MiB(4), 8), 14.0 * 4194304 / 192 / 384000, 1e-12);
}

// Ring Simple: pieces of bytes / 192 rounded up to (544 - 32) x 8 = 4,096 bytes, channel-major
// (channel b's 8 pieces are consecutive). 1 MiB: 5,461.3 -> 8,192; channel 0 gets 8 whole pieces,
// 14 of them cross each edge. 64 KiB runs on 2 channels (getAlgoInfo) with 4 KiB pieces: even.
TEST(Split, SimpleRingPiecesRoundUpToTheGrain) {
  EXPECT_EQ(ring_busiest_edge_bytes(kNccl, CollOp::allreduce, Protocol::simple, Bytes::MiB(1), 8), 14 * 8192);
  EXPECT_NEAR(ring_split_fraction(kNccl, CollOp::allreduce, Protocol::simple, Bytes::MiB(1), 8), 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(ring_split_fraction(kNccl, CollOp::allreduce, Protocol::simple, Bytes::KiB(64), 8), 2.0 / 24.0, 1e-12);
  // All-gather of 256 MiB: each rank's 32 MiB in pieces of 32 MiB / 24 rounded up to 4 KiB.
  EXPECT_EQ(ring_busiest_edge_bytes(kNccl, CollOp::allgather, Protocol::simple, Bytes::MiB(256), 8), 7 * 1400832);
  // Full loops are even: 768 MiB = 2 loops of 24 x 8 x 2 MiB.
  EXPECT_DOUBLE_EQ(ring_split_fraction(kNccl, CollOp::allreduce, Protocol::simple, Bytes::MiB(768), 8), 1.0);
}

// NCCL_BUFFSIZE 8 MiB: the Simple step is 1 MiB and a ring's chunk 4 MiB, so a loop over 8 ranks
// and 24 channels is 768 MiB (the default's 384 MiB). 768 MiB is one whole loop, even; 384 MiB,
// a whole loop at the default, is half of one: pieces of 384 MiB / 192 = 2 MiB (a multiple of the
// 4,096-byte grain), channel-major, so channel 0's 8 pieces are all whole and still even.
// 1.5 GiB is two loops. Each rank's 2 x 7 slices per loop stay: 2 x loops x steps.
TEST(Split, NcclsBufferSizeSetsTheRingsChunk) {
  CommParams p = kNccl;
  ASSERT_TRUE(set_comm_param(p, "buffsize", "8M").ok());
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allreduce, Protocol::simple, Bytes::MiB(768), 8), 14 * (std::int64_t{4} << 20));
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allreduce, Protocol::simple, Bytes::MiB(384), 8), 14 * (std::int64_t{2} << 20));
  EXPECT_EQ(p.ring_slices(Bytes::MiB(768), 8, 24, 14), 1 * 14 * 2);
  EXPECT_EQ(p.ring_slices(Bytes::MiB(1536), 8, 24, 14), 2 * 14 * 2);
  EXPECT_EQ(kNccl.ring_slices(Bytes::MiB(768), 8, 24, 14), 2 * 14 * 2);
  // Out of NCCL's range or not whole steps: refused, naming the parameter.
  for (const char* bad : {"32K", "2G", "1000001", "-4M"}) {
    const Status st = set_comm_param(p, "buffsize", bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.error().field, "buffsize") << bad;
  }
  // The chains' chunk parameter it replaces points to it.
  const Status old = set_comm_param(p, "pipeline_chunk", "1M");
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("comm.buffsize"), std::string::npos) << old.error().message;
}

// Ring LL128 all-gather on 1,536 ranks (192 nodes of 8) and 16 channels (NCCL's count across nodes
// with 8 NICs per node): all_gather.h cuts each rank's part (bytes / n) in loops of 16 x 576,000
// bytes, and a part shorter than a loop in pieces of whole minChunkSize units (640 x 60 / 2 =
// 19,200 bytes). Every part from 19,201 to 307,200 bytes is one unit per channel, so channel 0
// carries 19,200 bytes per step whatever the size: 32 MiB (parts of 21,845 bytes) and 256 MiB
// (174,762) both put 1,535 x 19,200 = 29,472,000 bytes on its busiest edge, and the ring takes as
// long at 256 MiB as at 32 MiB. 512 MiB (349,525: 2 units) and 1 GiB (699,050: 3 units) take 2 and
// 3 units a step. NCCL from 2.22 spreads a collective over its channels on the host instead
// (enqueue.cc, the cbd counts), which v2.18.5's kernels, modelled here, do not.
TEST(Split, Ll128AllGatherOnManyRanksMovesWholeUnitsPerStep) {
  CommParams p = kNccl;
  p.max_channels = 16;
  const int n = 1536;
  EXPECT_EQ(nccl_launch(p, Algo::ring, Protocol::ll128, Bytes::MiB(32), n).channels, 16);
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allgather, Protocol::ll128, Bytes::MiB(32), n), 1535 * 19200);
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allgather, Protocol::ll128, Bytes::MiB(256), n), 1535 * 19200);
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allgather, Protocol::ll128, Bytes::MiB(512), n), 1535 * 2 * 19200);
  EXPECT_EQ(ring_busiest_edge_bytes(p, CollOp::allgather, Protocol::ll128, Bytes::GiB(1), n), 1535 * 3 * 19200);
  // An even split of 256 MiB would put 1,535 x 174,762 / 16 bytes on each channel: 0.569 of 19,200.
  EXPECT_NEAR(ring_split_fraction(p, CollOp::allgather, Protocol::ll128, Bytes::MiB(256), n),
              1535.0 * 268435456.0 / 1536 / 16 / (1535.0 * 19200), 1e-12);
}

// Tree LL128, 8 ranks on one node, 24 channels: computeColl halves the 614,400-byte step while
// bytes / (24 x step) < 1.8 x 64 / 8 (to 76,800) and < 1.8 x 16 / 8 (to 19,200): 18,000 data
// bytes. Loops of 24 x 18,000 = 432,000: 1 MiB is 2 loops and 184,576 bytes, of which channel 0
// takes a whole piece: 3 x 18,000 = 54,000 against 1 MiB / 24 = 43,690.7.
TEST(Split, TreePiecesAreChannelMajor) {
  EXPECT_EQ(tree_busiest_channel_bytes(kNccl, Protocol::ll128, Bytes::MiB(1), 8, 1), 54000);
  EXPECT_NEAR(tree_split_fraction(kNccl, Protocol::ll128, Bytes::MiB(1), 8, 1), 1048576.0 / 24 / 54000, 1e-12);
}

// Tree Simple, 8 ranks on one node (depth 7), 24 channels: from v2.20 a chunk is one step at every
// size (the default); with v2.18.5's rule (tree_chunk_floor 32K) computeColl halves the 512 KiB
// step while bytes / (24 x chunk) < 56 (to 128 KiB), < 28 (to 64 KiB) and < 7 (to 32 KiB).
// 64 MiB: 64 MiB / (24 x 128 KiB) = 21.3 < 28 -> 64 KiB; 21.3 x 2 = 42.7 >= 7 stops there.
// 1 MiB ends at 32 KiB. With an 8 MiB buffer the default's chunk is 1 MiB.
TEST(Split, TreeSimpleChunkIsOneStepUnlessTheOldRuleIsAsked) {
  EXPECT_EQ(tree_chunk(kNccl, Protocol::simple, Bytes::MiB(64), 8, 1).chunk, 524288);
  EXPECT_EQ(tree_chunk(kNccl, Protocol::simple, Bytes::MiB(1), 8, 1).chunk, 524288);
  CommParams old = kNccl;
  ASSERT_TRUE(set_comm_param(old, "tree_chunk_floor", "32K").ok());
  EXPECT_EQ(tree_chunk(old, Protocol::simple, Bytes::MiB(64), 8, 1).chunk, 65536);
  EXPECT_EQ(tree_chunk(old, Protocol::simple, Bytes::MiB(1), 8, 1).chunk, 32768);
  ASSERT_TRUE(set_comm_param(old, "tree_chunk_floor", "none").ok());
  EXPECT_EQ(tree_chunk(old, Protocol::simple, Bytes::MiB(1), 8, 1).chunk, 524288);
  CommParams big = kNccl;
  ASSERT_TRUE(set_comm_param(big, "buffsize", "8M").ok());
  EXPECT_EQ(tree_chunk(big, Protocol::simple, Bytes::MiB(1), 8, 1).chunk, 1048576);
}

// NVLS's chunk is the Simple step capped at 128 KiB (enqueue.cc computeColl, nvlsChunkSize): a
// 512 KiB buffer (64 KiB steps) gives 64 KiB chunks where the default runs 128 KiB at 8 GiB on 8
// GPUs (8 GiB is not below 64 x 16 channels x 8 heads x 128 KiB = 1 GiB, so no halving); a buffer
// of 1 MiB or more changes nothing.
TEST(Split, NvlsChunkIsTheSimpleStepCappedAt128KiB) {
  EXPECT_EQ(kNccl.nvls_chunk(Bytes::GiB(8), 8), Bytes::KiB(128));
  CommParams small = kNccl;
  ASSERT_TRUE(set_comm_param(small, "buffsize", "512K").ok());
  EXPECT_EQ(small.nvls_chunk(Bytes::GiB(8), 8), Bytes::KiB(64));
  CommParams one = kNccl;
  ASSERT_TRUE(set_comm_param(one, "buffsize", "1M").ok());
  EXPECT_EQ(one.nvls_chunk(Bytes::GiB(8), 8), Bytes::KiB(128));
}

// NVLS on 8 GPUs: channel b scatters the block at b x 8 x chunk of each 16-block loop. Below
// 8 MiB the chunk is 16 KiB, a block 128 KiB: 64 KiB is all on channel 0; 1 MiB fills 8 channels;
// 4 MiB is two whole loops.
TEST(Split, NvlsBlocksFillTheFirstChannelsFirst) {
  EXPECT_EQ(nvls_busiest_channel_bytes(kNccl, Bytes::KiB(64), 8), 65536);
  EXPECT_EQ(nvls_busiest_channel_bytes(kNccl, Bytes::MiB(1), 8), 131072);
  EXPECT_EQ(nvls_busiest_channel_bytes(kNccl, Bytes::MiB(4), 8), 262144);
  EXPECT_NEAR(nvls_split_fraction(kNccl, Bytes::KiB(64), 8), 1.0 / 16, 1e-12);
  EXPECT_NEAR(nvls_split_fraction(kNccl, Bytes::MiB(1), 8), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(nvls_split_fraction(kNccl, Bytes::MiB(4), 8), 1.0);
}

// End to end on the 100 GB/s test switch: an 8 MiB ring LL128 all-reduce takes NCCL's latency
// (14 + 14 x 1.9 us) plus the even alpha-beta data time at 92% of B, stretched by the busiest
// channel: 748,800 bytes per edge where an even split gives 14 x 8 MiB / 192.
TEST(Split, TheBusiestChannelSetsTheRingsTime) {
  auto topo = hw::Topology::build(hw::testing::cluster(hw::testing::nvswitch_node(), 1, hw::FabricKind::fat_tree)).value();
  hw::Router router(topo);
  Planner planner(topo, router, kNccl);
  CollectiveRequest req;
  req.size = Bytes::MiB(8);
  for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
  req.algo = Algo::ring;
  req.protocol = Protocol::ll128;
  const Plan p = planner.plan(req).value();
  const double S = 8388608, stretch = 748800 / (14.0 * S / 192);
  const double expected = 14e-6 + 14 * 1.9e-6 + 2.0 * 7 / 8 * S / (0.92 * 100e9) * stretch;
  EXPECT_NEAR(simulate_alone(topo, p).seconds(), expected, 0.01 * expected);
  EXPECT_NEAR(p.estimate.seconds(), expected, 0.01 * expected);
}

}  // namespace
}  // namespace dtsim::comm

namespace dtsim::comm {
namespace {

// NCCL v2.18.5's channel count across nodes (comm/channels.hpp), worked by hand from its source:
// search speed tables (search.cc), link capacities (topo.h, topo.cc), the search's own doubling,
// the ranks' minimum (init.cc), ncclTopoPostset's doubling and the Hopper rule (connect.cc).
TEST(NcclChannels, SearchSpeedIsTheLargestThePathCarries) {
  EXPECT_DOUBLE_EQ(nccl_search_speed(50, 90), 48);    // NDR / 400 GbE on Hopper
  EXPECT_DOUBLE_EQ(nccl_search_speed(25, 80), 24);    // HDR on Ampere
  EXPECT_DOUBLE_EQ(nccl_search_speed(12.5, 80), 12);  // 100 Gb/s
  EXPECT_DOUBLE_EQ(nccl_search_speed(44, 90), 42);    // Hopper's table has 45 and 42; Ampere's has neither
  EXPECT_DOUBLE_EQ(nccl_search_speed(44, 80), 30);
  EXPECT_DOUBLE_EQ(nccl_search_speed(0.01, 80), 0.12);  // slower than the table: its last speed
}

ChannelSearch dgx_h100() { return {8, 8, 50, 18, 5, 90}; }
ChannelSearch dgx_a100() { return {8, 8, 25, 12, 4, 80}; }

TEST(NcclChannels, FollowTheSearchAndBothDoublings) {
  // DGX H100: path min(50 NIC, 48 PCIe Gen5) -> 48; 8 NICs x 1 = 8 channels, each crossing 7 of 8
  // GPUs' 360 GB/s NVLink (8 x 48 x 7/8 = 336 fits); 8 x 48 = 384 >= 360 ends the search. Kept
  // (Hopper, under 50, more than 4), 16 after ncclTopoPostset, 32 with the Hopper rule (48 > 45).
  EXPECT_EQ(nccl_ring_search(dgx_h100()).channels, 8);
  EXPECT_EQ(nccl_multinode_channels({dgx_h100(), dgx_h100()}), 32);
  // DGX A100: path min(25, 24 PCIe Gen4) -> 24; 8 channels, 192 < 240; slower speeds give 8 (less)
  // until 12, which gives 16 x 12 = 192, not more; .42 stops it at 10. Kept (under 25): 16.
  EXPECT_EQ(nccl_ring_search(dgx_a100()).channels, 8);
  EXPECT_EQ(nccl_multinode_channels({dgx_a100(), dgx_a100()}), 16);
  // One GPU per node on Hopper: 1 channel at 48 (2 at 24 only ties), doubled by the search to 2 at
  // 24, 4 after ncclTopoPostset; 24 is under the Hopper rule's 45.
  const ChannelSearch lone_h100{1, 1, 50, 18, 5, 90};
  EXPECT_EQ(nccl_multinode_channels({lone_h100, lone_h100}), 4);
  // One GPU per node on Ampere: 1 at 24, kept, then 2.
  const ChannelSearch lone_a100{1, 1, 25, 12, 4, 80};
  EXPECT_EQ(nccl_multinode_channels({lone_a100, lone_a100}), 2);
  // 4 NICs of 50 GB/s on Hopper: 4 at 48 (4 is not more than 4: doubled to 8 at 24), 16.
  const ChannelSearch four_nics{4, 8, 50, 18, 5, 90};
  EXPECT_EQ(nccl_multinode_channels({four_nics, four_nics}), 16);
}

TEST(NcclChannels, PcieOnlyNodesAndMixedNodesTakeTheirOwnLimits) {
  // 8 L40S without NVLink, 4 x 400 Gb/s NICs, PCIe Gen4: every channel crosses each GPU's 24 GB/s
  // link, so one channel at 24 reaches the total; kept (under 25), 2.
  const ChannelSearch l40s{4, 8, 50, 0, 4, 89};
  EXPECT_EQ(nccl_multinode_channels({l40s, l40s}), 2);
  // An A100 node with NDR NICs beside a DGX H100: the A100's Gen4 PCIe caps its search at 24 (8
  // channels, kept); the ranks keep the smaller speed, so no Hopper doubling: 16.
  const ChannelSearch a100_ndr{8, 8, 50, 12, 4, 80};
  EXPECT_EQ(nccl_multinode_channels({a100_ndr, dgx_h100()}), 16);
}

TEST(NcclChannels, GraphKeepsTheSmallestSearch) {
  // The tuner's bandwidths scale with the graph (before ncclTopoPostset): 8 channels at 48 on DGX
  // H100, 8 at 24 on DGX A100; beside each other the ranks keep 8 and 24.
  EXPECT_EQ(nccl_multinode_graph({dgx_h100(), dgx_h100()}).channels, 8);
  EXPECT_DOUBLE_EQ(nccl_multinode_graph({dgx_h100(), dgx_h100()}).speed, 48);
  const ChannelSearch lone_h100{1, 1, 50, 18, 5, 90};
  EXPECT_EQ(nccl_multinode_graph({dgx_h100(), lone_h100}).channels, 2);
  EXPECT_DOUBLE_EQ(nccl_multinode_graph({dgx_a100(), dgx_h100()}).speed, 24);
}

TEST(NcclChannels, PerChannelCapsByGenerationAndNodes) {
  // v2.18.5 tuning.cc: [Volta, Ampere, Hopper] x [1 node, 2, more].
  const PerChannelCaps h2 = nccl_per_channel_caps(90, 2), h16 = nccl_per_channel_caps(90, 16);
  EXPECT_DOUBLE_EQ(h2.tree, 41.4);
  EXPECT_DOUBLE_EQ(h16.tree, 36.0);
  EXPECT_DOUBLE_EQ(h16.tree_ll128, 29.0);
  EXPECT_DOUBLE_EQ(h16.ring_ll128, 36.7);
  const PerChannelCaps a4 = nccl_per_channel_caps(80, 4);
  EXPECT_DOUBLE_EQ(a4.tree, 17.8);
  EXPECT_DOUBLE_EQ(a4.tree_ll128, 20.0);
  EXPECT_DOUBLE_EQ(nccl_per_channel_caps(70, 1).tree, 26.5);
  EXPECT_DOUBLE_EQ(nccl_per_channel_caps(89, 3).tree, 17.8);  // 8.9 is Ampere's row
  EXPECT_TRUE(std::isinf(nccl_per_channel_caps(0, 2).tree));  // unknown GPU: no cap
}

}  // namespace
}  // namespace dtsim::comm
