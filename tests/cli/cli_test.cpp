// The dtsim executable as a user runs it: output, exit codes, messages for bad input, and no
// output file when the run fails.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;
using dtsim::testing::slurp;
using dtsim::testing::temp;

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(Cli, CollectivePrintsAnNcclTestsTable) {
  const Result r = run("collective --cluster dgx-h100 --nodes 2 --min 1M --max 4M");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 x dgx-h100 = 16 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rail-optimized"), std::string::npos);
  EXPECT_NE(r.out.find("busbw"), std::string::npos);
  EXPECT_NE(r.out.find("      1048576 "), std::string::npos);
  EXPECT_NE(r.out.find("      4194304 "), std::string::npos);
}

// The last column of a table row: the channels NCCL runs the collective on (by hand from NCCL's
// launch rule: a Simple ring uses bytes / (512 threads x 64) channels, at most the 24 the preset's
// node opens: 2 at 64 KiB, 24 at 1 GiB), "-" for dtsim's own all-to-all.
std::string last_field_of_row(const std::string& out, const std::string& size) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string first, last, f;
    ls >> first;
    if (first != size) continue;
    while (ls >> f) last = f;
    return last;
  }
  return "";
}

// Field `n` (from 0) of the table row for `size`: in a --compare table 6 is the algorithm/protocol.
std::string field_of_row(const std::string& out, const std::string& size, int n) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<std::string> fields;
    for (std::string f; ls >> f;) fields.push_back(f);
    if (fields.empty() || fields[0] != size) continue;
    return n < static_cast<int>(fields.size()) ? fields[static_cast<std::size_t>(n)] : "";
  }
  return "";
}

