// The nccl-tests log reader: the format's variants (settings, rank lines, NCCL INFO noise, N/A,
// older logs without the root column, several tables), errors naming file:line, and the
// published figures reformatted as a log (data/calibration/published/), checked against the CSV
// they come from. The inline logs are format fixtures; their numbers are not measurements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "calibrate/log_settings.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "calibrate/published.hpp"

namespace dtsim::calibrate {
namespace {

const char* kTwoNodes = R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41234 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41235 on     node01 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  51234 on     node02 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  51235 on     node02 device  1 [0x2a] NVIDIA H100 80GB HBM3
node01:41234:41234 [0] NCCL INFO NCCL_ALGO set by environment to Ring
node01:41234:41234 [0] NCCL INFO Bootstrap : Using eth0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    40.00    0.00    0.00      0    41.00    0.00    0.00      0
          16             4     float     sum      -1    42.00    0.00    0.00      0    43.00    0.00    0.00    N/A
          32             8     float     sum      -1      N/A     N/A     N/A    N/A    44.00    0.00    0.00      2
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001
#
)";

TEST(NcclTestsLog, ReadsRanksRowsAndTrailer) {
  auto log = parse_nccl_tests(kTwoNodes, "logs/all_reduce_perf.out");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->ranks_count(), 4);
  EXPECT_EQ(log->nodes_count(), 2);
  EXPECT_EQ(log->ranks[2].host, "node02");
  EXPECT_EQ(log->ranks[3].gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(log->nthread, 1);
  EXPECT_EQ(log->ngpus, 1);
  EXPECT_EQ(log->skipped_lines, 2);  // the NCCL INFO lines
  EXPECT_EQ(log->algo_env(), "Ring");
  ASSERT_EQ(log->tables.size(), 1u);
  const auto& t = log->tables[0];
  EXPECT_EQ(t.op, CollOp::allreduce);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].bytes, 8);
  EXPECT_EQ(t.rows[0].count, 2);
  EXPECT_EQ(t.rows[0].type, "float");
  EXPECT_EQ(t.rows[0].redop, "sum");
  EXPECT_EQ(t.rows[0].root, -1);
  EXPECT_DOUBLE_EQ(*t.rows[0].out_of_place.time_us, 40.0);
  EXPECT_DOUBLE_EQ(*t.rows[0].in_place.time_us, 41.0);
  EXPECT_FALSE(t.rows[1].in_place.wrong.has_value());
  EXPECT_FALSE(t.rows[2].out_of_place.time_us.has_value());
  EXPECT_EQ(*t.rows[2].in_place.wrong, 2);
  EXPECT_EQ(t.rows[2].line, 16);
  ASSERT_TRUE(t.avg_busbw_GBps.has_value());
  EXPECT_DOUBLE_EQ(*t.avg_busbw_GBps, 0.001);
}

TEST(NcclTestsLog, OlderLogsWithoutRootAndSeveralTables) {
  const char* text = R"(# Collective test starting: all_gather_perf
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        1024           256     float    none    10.00    0.10    0.09  0e+00    10.50    0.10    0.09  0e+00
# Collective test starting: reduce_scatter_perf
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    11.00    0.09    0.08      0    12.00    0.09    0.07      0
        2048           512     float     sum      -1    11.50    0.18    0.16      0    12.50    0.16    0.14      0
)";
  auto log = parse_nccl_tests(text, "mixed.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  ASSERT_EQ(log->tables.size(), 2u);
  EXPECT_EQ(log->tables[0].op, CollOp::allgather);
  EXPECT_EQ(log->tables[1].op, CollOp::reducescatter);
  EXPECT_EQ(log->tables[0].rows[0].root, -1);
  EXPECT_EQ(log->tables[0].rows[0].redop, "none");
  EXPECT_FALSE(log->tables[0].rows[0].out_of_place.wrong.has_value());  // an error size, not a count of wrong values
  EXPECT_EQ(log->tables[1].rows.size(), 2u);
}

