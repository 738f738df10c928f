// Replays every file of tests/fuzz/regressions/<target>/ through that target's fuzz entry (the
// same function the libFuzzer binary calls), so that a crash found once stays fixed in every
// build, GCC's and the sanitizer run's included. Also runs each target's seed corpus once.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/entries.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files of a folder, sorted (a fixed order).
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path kRegressions = fs::path(DTSIM_SOURCE_DIR) / "tests/fuzz/regressions";

TEST(FuzzRegressions, EveryFolderNamesATarget) {
  for (const auto& e : fs::directory_iterator(kRegressions)) {
    if (!e.is_directory()) continue;
    EXPECT_NE(dtsim::fuzz::find_target(e.path().filename().string()), nullptr) << e.path();
  }
}

class Replay : public ::testing::TestWithParam<std::string> {};

TEST_P(Replay, RegressionFilesRunWithoutCrashing) {
  const dtsim::fuzz::Target* t = dtsim::fuzz::find_target(GetParam());
  ASSERT_NE(t, nullptr);
  const auto files = files_in(kRegressions / GetParam());
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    t->run(slurp(f));  // a crash or an abort fails the test (and names the file on stderr)
  }
  RecordProperty("files", static_cast<int>(files.size()));
}

std::vector<std::string> target_names() {
  std::vector<std::string> names;
  for (const auto& t : dtsim::fuzz::targets()) names.emplace_back(t.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fuzz, Replay, ::testing::ValuesIn(target_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
