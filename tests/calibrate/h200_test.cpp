// The first H200 measurements (data/calibration/h200-sxm-2026-11-27, data/validation/h200-sxm-2026-11-27).
// No constant's value comes from them; which memory kinds have an SM limit was read from the
// calibration run (the limits' values are the H100's), never from the validation steps:
//  - the memory-bound kinds whose kernels the SMs bind: on the H200 (the H100's SMs and clock,
//    1.43x its bandwidth) the presets give them the H100's rate, and the harness's kernels measured
//    on the H200 agree;
//  - the validation workload's steps against the hgx-h200 presets;
//  - a profile fitted on one GPU gives that GPU the rate it measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "calibrate/fit_memory.hpp"
#include "calibrate/lsq.hpp"
#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "config/hardware.hpp"
#include "config/profile.hpp"
#include "workloads/step.hpp"

namespace dtsim::calibrate {
namespace {

using workloads::MemoryKind;

const std::string kRoot = DTSIM_SOURCE_DIR;
const std::string kMemory = kRoot + "/data/calibration/h200-sxm-2026-11-27/calibration-memory.jsonl";
const std::string kValidation = kRoot + "/data/validation/h200-sxm-2026-11-27/validation.jsonl";

hw::GpuSpec gpu_of(const std::string& node) {
  config::LoadContext ctx;
  auto cl = config::load_cluster(config::ClusterRequest{node, 1, std::nullopt}, ctx);
  EXPECT_TRUE(cl.has_value()) << ctx.diagnostics.to_string();
  return cl ? cl->groups.front().node.gpu : hw::GpuSpec{};
}

Dataset dataset(const std::string& path) {
  auto recs = read_records(path);
  EXPECT_TRUE(recs.ok()) << (recs.ok() ? "" : recs.error().message);
  Dataset d;
  if (recs.ok()) {
    auto st = add_records(d, *recs);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  }
  return d;
}

constexpr MemoryKind kSmBound[] = {MemoryKind::norm,    MemoryKind::norm_bwd,    MemoryKind::activation, MemoryKind::activation_bwd,
                                   MemoryKind::softmax, MemoryKind::softmax_bwd, MemoryKind::layout,     MemoryKind::layout_split};

// Closed form: the H100's rate is its bandwidth times the kind's efficiency (3.35 TB/s x 0.4067 for
// layer norm), and the H200 (same 132 SMs at 1,980 MHz) gets the same; a stream scales with the
// bandwidth (4.8 / 3.35); a GPU without an SM clock keeps the bandwidth fraction.
TEST(H200Model, SmBoundKindsKeepTheH100sRateStreamsScaleWithBandwidth) {
  const workloads::ComputeParams p;
  const hw::GpuSpec h100 = gpu_of("dgx-h100"), h200 = gpu_of("hgx-h200");
  const workloads::ComputeModel m100(h100, p), m200(h200, p);
  for (MemoryKind k : kSmBound) {
    const double hbm100 = 3.35e12 * p.kind_efficiency(k);
    EXPECT_NEAR(m100.memory_rate(k) / hbm100, 1.0, 1e-3) << to_string(k);
    EXPECT_NEAR(m200.memory_rate(k) / hbm100, 1.0, 1e-3) << to_string(k);
  }
  EXPECT_DOUBLE_EQ(m200.memory_rate(MemoryKind::stream) / m100.memory_rate(MemoryKind::stream), 4.8 / 3.35);
  EXPECT_DOUBLE_EQ(m200.memory_rate(MemoryKind::optimizer) / m100.memory_rate(MemoryKind::optimizer), 4.8 / 3.35);
  hw::GpuSpec unclocked = h200;
  unclocked.sm_clock_hz = 0;
  EXPECT_DOUBLE_EQ(workloads::ComputeModel(unclocked, p).memory_rate(MemoryKind::norm), 4.8e12 * p.kind_efficiency(MemoryKind::norm));
}

// The harness's memory suite on the H200 against the presets: the evidence the kinds were chosen
// by (the values are the H100's, so this checks them, not the choice). Each kernel's
// median error over all its points (`dtsim fit` prints them as the defaults' median(all)).
// Measured: layer norm 8.4% forward and 10.3% backward (the backward runs 11% faster on the H200
// than on the H100), GELU 6.4% and 4.2%, softmax 8.6% and 4.2%, the layout copies 0.3% (heads)
// and 2.9% (QKV); with the bandwidth fraction alone (no SM limit) 21.7-30.5%. Bound: 15% each,
// and every median below the bandwidth-only model's.
TEST(H200Model, HarnessKernelsBoundByTheirSmsMatchTheMeasuredH200) {
  const Dataset d = dataset(kMemory);
  hw::GpuSpec h200 = gpu_of("hgx-h200");
  const workloads::ComputeParams p;
  const workloads::ComputeModel model(h200, p);
  h200.sm_clock_hz = 0;
  const workloads::ComputeModel bandwidth_only(h200, p);
  std::map<std::string, std::vector<double>> err, err_bw;
  for (const auto& s : d.memory) {
    const auto k = memory_kernel_of(s);
    if (!k || std::find(std::begin(kSmBound), std::end(kSmBound), k->kind) == std::end(kSmBound)) continue;
    err[s.kernel].push_back(std::fabs(model.kernel_time(*k).seconds() - s.time_s) / s.time_s);
    err_bw[s.kernel].push_back(std::fabs(bandwidth_only.kernel_time(*k).seconds() - s.time_s) / s.time_s);
  }
  ASSERT_EQ(err.size(), 8u);
  for (const auto& [kernel, e] : err) {
    EXPECT_LE(median_abs(e), 0.15) << kernel;
    EXPECT_LT(median_abs(e), median_abs(err_bw[kernel])) << kernel;
  }
}

// dtsim's validation workload on the H200, predicted with the hgx-h200 presets: no constant's
// value comes from an H200, but this miss is what led to the memory suite above, where the kinds
// were chosen. Measured: median 2.2%, worst 6.7% (gpt-125m at
// micro-batch 1; before the SM limit every point was too fast, median 7.3%, worst 10.4%). Bound:
// median 4%, worst 8%.
TEST(H200Validation, PresetsPredictTheHeldOutSteps) {
  auto recs = read_records(kValidation);
  ASSERT_TRUE(recs.ok()) << recs.error().message;
  std::vector<std::string> skipped;
  auto pts = validation_points(*recs, skipped);
  ASSERT_TRUE(pts.ok()) << pts.error().message;
  ASSERT_EQ(pts->size(), 20u);
  auto rows = predict_points(*pts, ValidationOptions{});
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  const auto s = summarize(*rows);
  EXPECT_LE(s.median, 0.04);
  EXPECT_LE(s.worst, 0.08);
}

// A profile fitted on the H200 writes, for each SM-bound kind it fits, the SM limit at the rate it
// measured: the H200 then gets its measured rate (not the presets' H100 one), and the fitted
// efficiency and SM limit describe the same rate.
TEST(H200Fit, TheProfileGivesItsOwnGpuTheMeasuredRate) {
  Dataset d = dataset(kMemory);
  auto r = fit_profile(d, FitOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  config::HardwareProfile prof;
  prof.params = r->params;
  workloads::StepInputs in;
  ASSERT_TRUE(config::apply_profile(prof, in).ok());
  const workloads::ComputeModel m(gpu_of("hgx-h200"), in.compute);
  int fitted = 0;
  for (MemoryKind k : kSmBound) {
    const std::string name(to_string(k));
    if (!r->params.count("compute.memory." + name + ".efficiency")) continue;
    ++fitted;
    ASSERT_TRUE(r->params.count("compute.memory." + name + ".sm_bytes_per_cycle")) << name;
    EXPECT_NEAR(m.memory_rate(k) / (4.8e12 * in.compute.kind_efficiency(k)), 1.0, 1e-3) << name;
  }
  EXPECT_GE(fitted, 4);
}

// Where a GPU's bandwidth, not its SMs, bound a kind in the fitted data, the profile keeps the SM
// limit it had (not the measured rate, which another GPU with more bandwidth would beat): layer
// norms at 0.5 TB/s on the H200's preset (hand-made samples: 5 us + bytes / 0.5 TB/s) fit
// efficiency 0.5 / 4.8 and leave the limit at the H100's 5.213 bytes per SM and cycle, rounded
// up as written.
TEST(H200Fit, ABandwidthBoundFitKeepsTheSmLimit) {
  Dataset d;
  for (int i = 0; i < 12; ++i) {
    const double bytes = 1e6 * std::pow(2.0, i);
    d.memory.push_back(MemorySample{"layernorm_fwd", bytes, 0, 5e-6 + bytes / 0.5e12, "made:" + std::to_string(i)});
  }
  FitOptions o;
  o.gpu = "h200-sxm";
  auto r = fit_profile(d, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->params.count("compute.memory.norm.efficiency"));
  EXPECT_NEAR(std::stod(r->params.at("compute.memory.norm.efficiency")), 0.5 / 4.8, 1e-4);
  EXPECT_EQ(r->params.at("compute.memory.norm.sm_bytes_per_cycle"), "5.2130");  // 0.4067 x 3.35e12 / (132 x 1.98e9) = 5.21291
}

}  // namespace
}  // namespace dtsim::calibrate
