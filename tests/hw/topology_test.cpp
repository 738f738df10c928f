#include "hw/topology.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/hw/fixtures.hpp"

namespace dtsim::hw {
namespace {

using testing::cluster;
using testing::nvswitch_node;
using testing::pcie_node;

Topology build(const ClusterSpec& c) {
  auto t = Topology::build(c);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().to_string());
  return std::move(t).value();
}

std::size_t fabric_links(const Topology& t, const Path& p) {
  std::size_t n = 0;
  for (LinkId l : p) n += t.link(l).kind == LinkKind::net ? 1 : 0;
  return n;
}

TEST(Topology, NvswitchNodeRoutesGpuToGpuThroughTheSwitch) {
  Topology t = build(cluster(nvswitch_node(), 1, FabricKind::fat_tree));
  EXPECT_EQ(t.gpus(), 8);
  Router r(t);
  Path p = r.route(0, 5);
  ASSERT_EQ(p.size(), 2u);  // GPU0 -> NVSwitch -> GPU5
  EXPECT_EQ(t.link(p[0]).kind, LinkKind::nvlink);
  EXPECT_DOUBLE_EQ(t.link(p[0]).bandwidth.GBps(), 100);  // 4 links x 25 GB/s
  EXPECT_EQ(t.link_name(p[0]), "n0.gpu0->n0.nvswitch");
  EXPECT_EQ(r.latency(p), Time::ns(600));
}

TEST(Topology, PcieHopCountsFollowTheTree) {
  Topology t = build(cluster(pcie_node(), 1, FabricKind::fat_tree));
  Router r(t);
  EXPECT_EQ(r.route(0, 1).size(), 2u);  // same switch: up and down
  EXPECT_EQ(r.route(0, 2).size(), 4u);  // other switch, same CPU: via the root complex
  EXPECT_EQ(r.route(0, 7).size(), 5u);  // other socket: plus the inter-socket link
  // Without peer-to-peer, even GPUs under one switch go through host memory.
  Topology staged = build(cluster(pcie_node(false), 1, FabricKind::fat_tree));
  Router rs(staged);
  EXPECT_EQ(rs.route(0, 1).size(), 4u);
}

TEST(Topology, WithoutGpuDirectRdmaNicTrafficGoesThroughHostMemory) {
  auto node = nvswitch_node();
  Topology direct = build(cluster(node, 2, FabricKind::single_switch));
  node.gpudirect_rdma = false;
  Topology staged = build(cluster(node, 2, FabricKind::single_switch));
  auto through_cpu = [](const Topology& t, const Path& p) {
    for (LinkId l : p) {
      if (t.vertices()[t.link(l).dst].kind == VertexKind::cpu) return true;
    }
    return false;
  };
  Router rd(direct), rs(staged);
  EXPECT_FALSE(through_cpu(direct, rd.route(0, 8)));  // GPU -> PCIe switch -> NIC
  EXPECT_TRUE(through_cpu(staged, rs.route(0, 8)));   // GPU -> ... -> CPU -> ... -> NIC
  EXPECT_GT(rs.route(0, 8).size(), rd.route(0, 8).size());
}

TEST(Topology, FatTreeHopCountsAndLatency) {
  // 16 nodes with 4 NICs each = 64 NICs; radix 8: 4 down + 4 up per leaf, 16 leaves? No:
  // radix 16 -> 8 down, 8 up: 8 leaves, 8 spines.
  auto c = cluster(nvswitch_node(8, false), 16, FabricKind::fat_tree, 16);
  Topology t = build(c);
  Router r(t);
  // GPU 0 of node 0 and GPU 0 of node 1: NIC 0 of both sit on leaf 0 (NICs fill leaves in order).
  Path same_leaf = r.route(0, 8);
  EXPECT_EQ(fabric_links(t, same_leaf), 2u);
  // Node 0 and node 2: node 2's NICs are NIC numbers 8..11, on leaf 1: up to a spine and down.
  Path cross = r.route(0, 16);
  EXPECT_EQ(fabric_links(t, cross), 4u);
  // NIC -> leaf -> NIC latency: two adapters of 400 ns plus one switch of 200 ns.
  Time fabric = Time::zero();
  for (LinkId l : same_leaf) if (t.link(l).kind == LinkKind::net) fabric += t.link(l).latency;
  EXPECT_EQ(fabric, Time::ns(1000));
}

TEST(Topology, EqualCostPathsAreSpreadByDestinationOverAllSpines) {
  // 16 nodes of 4 NICs on radix-16 leaves: 8 NICs (2 nodes) per leaf, 8 spines. Flows from one
  // GPU to the 8 NICs of another leaf take the 8 spines once each (D-mod-k: the destination's
  // port on its leaf picks the spine), where a per-flow hash would pile some onto one spine.
  auto c = cluster(nvswitch_node(8, false), 16, FabricKind::fat_tree, 16);
  Topology t = build(c);
  Router r(t);
  std::map<std::uint32_t, int> spine_use;  // spine vertex -> flows
  for (int dst : {16, 18, 20, 22, 24, 26, 28, 30}) {  // GPUs 0, 2, 4, 6 of nodes 2 and 3: NICs 0-3 of each
    Path p = r.route(0, dst);
    for (LinkId l : p) {
      const auto v = t.link(l).dst;
      if (t.vertex_name(v).rfind("spine", 0) == 0) ++spine_use[v];
    }
  }
  ASSERT_EQ(spine_use.size(), 8u);  // every spine is used
  for (auto [v, n] : spine_use) EXPECT_EQ(n, 1) << t.vertex_name(v);
  // Routes are a function of the endpoints: the same route every time, whatever the label.
  EXPECT_EQ(r.route(0, 16, 7), r.route(0, 16, 7));
  EXPECT_EQ(r.route(0, 16, 7), r.route(0, 16, 8));
  // One flow's path, link by link: GPU 0 of node 0 through its PCIe switch to NIC 0, up to
  // leaf 0, to the spine its destination picks, down to leaf 1 (node 2's NICs, numbers 8..11,
  // sit there), and through NIC 8 and its PCIe switch to GPU 16. A second router (no shared
  // state) picks the same spine.
  const Path p = r.route(0, 16, 7);
  std::vector<std::string> hops;
  for (LinkId l : p) hops.push_back(t.vertex_name(t.link(l).src) + ">" + t.vertex_name(t.link(l).dst));
  ASSERT_EQ(hops.size(), 8u);
  const std::string spine = t.vertex_name(t.link(p[3]).dst);  // which spine is the routing's choice
  ASSERT_EQ(spine.rfind("spine", 0), 0u) << spine;
  const std::vector<std::string> expected = {"n0.gpu0>n0.pcie0", "n0.pcie0>n0.nic0", "n0.nic0>leaf0", "leaf0>" + spine,
                                             spine + ">leaf1",   "leaf1>n2.nic0",     "n2.nic0>n2.pcie0", "n2.pcie0>n2.gpu0"};
  EXPECT_EQ(hops, expected);
  EXPECT_EQ(Router(t).route(0, 16, 7), p);
}

TEST(Topology, RailOptimizedKeepsSameRailTrafficOnOneSwitch) {
  Topology t = build(cluster(nvswitch_node(), 4, FabricKind::rail_optimized, 64));
  Router r(t);
  // GPU 3 of node 0 to GPU 3 of node 2: both use NIC 3, on rail switch 3: one switch.
  EXPECT_EQ(fabric_links(t, r.route(3, 2 * 8 + 3)), 2u);
  // GPU 3 to GPU 4 of another node: rails 3 and 4 meet at a spine.
  EXPECT_EQ(fabric_links(t, r.route(3, 8 + 4)), 4u);
  EXPECT_NE(t.summary().find("rail-optimized"), std::string::npos);
}

TEST(Topology, OversubscriptionSetsLeafPorts) {
  auto c = cluster(nvswitch_node(8, false), 8, FabricKind::fat_tree, 12);
  c.fabric.oversubscription = 2.0;  // 12 ports: 8 down, 4 up
  Topology t = build(c);
  EXPECT_EQ(t.fabric_switches(), 4 + 4);  // 32 NICs / 8 = 4 leaves, 4 spines
}

TEST(Topology, ThreeLevelClosReachesEveryNic) {
  auto c = cluster(nvswitch_node(8, false), 64, FabricKind::clos3, 16);  // 256 NICs, radix 16
  Topology t = build(c);
  Router r(t);
  // 32 leaves of 8 down / 8 up; pods of 8 leaves -> 4 pods of 8 spines; 8 groups x 8 = 64 cores.
  EXPECT_EQ(t.fabric_switches(), 32 + 4 * 8 + 64);
  // Leaf in another pod: leaf, pod spine, core, pod spine, leaf = 6 fabric links.
  EXPECT_EQ(fabric_links(t, r.route(0, 63 * 8)), 6u);
}

TEST(Topology, ClosBeyondItsRadixIsAClearError) {
  // A 3-level fat-tree of radix k has k pods of k/2 leaves: 32 leaves for k = 8, which reach
  // k^3/4 = 128 NICs when the nodes fill every downlink (here 4 NICs a node on 4-port leaves).
  auto t = Topology::build(cluster(nvswitch_node(8, false), 64, FabricKind::clos3, 8));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().field, "fabric.radix");
  EXPECT_NE(t.error().message.find("at most 32 leaves: 128 NICs"), std::string::npos) << t.error().message;
  // 3 NICs a node on those leaves: a node never straddles two, so each leaf takes one node and
  // leaves a port free, and the limit is 32 leaves of 3 (NIC counts: nvswitch_node's own 4,
  // fabric.nics_per_node keeps 3).
  auto three = cluster(nvswitch_node(8, false), 40, FabricKind::clos3, 8);
  three.fabric.nics_per_node = 3;
  auto t3 = Topology::build(three);
  ASSERT_FALSE(t3.ok());
  EXPECT_NE(t3.error().message.find("40 leaf switches"), std::string::npos) << t3.error().message;
  EXPECT_NE(t3.error().message.find("at most 32 leaves: 96 NICs at the 3 a leaf takes"), std::string::npos) << t3.error().message;
}

