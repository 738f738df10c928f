// dtsim sweep, plan and report as a user runs them: outputs, exit codes, the messages for bad
// input, failed points as rows, the progress bar only on a terminal, and traces from simulate.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;
using dtsim::testing::slurp;
using dtsim::testing::temp;
using dtsim::testing::source;

using json = nlohmann::json;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp(name);
  std::ofstream(path) << text;
  return path;
}
std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

const std::string kSweep =
    "question: Which micro-batch?\n"
    "base:\n"
    "  cluster: {node: dgx-h100, nodes: 1}\n"
    "  model: gpt3-1.3b\n"
    "  training: {global_batch: 64, micro_batch: 1, seq_len: 2048}\n"
    "axes:\n"
    "  parallel.tp: [1, 3]\n"
    "  training.micro_batch: [1, 2]\n";

TEST(SweepCli, WritesRowsDocumentAndCsvAndKeepsFailedPointsAsRows) {
  const std::string spec = write("cli-sweep.yaml", kSweep);
  const std::string out = temp("cli-sweep.jsonl"), doc = temp("cli-sweep.json"), csv = temp("cli-sweep.csv");
  const Result r = run("sweep " + spec + " -o " + out + " --json " + doc + " --csv " + csv + " -j 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("\r["), std::string::npos) << "no progress bar when stderr is not a terminal";
  EXPECT_EQ(lines(slurp(out)), 5u);  // header + 4 rows
  const json d = json::parse(slurp(doc));
  ASSERT_EQ(d["rows"].size(), 4u);
  // tp 3 divides neither the 8 GPUs nor the 32 heads: those points are rows with the reason.
  for (int i : {2, 3}) {
    EXPECT_EQ(d["rows"][i]["status"], "error");
    EXPECT_NE(d["rows"][i]["error"].get<std::string>().find("tp"), std::string::npos) << d["rows"][i]["error"];
  }
  EXPECT_EQ(d["rows"][0]["status"], "ok");
  EXPECT_TRUE(d["rows"][0]["result"].contains("step_time_s"));
  EXPECT_EQ(d["rows"][1]["config"]["training"]["micro_batch"], 2);
  EXPECT_EQ(lines(slurp(csv)), 5u);
  EXPECT_NE(r.out.find("error"), std::string::npos);  // the table shows the failed rows
}

TEST(SweepCli, ProgressBarOnlyOnATerminal) {
  const std::string spec = write("cli-tty.yaml", kSweep);
  if (std::system("command -v script > /dev/null 2>&1") != 0) GTEST_SKIP() << "script (util-linux) is not installed";
  // script(1) gives the command a pseudo-terminal.
  const Result r = run("", "script -q -e -c '" + std::string(DTSIM_BINARY) + " sweep " + spec + " -j 1' /dev/null; true #");
  EXPECT_NE(r.out.find("points"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\r["), std::string::npos) << r.out;
}

TEST(SweepCli, BadInputIsAClearErrorWithTheLine) {
  const std::string unknown = write("cli-unknown.yaml", kSweep + "  parallel.tpp: [1]\n");
  Result r = run("sweep " + unknown);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(unknown + ":9:3: axes.parallel.tpp: unknown axis"), std::string::npos) << r.out;
  const std::string empty = write("cli-empty.yaml", "base: {cluster: {node: dgx-h100}, model: gpt3-1.3b, training: {global_batch: 8}}\naxes: {}\n");
  r = run("sweep " + empty);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the sweep is empty"), std::string::npos) << r.out;
  r = run("sweep " + empty + " --resume");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--resume needs"), std::string::npos) << r.out;
  r = run("sweep " + temp("does-not-exist.yaml"));
  EXPECT_EQ(r.code, 2);
}

const std::string kPlan =
    "question: Fastest way to train GPT-3 1.3B on 10B tokens?\n"
    "model: gpt3-1.3b\n"
    "training: {global_batch: 64, seq_len: 2048, tokens: 1.0e10}\n"
    "search: {tp: [1, 2], pp: [1, 2], micro_batch: [1, 2], zero: [0, 1], recompute: [none, full], schedule: [1f1b], simulate_top: 2}\n"
    "hardware:\n"
    "  - {name: H100, cluster: dgx-h100, gpus: [8, 16], price_per_gpu_hour: 2.5}\n"
    "  - {name: A100, cluster: dgx-a100-80g, gpus: [16], price_per_gpu_hour: 1.5}\n";

TEST(PlanCli, PrintsBestPerOptionParetoWhyAndRejectionsAndWritesAReport) {
  const std::string spec = write("cli-plan.yaml", kPlan);
  const std::string dir = temp("cli-plan-report"), doc = temp("cli-plan.json");
  std::filesystem::remove_all(dir);
  const Result r = run("plan " + spec + " --report " + dir + " --json " + doc);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"best layout per hardware option", "H100 x 8", "H100 x 16", "A100 x 16", "Pareto front", "recommended:", "near misses",
                        "rejected layouts", "assumptions"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  for (const char* f : {"report.html", "report.md", "results.csv", "results.json", "breakdown.svg", "pareto.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / f)) << f;
  }
  const json d = json::parse(slurp(doc));
  EXPECT_EQ(d["dtsim"], "plan");
  EXPECT_FALSE(d["top"].is_null());
}

TEST(PlanCli, MissingPricesAndNoFeasibleLayoutAreClearErrors) {
  const std::string noprice = write("cli-noprice.yaml", kPlan + "  - {name: H200, cluster: hgx-h200, gpus: [8]}\n");
  Result r = run("plan " + noprice);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(noprice + ":8:5: hardware[2]: hardware option 'H200' has no price"), std::string::npos) << r.out;
  const std::string nofit = write("cli-nofit.yaml",
                                  "model: gpt3-175b\ntraining: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\n"
                                  "hardware:\n  - {name: A100, cluster: dgx-a100-80g, gpus: [8], price_per_gpu_hour: 1}\n"
                                  "search: {tp: [1, 3, 8], pp: [1, 8], micro_batch: [1], recompute: [full]}\n");
  r = run("plan " + nofit);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(nofit + ": no feasible layout"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("do not fit in memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fail divisibility"), std::string::npos) << r.out;
}

// GPU counts listed twice or beyond what a cluster can hold, and a budget the model cannot use, are
// refused at their own line (file:line:col: field).
TEST(PlanCli, BadGpuCountsAndBudgetsPointAtTheirLine) {
  const std::string head = "model: gpt3-1.3b\ntraining: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\nhardware:\n";
  // Line 4: "  - {name: H100, cluster: dgx-h100, gpus: [" is 43 characters; the values start at columns 44 and 47.
  const std::string twice = write("cli-gpus-twice.yaml", head + "  - {name: H100, cluster: dgx-h100, gpus: [8, 8], price_per_gpu_hour: 2.5}\n");
  Result r = run("plan " + twice);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(twice + ":4:47: hardware[0].gpus[1]: 8 GPUs is listed twice (first at hardware[0].gpus[0])"), std::string::npos) << r.out;
  const std::string huge = write("cli-gpus-huge.yaml", head + "  - {name: H100, cluster: dgx-h100, gpus: [8, 10000000], price_per_gpu_hour: 2.5}\n");
  r = run("plan " + huge);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(huge + ":4:47: hardware[0].gpus[1]: 10000000 GPUs is more than a plan considers (at most 1000000"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cluster.nodes"), std::string::npos) << r.out;
  // A token budget for a CNN: "tokens" is at column 31 of line 2, as dtsim simulate reports it.
  const std::string cnn = write("cli-cnn-tokens.yaml",
                                "model: resnet50\ntraining: {global_batch: 256, tokens: 1e9}\nhardware:\n"
                                "  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n");
  r = run("plan " + cnn);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(cnn + ":2:31: training.tokens: a token budget needs a model with a sequence length"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("recommended"), std::string::npos) << r.out;
  // A search list with a repeated value: "  tp: [2, " is 10 characters, so the second 2 is at column 11.
  const std::string rep = write("cli-search-twice.yaml", head + "  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"
                                                             "search:\n  tp: [2, 2]\n  schedule: [1f1b, 1f1b]\n");
  r = run("plan " + rep);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(rep + ":6:11: search.tp[1]: 2 is listed twice"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(rep + ":7:20: search.schedule[1]: '1f1b' is listed twice"), std::string::npos) << r.out;
}

TEST(ReportCli, RendersSweepResultsFromTheDocumentOrTheResultsFile) {
  const std::string spec = write("cli-report.yaml", kSweep);
  const std::string out = temp("cli-report.jsonl"), doc = temp("cli-report.json");
  ASSERT_EQ(run("sweep " + spec + " -o " + out + " --json " + doc).code, 0);
  for (const std::string& input : {doc, out}) {
    const std::string dir = temp("cli-report-" + std::to_string(input.size()));
    std::filesystem::remove_all(dir);
    const Result r = run("report " + input + " -o " + dir);
    ASSERT_EQ(r.code, 0) << r.out;
    for (const char* f : {"report.html", "report.md", "results.csv", "results.json", "breakdown.svg", "memory.svg"}) {
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / f)) << input << " " << f;
    }
    EXPECT_NE(slurp(dir + "/report.html").find("<svg"), std::string::npos);
    EXPECT_NE(slurp(dir + "/report.md").find("Which micro-batch?"), std::string::npos);
  }
  Result bad = run("report " + spec + " -o " + temp("cli-report-bad"));
  EXPECT_EQ(bad.code, 2) << bad.out;
}

TEST(ReportCli, WithoutGnuplotTheReportSaysSoAndWritesNothing) {
  const std::string spec = write("cli-nognuplot.yaml", kSweep);
  const std::string doc = temp("cli-nognuplot.json"), dir = temp("cli-nognuplot");
  ASSERT_EQ(run("sweep " + spec + " --json " + doc).code, 0);
  std::filesystem::remove_all(dir);
  const Result r = run("report " + doc + " -o " + dir, "env PATH=/nonexistent ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("gnuplot is not installed"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir) / "report.html"));
}

TEST(TraceCli, WritesChromeTraceJsonAndRejectsBadRanks) {
  const std::string cfg = write("cli-trace.yaml",
                                "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-125m\ntraining: {global_batch: 16, seq_len: 1024}\n"
                                "parallel: {tp: 2, pp: 2, sequence_parallel: true}\n");
  const std::string t = temp("cli-trace.json");
  Result r = run("simulate " + cfg + " --trace " + t + " --trace-ranks 0-3,8");
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(slurp(t));
  ASSERT_TRUE(j["traceEvents"].is_array());
  EXPECT_EQ(j["displayTimeUnit"], "ns");
  EXPECT_EQ(j["otherData"]["ranks_shown"], "0-3,8");
  r = run("simulate " + cfg + " --trace " + temp("cli-trace-bad.json") + " --trace-ranks 0-99");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("ranks 0-15"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(temp("cli-trace-bad.json")));
}

}  // namespace
