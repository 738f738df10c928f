// `dtsim fit` and `dtsim validate` as a user runs them: the published nccl-tests figures fitted into
// a profile that `dtsim collective --hw-profile` accepts, and bad input refused with exit code 2,
// a message naming the file and line, and nothing written.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;
using dtsim::testing::source;

std::string temp(const std::string& name) {
  const auto p = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove(p);
  return p.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kA100Log = source("data/calibration/published/all_reduce_perf-a100.log");

TEST(FitCli, PublishedLogGivesAProfileThatCollectiveAccepts) {
  const std::string profile = temp("calibrate-cli-a100-profile.yaml");
  const Result r = run("fit --nccl-tests " + kA100Log + " -o " + profile);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("held-out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nccl.allreduce.8x1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("presets: gpu a100-sxm4-80g, node dgx-a100-80g"), std::string::npos) << r.out;
  ASSERT_TRUE(std::filesystem::exists(profile));
  EXPECT_FALSE(std::filesystem::exists(profile + ".check.tmp"));

  const std::string json = temp("a100-collective.json");
  const Result c = run("collective --cluster dgx-a100-80g -b 1K -e 8G --hw-profile " + profile + " --json " + json);
  ASSERT_EQ(c.code, 0) << c.out;
  const auto rows = nlohmann::json::parse(slurp(json)).at("rows");
  ASSERT_EQ(rows.size(), 24u);
  // Published (data/published/nccl-allreduce-8gpu-published.csv): 0.04 GB/s at 1 KiB, 231.58 at 8 GiB.
  EXPECT_NEAR(rows.front().at("busbw_GBps").get<double>(), 0.04, 0.01);
  EXPECT_NEAR(rows.back().at("busbw_GBps").get<double>(), 231.58, 0.02 * 231.58);
}

// A log posted without its '#  Rank' lines (data/published/nccl-tests/, 64 ranks on 8 nodes of
// H100) names no GPU: the fit says which option maps it onto dtsim, and with them runs the suite
// as 8 nodes of 8.
TEST(FitCli, LogWithoutRankLinesAsksForTheGpu) {
  // (2 nodes: the fit of 8 nodes takes minutes under the sanitizers.)
  const std::string log = source("data/published/nccl-tests/all_reduce_perf-2x-h100-ib400-default.log");
  const Result bare = run("fit --nccl-tests " + log + " -o " + temp("no-ranks.yaml"));
  ASSERT_EQ(bare.code, 0) << bare.out;
  EXPECT_NE(bare.out.find("16 ranks inferred from busbw / algbw"), std::string::npos) << bare.out;
  EXPECT_NE(bare.out.find("names no GPU"), std::string::npos) << bare.out;
  EXPECT_NE(bare.out.find("pass --gpu or --node"), std::string::npos) << bare.out;
  const Result named = run("fit --nccl-tests " + log + " --gpu h100-sxm --nodes 2 -o " + temp("named-ranks.yaml"));
  ASSERT_EQ(named.code, 0) << named.out;
  EXPECT_NE(named.out.find("nccl.allreduce.8x2"), std::string::npos) << named.out;
  EXPECT_EQ(named.out.find("names no GPU"), std::string::npos) << named.out;
}

TEST(FitCli, SameInputGivesTheSameProfile) {
  const std::string a = temp("same-a.yaml"), b = temp("same-b.yaml");
  ASSERT_EQ(run("fit --nccl-tests " + kA100Log + " -o " + a).code, 0);
  ASSERT_EQ(run("fit --nccl-tests " + kA100Log + " -o " + b).code, 0);
  EXPECT_EQ(slurp(a), slurp(b));
}

TEST(FitCli, BadInputIsRefusedWithNothingWritten) {
  const std::string profile = temp("never.yaml");
  struct Case {
    std::string name, args, expect;
  };
  const std::string malformed = temp("malformed.jsonl");
  write(malformed, R"({"schema": "dtsim-calibrate/1", "suite": "overhead", "point": "a", "params": {"what": "kernel_gpu"}, "result": {"time_s": 1e-6}})"
                   "\n{\"schema\": \"dtsim-calibrate/1\", \"suite\"\n");
  const std::string unknown = temp("unknown.jsonl");
  write(unknown, R"({"schema": "dtsim-calibrate/1", "suite": "warp-speed", "point": "a", "result": {"time_s": 1e-6}})" "\n");
  const std::string empty = temp("empty.jsonl");
  write(empty, "");
  const std::string norows = temp("all_reduce_perf.log");
  write(norows, "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592\n# Avg bus bandwidth    : 0\n");
  const std::vector<Case> cases{
      {"malformed JSONL", malformed + " -o " + profile, malformed + ":2:"},
      {"unknown suite", unknown + " -o " + profile, unknown + ":1: unknown suite 'warp-speed'"},
      {"empty input", empty + " -o " + profile, "no records"},
      {"log without rows", "--nccl-tests " + norows + " -o " + profile, "no nccl-tests data rows"},
      {"no input", "-o " + profile, "nothing to fit"},
      {"unwritable profile", "--nccl-tests " + kA100Log + " -o /nonexistent-dtsim-dir/p.yaml", "/nonexistent-dtsim-dir/p.yaml"},
      {"unknown algorithm", "--nccl-tests " + kA100Log + " --algo warp -o " + profile, "--algo"},
      {"missing file", temp("missing.jsonl") + " -o " + profile, "cannot open"},
  };
  for (const auto& c : cases) {
    const Result r = run("fit " + c.args);
    EXPECT_EQ(r.code, 2) << c.name << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << "\n" << r.out;
    EXPECT_FALSE(std::filesystem::exists(profile)) << c.name;
  }
}

TEST(ValidateCli, ComparesAndWritesTables) {
  const std::string csv = temp("validation.csv"), json = temp("validation.json");
  const Result r = run("validate " + source("tests/calibrate/data/validate-fixture.jsonl") + " --csv " + csv + " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("MAPE"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out of memory"), std::string::npos) << r.out;  // the failed point is listed
  EXPECT_NE(slurp(csv).find("gpt-tiny/seq128/mb4/gpus1"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(slurp(json)).at("summary").at("points"), 2);
}

TEST(ValidateCli, BadInputIsRefused) {
  const std::string calib = temp("calib.jsonl");
  write(calib, R"({"schema": "dtsim-calibrate/1", "suite": "overhead", "point": "a", "params": {"what": "kernel_gpu"}, "result": {"time_s": 1e-6}})" "\n");
  const Result r = run("validate " + calib);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("dtsim fit"), std::string::npos) << r.out;
  const Result none = run("validate");
  EXPECT_EQ(none.code, 2) << none.out;
  const Result prof = run("validate " + source("tests/calibrate/data/validate-fixture.jsonl") + " --hw-profile " + temp("nope.yaml"));
  EXPECT_EQ(prof.code, 2) << prof.out;
}

}  // namespace