TEST(Topology, FatTreeGrowsAThirdTierWhenTwoDoNotSuffice) {
  // 256 NICs, radix 16: 32 leaves exceed a 16-port spine, so pods and cores appear.
  Topology t = build(cluster(nvswitch_node(8, false), 64, FabricKind::fat_tree, 16));
  EXPECT_EQ(t.fabric_switches(), 32 + 4 * 8 + 64);
  EXPECT_NE(t.summary().find("three tiers"), std::string::npos) << t.summary();
}

TEST(Topology, AdaptiveRoutingPoolsEachTierBehindTrunks) {
  // 64 nodes of 4 NICs (50 GB/s each) on radix-16 leaves: 8 NICs per leaf, 8 uplinks, 32 leaves
  // in 4 pods of 8 (three tiers). Adaptive routing spreads a flow over the 8 pod spines and the
  // 64 cores above its leaf, so each tier is one switch, fed by a leaf's 8 uplinks (400 GB/s) and
  // by a pod's 8 x 8 spine-to-core links (3,200 GB/s).
  auto c = cluster(nvswitch_node(8, false), 64, FabricKind::fat_tree, 16);
  c.fabric.routing = FabricRouting::adaptive;
  Topology t = build(c);
  EXPECT_EQ(t.fabric_switches(), 32 + 4 + 1);
  EXPECT_NE(t.summary().find("three tiers: 4 pod(s) of 8 spine, 64 core, 1:1 oversubscribed, adaptive routing"), std::string::npos)
      << t.summary();
  Router r(t);
  const Path p = r.route(0, 63 * 8);  // node 0 (pod 0) to node 63 (pod 3)
  std::vector<std::pair<std::string, double>> hops;
  for (LinkId l : p) hops.emplace_back(t.vertex_name(t.link(l).src) + ">" + t.vertex_name(t.link(l).dst), t.link(l).bandwidth.bytes_per_s() / 1e9);
  ASSERT_EQ(hops.size(), 10u);
  EXPECT_EQ(hops[3], std::pair(std::string("leaf0>pod0-spine0-7"), 400.0));
  EXPECT_EQ(hops[4], std::pair(std::string("pod0-spine0-7>core0-63"), 3200.0));
  EXPECT_EQ(hops[5], std::pair(std::string("core0-63>pod3-spine0-7"), 3200.0));
  EXPECT_EQ(hops[6], std::pair(std::string("pod3-spine0-7>leaf31"), 400.0));
  // Static routing keeps the switches apart and says so.
  c.fabric.routing = FabricRouting::static_paths;
  EXPECT_NE(build(c).summary().find("static routing (D-mod-k)"), std::string::npos);
  // A custom fabric's links are the user's; adaptive routing is refused there, naming the field.
  auto custom = cluster(nvswitch_node(8, false), 2, FabricKind::custom);
  custom.fabric.switches = {"a"};
  custom.fabric.attach = {{0, 1, "a"}};
  custom.fabric.routing = FabricRouting::adaptive;
  auto refused = Topology::build(custom);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().field, "fabric.routing");
}