TEST(Cli, CollectiveShowsTheChannelsNcclRunsOn) {
  const std::string json = temp("channels.json");
  const Result r = run("collective --cluster dgx-a100-80g --algo ring --proto Simple --min 64K --max 1G -f 16384 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(last_field_of_row(r.out, "65536"), "2") << r.out;
  EXPECT_EQ(last_field_of_row(r.out, "1073741824"), "24") << r.out;
  EXPECT_NE(slurp(json).find("\"channels\": 24"), std::string::npos);
  // Across nodes, the channels NCCL v2.18.5 opens from the nodes' NICs (worked by hand in
  // tests/comm/split_test.cpp, docs/model.md "Channels across nodes"): 16 on A100 nodes with 8 HDR
  // NICs, 32 on H100 nodes with 8 NDR NICs; a 1 GiB Simple ring uses them all.
  const Result a100 = run("collective --cluster dgx-a100-80g --nodes 2 --algo ring --proto Simple --min 1G --max 1G");
  ASSERT_EQ(a100.code, 0) << a100.out;
  EXPECT_EQ(last_field_of_row(a100.out, "1073741824"), "16") << a100.out;
  const Result h100 = run("collective --cluster dgx-h100 --nodes 2 --algo ring --proto Simple --min 1G --max 1G");
  ASSERT_EQ(h100.code, 0) << h100.out;
  EXPECT_EQ(last_field_of_row(h100.out, "1073741824"), "32") << h100.out;
  const Result a2a = run("collective --cluster dgx-a100-80g --op alltoall --min 1M --max 1M");
  ASSERT_EQ(a2a.code, 0) << a2a.out;
  EXPECT_EQ(last_field_of_row(a2a.out, "1048576"), "-") << a2a.out;
}

TEST(Cli, JsonHasConfigAndRowsAndIsByteIdenticalAcrossRuns) {
  const std::string a = temp("collective-same-input-a.json"), b = temp("collective-same-input-b.json");
  ASSERT_EQ(run("collective --cluster dgx-a100-80g --nodes 3 --op allgather --min 8 --max 1G --json " + a).code, 0);
  ASSERT_EQ(run("collective --cluster dgx-a100-80g --nodes 3 --op allgather --min 8 --max 1G --json " + b).code, 0);
  const std::string ja = slurp(a);
  EXPECT_EQ(ja, slurp(b));
  for (const char* key : {"\"config\"", "\"rows\"", "\"op\": \"allgather\"", "\"algbw_GBps\"", "\"busbw_GBps\"", "\"time_us\"",
                          "\"count\"", "\"type\": \"float\"", "\"comm_params\""}) {
    EXPECT_NE(ja.find(key), std::string::npos) << key;
  }
}

TEST(Cli, UnknownPresetIsAClearErrorWithAHint) {
  const Result r = run("collective --cluster dgx-h1000");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown cluster or node preset 'dgx-h1000'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did you mean 'dgx-h100'"), std::string::npos) << r.out;
}

TEST(Cli, BadOptionsAreAllReportedAndNothingIsWritten) {
  const std::string out = temp("never.json");
  std::filesystem::remove(out);
  const Result r = run("collective --cluster dgx-h100 --op allsum --min 12XB --algo fastest --json " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--op: unknown collective 'allsum'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--min: '12XB' has an unknown size unit 'XB'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--algo: unknown algorithm 'fastest'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Cli, MalformedYamlNamesTheLine) {
  const std::string f = temp("broken.yaml");
  write(f, "node: dgx-h100\nnodes: 2\nfabric: {kind: fat-tree, radix: [64\n");
  const Result r = run("collective --cluster " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("malformed YAML"), std::string::npos) << r.out;
}

TEST(Cli, NegativeBandwidthNamesFileLineAndField) {
  const std::string f = temp("negative.yaml");
  write(f,
        "node: dgx-h100\n"
        "nodes: 2\n"
        "fabric:\n"
        "  kind: fat-tree\n"
        "  nic: {kind: net, bandwidth: -400 Gb/s, latency: 1 us}\n");
  const Result r = run("collective --cluster " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":5:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fabric.nic.bandwidth"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("negative"), std::string::npos) << r.out;
}

TEST(Cli, ZeroBandwidthIsRejected) {
  const std::string f = temp("zero.yaml");
  write(f, "node: dgx-h100\nnodes: 2\nfabric: {nic: {kind: net, bandwidth: 0 Gb/s, latency: 1 us}}\n");
  const Result r = run("collective --cluster " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("must be positive"), std::string::npos) << r.out;
}

TEST(Cli, BadRoutingIsRefusedAtItsLine) {
  const std::string f = temp("routing.yaml");
  write(f, "node: dgx-h100\nnodes: 2\nfabric:\n  kind: fat-tree\n  routing: spray\n");
  Result r = run("collective --cluster " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":5:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown routing 'spray' (use adaptive, static or ecmp)"), std::string::npos) << r.out;
  // A custom fabric's links are the user's: adaptive routing is refused there, pointing at the fabric.
  const std::string g = temp("custom-adaptive.yaml");
  write(g,
        "node: dgx-h100\n"
        "nodes: 2\n"
        "fabric:\n"
        "  kind: custom\n"
        "  routing: adaptive\n"
        "  switches: [sw]\n"
        "  attach: [{nodes: 0-1, switch: sw}]\n");
  r = run("collective --cluster " + g);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(g + ":"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("adaptive routing is modelled on fat-tree, clos3 and rail-optimized fabrics"), std::string::npos) << r.out;
}

TEST(Cli, DisconnectedTopologyIsAnErrorNotAHang) {
  const std::string f = temp("islands.yaml");
  write(f,
        "node: dgx-h100\n"
        "nodes: 4\n"
        "fabric:\n"
        "  kind: custom\n"
        "  switches: [east, west]\n"
        "  attach: [{nodes: 0-1, switch: east}, {nodes: 2-3, switch: west}]\n");
  const Result r = run("collective --cluster " + f);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(f + ":3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("disconnected"), std::string::npos) << r.out;
}

TEST(Cli, ImpossibleAlgorithmSaysWhatWouldWork) {
  const Result r = run("collective --cluster dgx-a100-80g --algo nvls");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--algo: nvls cannot run allreduce"), std::string::npos) << r.out;
}

// NCCL_ALGO's and NCCL_PROTO's lists: the tuner chooses among the named ones only. On two H100
// nodes NCCL's default at 1 MiB is the NVLS tree; leaving NVLS out leaves ring or tree, and
// naming Simple alone leaves its pairs.
TEST(Cli, AlgorithmAndProtocolListsRestrictTheChoice) {
  const Result def = run("collective --cluster dgx-h100 --nodes 2 --min 1M --max 1M");
  ASSERT_EQ(def.code, 0) << def.out;
  EXPECT_NE(def.out.find("nvls/Simple"), std::string::npos) << def.out;
  const Result no_nvls = run("collective --cluster dgx-h100 --nodes 2 --min 1M --max 1M --algo ^NVLS");
  ASSERT_EQ(no_nvls.code, 0) << no_nvls.out;
  EXPECT_EQ(no_nvls.out.find("nvls/"), std::string::npos) << no_nvls.out;
  const Result listed = run("collective --cluster dgx-h100 --nodes 2 --min 1M --max 1M --algo Ring,Tree --proto Simple");
  ASSERT_EQ(listed.code, 0) << listed.out;
  EXPECT_TRUE(listed.out.find("ring/Simple") != std::string::npos || listed.out.find("tree/Simple") != std::string::npos) << listed.out;
}

TEST(Cli, BadAlgorithmListsAndParametersAreRejected) {
  const Result empty = run("collective --cluster dgx-h100 --algo ring,,tree");
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.out.find("--algo: an empty algorithm name"), std::string::npos) << empty.out;
  const Result none = run("collective --cluster dgx-h100 --proto ^LL,LL128,Simple");
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.out.find("--proto: '^LL,LL128,Simple' leaves no protocol"), std::string::npos) << none.out;
  const Result typo = run("collective --cluster dgx-h100 --algo ring,trea");
  EXPECT_EQ(typo.code, 2);
  EXPECT_NE(typo.out.find("--algo: unknown algorithm 'trea'"), std::string::npos) << typo.out;
  const Result floor = run("collective --cluster dgx-h100 --set comm.tree_chunk_floor=-1K");
  EXPECT_EQ(floor.code, 2);
  EXPECT_NE(floor.out.find("tree_chunk_floor"), std::string::npos) << floor.out;
}