TEST(NcclTestsLog, GarbageRowsNameFileAndLine) {
  const std::string text = std::string("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n") +
                           "        1024           256     float     sum      -1    11.00    0.09    0.08      0    12.00    0.09    0.07      0\n" +
                           "        2048           512     float     sum      -1    fast    0.18    0.16      0    12.50    0.16    0.14      0\n";
  auto log = parse_nccl_tests(text, "bad.log");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.error().message.find("bad.log:3:"), std::string::npos) << log.error().message;

  auto short_row = parse_nccl_tests("        1024           256     float     sum\n", "short.log");
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.error().message.find("short.log:1:"), std::string::npos) << short_row.error().message;

  // A settings line with counts no nccl-tests process has (fuzz_nccl_tests: a 2^32 nThread
  // overflowed nThread x nGpus in `dtsim fit`) is refused at its line.
  auto absurd = parse_nccl_tests("9 7 o s 1 5 4 7 N/A 1 6 0 N/A\n#nThread 4294967296 nGpus 8\n", "absurd.log");
  ASSERT_FALSE(absurd.ok());
  EXPECT_NE(absurd.error().message.find("absurd.log:2: nThread 4294967296 is not a count"), std::string::npos) << absurd.error().message;

  auto none = parse_nccl_tests("# nThread 1 nGpus 8\n# Avg bus bandwidth : 1\nsrun: job 42 done\n", "empty.log");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no nccl-tests data rows"), std::string::npos) << none.error().message;
}

// NCCL_DEBUG=INFO prints "NCCL_X set by environment to V" for every variable it reads (NCCL
// misc/param.cc adds a '.' after numbers; tuning.cc's NCCL_ALGO and NCCL_PROTO lines have none).
// Every rank prints them: the first of each name is kept, in order. What dtsim models becomes an
// option (NCCL_ALGO, NCCL_PROTO, NCCL_BUFFSIZE, NCCL_P2P_LL_THRESHOLD, NCCL_NVLS_ENABLE=0); the
// rest is listed as not modelled.
TEST(NcclTestsLog, ReadsTheNcclVariablesItsInfoLinesState) {
  std::string text = kTwoNodes;
  const std::string info =
      "node01:41234:41234 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n"
      "node01:41234:41234 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 4.\n"
      "[1,1]<stdout>:node01:41235:41235 [1] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n"
      "node01:41234:41234 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"
      "node01:41234:41234 [0] NCCL INFO NCCL_PROTO set by environment to LL128,Simple\n";
  text.insert(text.find("#\n#  "), info);
  auto log = parse_nccl_tests(text, "all_reduce_perf.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(log->nccl_env, (Env{{"NCCL_ALGO", "Ring"},
                                {"NCCL_BUFFSIZE", "8388608"},
                                {"NCCL_MIN_NCHANNELS", "4"},
                                {"NCCL_NVLS_ENABLE", "0"},
                                {"NCCL_PROTO", "LL128,Simple"}}));
  const LogNcclSettings s = nccl_settings(*log);
  ASSERT_EQ(s.modelled.size(), 3u);
  EXPECT_EQ(s.modelled[0].option, "algo");
  EXPECT_EQ(s.modelled[0].value, "Ring");  // a list of names: NVLS is not among them already
  EXPECT_EQ(s.modelled[0].variable, "NCCL_ALGO=Ring, NCCL_NVLS_ENABLE=0");
  EXPECT_EQ(s.modelled[1].option, "buffsize");
  EXPECT_EQ(s.modelled[1].value, "8388608");
  EXPECT_EQ(s.modelled[2].option, "proto");
  EXPECT_EQ(s.modelled[2].value, "LL128,Simple");
  EXPECT_EQ(s.not_modelled, std::vector<std::string>{"NCCL_MIN_NCHANNELS"});
  // NCCL_NVLS_ENABLE=0 alone leaves NVLS out of NCCL's own set, and out of a '^' list.
  NcclTestsLog only;
  only.nccl_env = {{"NCCL_NVLS_ENABLE", "0"}};
  ASSERT_EQ(nccl_settings(only).modelled.size(), 1u);
  EXPECT_EQ(nccl_settings(only).modelled[0].value, "^nvls");
  only.nccl_env = {{"NCCL_ALGO", "^Tree"}, {"NCCL_NVLS_ENABLE", "0"}};
  EXPECT_EQ(nccl_settings(only).modelled[0].value, "^Tree,nvls");
  only.nccl_env = {{"NCCL_NVLS_ENABLE", "1"}};
  EXPECT_TRUE(nccl_settings(only).modelled.empty());
}

