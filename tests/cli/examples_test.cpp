// Every bundled simulate example runs (slow: run in the warnings-as-errors pass, not under the
// sanitizers).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/cli_run.hpp"

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;

TEST(Examples, EverySimulateExampleRuns) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate")) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    const Result r = run("simulate " + entry.path().string());
    EXPECT_EQ(r.code, 0) << entry.path() << "\n" << r.out;
    EXPECT_NE(r.out.find("step time"), std::string::npos) << entry.path();
  }
  EXPECT_GE(seen, 10);
}

}  // namespace