TEST(Topology, DisconnectedCustomFabricIsAnErrorNamingTheGpus) {
  auto c = cluster(nvswitch_node(8, false), 4, FabricKind::custom);
  c.fabric.switches = {"a", "b"};
  c.fabric.attach = {{0, 1, "a"}, {2, 3, "b"}};  // no link between a and b
  auto t = Topology::build(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().field, "fabric");
  EXPECT_NE(t.error().message.find("disconnected"), std::string::npos);
  EXPECT_NE(t.error().message.find("switch 'b'"), std::string::npos);
  c.fabric.links = {{"a", "b", 2}};
  EXPECT_TRUE(Topology::build(c).ok());
}

TEST(Topology, StructuralErrorsNameTheField) {
  auto node = nvswitch_node();
  node.pcie_groups[1].gpus = {2};  // GPU 3 is nowhere
  auto t = Topology::build(cluster(node, 1, FabricKind::fat_tree));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().field, "node.pcie.switches");
  EXPECT_NE(t.error().message.find("GPU 3"), std::string::npos);

  auto partial = cluster(nvswitch_node(), 1, FabricKind::fat_tree);
  partial.groups[0].gpus_per_node = 9;
  auto t2 = Topology::build(partial);
  ASSERT_FALSE(t2.ok());
  EXPECT_EQ(t2.error().field, "gpus_per_node");
}

