// Metamorphic tests of mechanisms a planner compares settings by (issue 18): each follows the
// physics or the framework's documented behaviour, not a figure the code printed.
//   - fat-tree routing: concurrent rings spread over the uplinks (D-mod-k), so a non-blocking
//     fat-tree is within 2% of one big switch and oversubscription is never faster;
//   - context parallelism: gradients reduced and the distributed optimizer sharded over dp x cp;
//   - the overlap penalty: bounded by comm_slowdown x the time communication overlaps compute;
//   - Horovod tensor fusion: a small fusion buffer sends many buffers per cycle;
//   - pipeline transfers: their own breakdown category, at least the bytes over the link, and on
//     one node NCCL's peer-to-peer channels' rate;
//   - precision: one capability check for every model family and path.
#include <set>

#include <gtest/gtest.h>

#include "comm/collective.hpp"
#include "tests/hw/fixtures.hpp"
#include "tests/workloads/fixtures.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;
using testing::gpt;

double at(const StepResult& r, TimeKind k) { return r.breakdown_s[static_cast<std::size_t>(k)]; }


StepInputs inputs(ModelSpec m, std::int64_t global_batch, std::int64_t micro_batch, std::int64_t seq = 2048) {
  StepInputs in;
  in.model = std::move(m);
  in.training.global_batch = global_batch;
  in.training.micro_batch = micro_batch;
  in.training.seq_len = seq;
  return in;
}

// Static routing (D-mod-k) unless told otherwise: the test node's NIC type does not route
// adaptively.
hw::Topology fabric(int nodes, hw::FabricKind kind, int radix, double oversubscription,
                    hw::FabricRouting routing = hw::FabricRouting::static_paths) {
  auto c = cluster(nvswitch_node(8, true, 25), nodes, kind, radix);
  c.fabric.oversubscription = oversubscription;
  c.fabric.routing = routing;
  return std::move(hw::Topology::build(c)).value();
}

// ---------------------------------------------------------------------------------------------
// Fat-tree routing

// Eight data-parallel rings (tp 8 inside each node, dp over the nodes), one per NIC rail, all
// reducing gradients at once after the backward pass.
double dp_time(const hw::Topology& topo) {
  StepInputs in = inputs(gpt(4, 4096), topo.nodes(), 1);
  in.parallel.tp = 8;
  in.parallel.dp_impl = DpImpl::no_overlap;
  auto r = simulate_step(topo, in);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? at(*r, TimeKind::dp) : 0;
}

TEST(FatTreeRouting, NonBlockingTreeIsWithinTwoPercentOfOneSwitch) {
  // Nodes of 8 NICs on radix-40 leaves (20 down, 20 up): 2 whole nodes a leaf, 20 spines. Every
  // ring edge that leaves a leaf goes to a distinct destination NIC, so D-mod-k gives each its
  // own uplink (hashing the flows with one label per ring put all eight rails' flows of a leaf on
  // one uplink). At 48 nodes the rings' wrap-around edges (node 47 to node 0) leave the last
  // leaf; when nodes straddled leaves (20 NICs: 2.5 nodes) they left one that also sent the
  // ring's ordinary edges to the same port positions of the next leaf, and D-mod-k put both on
  // the same 4 uplinks: twice one switch's time.
  for (int nodes : {16, 48}) {
    const hw::Topology tree_topo = fabric(nodes, hw::FabricKind::fat_tree, 40, 1);
    EXPECT_EQ(tree_topo.fabric_switches(), nodes / 2 + 20) << nodes << " nodes: a leaf per 2 nodes, 20 spines";
    const double one_switch = dp_time(fabric(nodes, hw::FabricKind::single_switch, 40, 1));
    const double tree = dp_time(tree_topo);
    ASSERT_GT(one_switch, 0);
    EXPECT_LE(tree, one_switch * 1.02) << nodes << " nodes";
    EXPECT_GE(tree, one_switch * 0.999) << nodes << " nodes";  // a tree adds hops, never bandwidth
  }
}

