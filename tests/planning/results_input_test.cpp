// What sweeps and reports do with awkward input: text from a results file never becomes a gnuplot
// command, --resume refuses rows computed from other inputs, GPU counts are whole numbers, a failed
// point never "matches" a measurement, and interrupted or moved results are reported honestly.
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

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

// Two points of a small GPT on one GPU: fractions of a second each.
std::string small_sweep(const std::string& extra = "", const std::string& model = "gpt3-125m") {
  return "base:\n  cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\n  model: " + model +
         "\n  training: {global_batch: 8, micro_batch: 1, seq_len: 1024}\naxes:\n  training.micro_batch: [1, 2]\n" + extra;
}

TEST(ResultsInput, LabelsCannotEndAChartDataBlockOrRunCommands) {
  const std::string spec = write(temp("inject/s.yaml"), small_sweep());
  const std::string doc = temp("inject/s.json"), marker = temp("inject/PWNED");
  ASSERT_EQ(run("sweep " + spec + " --json " + doc + " --no-progress").code, 0);
  json d = json::parse(slurp(doc));
  const std::string evil = "x\nEOD\nsystem \"touch " + marker + "\"\n$zz << EOD\n`touch " + marker + "`\ny";
  for (auto& r : d["rows"]) {
    r["label"] = evil;
    r["summary"]["label"] = evil;
    r["summary"]["short_label"] = evil;
  }
  d["question"] = "a question with a `touch " + marker + "` and a\nnewline";
  write(temp("inject/evil.json"), d.dump());
  const Result r = run("report " + temp("inject/evil.json") + " -o " + temp("inject/report"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_FALSE(fs::exists(marker)) << "a label ran a shell command through gnuplot";
  EXPECT_TRUE(fs::exists(temp("inject/report/breakdown.svg"))) << r.out;
}

TEST(ResultsInput, ResumeRefusesRowsFromAChangedProfileOrIncludedFile) {
  // A hardware profile: changing its contents (same path) changes what every point computes.
  const std::string dir = temp("fingerprint");
  const std::string profile = write(dir + "/profile.yaml", "profile: 1\nparams:\n  compute.gemm.efficiency.bf16: 0.5\n");
  const std::string spec = write(dir + "/s.yaml", small_sweep());
  const std::string out = dir + "/r.jsonl";
  ASSERT_EQ(run("sweep " + spec + " -o " + out + " --hw-profile " + profile + " --no-progress").code, 0);
  EXPECT_EQ(run("sweep " + spec + " -o " + out + " --resume --hw-profile " + profile + " --no-progress").code, 0);
  write(profile, "profile: 1\nparams:\n  compute.gemm.efficiency.bf16: 0.9\n");
  Result r = run("sweep " + spec + " -o " + out + " --resume --hw-profile " + profile + " --no-progress");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("different sweep"), std::string::npos) << r.out;

  // A Hugging Face config.json the base refers to (GPT-2 small's shape fields, 4 layers, then 8).
  const std::string hf = R"({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_positions": 1024, "vocab_size": 50257, "n_layer": )";
  write(dir + "/hf.json", hf + "4}");
  const std::string hf_spec = write(dir + "/hf.yaml", small_sweep("", "{hf_config: hf.json}"));
  const std::string hf_out = dir + "/hf.jsonl";
  ASSERT_EQ(run("sweep " + hf_spec + " -o " + hf_out + " --no-progress").code, 0) << run("sweep " + hf_spec).out;
  write(dir + "/hf.json", hf + "8}");
  r = run("sweep " + hf_spec + " -o " + hf_out + " --resume --no-progress");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("different sweep"), std::string::npos) << r.out;
}

TEST(ResultsInput, GpuCountsMustBeWholeNumbers) {
  for (const char* bad : {"2.5", "8abc", "1e1", "0", "2000000"}) {
    const std::string spec = write(temp("gpus.yaml"), std::string("base:\n  cluster: {node: dgx-h100, nodes: 1}\n  model: gpt3-125m\n"
                                                                  "  training: {global_batch: 8, micro_batch: 1, seq_len: 1024}\n"
                                                                  "axes:\n  gpus: [1, ") + bad + "]\n");
    const Result r = run("sweep " + spec);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("gpus.yaml:6:"), std::string::npos) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("axes.gpus[1]"), std::string::npos) << bad << ": " << r.out;
  }
}