// A launcher's rank label in front of every line (Open MPI --tag-output, srun --label, MPICH
// -prepend-rank) reads as the bare log: the same ranks, rows, trailer and NCCL INFO lines.
TEST(NcclTestsLog, LauncherRankLabelsAreReadPast) {
  const auto bare = parse_nccl_tests(kTwoNodes, "all_reduce_perf.out");
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  for (const std::string label : {"[1,0]<stdout>:", "[12,103]<stdout>: ", " 0: ", "12: ", "[0] ", "[103] "}) {
    std::string text;
    std::istringstream in(kTwoNodes);
    for (std::string line; std::getline(in, line);) text += label + line + "\n";
    auto log = parse_nccl_tests(text, "all_reduce_perf.out");
    ASSERT_TRUE(log.ok()) << label << ": " << log.error().message;
    EXPECT_EQ(log->ranks_count(), 4) << label;
    EXPECT_EQ(log->nodes_count(), 2) << label;
    EXPECT_EQ(log->ranks[3].gpu, "NVIDIA H100 80GB HBM3") << label;
    EXPECT_EQ(log->algo_env(), "Ring") << label;
    EXPECT_EQ(log->skipped_lines, 2) << label;
    ASSERT_EQ(log->tables.size(), 1u) << label;
    ASSERT_EQ(log->tables[0].rows.size(), 3u) << label;
    EXPECT_EQ(log->tables[0].rows[2].bytes, 32) << label;
    EXPECT_DOUBLE_EQ(*log->tables[0].rows[1].out_of_place.time_us, 42.0) << label;
    EXPECT_EQ(*log->tables[0].rows[2].in_place.wrong, 2) << label;
    EXPECT_DOUBLE_EQ(*log->tables[0].avg_busbw_GBps, 0.001) << label;
  }
  // Open MPI's tag needs its stream name; a bracket that is not a rank label stays foreign output.
  auto odd = parse_nccl_tests(std::string("[1,0] 8 2 float sum -1 1 0 0 0 1 0 0 0\n[a] 8 2 float sum -1 1 0 0 0 1 0 0 0\n"), "odd.log");
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("no nccl-tests data rows"), std::string::npos) << odd.error().message;
}

