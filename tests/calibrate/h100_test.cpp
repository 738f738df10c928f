// The real H100 measurements (data/calibration/h100-sxm-2026-11-23, data/validation/...):
//  - `dtsim fit` on them never ends worse than dtsim's defaults on its own held-out points, class
//    by class;
//  - the shipped profile (presets/profiles/h100-sxm-2026-11-23.yaml) is what the fit gives from the
//    committed data (regenerated here, compared parameter by parameter);
//  - the kernel-profile reader and classifier on the committed Nsight Compute CSVs, and hand-made
//    bad files.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "calibrate/fit.hpp"
#include "calibrate/kernel_profile.hpp"
#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "config/profile.hpp"

namespace dtsim::calibrate {
namespace {

const std::string kRoot = DTSIM_SOURCE_DIR;
const std::string kCalibration = kRoot + "/data/calibration/h100-sxm-2026-11-23/calibration-full.jsonl";
const std::string kValidation = kRoot + "/data/validation/h100-sxm-2026-11-23/validation-full.jsonl";
const std::string kKernels125m = kRoot + "/data/validation/h100-sxm-2026-11-23/kernels/kernels-gpt-125m-b8.csv";

Expected<FitResult> fit_committed(const std::string& path) {
  auto recs = read_records(path);
  if (!recs) return recs.error();
  Dataset d;
  if (auto st = add_records(d, *recs); !st) return st.error();
  return fit_profile(d, FitOptions{});
}

TEST(H100Fit, NeverWorseThanTheDefaultsOnHeldOutMemoryKernels) {
  auto r = fit_committed(kCalibration);
  ASSERT_TRUE(r.ok()) << r.error().message;
  std::map<std::string, std::map<std::string, double>> med;  // suite -> model -> held-out median
  for (const auto& s : r->residuals) med[s.suite][s.model] = s.median;
  int memory_classes = 0;
  for (const auto& [suite, m] : med) {
    if (suite.rfind("memory.", 0) != 0) continue;
    ++memory_classes;
    ASSERT_TRUE(m.count("profile") && m.count("defaults")) << suite;
    // The fit keeps the defaults where it would do worse; a tie within 0.5 points is rounding of
    // the written values.
    EXPECT_LE(m.at("profile"), m.at("defaults") + 0.005) << suite;
  }
  EXPECT_GE(memory_classes, 10);  // copy, memcpy, triad, layer norm, GELU, softmax (each way), dropout, adam
}

TEST(H100Fit, TheShippedProfileIsTheFitOfTheCommittedData) {
  auto r = fit_committed(kCalibration);
  ASSERT_TRUE(r.ok()) << r.error().message;
  config::LoadContext ctx;
  const auto shipped = config::load_profile("h100-sxm-2026-11-23", ctx);
  ASSERT_TRUE(shipped.has_value()) << ctx.diagnostics.to_string();
  ASSERT_FALSE(r->params.empty());
  for (const auto& [name, value] : r->params) {
    const auto it = shipped->params.find(name);
    ASSERT_NE(it, shipped->params.end()) << name << " is fitted but not in the shipped profile";
    EXPECT_EQ(it->second, value) << name << ": regenerate: dtsim fit data/calibration/h100-sxm-2026-11-23/calibration-full.jsonl -o presets/profiles/h100-sxm-2026-11-23.yaml";
  }
  EXPECT_EQ(shipped->params.size(), r->params.size());
}

TEST(KernelProfile, CommittedCsvReadsAndClassifies) {
  auto ks = read_kernel_csv(kKernels125m);
  ASSERT_TRUE(ks.ok()) << ks.error().message;
  std::map<std::string, int> n;
  for (const auto& k : *ks) ++n[kernel_family_of(k.name)];
  // One warm-up and one timed step of gpt-125m (12 layers, standard attention, dropout).
  EXPECT_EQ(n["optimizer"], 2);
  EXPECT_EQ(n["softmax"], 2 * 12 * 2);         // forward and backward per layer
  EXPECT_EQ(n["cross_entropy"], 2 * 2);
  EXPECT_EQ(n["norm"], 2 * (25 + 25 * 2));     // 25 layer norms forward, two kernels each backward
  EXPECT_EQ(n["other"], 0);
  EXPECT_GT(n["gemm"], 0);
  EXPECT_GT(n["startup"], 0);
}

TEST(KernelProfile, ComparisonSumsTheHandWrittenProfile) {
  // A hand-made profile: start-up kernels, then two steps of four kernels each.
  const std::string csv =
      "id,kernel,grid,block,duration_ns\n"
      "0,\"void k_fill_random<float>(float *, unsigned long)\",\"(1, 1, 1)\",\"(256, 1, 1)\",1000000\n"
      "1,nvjet_sm90_tst_256x128_gemm,\"(2, 66, 1)\",\"(384, 1, 1)\",100000\n"
      "2,void k_softmax_fwd<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",30000\n"
      "3,void k_dropout<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",50000\n"
      "4,void k_adam<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",20000\n"
      "5,nvjet_sm90_tst_256x128_gemm,\"(2, 66, 1)\",\"(384, 1, 1)\",120000\n"
      "6,void k_softmax_fwd<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",30000\n"
      "7,void k_dropout<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",70000\n"
      "8,void k_adam<bf16>(),\"(1, 1, 1)\",\"(256, 1, 1)\",20000\n";
  auto ks = parse_kernel_csv(csv, "hand.csv");
  ASSERT_TRUE(ks.ok()) << ks.error().message;
  auto recs = read_records(kValidation);
  ASSERT_TRUE(recs.ok());
  std::vector<std::string> skipped;
  auto pts = validation_points(*recs, skipped);
  ASSERT_TRUE(pts.ok());
  auto c = compare_kernels(pts->front(), *ks, 0, ValidationOptions{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->steps, 2);
  EXPECT_EQ(c->startup_kernels, 1);
  std::map<std::string, double> m;
  for (const auto& r : c->rows) m[r.family] = r.measured_s;
  EXPECT_DOUBLE_EQ(m["gemm"], 110e-6);     // (100 + 120) us / 2 steps
  EXPECT_DOUBLE_EQ(m["dropout"], 60e-6);   // (50 + 70) / 2
  EXPECT_DOUBLE_EQ(m["softmax"], 30e-6);
  EXPECT_DOUBLE_EQ(m["optimizer"], 20e-6);
  EXPECT_NEAR(c->measured_s, 220e-6, 1e-12);
  EXPECT_GT(c->predicted_s, 0);
}

TEST(KernelProfile, BadFilesAreRefusedWithTheirLine) {
  auto not_csv = parse_kernel_csv("hello world\n1,2,3\n", "x.csv");
  ASSERT_FALSE(not_csv.ok());
  EXPECT_NE(not_csv.error().message.find("x.csv:1"), std::string::npos) << not_csv.error().message;
  auto truncated = parse_kernel_csv("id,kernel,grid,block,duration_ns\n0,k,\"(1, 1, 1)\",\"(1, 1, 1)\",5\n1,k,\"(1, 1", "t.csv");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message.find("t.csv:3"), std::string::npos) << truncated.error().message;
  auto negative = parse_kernel_csv("kernel,duration_ns\nk,-5\n", "n.csv");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().message.find("n.csv:2"), std::string::npos);
  EXPECT_NE(negative.error().message.find("duration_ns"), std::string::npos);
  EXPECT_FALSE(parse_kernel_csv("", "e.csv").ok());
  EXPECT_FALSE(parse_kernel_csv("kernel,duration_ns\n", "h.csv").ok());
  EXPECT_FALSE(read_kernel_csv(kRoot + "/no/such/file.csv").ok());
}

}  // namespace
}  // namespace dtsim::calibrate