TEST(FatTreeRouting, OversubscriptionIsNeverFaster) {
  for (int nodes : {2, 16}) {
    const int radix = nodes == 2 ? 16 : 40;
    double prev = 0;
    for (double o : nodes == 2 ? std::vector<double>{1, 3, 7, 15} : std::vector<double>{1, 2, 4, 8}) {
      const double t = dp_time(fabric(nodes, hw::FabricKind::fat_tree, radix, o));
      EXPECT_GE(t, prev * (1 - 1e-9)) << nodes << " nodes, oversubscription " << o;
      prev = t;
    }
  }
}

TEST(FatTreeRouting, ShiftPermutationUsesDistinctUplinks) {
  // Node i's NIC k sends to node i+1's NIC k, for every k: the flows leaving a leaf take
  // pairwise distinct first fabric links above the leaf.
  const hw::Topology topo = fabric(4, hw::FabricKind::fat_tree, 16, 1);  // 1 node per leaf, 8 spines
  hw::Router router(topo);
  std::set<std::uint32_t> uplinks;
  for (int k = 0; k < 8; ++k) {
    const hw::Path p = router.route(k, 8 + k);  // GPU k of node 0 to GPU k of node 1
    int fabric_hops = 0;
    for (LinkId l : p) {
      const auto& link = topo.link(l);
      if (topo.vertices()[link.src].kind == hw::VertexKind::fabric_switch &&
          topo.vertices()[link.dst].kind == hw::VertexKind::fabric_switch) {
        if (fabric_hops++ == 0) uplinks.insert(l.value);
      }
    }
    EXPECT_EQ(fabric_hops, 2) << "leaf, spine, leaf";
  }
  EXPECT_EQ(uplinks.size(), 8u);
}

// ECMP (`routing: ecmp`): each connection is hashed onto one of the equal-cost paths, as Ethernet
// switches hash a RoCE flow's five-tuple. Routes stay shortest and fixed per
// connection, but distinct connections may share an uplink while another idles: "ECMP rendered
// poor performance for the training workload due to the low flow entropy" (Meta, "RDMA over
// Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024, and its engineering blog of
// 2024-08-05), where D-mod-k gives a ring's flows distinct uplinks.
TEST(FatTreeRouting, EcmpHashesEachConnectionOntoOnePath) {
  // The shift permutation above (node 0's 8 NICs to node 1's, one node per leaf, 8 spines).
  const hw::Topology topo = fabric(4, hw::FabricKind::fat_tree, 16, 1, hw::FabricRouting::ecmp);
  EXPECT_NE(topo.summary().find("ECMP (a hashed path per connection)"), std::string::npos) << topo.summary();
  hw::Router router(topo);
  auto first_uplink = [&](const hw::Path& p, int& fabric_hops) {
    std::uint32_t up = 0;
    fabric_hops = 0;
    for (LinkId l : p) {
      const auto& link = topo.link(l);
      if (topo.vertices()[link.src].kind == hw::VertexKind::fabric_switch &&
          topo.vertices()[link.dst].kind == hw::VertexKind::fabric_switch) {
        if (fabric_hops++ == 0) up = l.value;
      }
    }
    return up;
  };
  std::set<std::uint32_t> uplinks;
  for (int k = 0; k < 8; ++k) {
    const hw::Path p = router.route(k, 8 + k, 1);
    int hops = 0;
    uplinks.insert(first_uplink(p, hops));
    EXPECT_EQ(hops, 2) << "leaf, spine, leaf: still a shortest path";
    EXPECT_EQ(router.route(k, 8 + k, 1), p) << "one connection, one path";
  }
  // Eight connections hashed onto eight uplinks all land apart with probability 8!/8^8 = 0.24%.
  EXPECT_LT(uplinks.size(), 8u);
  // One GPU pair's connections (distinct labels: channels) reach every spine: 64 draws miss one of
  // 8 with probability 8 x (7/8)^64 = 0.16%.
  std::set<std::uint32_t> spread;
  for (std::uint64_t label = 0; label < 64; ++label) {
    int hops = 0;
    spread.insert(first_uplink(router.route(0, 8, label), hops));
  }
  EXPECT_EQ(spread.size(), 8u);
  // Eight data-parallel rings over 16 nodes on 8 leaves (the non-blocking case above): D-mod-k
  // runs them at one switch's pace; hashed, some uplinks carry two or more of their flows, so
  // they run slower; spreading every flow (adaptive) is one switch again.
  const double one_switch = dp_time(fabric(16, hw::FabricKind::single_switch, 40, 1));
  const double dmodk = dp_time(fabric(16, hw::FabricKind::fat_tree, 40, 1, hw::FabricRouting::static_paths));
  const double hashed = dp_time(fabric(16, hw::FabricKind::fat_tree, 40, 1, hw::FabricRouting::ecmp));
  const double adaptive = dp_time(fabric(16, hw::FabricKind::fat_tree, 40, 1, hw::FabricRouting::adaptive));
  ASSERT_GT(one_switch, 0);
  EXPECT_LE(dmodk, one_switch * 1.02);
  EXPECT_LE(adaptive, one_switch * 1.02);
  EXPECT_GT(hashed, dmodk * 1.05);
  EXPECT_EQ(hashed, dp_time(fabric(16, hw::FabricKind::fat_tree, 40, 1, hw::FabricRouting::ecmp))) << "deterministic";
}