TEST(ResultsInput, AFailedPointNeverMatchesAMeasurement) {
  // Point 0 (tp 3 of 8 GPUs) fails; point 1 (tp 4 of 12 heads) runs. Both have a measurement.
  const std::string dir = temp("measured");
  write(dir + "/m.csv", "point,step_time_s\n0,0.5\n1,0.5\n");
  const std::string spec = write(dir + "/s.yaml", "base:\n  cluster: {node: dgx-h100, nodes: 1}\n  model: gpt3-125m\n"
                                                  "  training: {global_batch: 8, micro_batch: 1, seq_len: 1024}\n"
                                                  "axes:\n  parallel.tp: [3, 4]\nmeasured: m.csv\n");
  const Result r = run("sweep " + spec + " --json " + dir + "/doc.json --no-progress");
  ASSERT_EQ(r.code, 0) << r.out;
  const json d = json::parse(slurp(dir + "/doc.json"));
  EXPECT_EQ(d["rows"][0]["summary"]["status"], "error");
  EXPECT_FALSE(d["rows"][0]["summary"].contains("measured"));
  EXPECT_TRUE(d["rows"][1]["summary"].contains("measured"));
  EXPECT_EQ(d["measured"]["matched"], 1);
  EXPECT_EQ(d["measured"]["without_prediction"], 1);
}

TEST(ResultsInput, ReportOfAMovedResultsFileFindsItsMeasurements) {
  // Run from the parent folder with relative paths, report from inside the folder.
  const fs::path dir = temp("moved");
  fs::create_directories(dir / "sub");
  write((dir / "sub/m.csv").string(), "point,step_time_s\n0,0.5\n");
  write((dir / "sub/s.yaml").string(), small_sweep("measured: m.csv\n"));
  const std::string cd = "cd " + dir.string() + " && ";
  ASSERT_EQ(run("sweep sub/s.yaml -o sub/r.jsonl --no-progress", cd).code, 0);
  const Result r = run("report r.jsonl -o ../moved-report", "cd " + (dir / "sub").string() + " && ");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(slurp((dir / "moved-report/report.md").string()).find("lines matched a row"), std::string::npos);
}

TEST(ResultsInput, TokenNoiseScaleOnACnnIsRefusedBeforeAnyPointRuns) {
  const std::string out = temp("cnn-noise.jsonl");
  fs::remove(out);
  const std::string spec = write(temp("cnn-noise.yaml"), "base:\n  cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\n  model: resnet50\n"
                                                         "  training: {global_batch: 64, micro_batch: 64}\n"
                                                         "axes:\n  training.global_batch: [64, 128]\n"
                                                         "statistical_efficiency:\n  b_noise_tokens: 1.0e6\n  s_min: 1000\n");
  const Result r = run("sweep " + spec + " -o " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cnn-noise.yaml:8:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("b_noise"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out)) << "points ran before the spec was refused";
}

TEST(ResultsInput, AnInterruptedSweepsReportSaysPointsAreMissing) {
  const std::string spec = write(temp("partial/s.yaml"), small_sweep());
  const std::string out = temp("partial/r.jsonl");
  ASSERT_EQ(run("sweep " + spec + " -o " + out + " --no-progress").code, 0);
  // Keep the header and the first row only, as if interrupted.
  std::istringstream in(slurp(out));
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  write(out, header + "\n" + row + "\n");
  const Result r = run("report " + out + " -o " + temp("partial/report"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("1 of the sweep's points are missing"), std::string::npos) << r.out;
  EXPECT_NE(slurp(temp("partial/report/report.md")).find("Incomplete: 1 of the sweep's 2 points"), std::string::npos);
  // The report folder is itself a valid input (its results.json).
  const Result again = run("report " + temp("partial/report") + " -o " + temp("partial/report2"));
  EXPECT_EQ(again.code, 0) << again.out;
  // --resume on an empty file starts anew.
  write(out, "");
  const Result resumed = run("sweep " + spec + " -o " + out + " --resume --no-progress");
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("2 simulated"), std::string::npos) << resumed.out;
}

TEST(ResultsInput, RowsThatDoNotFitInMemoryAreNotDrawnAsOptions) {
  // Micro-batch 64 of GPT-3 1.3B needs far more than 80 GiB (activations alone: 64 x 2048 tokens).
  const std::string spec = write(temp("oom/s.yaml"), "base:\n  cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\n  model: gpt3-1.3b\n"
                                                     "  training: {global_batch: 64, micro_batch: 1, seq_len: 2048, tokens: 1.0e9}\n"
                                                     "  prices: {gpu_hour: 2.0}\naxes:\n  training.micro_batch: [1, 64]\n");
  const Result r = run("sweep " + spec + " --report " + temp("oom/report") + " --no-progress");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("oom"), std::string::npos) << r.out;
  const std::string html = slurp(temp("oom/report/report.html"));
  EXPECT_NE(html.find("1 row left out (not fitting in memory)"), std::string::npos);
  // The time/cost chart has one bar: the label of the row that does not fit is not on it.
  const std::string svg = slurp(temp("oom/report/time_cost.svg"));
  EXPECT_NE(svg.find("micro_batch=1"), std::string::npos);
  EXPECT_EQ(svg.find("micro_batch=64"), std::string::npos);
}

TEST(ResultsInput, TraceRanksWithoutATraceIsAnError) {
  const std::string cfg = std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/gpt2-single-gpu.yaml";
  const Result r = run("simulate " + cfg + " --trace-ranks 0-3");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--trace"), std::string::npos) << r.out;
}

}  // namespace