TEST(Topology, PartialNodesUseTheFirstGpus) {
  auto c = cluster(nvswitch_node(), 2, FabricKind::fat_tree);
  c.groups[0].gpus_per_node = 2;
  Topology t = build(c);
  EXPECT_EQ(t.gpus(), 4);
  EXPECT_EQ(t.node_of(2), 1);
  EXPECT_EQ(t.local_of(3), 1);
}

TEST(Topology, FewerNicsPerNodeAreSpreadOverThePcieSwitches) {
  // 4 PCIe switches, each with 2 GPUs and 2 NICs (2s, 2s + 1). Keeping 4 NICs keeps each switch's
  // first, 0, 2, 4, 6, renumbered 0-3, so every GPU reaches a NIC under its own switch, as on
  // servers built with 4 NICs (the first 4 would leave GPUs 4-7 none on their switch).
  auto c = cluster(nvswitch_node(), 2, FabricKind::single_switch);
  c.fabric.nics_per_node = 4;
  Topology t = build(c);
  EXPECT_EQ(t.fabric_nics(0), 4);
  const NodeTemplate& nt = t.node_template(0);
  for (int g = 0; g < 8; ++g) {
    const int nic = nt.nearest_nic(g);
    EXPECT_EQ(nic, g / 2) << "GPU " << g;
    EXPECT_EQ(nt.route(nt.gpu_vertex(g), nt.nic_vertex(nic)).size(), 2u) << "GPU " << g << ": up to its switch and down";
  }
  // 2 NICs: the first round's spread, NICs 0 and 4 (switches 0 and 2), so GPU 4 has one on its
  // switch; 6: the first round whole and 1 and 5 of the second.
  c.fabric.nics_per_node = 2;
  Topology two = build(c);
  const NodeTemplate& n2 = two.node_template(0);
  EXPECT_EQ(n2.nearest_nic(4), 1);
  EXPECT_EQ(n2.route(n2.gpu_vertex(4), n2.nic_vertex(1)).size(), 2u);
  EXPECT_GT(n2.route(n2.gpu_vertex(2), n2.nic_vertex(n2.nearest_nic(2))).size(), 2u);
  c.fabric.nics_per_node = 6;
  Topology six = build(c);
  const NodeTemplate& n6 = six.node_template(0);
  EXPECT_EQ(n6.spec().pcie_groups[0].nics, (std::vector<int>{0, 1}));  // old 0 and 1
  EXPECT_EQ(n6.spec().pcie_groups[1].nics, (std::vector<int>{2}));     // old 2
  EXPECT_EQ(n6.spec().pcie_groups[2].nics, (std::vector<int>{3, 4}));  // old 4 and 5
  // More NICs than the node has is an error naming the field; a broken node is reported with its
  // own NIC numbers, before any are dropped.
  c.fabric.nics_per_node = 9;
  auto too_many = Topology::build(c);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().field, "fabric.nics_per_node");
  c.fabric.nics_per_node = 4;
  c.groups[0].node.pcie_groups[3].nics = {6, 9};
  auto broken = Topology::build(c);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("NIC 9 does not exist"), std::string::npos) << broken.error().message;
}