// Adaptive routing spreads every flow over the equal-cost paths, so a non-blocking tree carries
// any traffic pattern as one big switch does, not only shift permutations. A double binary tree
// all-reduce is not a shift permutation: with static D-mod-k routing some of its flows share an
// uplink; with adaptive routing its time equals one switch's (the tiers add only hops' latency,
// microseconds of tens of milliseconds): two tiers (fat-tree, rail-optimized) and three (clos3).
// The NICs (12.5 GB/s) are slower than the node's NVLink chain, so the network bounds the tree.
Time tree_allreduce(int nodes, hw::FabricKind kind, int radix, hw::FabricRouting routing) {
  auto c = cluster(nvswitch_node(8, true, 12.5), nodes, kind, radix);
  c.fabric.routing = routing;
  const hw::Topology topo = std::move(hw::Topology::build(c)).value();
  hw::Router router(topo);
  comm::Planner planner(topo, router, comm::CommParams{});
  comm::CollectiveRequest req;
  req.size = Bytes(std::int64_t{1} << 30);
  for (int r = 0; r < topo.gpus(); ++r) req.ranks.push_back(r);
  req.algo = comm::Algo::tree;
  req.protocol = comm::Protocol::simple;
  auto plan = planner.plan(req);
  EXPECT_TRUE(plan.ok()) << plan.error().to_string();
  return plan.ok() ? comm::simulate_alone(topo, *plan) : Time::zero();
}

TEST(FatTreeRouting, AdaptiveRoutingCarriesAnyPatternAsOneSwitch) {
  struct Case {
    int nodes;
    hw::FabricKind kind;
    int radix;
    const char* tiers;
  };
  // 32 nodes: 8 leaves under 32 spines (radix 64), or 32 leaves in 4 pods (radix 16); 64 nodes
  // on radix 32: 4 units of 16 nodes, each rail's leaves joined by 16 spines.
  for (const Case& c : {Case{32, hw::FabricKind::fat_tree, 64, "two tiers"}, Case{32, hw::FabricKind::clos3, 16, "three tiers"},
                        Case{64, hw::FabricKind::rail_optimized, 32, "two tiers, 4 units"}}) {
    const Time one_switch = tree_allreduce(c.nodes, hw::FabricKind::single_switch, 512, hw::FabricRouting::static_paths);
    const Time adaptive = tree_allreduce(c.nodes, c.kind, c.radix, hw::FabricRouting::adaptive);
    const Time fixed = tree_allreduce(c.nodes, c.kind, c.radix, hw::FabricRouting::static_paths);
    ASSERT_GT(one_switch, Time::zero());
    EXPECT_NEAR(adaptive.seconds(), one_switch.seconds(), one_switch.seconds() * 0.005) << hw::to_string(c.kind) << ", " << c.tiers;
    EXPECT_GT(fixed.seconds(), adaptive.seconds() * 1.05) << hw::to_string(c.kind) << ", " << c.tiers << ": static routing should collide here";
  }
}