namespace {

int sh_status(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const std::string kH100Validation = source("data/validation/h100-sxm-2026-11-23/validation-full.jsonl");
const std::string kH100Kernels = source("data/validation/h100-sxm-2026-11-23/kernels/kernels-gpt-125m-b8.csv");

TEST(ValidateCli, ShippedProfileByNameKernelTableAndReport) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "validate-report").string();
  std::filesystem::remove_all(dir);
  const Result r = run("validate " + kH100Validation + " --hw-profile h100-sxm-2026-11-23 --kernels " + kH100Kernels +
                       " --point gpt-125m/seq1024/mb8/gpus1 --report " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("hardware profile h100-sxm-2026-11-23"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("27 points"), std::string::npos) << r.out;
  for (const char* family : {"gemm", "dropout", "softmax", "cross_entropy", "optimizer", "norm", "copy"}) {
    EXPECT_NE(r.out.find(std::string("\n") + family + " "), std::string::npos) << family << " missing from\n" << r.out;
  }
  const std::string html = slurp(dir + "/report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Kernels of one step of gpt-125m/seq1024/mb8/gpus1"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  const auto doc = nlohmann::json::parse(slurp(dir + "/validation.json"));
  EXPECT_EQ(doc["rows"].size(), 27u);
  EXPECT_TRUE(doc["kernels"].is_object());

  // Rendered offline by headless Chromium into a non-trivial picture.
  bool have_chromium = false;
  std::string browser;
  for (const char* c : {"chromium", "chromium-browser", "google-chrome"}) {
    if (!have_chromium && sh_status(std::string("command -v ") + c + " > /dev/null 2>&1") == 0) {
      have_chromium = true;
      browser = c;
    }
  }
  if (!have_chromium) GTEST_SKIP() << "chromium is not installed (scripts/deps --test installs it)";
  const std::string png = dir + "/render.png", profile = (std::filesystem::path(::testing::TempDir()) / "validate-chromium").string();
  std::filesystem::remove_all(profile);
  sh_status(browser + " --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-component-update"
                      " --disable-sync --disable-default-apps --disable-extensions --user-data-dir=" + profile +
            " --window-size=1200,1600 --screenshot=" + png + " file://" + dir + "/report.html > " + dir + "/chromium.log 2>&1");
  ASSERT_TRUE(std::filesystem::exists(png)) << slurp(dir + "/chromium.log");
  EXPECT_GT(std::filesystem::file_size(png), 30'000u) << "a chart and two tables compress to more than a blank page";
}

TEST(ValidateCli, KernelProfileProblemsAreRefused) {
  const Result no_point = run("validate " + kH100Validation + " --kernels " + kH100Kernels);
  EXPECT_EQ(no_point.code, 2) << no_point.out;
  EXPECT_NE(no_point.out.find("--point"), std::string::npos) << no_point.out;
  const Result bad_point = run("validate " + kH100Validation + " --kernels " + kH100Kernels + " --point gpt-9b");
  EXPECT_EQ(bad_point.code, 2);
  EXPECT_NE(bad_point.out.find("gpt-9b"), std::string::npos) << bad_point.out;
  const std::string bad = temp("bad-kernels.csv");
  write(bad, "id,kernel,grid,block,duration_ns\n0,k,a,b,12\n1,k,a,b,oops\n");
  const Result bad_csv = run("validate " + kH100Validation + " --kernels " + bad + " --point gpt-125m/seq1024/mb8/gpus1");
  EXPECT_EQ(bad_csv.code, 2);
  EXPECT_NE(bad_csv.out.find(bad + ":3"), std::string::npos) << bad_csv.out;
  const Result bad_profile = run("validate " + kH100Validation + " --hw-profile h100-sxm-2026");
  EXPECT_EQ(bad_profile.code, 2);
  EXPECT_NE(bad_profile.out.find("h100-sxm-2026-11-23"), std::string::npos) << bad_profile.out;
}

}  // namespace
