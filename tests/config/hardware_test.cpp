#include "config/hardware.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/presets.hpp"
#include "hw/topology.hpp"

namespace dtsim::config {
namespace {

// Writes `text` to a fresh file under the test's temp directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "dtsim-config-test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

std::optional<hw::ClusterSpec> load(const std::string& name, LoadContext& ctx, std::optional<int> nodes = std::nullopt) {
  return load_cluster(ClusterRequest{name, nodes, std::nullopt}, ctx);
}

TEST(Presets, EveryNodePresetLoadsAndBuildsATwoNodeCluster) {
  const auto nodes = preset_names("nodes");
  ASSERT_GE(nodes.size(), 7u);
  for (const auto& name : nodes) {
    LoadContext ctx;
    auto spec = load(name, ctx, 2);
    ASSERT_TRUE(spec.has_value()) << name << "\n" << ctx.diagnostics.to_string();
    auto topo = hw::Topology::build(*spec);
    ASSERT_TRUE(topo.ok()) << name << ": " << topo.error().to_string();
    EXPECT_EQ(topo->gpus(), 2 * spec->groups[0].node.gpus) << name;
  }
}

TEST(Presets, EveryGpuPresetLoads) {
  const auto gpus = preset_names("gpus");
  ASSERT_GE(gpus.size(), 5u);
  for (const auto& name : gpus) {
    LoadContext ctx;
    YAML::Node doc(YAML::NodeType::Map);
    doc["gpu"] = name;
    MapReader r(doc, "", "test", ctx);
    HardwareLoader hl(ctx);
    auto g = hl.gpu(r, "gpu");
    ASSERT_TRUE(g.has_value()) << name << "\n" << ctx.diagnostics.to_string();
    EXPECT_EQ(g->name, name);
    EXPECT_GT(g->memory.count(), 0);
    EXPECT_FALSE(g->peak.empty());
  }
}

TEST(Presets, DatasheetFiguresSurviveParsing) {
  // Spot checks against the H100 SXM datasheet: 989.4 dense BF16 TFLOP/s, 3.35 TB/s, 132 SMs,
  // 18 NVLink 4 links of 25 GB/s per direction = 450 GB/s per GPU.
  LoadContext ctx;
  auto spec = load("dgx-h100", ctx, 1);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  const hw::NodeSpec& n = spec->groups[0].node;
  EXPECT_DOUBLE_EQ(n.gpu.peak.at(hw::DType::bf16).TFLOPs(), 989.4);
  EXPECT_DOUBLE_EQ(n.gpu.memory_bandwidth.bytes_per_s(), 3.35e12);
  EXPECT_EQ(n.gpu.sms, 132);
  EXPECT_DOUBLE_EQ(n.gpu.sm_clock_hz, 1.98e9);
  EXPECT_DOUBLE_EQ(n.nvlink->bandwidth.GBps() * n.nvlink_links_per_gpu, 450.0);
  EXPECT_DOUBLE_EQ(n.nic->bandwidth.GBps(), 50.0);  // 400 Gb/s
  EXPECT_EQ(n.reference_fabric->kind, hw::FabricKind::rail_optimized);
}

TEST(Presets, AliasesResolve) {
  LoadContext ctx;
  const std::string f = write_temp("alias.yaml", "node: dgx-a100-80g\nnodes: 2\nfabric: {kind: fat-tree, nic: hdr-200, nics_per_node: 8}\n");
  auto spec = load(f, ctx);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  EXPECT_EQ(spec->fabric.nic->name, "ib-hdr");
  EXPECT_EQ(spec->groups[0].count, 2);
  EXPECT_EQ(spec->fabric.radix, 40);  // inherited from the node's reference fabric
}

TEST(BadInput, MalformedYamlNamesFileAndLine) {
  LoadContext ctx;
  const std::string f = write_temp("malformed.yaml", "node: dgx-h100\nnodes: [1, 2\nfabric: {}\n");
  EXPECT_FALSE(load(f, ctx).has_value());
  ASSERT_FALSE(ctx.diagnostics.empty());
  const std::string msg = ctx.diagnostics.items()[0].to_string();
  EXPECT_NE(msg.find(f + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
  EXPECT_GT(ctx.diagnostics.items()[0].where.line, 1);
}

TEST(BadInput, UnknownPresetSuggestsTheClosest) {
  LoadContext ctx;
  EXPECT_FALSE(load("dgx-h10", ctx).has_value());
  ASSERT_EQ(ctx.diagnostics.size(), 1u);
  EXPECT_NE(ctx.diagnostics.items()[0].message.find("did you mean 'dgx-h100'"), std::string::npos)
      << ctx.diagnostics.items()[0].message;
}

TEST(BadInput, NegativeAndZeroBandwidthAreRejectedWithTheirLine) {
  const std::string text =
      "node:\n"
      "  name: bad\n"
      "  gpu: h100-sxm\n"
      "  gpus: 2\n"
      "  pcie:\n"
      "    link: {kind: pcie, bandwidth: -5 GB/s, latency: 1 us}\n"
      "    switches: [{cpu: 0, gpus: [0, 1]}]\n"
      "  nics: {link: {kind: net, bandwidth: 0 Gb/s, latency: 1 us}, count: 0}\n";
  LoadContext ctx;
  EXPECT_FALSE(load(write_temp("negative.yaml", text), ctx).has_value());
  ASSERT_EQ(ctx.diagnostics.size(), 2u) << ctx.diagnostics.to_string();
  EXPECT_EQ(ctx.diagnostics.items()[0].where.line, 6);
  EXPECT_EQ(ctx.diagnostics.items()[0].field, "node.pcie.link.bandwidth");
  EXPECT_NE(ctx.diagnostics.items()[0].message.find("negative"), std::string::npos);
  EXPECT_EQ(ctx.diagnostics.items()[1].where.line, 8);
  EXPECT_NE(ctx.diagnostics.items()[1].message.find("must be positive"), std::string::npos);
}

TEST(BadInput, UnknownFieldGetsAHint) {
  LoadContext ctx;
  const std::string f = write_temp("typo.yaml", "node: dgx-h100\nnodes: 4\nfabric:\n  kind: fat-tree\n  radx: 32\n");
  EXPECT_FALSE(load(f, ctx).has_value());
  ASSERT_EQ(ctx.diagnostics.size(), 1u) << ctx.diagnostics.to_string();
  const auto& d = ctx.diagnostics.items()[0];
  EXPECT_EQ(d.field, "fabric.radx");
  EXPECT_EQ(d.where.line, 5);
  EXPECT_NE(d.message.find("did you mean 'radix'"), std::string::npos);
}

TEST(BadInput, DisconnectedTopologyPointsAtTheFabric) {
  const std::string text =
      "node: dgx-h100\n"
      "nodes: 4\n"
      "fabric:\n"
      "  kind: custom\n"
      "  switches: [a, b]\n"
      "  attach:\n"
      "    - {nodes: 0-1, switch: a}\n"
      "    - {nodes: 2-3, switch: b}\n";
  LoadContext ctx;
  const std::string f = write_temp("disconnected.yaml", text);
  auto spec = load(f, ctx);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(*spec);
  ASSERT_FALSE(topo.ok());
  ctx.report(topo.error());
  const auto& d = ctx.diagnostics.items().at(0);
  EXPECT_EQ(d.where.file, f);
  EXPECT_EQ(d.where.line, 3);  // the fabric: key
  EXPECT_NE(d.message.find("disconnected"), std::string::npos);
}

TEST(BadInput, NodeErrorsPointIntoTheNodeFile) {
  const std::string node_file = write_temp("node.yaml",
                                           "name: broken\n"
                                           "gpu: h100-sxm\n"
                                           "gpus: 4\n"
                                           "pcie:\n"
                                           "  link: pcie5-x16\n"
                                           "  switches:\n"
                                           "    - {cpu: 0, gpus: [0, 1, 2]}\n");
  LoadContext ctx;
  const std::string f = write_temp("uses-node.yaml", "node: " + node_file + "\n");
  auto spec = load(f, ctx);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(*spec);
  ASSERT_FALSE(topo.ok());
  ctx.report(topo.error());
  const auto& d = ctx.diagnostics.items().at(0);
  EXPECT_EQ(d.where.file, node_file);
  EXPECT_EQ(d.where.line, 6);
  EXPECT_NE(d.message.find("GPU 3"), std::string::npos) << d.to_string();
}

// The host CPU's maker sets NCCL's network post cost and LL ceiling across nodes: the DGX A100
// preset says AMD (EPYC 7742), the DGX H100 preset Intel (Xeon 8480C); a maker dtsim does not know
// is refused at its line.
TEST(BadInput, CpuVendorIsIntelAmdOrOther) {
  LoadContext ctx;
  auto a100 = load_cluster(ClusterRequest{"dgx-a100-80g", 2, std::nullopt}, ctx);
  auto h100 = load_cluster(ClusterRequest{"dgx-h100", 2, std::nullopt}, ctx);
  ASSERT_TRUE(a100.has_value() && h100.has_value()) << ctx.diagnostics.to_string();
  EXPECT_EQ(a100->groups.at(0).node.cpu_vendor, hw::CpuVendor::amd);
  EXPECT_EQ(h100->groups.at(0).node.cpu_vendor, hw::CpuVendor::intel);
  const std::string node_file = write_temp("vendor.yaml",
                                           "name: odd-cpu\n"
                                           "gpu: h100-sxm\n"
                                           "gpus: 1\n"
                                           "cpu_vendor: via\n"
                                           "pcie: {link: pcie5-x16, switches: [{cpu: 0, gpus: [0]}]}\n");
  LoadContext bad;
  const std::string f = write_temp("uses-vendor.yaml", "node: " + node_file + "\n");
  EXPECT_FALSE(load(f, bad).has_value());
  ASSERT_EQ(bad.diagnostics.size(), 1u) << bad.diagnostics.to_string();
  const auto& d = bad.diagnostics.items().at(0);
  EXPECT_EQ(d.where.file, node_file);
  EXPECT_EQ(d.where.line, 4);
  EXPECT_NE(d.message.find("unknown CPU vendor 'via'"), std::string::npos) << d.to_string();
}

// A one-GPU node file whose GPU ends with `line` (line 8 of the file).
std::string node_with_gpu_line(const std::string& line) {
  return "name: one-gpu\n"
         "gpus: 1\n"
         "gpu:\n"
         "  name: g\n"
         "  peak: {bf16: 100 TFLOP/s}\n"
         "  memory: {capacity: 80 GiB, bandwidth: 3 TB/s}\n"
         "  sms: 100\n"
         "  " + line + "\n"
         "pcie: {link: pcie5-x16, switches: [{cpu: 0, gpus: [0]}]}\n";
}

// The GPU of a cluster of that node (a default GPU, with a failure, if it does not load).
hw::GpuSpec gpu_with(const std::string& line) {
  LoadContext ctx;
  // Named after the test: ctest runs each test in its own process, in parallel.
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  auto c = load(write_temp("uses-good-gpu-" + test + ".yaml", "node: " + write_temp("good-gpu-" + test + ".yaml", node_with_gpu_line(line)) + "\n"), ctx);
  if (!c.has_value()) {
    ADD_FAILURE() << line << ": " << ctx.diagnostics.to_string();
    return {};
  }
  return c->groups.at(0).node.gpu;
}

// Loads a cluster of that node with `field: value` and expects one error, at the node file's line
// 8 and that field, saying `says`.
void expect_gpu_field_refused(const std::string& field, const std::string& value, const std::string& says) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string node_file = write_temp(field + "-bad-" + test + ".yaml", node_with_gpu_line(field + ": " + value));
  LoadContext bad;
  EXPECT_FALSE(load(write_temp("uses-bad-" + field + "-" + test + ".yaml", "node: " + node_file + "\n"), bad).has_value()) << value;
  ASSERT_EQ(bad.diagnostics.size(), 1u) << bad.diagnostics.to_string();
  const auto& d = bad.diagnostics.items().at(0);
  EXPECT_EQ(d.where.file, node_file);
  EXPECT_EQ(d.where.line, 8) << value;
  EXPECT_NE(d.field.find(field), std::string::npos) << d.to_string();
  EXPECT_NE(d.message.find(says), std::string::npos) << d.to_string();
}

// The GPU's SM clock: a clock with its unit, within what a GPU runs at; refused at its line.
TEST(BadInput, SmClockNeedsAUnitAndAGpusRange) {
  EXPECT_DOUBLE_EQ(gpu_with("sm_clock: 1.5 GHz").sm_clock_hz, 1.5e9);
  expect_gpu_field_refused("sm_clock", "fast", "does not start with a number");
  expect_gpu_field_refused("sm_clock", "1980", "has no unit");
  expect_gpu_field_refused("sm_clock", "1980 MHZ", "unknown frequency unit 'MHZ'");
  expect_gpu_field_refused("sm_clock", "50 GHz", "100 MHz to 10 GHz");
}

// The GPU's TDP: a power with its unit (sim/units' parser, as every other quantity); refused at its
// line. "inf W" used to pass a hand-written parser.
TEST(BadInput, TdpNeedsAFinitePowerWithAUnit) {
  EXPECT_DOUBLE_EQ(gpu_with("tdp: 1.2 kW").tdp_watts, 1200.0);
  expect_gpu_field_refused("tdp", "inf W", "not a finite power");
  expect_gpu_field_refused("tdp", "700", "has no unit");
  expect_gpu_field_refused("tdp", "-700 W", "is negative");
  expect_gpu_field_refused("tdp", "700 w", "unknown power unit 'w'");
  expect_gpu_field_refused("tdp", "30 MW", "1 W to 10 kW");
}

// InfiniBand NIC types say they route adaptively (presets/links.yaml); RoCE types do not; the
// cluster's fabric.routing wins over either; a wrong value is refused at its line.
TEST(Presets, RoutingFollowsTheNicTypeUnlessTheFabricSaysOtherwise) {
  LoadContext ctx;
  auto ib = load_cluster(ClusterRequest{"dgx-h100", 2, std::nullopt}, ctx);
  const std::string roce = write_temp("roce.yaml", "node: dgx-h100\nnodes: 2\nfabric: {nic: roce-400}\n");
  const std::string fixed = write_temp("static.yaml", "node: dgx-h100\nnodes: 2\nfabric: {routing: static}\n");
  auto r = load(roce, ctx);
  auto s = load(fixed, ctx);
  ASSERT_TRUE(ib && r && s) << ctx.diagnostics.to_string();
  EXPECT_TRUE(ib->groups.at(0).node.nic->adaptive_routing);
  EXPECT_FALSE(ib->fabric.routing.has_value());
  EXPECT_FALSE(r->fabric.nic->adaptive_routing);
  EXPECT_EQ(s->fabric.routing, hw::FabricRouting::static_paths);
  EXPECT_NE(hw::Topology::build(*ib)->summary().find("adaptive routing"), std::string::npos);
  EXPECT_NE(hw::Topology::build(*r)->summary().find("static routing"), std::string::npos);
  EXPECT_NE(hw::Topology::build(*s)->summary().find("static routing"), std::string::npos);
  const std::string hashed = write_temp("ecmp.yaml", "node: dgx-h100\nnodes: 2\nfabric: {nic: roce-400, routing: ecmp}\n");
  auto e = load(hashed, ctx);
  ASSERT_TRUE(e) << ctx.diagnostics.to_string();
  EXPECT_EQ(e->fabric.routing, hw::FabricRouting::ecmp);
  EXPECT_NE(hw::Topology::build(*e)->summary().find("ECMP (a hashed path per connection)"), std::string::npos);

  LoadContext bad;
  const std::string f = write_temp("routing.yaml", "node: dgx-h100\nnodes: 2\nfabric:\n  routing: spray\n");
  EXPECT_FALSE(load(f, bad).has_value());
  ASSERT_EQ(bad.diagnostics.size(), 1u) << bad.diagnostics.to_string();
  const auto& d = bad.diagnostics.items().at(0);
  EXPECT_EQ(d.where.line, 4);
  EXPECT_NE(d.message.find("unknown routing 'spray' (use adaptive, static or ecmp)"), std::string::npos) << d.to_string();

  LoadContext wrong_kind;
  const std::string g = write_temp("ar-pcie.yaml",
                                   "node: dgx-h100\nnodes: 2\nfabric:\n  link: {kind: pcie, bandwidth: 64 GB/s, latency: 1 us,\n"
                                   "         adaptive_routing: true}\n");
  EXPECT_FALSE(load(g, wrong_kind).has_value());
  ASSERT_EQ(wrong_kind.diagnostics.size(), 1u) << wrong_kind.diagnostics.to_string();
  EXPECT_EQ(wrong_kind.diagnostics.items().at(0).where.line, 5);
  EXPECT_NE(wrong_kind.diagnostics.items().at(0).message.find("applies to NIC (kind: net) link types"), std::string::npos)
      << wrong_kind.diagnostics.to_string();
}

TEST(BadInput, AllProblemsOfAFileAreReportedTogether) {
  LoadContext ctx;
  const std::string f = write_temp("many.yaml", "node: dgx-h100\nnodes: -3\ngpus_per_node: lots\nfabric: {kind: torus}\n");
  EXPECT_FALSE(load(f, ctx).has_value());
  EXPECT_EQ(ctx.diagnostics.size(), 3u) << ctx.diagnostics.to_string();
}

}  // namespace
}  // namespace dtsim::config