TEST(Cli, AbsurdSizesAreRejected) {
  const Result r = run("collective --cluster dgx-h100 --max 1P");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--max"), std::string::npos) << r.out;
  const Result r2 = run("collective --cluster dgx-h100 --nodes 0");
  EXPECT_EQ(r2.code, 2);
  EXPECT_NE(r2.out.find("count must be positive"), std::string::npos) << r2.out;
}

TEST(Cli, HugeFactorsStopAtTheMaximum) {
  const Result r = run("collective --cluster dgx-h100 --min 8 --max 8G -f 1073741824");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("     8589934592 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("             4 "), std::string::npos) << r.out;  // no wrapped-around sizes
}

TEST(Cli, ListParamsShowsSources) {
  const Result r = run("collective --list-params");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("comm.ring.Simple.base_latency"), std::string::npos);
  EXPECT_NE(r.out.find("tuning.cc"), std::string::npos);
  // Each constant names the datasets of data/registry.yaml it was derived from.
  EXPECT_NE(r.out.find("[data: azure-nd-h100-v5-allreduce]"), std::string::npos) << r.out;  // comm.nvls.latency
  EXPECT_NE(r.out.find("links.nvlink3.efficiency"), std::string::npos) << r.out;
  const Result s = run("simulate --list-params");
  ASSERT_EQ(s.code, 0);
  const auto line = s.out.find("compute.memory.efficiency");
  ASSERT_NE(line, std::string::npos);
  EXPECT_NE(s.out.substr(line, s.out.find('\n', line) - line).find("[data: azure-nd-h100-v5-hbm, azure-nd-a100-v4-hbm]"), std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("[data: none]"), std::string::npos);  // constants from NCCL's source, not data
}

TEST(Cli, SetOverridesAParameterAndRejectsUnknownOnes) {
  const Result slow = run("collective --cluster dgx-h100 --algo ring --proto Simple --min 8 --max 8 --set comm.ring.Simple.base_latency=100us");
  ASSERT_EQ(slow.code, 0) << slow.out;
  EXPECT_NE(slow.out.find(" 195.20 "), std::string::npos) << slow.out;  // 100 + 14 steps x 2 Simple slices x 3.4 us
  const Result bad = run("collective --cluster dgx-h100 --set comm.warp_speed=9");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.out.find("unknown communication parameter 'warp_speed'"), std::string::npos) << bad.out;
}

