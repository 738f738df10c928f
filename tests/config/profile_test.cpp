#include "config/profile.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/hardware.hpp"
#include "config/simulate_loader.hpp"

namespace dtsim::config {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::path(::testing::TempDir()) / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Profile, AppliesParametersAndLinkOverrides) {
  LoadContext ctx;
  auto p = load_profile(write_temp("p.yaml",
                                   "profile: 1\n"
                                   "description: measured\n"
                                   "source: {gpu: NVIDIA H100 80GB HBM3}\n"
                                   "params:\n"
                                   "  comm.ring.Simple.base_latency: 12 us\n"
                                   "  compute.gemm.efficiency.bf16: 0.75\n"
                                   "links:\n"
                                   "  nvlink4: {efficiency: 0.7, latency: 0.25 us}\n"),
                        ctx);
  ASSERT_TRUE(p.has_value()) << ctx.diagnostics.to_string();
  workloads::StepInputs in;
  ASSERT_TRUE(apply_profile(*p, in).ok());
  EXPECT_EQ(in.comm.lat(comm::Algo::ring, comm::Protocol::simple).base, Time::us(12));
  EXPECT_DOUBLE_EQ(in.compute.efficiency(hw::DType::bf16), 0.75);
  auto cluster = load_cluster(ClusterRequest{"dgx-h100", 1, std::nullopt}, ctx);
  const auto untouched = load_cluster(ClusterRequest{"dgx-h100", 1, std::nullopt}, ctx);
  // The profile's nvlink4 efficiency (0.7) differs from the preset's pcie5 value (0.80), so a leak
  // of the override into the node's other link types would show below.
  ASSERT_NE(untouched->groups[0].node.pcie.efficiency, 0.7);
  apply_profile(*p, *cluster);
  EXPECT_DOUBLE_EQ(cluster->groups[0].node.nvlink->efficiency, 0.7);
  EXPECT_EQ(cluster->groups[0].node.nvlink->latency, Time::ns(250));
  EXPECT_DOUBLE_EQ(cluster->groups[0].node.pcie.efficiency, untouched->groups[0].node.pcie.efficiency);  // pcie5 keeps its preset value
  EXPECT_EQ(cluster->groups[0].node.pcie.latency, untouched->groups[0].node.pcie.latency);
}

TEST(Profile, BadNamesAndValuesNameTheLine) {
  LoadContext ctx;
  const std::string f = write_temp("bad.yaml",
                                   "profile: 1\n"
                                   "params:\n"
                                   "  comm.warp.speed: 9\n"
                                   "  compute.gemm.efficiency.bf16: 1.7\n"
                                   "links:\n"
                                   "  nvlink4: {efficency: 0.8}\n");
  EXPECT_FALSE(load_profile(f, ctx).has_value());
  const std::string all = ctx.diagnostics.to_string();
  EXPECT_NE(all.find(f + ":3:"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown communication parameter"), std::string::npos) << all;
  EXPECT_NE(all.find(f + ":4:"), std::string::npos) << all;
  EXPECT_NE(all.find("did you mean 'efficiency'"), std::string::npos) << all;
}

TEST(Profile, TheConfigFileAndSetOverrideTheProfile) {
  LoadContext ctx;
  auto p = load_profile(write_temp("q.yaml", "profile: 1\nparams:\n  compute.kernel_overhead: 2 us\n  compute.comm_slowdown: 0.2\n"), ctx);
  ASSERT_TRUE(p.has_value());
  const std::string yaml =
      "cluster: {node: dgx-h100, nodes: 1}\nmodel: llama2-7b\ntraining: {global_batch: 8}\n"
      "simulation: {params: {compute.kernel_overhead: 3 us}}\n";
  auto cfg = load_simulate_config("inline.yaml", {"simulation.params.compute.comm_slowdown=0.05"}, ctx, yaml, &*p);
  ASSERT_TRUE(cfg.has_value()) << ctx.diagnostics.to_string();
  EXPECT_EQ(cfg->inputs.compute.kernel_overhead, Time::us(3));   // the file wins over the profile
  EXPECT_DOUBLE_EQ(cfg->inputs.compute.comm_slowdown, 0.05);     // --set wins over both
  EXPECT_EQ(cfg->resolved.at("hw_profile").at("calibrated").size(), 2u);
}

}  // namespace
}  // namespace dtsim::config
