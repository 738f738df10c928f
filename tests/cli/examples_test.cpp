// Every bundled simulate example runs (slow: run in the warnings-as-errors pass, not under the
// sanitizers).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>

namespace {

TEST(Examples, EverySimulateExampleRuns) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate")) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    const std::string cmd = std::string(DTSIM_BINARY) + " simulate " + entry.path().string() + " 2>&1";
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    std::array<char, 4096> buf{};
    while (p && std::fgets(buf.data(), buf.size(), p)) out += buf.data();
    const int status = p ? pclose(p) : -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << entry.path() << "\n" << out;
    EXPECT_NE(out.find("step time"), std::string::npos) << entry.path();
  }
  EXPECT_GE(seen, 10);
}

}  // namespace
