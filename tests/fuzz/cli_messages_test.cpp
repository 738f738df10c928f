// Messages the command line prints after loading (not the loader's own), found by the issue-15
// mutation run: each must name the configuration file and line it is about.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/cli_run.hpp"

namespace {

namespace fs = std::filesystem;

using dtsim::testing::Result;
using dtsim::testing::run;

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p;
}

TEST(FuzzCliMessages, AMissingTraceIsReportedAtTheConfigurationsModelTraceLine) {
  const fs::path cfg = write("dtsim-cli-missing-trace.yaml", "cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\n"
                                                             "model: {trace: no-such-trace.json}\n");
  const Result r = run("simulate " + cfg.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(cfg.string() + ":2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.trace: "), std::string::npos) << r.out;
  fs::remove(cfg);
}

TEST(FuzzCliMessages, AnUnknownClusterNameIsReportedAtTheConfigurationsLine) {
  const fs::path cfg = write("dtsim-cli-unknown-cluster.yaml", "cluster: 0.5\nmodel: gpt2-124m\ntraining: {global_batch: 8}\n");
  const Result r = run("simulate " + cfg.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(cfg.string() + ":1:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--cluster"), std::string::npos) << r.out;
  fs::remove(cfg);
}

TEST(FuzzCliMessages, ATracedStepWhoseDpDoesNotFitTheClusterNamesTheConfiguration) {
  // The trace is the test suite's small one; dp 64 on one 8-GPU node is refused by the replay.
  const fs::path cfg = write("dtsim-cli-trace-dp.yaml", "cluster: {node: dgx-h100, nodes: 1}\n"
                                                         "model: {trace: " DTSIM_SOURCE_DIR "/tests/trace/data/small.json}\n"
                                                         "parallel: {dp: 64}\n");
  const Result r = run("simulate " + cfg.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(cfg.string() + ":2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parallel.dp: data-parallel size 64"), std::string::npos) << r.out;
  fs::remove(cfg);
}

TEST(FuzzCliMessages, TraceTimesBeyondWhatNanosecondsHoldAreRefusedNotOverflowed) {
  // Before: `ts` and `dur` were multiplied into int64 nanoseconds unchecked (UBSan: signed overflow).
  const std::string dir = DTSIM_SOURCE_DIR "/tests/fuzz/regressions/trace/";
  const Result dur = run("trace summary " + dir + "mutation-huge-dur.json");
  EXPECT_NE(dur.code, 0) << dur.out;
  EXPECT_NE(dur.out.find("mutation-huge-dur.json: event 1: 'dur' of 99999999999999999999 us is beyond"), std::string::npos) << dur.out;
  const Result ts = run("trace summary " + dir + "mutation-huge-ts.json");
  EXPECT_NE(ts.code, 0) << ts.out;
  EXPECT_NE(ts.out.find("mutation-huge-ts.json: event 1: 'ts' of 9223372036854775807 us is beyond"), std::string::npos) << ts.out;
}

TEST(FuzzCliMessages, AnInfiniteTimeInAnNcclTestsLogIsRefusedAtItsLineNotACrash) {
  // Before: from_chars read "inf", and `dtsim fit --nccl-tests` died of a segmentation fault.
  const std::string log = DTSIM_SOURCE_DIR "/tests/fuzz/regressions/nccl_tests/all_reduce_perf-inf-time.log";
  const fs::path out = fs::temp_directory_path() / "dtsim-cli-inf-time.yaml";
  const Result r = run("fit --nccl-tests " + log + " -o " + out.string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("all_reduce_perf-inf-time.log:24: cannot read this nccl-tests row (time, algbw, busbw and #wrong must be finite"),
            std::string::npos)
      << r.out;
  fs::remove(out);
}

TEST(FuzzCliMessages, ANodeFileWithTwoSocketsAndNoInterconnectIsRefusedInThatFile) {
  const fs::path node = write("dtsim-cli-node-no-upi.yaml", "name: two-socket\ngpu: h100-sxm\ngpus: 1\ncpus: 2\n"
                                                            "pcie: {link: pcie5-x16, switches: [{cpu: 0, gpus: [0], nics: []}]}\n");
  const Result r = run("simulate " DTSIM_SOURCE_DIR "/examples/simulate/gpt2-single-gpu.yaml --set cluster.node=" + node.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(node.string() + ":4:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 CPU sockets need a cpu_interconnect link"), std::string::npos) << r.out;
  fs::remove(node);
}

TEST(FuzzCliMessages, APlanWhosePricesAreAListIsRefusedAtItsLineNotAtSet) {
  std::ifstream in(DTSIM_SOURCE_DIR "/examples/plans/gpt3-6.7b-small-cluster.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("prices: {currency: USD}");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 23, "prices: [1]");
  const fs::path plan = write("dtsim-cli-plan-prices.yaml", text);
  const Result r = run("plan -j 1 " + plan.string());
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(plan.string() + ":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prices: expected a mapping"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--set"), std::string::npos) << r.out;
  fs::remove(plan);
}

}  // namespace