// ---------------------------------------------------------------------------------------------
// Context parallelism

TEST(ContextParallel, GradientsAreReducedOverDpTimesCp) {
  // 8 GPUs, cp 8, dp 1: the eight context ranks hold the same weights and must still sum their
  // gradients (Megatron-LM's data-parallel group "with context parallel").
  const hw::Topology topo = std::move(hw::Topology::build(cluster(nvswitch_node(), 1, hw::FabricKind::single_switch))).value();
  StepInputs in = inputs(gpt(4, 2048), 1, 1, 8192);
  in.parallel.cp = 8;
  in.parallel.dp_impl = DpImpl::no_overlap;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_GT(at(*r, TimeKind::dp), 0);
}

TEST(ContextParallel, DistributedOptimizerShardsOverDpTimesCp) {
  // Fixed 8 GPUs: dp x cp = 8 for every split, so the optimizer states per GPU are the same
  // 12 bytes (fp32 master + two Adam moments) x parameters / 8 at every cp.
  const hw::Topology topo = std::move(hw::Topology::build(cluster(nvswitch_node(), 1, hw::FabricKind::single_switch))).value();
  double first = 0;
  for (int cp : {1, 2, 4, 8}) {
    StepInputs in = inputs(gpt(4, 2048), 8 / cp, 1, 8192);
    in.parallel.cp = cp;
    in.parallel.zero = 1;
    auto r = simulate_step(topo, in);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    const double expect = 12.0 * r->params / 8;
    EXPECT_NEAR(r->peak_memory.optimizer, expect, expect * 1e-9) << "cp " << cp;
    auto est = estimate_memory(topo, in);
    ASSERT_TRUE(est.ok());
    EXPECT_NEAR(est->peak.optimizer, expect, expect * 1e-9) << "cp " << cp;
    if (cp == 1) first = r->peak_memory.optimizer;
    EXPECT_LE(r->peak_memory.optimizer, first * (1 + 1e-12));
  }
}

// ---------------------------------------------------------------------------------------------
// Overlap penalty

TEST(OverlapPenalty, BoundedBySlowdownTimesOverlappedTime) {
  // 2 nodes, dp 16: DDP's all-reduces overlap the backward pass. The compute time may grow over
  // no-overlap's by at most comm_slowdown x the time collectives ran, and by something when they
  // did overlap.
  const hw::Topology topo = fabric(2, hw::FabricKind::single_switch, 40, 1);
  StepInputs in = inputs(gpt(8, 2048), 16, 1);
  in.compute.comm_slowdown = 0.1;
  in.record_timeline = true;
  in.parallel.dp_impl = DpImpl::no_overlap;
  auto base = simulate_step(topo, in);
  in.parallel.dp_impl = DpImpl::ddp;
  in.parallel.bucket = Bytes::MiB(25);
  auto ddp = simulate_step(topo, in);
  ASSERT_TRUE(base.ok() && ddp.ok());
  double collectives = 0;
  for (const auto& ev : ddp->timeline.events) {
    if (ev.stage == 0 && ev.replica == 0 && ev.track == TimelineEvent::Track::dp) collectives += (ev.end - ev.start).seconds();
  }
  ASSERT_GT(collectives, 0);
  const double penalty = at(*ddp, TimeKind::compute) - at(*base, TimeKind::compute);
  EXPECT_GT(penalty, 0);
  EXPECT_LE(penalty, in.compute.comm_slowdown * collectives * (1 + 1e-9));
  // With no slowdown, overlapping costs no compute at all.
  in.compute.comm_slowdown = 0;
  auto free = simulate_step(topo, in);
  ASSERT_TRUE(free.ok());
  EXPECT_NEAR(at(*free, TimeKind::compute), at(*base, TimeKind::compute), 1e-9);
}