TEST(Cli, ThePeerToPeerLlThresholdMovesTheProtocolAndRefusesGarbage) {
  // 64 KiB on 8 GPUs is 8 KiB a peer: LL at NCCL's 16 KiB threshold, Simple at 4 KiB.
  const Result ll = run("collective --cluster dgx-h100 --op alltoall --min 64K --max 64K");
  ASSERT_EQ(ll.code, 0) << ll.out;
  EXPECT_NE(ll.out.find("direct/LL"), std::string::npos) << ll.out;
  const Result simple = run("collective --cluster dgx-h100 --op alltoall --min 64K --max 64K --set comm.p2p_ll_threshold=4K");
  ASSERT_EQ(simple.code, 0) << simple.out;
  EXPECT_NE(simple.out.find("direct/Simple"), std::string::npos) << simple.out;
  for (const char* v : {"-5", "lots", "16Q"}) {
    const Result bad = run(std::string("collective --cluster dgx-h100 --op alltoall --set comm.p2p_ll_threshold=") + v);
    EXPECT_EQ(bad.code, 2) << v;
    EXPECT_NE(bad.out.find("p2p_ll_threshold"), std::string::npos) << bad.out;
  }
}

TEST(Cli, ThePeerToPeerChannelLoadMovesTheChannelsAndRefusesGarbage) {
  // 1 GiB send/recv on 8 A100s: NCCL v2.18.5 spreads it over 16 of the peer's 32 channels; with
  // v2.20's rule (no limit) over all 32 (comm/p2p.hpp).
  const Result old_rule = run("collective --cluster dgx-a100-80g --op sendrecv --min 1G --max 1G");
  ASSERT_EQ(old_rule.code, 0) << old_rule.out;
  EXPECT_EQ(last_field_of_row(old_rule.out, "1073741824"), "16") << old_rule.out;
  const Result new_rule = run("collective --cluster dgx-a100-80g --op sendrecv --min 1G --max 1G --set comm.p2p.channel_load=64");
  ASSERT_EQ(new_rule.code, 0) << new_rule.out;
  EXPECT_EQ(last_field_of_row(new_rule.out, "1073741824"), "32") << new_rule.out;
  for (const char* v : {"0", "65", "four", "-4", "4.5"}) {
    const Result bad = run(std::string("collective --cluster dgx-a100-80g --op sendrecv --set comm.p2p.channel_load=") + v);
    EXPECT_EQ(bad.code, 2) << v;
    EXPECT_NE(bad.out.find("p2p.channel_load"), std::string::npos) << bad.out;
    EXPECT_EQ(bad.out.find("direct/"), std::string::npos) << bad.out;  // nothing simulated
  }
}

TEST(Cli, AnUnknownChoiceIsRefusedOnTheCommandLineAndInAProfile) {
  const Result set = run("collective --cluster dgx-h100 --min 1M --max 1M --set comm.choice=quickest");
  EXPECT_EQ(set.code, 2);
  EXPECT_NE(set.out.find("'quickest' is not a choice: nccl, fastest or fastest-on-one-node"), std::string::npos) << set.out;
  const std::string path = ::testing::TempDir() + "choice-profile.yaml";
  {
    std::ofstream f(path);
    f << "profile: 1\ndescription: bad choice\nparams:\n  comm.choice: quickest\n";
  }
  const Result prof = run("collective --cluster dgx-h100 --min 1M --max 1M --hw-profile " + path);
  EXPECT_EQ(prof.code, 2);
  EXPECT_NE(prof.out.find(path + ":4:3: params.comm.choice: 'quickest' is not a choice"), std::string::npos) << prof.out;
}

}  // namespace

namespace {

TEST(Cli, EveryBundledExampleClusterRuns) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/examples/clusters")) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    const Result r = run("collective --cluster " + entry.path().string() + " --min 1M --max 64M -f 8");
    EXPECT_EQ(r.code, 0) << entry.path() << "\n" << r.out;
    EXPECT_NE(r.out.find("busbw"), std::string::npos) << entry.path();
  }
  EXPECT_GE(seen, 5);
}

TEST(Cli, EveryClusterPresetRuns) {
  for (const char* preset : {"dgx-h100-superpod-su", "dgx-a100-superpod-su"}) {
    const Result r = run(std::string("collective --cluster ") + preset + " --min 1G --max 1G");
    EXPECT_EQ(r.code, 0) << preset << "\n" << r.out;
  }
}

}  // namespace

