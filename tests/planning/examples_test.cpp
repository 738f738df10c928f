// Every bundled sweep and plan example runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <utility>

#include "tests/support/cli_run.hpp"

namespace {

std::pair<int, std::string> run(const std::string& args) {
  dtsim::testing::Result r = dtsim::testing::run(args);
  return {r.code, std::move(r.out)};
}

std::vector<std::string> examples(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/examples/" + dir)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Examples, EverySweepRuns) {
  const auto files = examples("sweeps");
  EXPECT_GE(files.size(), 4u);
  for (const auto& f : files) {
    const auto [code, out] = run("sweep " + f);
    EXPECT_EQ(code, 0) << f << "\n" << out;
    EXPECT_NE(out.find("points done"), std::string::npos) << f;
    EXPECT_EQ(out.find(" error "), std::string::npos) << f << "\n" << out;
  }
}

TEST(Examples, EveryPlanRuns) {
  const auto files = examples("plans");
  EXPECT_GE(files.size(), 1u);
  for (const auto& f : files) {
    const auto [code, out] = run("plan " + f);
    EXPECT_EQ(code, 0) << f << "\n" << out;
    EXPECT_NE(out.find("recommended:"), std::string::npos) << f;
  }
}

TEST(Examples, TraceOfTheLlama2Example) {
  const std::string t = (std::filesystem::path(::testing::TempDir()) / "llama2-trace.json").string();
  const auto [code, out] = run("simulate " + std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama2-70b-tp-sp-pp.yaml --trace " + t +
                               " --trace-ranks 0-7");
  ASSERT_EQ(code, 0) << out;
  // One executor (tp 8 ranks of stage 0): bounded by the filter.
  EXPECT_LT(std::filesystem::file_size(t), 32u << 20);
}

}  // namespace