// ---------------------------------------------------------------------------------------------
// Horovod tensor fusion

TEST(HorovodFusion, SmallBufferIsNoWorseThanTheSameBuffersUnfusedAfterBackward) {
  // Every cycle sends every ready tensor in as many buffers as it takes. With a 1 MiB buffer the
  // step can be no slower than all-reducing the same 1 MiB pieces one by one after the backward
  // pass (no-overlap with 1 MiB buckets), plus the one cycle Horovod waits before its first.
  const hw::Topology topo = fabric(2, hw::FabricKind::single_switch, 40, 1);
  StepInputs in = inputs(gpt(8, 2048), 16, 1);
  in.compute.comm_slowdown = 0;
  in.parallel.dp_impl = DpImpl::no_overlap;
  in.parallel.bucket = Bytes::MiB(1);
  auto unfused = simulate_step(topo, in);
  in.parallel.dp_impl = DpImpl::horovod;
  in.parallel.fusion_buffer = Bytes::MiB(1);
  auto small = simulate_step(topo, in);
  in.parallel.fusion_buffer = Bytes::MiB(64);
  auto big = simulate_step(topo, in);
  ASSERT_TRUE(unfused.ok() && small.ok() && big.ok());
  EXPECT_LE(small->step_time_s, unfused->step_time_s + in.parallel.fusion_cycle.seconds());
  // A long cycle costs at most the cycles the backward pass spans plus one, not one per buffer.
  in.parallel.fusion_buffer = Bytes::MiB(1);
  in.parallel.fusion_cycle = Time::ms(100);
  auto slow = simulate_step(topo, in);
  ASSERT_TRUE(slow.ok());
  EXPECT_LE(slow->step_time_s, unfused->step_time_s + 2 * 0.1 + at(*unfused, TimeKind::compute));
}

// ---------------------------------------------------------------------------------------------
// Pipeline transfers

// Two stages on two nodes joined by 1 GB/s NICs, tp 8, m micro-batches: stage 0 sends m
// activations, each 1/8 of [seq, hidden] in bf16 per rank pair over its own NIC.
constexpr int kPipelineMicroBatches = 8;
hw::Topology two_stage_topology(double nic_GBps = 1) {
  return std::move(hw::Topology::build(cluster(nvswitch_node(8, true, nic_GBps), 2, hw::FabricKind::single_switch))).value();
}
StepInputs two_stage_inputs() {
  StepInputs in = inputs(gpt(8, 4096), kPipelineMicroBatches, 1);
  in.parallel.tp = 8;
  in.parallel.pp = 2;
  in.parallel.sequence_parallel = true;
  return in;
}
// The two-stage step with blocking and with overlapped pipeline sends, without the overlap
// slowdown of compute.
struct BlockingAndOverlapped {
  Expected<StepResult> blocking, overlapped;
};
BlockingAndOverlapped blocking_and_overlapped(const hw::Topology& topo) {
  StepInputs in = two_stage_inputs();
  in.compute.comm_slowdown = 0;
  auto blocking = simulate_step(topo, in);
  in.parallel.overlap_p2p = true;
  return {std::move(blocking), simulate_step(topo, in)};
}