// dtsim-calibrate's console output (calibrate/harness/nccl_suite.cpp prints nccl-tests' rows with
// these formats, between Google Benchmark's own lines) reads back as a log.
TEST(NcclTestsLog, ReadsTheHarnessConsoleOutput) {
  char buf[512];
  std::string text = "Running ./dtsim-calibrate\nRun on (16 X 2000 MHz CPU s)\n";
  for (int r = 0; r < 2; ++r) {
    std::snprintf(buf, sizeof buf, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", r, 100 + r, "gpu-node", r, "0000:18:00.0",
                  "NVIDIA H100 80GB HBM3");
    text += buf;
  }
  text += "# Collective test starting: alltoall_perf\n#  dtsim-calibrate: 2 ranks on 1 node(s), type float, 5 warm-up and 20 timed iterations\n";
  text += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  const std::string none = "     N/A     N/A     N/A    N/A";
  for (long long size : {1024LL, 2048LL}) {
    char oop[96];
    std::snprintf(oop, sizeof oop, "%8.2f %7.2f %7.2f %6lld", 20.0, 0.05, 0.03, 0LL);
    std::snprintf(buf, sizeof buf, "%12lld  %12lld  %8s  %6s  %6d  %s  %s\n", size, size / 4, "float", "none", -1, oop, none.c_str());
    text += buf;
    text += "nccl/alltoall/" + std::to_string(size / 1024) + "KiB      20.0 us   35.1 us   1 busbw_GB/s=0.03\n";
  }
  auto log = parse_nccl_tests(text, "calibrate.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->ranks_count(), 2);
  ASSERT_EQ(log->tables.size(), 1u);
  EXPECT_EQ(log->tables[0].op, CollOp::alltoall);
  ASSERT_EQ(log->tables[0].rows.size(), 2u);
  EXPECT_DOUBLE_EQ(*log->tables[0].rows[1].out_of_place.time_us, 20.0);
  EXPECT_FALSE(log->tables[0].rows[1].in_place.time_us.has_value());
}

TEST(NcclTestsLog, CollectiveFromTheName) {
  EXPECT_EQ(op_from_name("/x/all_reduce_perf.log"), CollOp::allreduce);
  EXPECT_EQ(op_from_name("reduce_scatter_perf"), CollOp::reducescatter);
  EXPECT_EQ(op_from_name("run-alltoall_perf-8n.txt"), CollOp::alltoall);
  EXPECT_EQ(op_from_name("broadcast_perf"), CollOp::broadcast);
  EXPECT_EQ(op_from_name("reduce_perf"), CollOp::reduce);
  EXPECT_EQ(op_from_name("sendrecv_perf"), CollOp::sendrecv);
  EXPECT_EQ(op_from_name("results.txt"), std::nullopt);
}

// The reformatted published logs hold exactly the published bus bandwidths, and times consistent
// with nccl-tests' definitions (busbw = size / time x 2(n-1)/n).
TEST(NcclTestsLog, PublishedReformattingMatchesTheCsv) {
  auto csv = read_published_busbw(std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-allreduce-8gpu-published.csv");
  ASSERT_TRUE(csv.ok());
  const std::map<std::string, std::string> logs{{"azure-nd-h100-v5", "all_reduce_perf-h100-nvls.log"},
                                                {"azure-nd-a100-v4", "all_reduce_perf-a100.log"}};
  for (const auto& [system, file] : logs) {
    auto log = read_nccl_tests(std::string(DTSIM_SOURCE_DIR) + "/data/calibration/published/" + file);
    ASSERT_TRUE(log.ok()) << log.error().message;
    EXPECT_EQ(log->ranks_count(), 8);
    EXPECT_EQ(log->nodes_count(), 1);
    ASSERT_EQ(log->tables.size(), 1u);
    EXPECT_EQ(log->tables[0].op, CollOp::allreduce);
    std::map<std::int64_t, double> published;
    for (const auto& r : *csv) {
      if (r.system == system) published[r.bytes] = r.busbw_GBps;
    }
    ASSERT_EQ(log->tables[0].rows.size(), published.size()) << file;
    for (const auto& row : log->tables[0].rows) {
      ASSERT_TRUE(published.count(row.bytes)) << row.bytes;
      EXPECT_DOUBLE_EQ(*row.in_place.busbw_GBps, published[row.bytes]) << file << " " << row.bytes;
      EXPECT_FALSE(row.out_of_place.time_us.has_value());
      const double busbw = busbw_GBps(CollOp::allreduce, 8, static_cast<double>(row.bytes), *row.in_place.time_us * 1e-6);
      EXPECT_NEAR(busbw, published[row.bytes], 0.005 * published[row.bytes] + 0.01) << file << " " << row.bytes;
    }
  }
}

}  // namespace
}  // namespace dtsim::calibrate