TEST(Topology, HeterogeneousClustersJoinThroughTheFabric) {
  ClusterSpec c = cluster(nvswitch_node(), 2, FabricKind::single_switch);
  c.groups.push_back(NodeGroup{pcie_node(), 1, 0});
  Topology t = build(c);
  EXPECT_EQ(t.gpus(), 24);
  Router r(t);
  EXPECT_EQ(fabric_links(t, r.route(0, 20)), 2u);
}

TEST(Topology, InstallMakesMatchingLinkIds) {
  Topology t = build(cluster(nvswitch_node(), 2, FabricKind::single_switch));
  Simulator sim;
  FlowNetwork net(sim, std::make_unique<MaxMinSharing>());
  t.install(net);
  ASSERT_EQ(net.link_count(), t.links().size());
  for (std::uint32_t i = 0; i < t.links().size(); ++i) {
    EXPECT_DOUBLE_EQ(net.capacity(LinkId{i}).bytes_per_s(), t.links()[i].bandwidth.bytes_per_s());
  }
}

TEST(GpuSpec, ComputeCapabilityAsANumber) {
  GpuSpec g;
  for (const auto& [text, code] : std::vector<std::pair<std::string, int>>{
           {"9.0", 90}, {"8.6", 86}, {"10.0", 100}, {"", 0}, {"9", 0}, {".0", 0}, {"x.0", 0}, {"9.x", 0}}) {
    g.compute_capability = text;
    EXPECT_EQ(compute_capability_code(g), code) << text;
  }
}

}  // namespace
}  // namespace dtsim::hw