TEST(PipelineTransfers, AppearInTheBreakdownAndTakeAtLeastTheirBytesOverTheLink) {
  // NCCL's send blocks until done.
  const hw::Topology topo = two_stage_topology();
  const int m = kPipelineMicroBatches;
  StepInputs in = two_stage_inputs();
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double msg = 2048.0 * 4096 * 2 / 8;
  const double floor = m * msg / 1e9;
  EXPECT_GE(r->stages[0].time_s[static_cast<std::size_t>(TimeKind::pp)], floor);
  EXPECT_GT(r->stages[1].time_s[static_cast<std::size_t>(TimeKind::pp)], 0);
  // A faster NIC: less pipeline communication.
  auto fast = std::move(hw::Topology::build(cluster(nvswitch_node(8, true, 50), 2, hw::FabricKind::single_switch))).value();
  auto rf = simulate_step(fast, in);
  ASSERT_TRUE(rf.ok());
  EXPECT_LT(rf->stages[0].time_s[static_cast<std::size_t>(TimeKind::pp)], r->stages[0].time_s[static_cast<std::size_t>(TimeKind::pp)]);
}

TEST(PipelineTransfers, OverlappedSendsLeaveTheSenderFree) {
  // Megatron-Core's overlap_p2p_comm: the sender issues its transfer and goes on; only the
  // receiver waits. The same two stages as above: blocking, stage 0 spends at least its m sends'
  // time (m x msg / 1 GB/s) as pipeline communication; overlapped, exactly that time leaves its
  // pipeline communication (its waits for stage 1's gradients stay), and the step is shorter.
  const int m = kPipelineMicroBatches;
  auto [blocking, overlapped] = blocking_and_overlapped(two_stage_topology());
  ASSERT_TRUE(blocking.ok() && overlapped.ok());
  const double floor = m * (2048.0 * 4096 * 2 / 8) / 1e9;
  const auto pp = static_cast<std::size_t>(TimeKind::pp);
  EXPECT_GE(blocking->stages[0].time_s[pp], floor);
  EXPECT_NEAR(blocking->stages[0].time_s[pp] - overlapped->stages[0].time_s[pp], floor, 0.05 * floor);
  EXPECT_LE(overlapped->step_time_s, blocking->step_time_s + 1e-9);
  EXPECT_LT(overlapped->step_time_s, blocking->step_time_s - 0.5 * floor);
}

TEST(PipelineTransfers, OverlappedSendsWaitForThePreviousOneInTheirDirection) {
  // At most one send in flight each way (Megatron waits for a send's handle before its next chunk
  // in that direction). With 10 MB/s NICs each activation takes far longer than a micro-batch's
  // compute, so stage 0 waits for its previous send before each of its m - 1 later ones: at least
  // (m - 1) sends' time less all its compute, as pipeline communication. The link then carries
  // the sends one after another, as it does when they block, so nothing arrives later than with
  // blocking sends and the step cannot be longer. (Sends issued without that wait share the
  // link, each arrives later, and this step took 9.95 s against 8.71 s blocking.)
  const int m = kPipelineMicroBatches;
  auto [blocking, overlapped] = blocking_and_overlapped(two_stage_topology(0.01));
  ASSERT_TRUE(blocking.ok() && overlapped.ok());
  const double send = (2048.0 * 4096 * 2 / 8) / 1e7;
  const auto pp = static_cast<std::size_t>(TimeKind::pp), compute = static_cast<std::size_t>(TimeKind::compute);
  EXPECT_GE(overlapped->stages[0].time_s[pp], (m - 1) * send - overlapped->stages[0].time_s[compute]);
  EXPECT_LE(overlapped->step_time_s, blocking->step_time_s + 1e-9);
}

