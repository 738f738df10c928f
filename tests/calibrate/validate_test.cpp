// `dtsim validate`'s comparison: each measured point of dtsim-validate must be simulated exactly as
// the hand-written equivalent `dtsim simulate` configuration (tests/calibrate/data/), and the error
// is (predicted - measured) / measured. The "measured" times in validate-fixture.jsonl are
// synthetic test fixtures, not measurements.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "calibrate/validate.hpp"
#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "workloads/step.hpp"

namespace dtsim::calibrate {
namespace {

std::string data(const std::string& name) { return std::string(DTSIM_SOURCE_DIR) + "/tests/calibrate/data/" + name; }

double simulate(const std::string& config, const config::HardwareProfile* profile = nullptr) {
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(config, {}, ctx, std::nullopt, profile);
  EXPECT_TRUE(cfg.has_value()) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(cfg->cluster);
  auto res = workloads::simulate_step(*topo, cfg->inputs);
  EXPECT_TRUE(res.ok());
  return res->step_time_s;
}

std::vector<ValidationPoint> fixture_points(std::vector<std::string>& skipped) {
  auto recs = read_records(data("validate-fixture.jsonl"));
  EXPECT_TRUE(recs.ok()) << recs.error().message;
  auto pts = validation_points(*recs, skipped);
  EXPECT_TRUE(pts.ok()) << pts.error().message;
  return *pts;
}

TEST(Validate, PredictsLikeTheEquivalentSimulateConfiguration) {
  std::vector<std::string> skipped;
  const auto pts = fixture_points(skipped);
  ASSERT_EQ(pts.size(), 2u);
  ASSERT_EQ(skipped.size(), 1u);  // the out-of-memory point
  EXPECT_NE(skipped[0].find("out of memory"), std::string::npos);
  auto rows = predict_points(pts, ValidationOptions{});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  const double one = simulate(data("validate-equivalent-1gpu.yaml"));
  const double two = simulate(data("validate-equivalent-2gpu.yaml"));
  EXPECT_EQ((*rows)[0].node, "dgx-h100");
  EXPECT_DOUBLE_EQ((*rows)[0].predicted_s, one);
  EXPECT_DOUBLE_EQ((*rows)[1].predicted_s, two);
  EXPECT_DOUBLE_EQ((*rows)[0].error, (one - 0.002) / 0.002);
  EXPECT_DOUBLE_EQ((*rows)[1].error, (two - 0.003) / 0.003);
  const ValidationSummary s = summarize(*rows);
  EXPECT_EQ(s.points, 2);
  EXPECT_DOUBLE_EQ(s.mape, 0.5 * (std::fabs((*rows)[0].error) + std::fabs((*rows)[1].error)));
  EXPECT_DOUBLE_EQ(s.worst, std::max(std::fabs((*rows)[0].error), std::fabs((*rows)[1].error)));
  // The table and CSV carry every point.
  const std::string csv = validation_csv(*rows);
  EXPECT_NE(csv.find("gpt-tiny/seq128/mb4/gpus2,gpt-tiny,128,4,8,2,dgx-h100"), std::string::npos) << csv;
  EXPECT_NE(validation_table(*rows).find("MAPE"), std::string::npos);
  EXPECT_EQ(validation_json(*rows, "")["summary"]["points"], 2);
}

TEST(Validate, AProfileChangesThePredictionAsItChangesSimulate) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "slow-kernels.yaml").string();
  {
    std::ofstream f(path);
    f << "profile: 1\nparams:\n  compute.kernel_overhead: 20 us\n  compute.memory.efficiency: 0.5\n";
  }
  config::LoadContext ctx;
  auto profile = config::load_profile(path, ctx);
  ASSERT_TRUE(profile.has_value()) << ctx.diagnostics.to_string();
  std::vector<std::string> skipped;
  const auto pts = fixture_points(skipped);
  ValidationOptions o;
  o.profile = &*profile;
  auto rows = predict_points(pts, o);
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const double slow = simulate(data("validate-equivalent-1gpu.yaml"), &*profile);
  EXPECT_DOUBLE_EQ((*rows)[0].predicted_s, slow);
  EXPECT_GT(slow, simulate(data("validate-equivalent-1gpu.yaml")));
}

TEST(Validate, BadRecordsNameFileAndLine) {
  Record r;
  r.schema = kValidateSchema;
  r.suite = "train_step";
  r.point = "p";
  r.status = "ok";
  r.file = "v.jsonl";
  r.line = 4;
  r.params = {{"model", {{"name", "x"}, {"hidden", 64}}}, {"training", nlohmann::json::object()}};
  std::vector<std::string> skipped;
  auto pts = validation_points({r}, skipped);
  ASSERT_FALSE(pts.ok());
  EXPECT_NE(pts.error().message.find("v.jsonl:4"), std::string::npos) << pts.error().message;
  EXPECT_NE(pts.error().message.find("params.model.layers"), std::string::npos) << pts.error().message;

  Record c = r;
  c.schema = kCalibrateSchema;
  c.suite = "gemm";
  auto other = validation_points({c}, skipped);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("dtsim fit"), std::string::npos);
}

TEST(Validate, UnknownDeviceNeedsANode) {
  std::vector<std::string> skipped;
  auto pts = fixture_points(skipped);
  pts[0].device_name = "Some Future GPU";
  auto rows = predict_points({pts[0]}, ValidationOptions{});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.error().message.find("--node"), std::string::npos);
  ValidationOptions o;
  o.node = "dgx-h100";
  EXPECT_TRUE(predict_points({pts[0]}, o).ok());
}

}  // namespace
}  // namespace dtsim::calibrate