// dtsim collective --compare LOG: the log's own figures beside dtsim's, with the error per size.
namespace compare {

const std::string kLog = std::string(DTSIM_SOURCE_DIR) + "/data/calibration/published/all_reduce_perf-a100.log";

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(CliCompare, PrintsBothCurvesAndTheErrorPerSize) {
  const std::string dir = temp("compare-report");
  const Result r = run("collective --cluster dgx-a100-80g --compare " + kLog + " --gpus-per-thread 8 --report " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("allreduce on 8 GPUs (from rank lines; 1 node), in-place column, 8 GPUs per nccl-tests thread"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("median |error|"), std::string::npos) << r.out;
  // The CSV: one row per size of the log (24, 1 KiB to 8 GiB); the measured bus bandwidth is the
  // log's own (busbw = size / time x 2(n-1)/n), and the error is (dtsim - measured) / measured
  // bus bandwidth.
  const auto rows = csv_rows(slurp(dir + "/compare.csv"));
  ASSERT_EQ(rows.size(), 25u);
  EXPECT_EQ(rows[0][0], "bytes");
  EXPECT_EQ(rows[1][0], "1024");
  EXPECT_EQ(rows[24][0], "8589934592");
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const double bytes = std::stod(rows[i][0]), meas_us = std::stod(rows[i][1]), sim_us = std::stod(rows[i][2]);
    const double meas_bw = std::stod(rows[i][3]), sim_bw = std::stod(rows[i][4]), err = std::stod(rows[i][5]);
    EXPECT_NEAR(meas_bw, bytes / (meas_us * 1e-6) * 1e-9 * 2 * 7 / 8, 1e-3 * meas_bw) << i;
    EXPECT_NEAR(sim_bw, bytes / (sim_us * 1e-6) * 1e-9 * 2 * 7 / 8, 1e-3 * sim_bw) << i;
    // busbw is proportional to 1 / time, so the error is measured time / simulated time - 1.
    EXPECT_NEAR(err, meas_us / sim_us - 1, 1e-4) << i;
    // One thread launched 8 kernels per iteration: never under 8 launches of the default 4.2 us.
    EXPECT_GE(sim_us, 8 * 4.2 - 1e-3) << i;
  }
  // At 8 GiB dtsim's ring runs on all 24 channels the node opens (NCCL's launch rule): the CSV's
  // last column and the printed row's last field.
  EXPECT_EQ(rows[0].back(), "channels");
  EXPECT_EQ(rows[24].back(), "24");
  EXPECT_EQ(last_field_of_row(r.out, "8589934592"), "24") << r.out;
  const std::string svg = slurp(dir + "/compare.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("measured"), std::string::npos);
  EXPECT_NE(slurp(dir + "/compare.md").find("| 8 GiB |"), std::string::npos);
}

TEST(CliCompare, RefusesWhatItCannotCompare) {
  Result r = run("collective --cluster dgx-a100-80g --compare " + temp("no-such.log"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no-such.log"), std::string::npos) << r.out;
  // More ranks in the log than GPUs in the cluster.
  r = run("collective --cluster dgx-a100-80g --gpus-per-node 4 --compare " + kLog);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the log ran on 8 GPUs but the cluster has 4"), std::string::npos) << r.out;
  // A GPU count below 1 is the option's error, not the log's.
  r = run("collective --cluster dgx-a100-80g --gpus 0 --compare " + kLog);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--gpus: 0 GPUs requested; give at least 1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("the log names no ranks"), std::string::npos) << r.out;
  r = run("collective --cluster dgx-a100-80g --report " + temp("r"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--report draws a comparison: it needs --compare LOG"), std::string::npos) << r.out;
}

// The summary's band from 1 MiB up names how many sizes it holds, and says so when it holds none
// (a median over no size is not 0%). Rows for 16 GPUs, busbw = algbw x 30 / 16 (as below).
TEST(CliCompare, TheSummarySaysWhenNoSizeReachesOneMiB) {
  const std::string head =
      "# nThread 1 nGpus 1 minBytes 65536 maxBytes 2097152 step: 32(factor) warmup iters: 5 iters: 20\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  const std::string small = "       65536         16384     float     sum      -1    20.48    3.20    6.00      0    20.48    3.20    6.00      0\n";
  const std::string large = "     2097152        524288     float     sum      -1    150.0   13.98   26.21      0    150.0   13.98   26.21      0\n";
  const std::string log = temp("all_reduce_perf-bands.log");
  write(log, head + small);
  Result r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("over all 1 sizes, no sizes from 1 MiB up;"), std::string::npos) << r.out;
  write(log, head + small + large);
  r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("over all 2 sizes, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("% over the 1 from 1 MiB up;"), std::string::npos) << r.out;
  write(log, head + large);
  r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("% from 1 MiB up;"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("over the"), std::string::npos) << r.out;
}

// A log with NCCL's INFO lines runs under the NCCL settings they state (NCCL_ALGO, NCCL_PROTO,
// NCCL_BUFFSIZE ...), where the command line does not say otherwise, and says so; variables dtsim
// has no model of are named. A value dtsim cannot take is refused, naming the log and the variable.
// Rows for 16 GPUs as below (busbw = algbw x 30 / 16).
TEST(CliCompare, RunsUnderTheNcclSettingsTheLogStates) {
  const std::string head =
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 1024(factor) warmup iters: 5 iters: 20\n"
      "node01:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring,Tree\n"
      "node01:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
      "node01:1:1 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 4.\n";
  const std::string rows =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66      0\n"
      "  1073741824     268435456     float     sum      -1   6000.0  178.96  335.54      0   6000.0  178.96  335.54      0\n";
  const std::string log = temp("all_reduce_perf-env.log");
  write(log, head + "node01:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n" + rows);
  Result r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# the log's NCCL settings (its NCCL INFO lines): NCCL_ALGO=Ring,Tree (--algo Ring,Tree), NCCL_PROTO=Simple (--proto "
                       "Simple), NCCL_BUFFSIZE=8388608 (comm.buffsize)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# the log also sets, which dtsim does not model: NCCL_MIN_NCHANNELS"), std::string::npos) << r.out;
  // Only ring and tree with Simple run (dtsim's own choice on 2 H100 nodes is NVLS at 1 GiB).
  for (const char* size : {"1048576", "1073741824"}) {
    const std::string algo = field_of_row(r.out, size, 6);
    EXPECT_TRUE(algo == "ring/Simple" || algo == "tree/Simple") << size << ": " << algo;
  }
  // The command line wins over the log, and then the note leaves the variable out.
  r = run("collective --cluster dgx-h100 --nodes 2 --algo nvls --set comm.buffsize=4M --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(field_of_row(r.out, "1073741824", 6), "nvls/Simple") << r.out;
  EXPECT_NE(r.out.find("# the log's NCCL settings (its NCCL INFO lines): NCCL_PROTO=Simple (--proto Simple)\n"), std::string::npos) << r.out;
  // A buffer NCCL would not run with.
  write(log, head + "node01:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 1024.\n" + rows);
  r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(log), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the log's NCCL_BUFFSIZE=1024"), std::string::npos) << r.out;
}

// An MPI run pasted without its '#  Rank' lines: the settings line says nGpus 1 (one process's
// GPUs), so the GPU count comes from busbw / algbw = 2(n-1)/n. The rows are made for n = 16:
// 1 MiB in 100 us is algbw 10.49 GB/s and busbw 10.49 x 30 / 16 = 19.66 GB/s.
TEST(CliCompare, TellsAnMpiRunsGpuCountFromItsBandwidths) {
  const std::string table =
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66      0\n"
      "     2097152        524288     float     sum      -1    150.0   13.98   26.21      0    150.0   13.98   26.21      0\n"
      "     4194304       1048576     float     sum      -1    250.0   16.78   31.46      0    250.0   16.78   31.46      0\n";
  const std::string log = temp("all_reduce_perf-mpi16.log");
  write(log, table);
  Result r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("allreduce on 16 GPUs (from busbw / algbw; hosts not named)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
  // The same rows with busbw = algbw x 2(n-1)/n for no whole n, and nGpus 1: nothing tells the GPU
  // count, and a one-GPU all-reduce has no bus bandwidth to compare. Refused, naming the way out.
  std::string odd = table;
  for (const std::string bw : {"19.66", "26.21", "31.46"}) {
    for (auto at = odd.find(bw); at != std::string::npos; at = odd.find(bw)) odd.replace(at, bw.size(), "15.00");
  }
  write(log, odd);
  r = run("collective --cluster dgx-h100 --nodes 2 --compare " + log);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--gpus N"), std::string::npos) << r.out;
  // A broadcast's bandwidths never tell the GPU count (busbw = algbw whatever n): refused alike
  // rather than compared as one GPU.
  const std::string bcast = temp("broadcast_perf-mpi.log");
  write(bcast, table);
  r = run("collective --cluster dgx-h100 --nodes 2 --compare " + bcast);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--gpus N"), std::string::npos) << r.out;
  r = run("collective --cluster dgx-h100 --nodes 2 --gpus 16 --compare " + log);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("on 16 GPUs (from --gpus; hosts not named)"), std::string::npos) << r.out;
}

// nccl-tests' device lines for `ranks` ranks, `per_host` on each of host0, host1, ...
std::string rank_lines(int ranks, int per_host, const std::string& gpu) {
  std::string out;
  for (int r = 0; r < ranks; ++r) {
    out += "#  Rank " + std::to_string(r) + " Group  0 Pid " + std::to_string(100 + r) + " on host" + std::to_string(r / per_host) +
           " device " + std::to_string(r % per_host) + " [0x18] " + gpu + "\n";
  }
  return out;
}

// A node preset and a log that ran on more GPUs than one node: dtsim builds as many nodes as
// the log's hosts, each with the GPUs the log ran there. 2 hosts of 4 ranks; busbw / algbw =
// 2 x 7 / 8 = 1.75 (1 MiB in 100 us: algbw 10.49, busbw 18.35).
TEST(CliCompare, SizesANodePresetToTheLogsHosts) {
  std::string text = "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20\n#\n" +
                     rank_lines(8, 4, "NVIDIA H100 80GB HBM3");
  text +=
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    100.0   10.49   18.35      0    100.0   10.49   18.35      0\n"
      "     2097152        524288     float     sum      -1    150.0   13.98   24.47      0    150.0   13.98   24.47      0\n";
  const std::string log = temp("all_reduce_perf-2x4.log");
  write(log, text);
  Result r = run("collective --cluster dgx-h100 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# 2 nodes of dgx-h100 for the log's 8 GPUs (its 2 hosts of 4 ranks;"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("allreduce on 8 GPUs (from rank lines; 2 nodes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dtsim on 2 x dgx-h100 (4 of 8 GPUs each) = 8 GPUs"), std::string::npos) << r.out;
  // --nodes is the user's choice: kept, and a cluster too small for the log is refused as before.
  r = run("collective --cluster dgx-h100 --nodes 1 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("nodes of dgx-h100 for the log"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dtsim on 1 x dgx-h100 = 8 GPUs"), std::string::npos) << r.out;
  // --gpus is the user's count: no split by the log's hosts (8 GPUs fit one node), and more GPUs
  // than a node fill as many nodes as they need, said to come from --gpus.
  r = run("collective --cluster dgx-h100 --gpus 8 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("dtsim on 1 x dgx-h100 = 8 GPUs"), std::string::npos) << r.out;
  r = run("collective --cluster dgx-h100 --gpus 24 --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# 3 nodes of dgx-h100 for --gpus 24 GPUs (8 GPUs a node;"), std::string::npos) << r.out;
  // A cluster file says its own node count: a one-node file is not resized.
  const std::string one = temp("one-node.yaml");
  write(one, "node: dgx-h100\nnodes: 1\n");
  r = run("collective --cluster " + one + " --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("nodes of dgx-h100 for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dtsim on 1 x dgx-h100 = 8 GPUs"), std::string::npos) << r.out;
  // Hosts holding different rank counts (6 and 2) are not split evenly: the 8 GPUs fit one node.
  std::string uneven = text;
  for (const std::string rank : {"4", "5"}) {
    const std::string from = "#  Rank " + rank + " Group  0 Pid 10" + rank + " on host1";
    const auto at = uneven.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    uneven.replace(at, from.size(), "#  Rank " + rank + " Group  0 Pid 10" + rank + " on host0");
  }
  const std::string log_uneven = temp("all_reduce_perf-6+2.log");
  write(log_uneven, uneven);
  r = run("collective --cluster dgx-h100 --compare " + log_uneven);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("nodes of dgx-h100 for"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("allreduce on 8 GPUs (from rank lines; 2 nodes)"), std::string::npos) << r.out;
  // Bandwidths that imply more GPUs than any cluster dtsim builds (busbw / algbw = 2(n-1)/n for
  // n = 2,000,000: 1999999.00 / 1000000.00) are refused, not built.
  const std::string huge = temp("all_reduce_perf-huge.log");
  write(huge,
        "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
        "     1048576        262144     float     sum      -1    100.0 1000000.00 1999999.00  0    100.0 1000000.00 1999999.00  0\n");
  r = run("collective --cluster dgx-h100 --compare " + huge);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the log ran on 2000000 GPUs, beyond the 1048576 GPUs a cluster may have"), std::string::npos) << r.out;
}

// A complete log of 1024 ranks on 128 hosts, its figures printed as nccl-tests prints them (two
// decimals): busbw / algbw rounds to 1.99 or 2.00 on small rows, which alone would suggest other
// counts, but the figures fit 1024 ranks, so the rank lines stand.
TEST(CliCompare, ACompleteLogOfManyRanksKeepsItsRankLines) {
  std::string text = "# nThread 1 nGpus 1 minBytes 8 maxBytes 33554432 step: 2(factor) warmup iters: 5 iters: 20\n#\n" +
                     rank_lines(1024, 8, "NVIDIA A100-SXM4-80GB");
  text += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  const double f = 2.0 * 1023 / 1024;
  for (std::int64_t bytes = 8; bytes <= (std::int64_t{1} << 25); bytes *= 4) {
    const double us = 60.0 + static_cast<double>(bytes) / 40e3;  // 40 GB/s past a 60 us floor
    const double algbw = static_cast<double>(bytes) / (us * 1e-6) * 1e-9;
    char row[256];
    std::snprintf(row, sizeof row, "%12lld %13lld     float     sum      -1 %8.1f %7.2f %7.2f      0 %8.1f %7.2f %7.2f      0\n",
                  static_cast<long long>(bytes), static_cast<long long>(bytes / 4), us, algbw, algbw * f, us, algbw, algbw * f);
    text += row;
  }
  const std::string log = temp("all_reduce_perf-1024.log");
  write(log, text);
  const Result r = run("collective --cluster dgx-a100-80g --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("allreduce on 1024 GPUs (from rank lines; 128 nodes)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# 128 nodes of dgx-a100-80g for the log's 1024 GPUs (its 128 hosts of 8 ranks;"), std::string::npos) << r.out;
}

// A log quoted with most of its rank lines cut ("..."): CoreWeave's README lists 5 of the 32
// ranks, and busbw / algbw = 148.35 / 76.57 = 1.9374 = 2(n - 1) / n for n = 32. The ratio wins,
// the hosts are not counted from the few lines left, and the preset is sized to 4 nodes of 8.
TEST(CliCompare, RankLinesCutShortGiveWayToTheBandwidths) {
  const std::string log = std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-tests/all_reduce_perf-4x-a100-ib-sharp.log";
  const Result r = run("collective --cluster dgx-a100-80g --compare " + log);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("allreduce on 32 GPUs (from busbw / algbw; the rank lines list only 5; hosts not counted)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# 4 nodes of dgx-a100-80g for the log's 32 GPUs (8 GPUs a node;"), std::string::npos) << r.out;
}

}  // namespace compare

// Issue 18 item 2: a NIC latency must reach step times. Two DGX H100 with FSDP gather and
// reduce-scatter across the two nodes every layer; each such collective crosses the network at
// least twice (out and back), so a 10 ms adapter latency adds at least 2 x 20 ms to the step.
namespace latency {

double step_time(const std::string& out) {
  const auto at = out.find("step time");
  if (at == std::string::npos) return -1;
  return std::stod(out.substr(out.find_first_of("0123456789", at)));
}

TEST(CliLatency, ANicLatencyShowsInTheStepTime) {
  const std::string ex = std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama2-7b-fsdp.yaml";
  const Result base = run("simulate " + ex);
  const Result slow = run("simulate " + ex + " --set simulation.links.ib-ndr.latency=10ms");
  ASSERT_EQ(base.code, 0) << base.out;
  ASSERT_EQ(slow.code, 0) << slow.out;
  const double a = step_time(base.out), b = step_time(slow.out);
  ASSERT_GT(a, 0) << base.out;
  EXPECT_GE(b, a + 2 * 20e-3) << base.out << slow.out;
}

}  // namespace latency