TEST(PipelineTransfers, OnOneNodeTheyRunOnNcclsPeerChannels) {
  // tp 4 x pp 2 on one node of 8 GPUs with 18 links of 25 GB/s (450 GB/s each way). Megatron sends
  // over the pipeline group (2 ranks, both on the node), so NCCL sends each 4 MiB activation on 16
  // channels (comm/p2p.hpp: 16 chunks of 256 KiB), each at most 12 GB/s on an A100 (compute
  // capability 8.0): 192 GB/s. A send blocks for its latency (a Simple step over NVLink) and its
  // bytes at that rate, which is what overlapping the sends takes off the sender's pipeline
  // communication (the test above). A GPU of unknown kind has no known channel rate: the links'.
  hw::NodeSpec node = nvswitch_node(8, true, 25);
  node.nvlink_links_per_gpu = 18;
  auto send_time = [](const hw::NodeSpec& n) {
    const hw::Topology topo = std::move(hw::Topology::build(cluster(n, 1, hw::FabricKind::single_switch))).value();
    StepInputs in = inputs(gpt(8, 4096), kPipelineMicroBatches, 1);
    in.parallel.tp = 4;
    in.parallel.pp = 2;
    in.parallel.sequence_parallel = true;
    in.compute.comm_slowdown = 0;
    auto blocking = simulate_step(topo, in);
    in.parallel.overlap_p2p = true;
    auto overlapped = simulate_step(topo, in);
    EXPECT_TRUE(blocking.ok() && overlapped.ok());
    const auto pp = static_cast<std::size_t>(TimeKind::pp);
    return (blocking->stages[0].time_s[pp] - overlapped->stages[0].time_s[pp]) / kPipelineMicroBatches;
  };
  const comm::CommParams c = comm::CommParams::nccl_defaults();
  const auto& lat = c.lat(comm::Algo::ring, comm::Protocol::simple);
  const double latency = (lat.base + lat.step[static_cast<std::size_t>(comm::Transport::nvlink)]).seconds();
  const double msg = 2048.0 * 4096 * 2 / 4;
  node.gpu.compute_capability = "8.0";
  EXPECT_NEAR(send_time(node), latency + msg / 192e9, 0.03 * (latency + msg / 192e9));
  node.gpu.compute_capability.clear();
  EXPECT_NEAR(send_time(node), latency + msg / 450e9, 0.03 * (latency + msg / 450e9));
}

// ---------------------------------------------------------------------------------------------
// Precision capability

TEST(Precision, UnsupportedPrecisionIsRefusedForEveryModelFamilyAndPath) {
  // The test GPU has a bf16 peak only.
  const hw::Topology topo = std::move(hw::Topology::build(cluster(nvswitch_node(), 1, hw::FabricKind::single_switch))).value();
  for (hw::DType d : {hw::DType::fp16, hw::DType::fp8}) {
    for (bool cnn : {true, false}) {
      StepInputs in = cnn ? inputs(make_resnet50(), 64, 8) : inputs(gpt(4, 2048), 8, 1);
      in.training.precision = d;
      auto r = simulate_step(topo, in);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().field, "training.precision");
        EXPECT_NE(r.error().message.find("has no " + std::string(hw::to_string(d)) + " support"), std::string::npos) << r.error().message;
      EXPECT_NE(r.error().message.find("bf16"), std::string::npos) << "names what the GPU has";
      auto est = estimate_memory(topo, in);
      ASSERT_FALSE(est.ok());
      EXPECT_EQ(est.error().field, "training.precision");
    }
  }
  // A mixed cluster is checked on every node kind, not only the first.
  auto c = cluster(nvswitch_node(), 1, hw::FabricKind::single_switch);
  hw::NodeSpec old = nvswitch_node();
  old.gpu.peak.clear();
  old.gpu.peak[hw::DType::fp32] = FlopRate::TFLOPs(10);
  old.gpu.name = "old-gpu";
  c.groups.push_back(hw::NodeGroup{old, 1, 0});
  const hw::Topology mixed = std::move(hw::Topology::build(c)).value();
  StepInputs in = inputs(make_resnet50(), 64, 4);
  auto r = simulate_step(mixed, in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("old-gpu"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace dtsim::workloads
