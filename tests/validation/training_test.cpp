// dtsim simulate against published end-to-end training throughput
// (data/published/training-throughput-published.csv: Meta's Llama 3 405B runs). The cluster is
// the dgx-h100 preset on a rail-optimized InfiniBand fabric, not Meta's RoCE Clos, and nothing was
// fitted to these numbers. docs/validation.md discusses the errors; this test guards them.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"

namespace dtsim {
namespace {

struct Row {
  int gpus, tp, cp, pp, dp;
  std::int64_t seq, batch;
  double tflops;
};

std::vector<Row> rows() {
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/data/published/training-throughput-published.csv");
  std::vector<Row> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("system,", 0) == 0) continue;
    std::stringstream ss(line);
    std::string f[10];
    for (auto& x : f) std::getline(ss, x, ',');
    if (f[0] != "meta-llama3-405b") continue;  // the Megatron-LM rows are in bench/accuracy_training.cpp
    out.push_back(Row{std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[4]), std::stoi(f[5]), std::stoi(f[6]), std::stoll(f[7]),
                      std::stoll(f[8]), std::stod(f[9])});
  }
  return out;
}

workloads::StepResult simulate_row(const Row& r, const std::string& recompute) {
  const std::vector<std::string> sets = {
      "cluster.nodes=" + std::to_string(r.gpus / 8), "parallel.tp=" + std::to_string(r.tp), "parallel.cp=" + std::to_string(r.cp),
      "parallel.pp=" + std::to_string(r.pp), "parallel.dp=" + std::to_string(r.dp), "training.seq_len=" + std::to_string(r.seq),
      "training.global_batch=" + std::to_string(r.batch), "training.recompute=" + recompute};
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama3-405b-16k.yaml", sets, ctx);
  EXPECT_TRUE(cfg.has_value()) << ctx.diagnostics.to_string();
  if (!cfg) return {};
  auto topo = hw::Topology::build(cfg->cluster);
  EXPECT_TRUE(topo.ok());
  if (!topo) return {};
  auto res = workloads::simulate_step(*topo, cfg->inputs);
  EXPECT_TRUE(res.ok()) << res.error().to_string();
  return res.ok() ? *res : workloads::StepResult{};
}

// Held-out: no default constant was derived from Meta's runs (data/registry.yaml).
//
// Memory. The example runs Meta's layout as the paper describes it (section 3.3.2): FSDP sharding
// the optimizer states and gradients (ZeRO-2), the embedding and loss each taking one layer's
// place in the pipeline split, and one slot per model chunk (8 chunks per stage), without
// recomputation. On 16,384 GPUs (16 micro-batches per pipeline) it fits in 80 GiB, as Meta ran
// it; on 8,192 (32 micro-batches) Megatron's interleaved schedule keeps 141 one-block chunks in
// flight on stage 1 and dtsim overstates its memory (Meta's own schedule with N contiguous
// micro-batches is not modelled; docs/model.md). With full recomputation both fit.
// The 128K-context row is in docs/validation.md (dtsim-compare-published) but not here: it takes
// about 36 s of CPU time to simulate (8 chunks per stage).
//
// Throughput, two claims of different strength:
//  - The pipeline schedule: from 8,192 to 16,384 GPUs (32 to 16 micro-batches per pipeline, the
//    same work per micro-batch) Meta's throughput falls 7.0% (430 -> 400). With the paper's 8
//    chunks per stage the interleaved schedule's bubble ((p - 1) / (v m) alone: a 5.2% fall) and
//    the per-step work that does not shrink with the micro-batches give that fall; with 2 chunks
//    (this example before) dtsim lost 17%. Tolerance: 3 points.
//  - The level: within 30%. dtsim is about 27% too fast on both rows (issue 12, open;
//    docs/validation.md names what is known: the preset's H100 GEMM efficiency is the A100's,
//    above what the repository's own H100 measures, and Meta's tensor-parallel overlap is not
//    published). The tolerance guards against a regression, it is not a claim of accuracy.
constexpr double kScheduleFallTolerance = 0.03;
constexpr double kThroughputLevelTolerance = 0.30;

TEST(PublishedTraining, Llama3_405B) {
  const auto rs = rows();
  ASSERT_EQ(rs.size(), 3u);
  double predicted[2] = {0, 0};
  for (int i : {0, 1}) {
    const Row& r = rs[static_cast<std::size_t>(i)];
    const workloads::StepResult none = simulate_row(r, "none");
    predicted[i] = none.tflops_per_gpu;
    EXPECT_LT(std::fabs(none.tflops_per_gpu / r.tflops - 1), kThroughputLevelTolerance) << r.gpus << " GPUs: " << none.tflops_per_gpu;
    // Meta trained both rows on 80 GB GPUs: the 16K row must fit. The 8K row's overestimate is the
    // known gap above (Megatron's interleaved schedule stands for Meta's); asserting that it does
    // not fit would pin the model's error, so only its figures are checked.
    if (r.dp == 128) {
      EXPECT_TRUE(none.fits) << r.gpus << " GPUs: " << none.memory_note;
    }
    const workloads::StepResult full = simulate_row(r, "full");
    EXPECT_TRUE(full.fits) << r.gpus << " GPUs with full recomputation: " << full.memory_note;
  }
  ASSERT_EQ(rs[0].gpus, 8192);
  ASSERT_EQ(rs[1].gpus, 16384);
  const double published_fall = 1 - rs[1].tflops / rs[0].tflops;
  const double predicted_fall = 1 - predicted[1] / predicted[0];
  EXPECT_NEAR(predicted_fall, published_fall, kScheduleFallTolerance) << predicted[0] << " -> " << predicted[1];
}

// ResNet-50 against NVIDIA's published PyTorch throughput: held-out (no default constant was
// derived from these runs; data/registry.yaml). Without a loader described (the published runs
// used PyTorch's DataLoader), dtsim predicts the GPUs' rate. Stated tolerances, per kind of row:
//  - mixed precision, one GPU: within 10% (the compute model's claim for fp16 with data behind
//    its GEMM efficiency);
//  - mixed precision, 8 GPUs: between the published 8-GPU rate (a left-out loader can only slow
//    the real run down) and perfect scaling of the published 1-GPU rate plus the 10% above;
//  - TF32 and FP32: within a factor of 2, because their GEMM efficiencies (0.8, 0.85) are
//    assumptions with no dataset behind them (docs/validation.md).
constexpr double kMixedOneGpuTolerance = 0.10;
constexpr double kAssumedEfficiencyFactor = 2.0;

TEST(PublishedTraining, ResNet50) {
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/data/published/cnn-throughput-published.csv");
  std::string line;
  std::map<std::string, double> one_gpu_published;  // node -> fp16 1-GPU images/s
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("system,", 0) == 0) continue;
    std::stringstream ss(line);
    std::string f[6];
    for (auto& x : f) std::getline(ss, x, ',');
    const int gpus = std::stoi(f[2]);
    const std::string yaml = "cluster: {node: " + f[1] + ", nodes: 1, gpus_per_node: " + f[2] +
                             "}\nmodel: resnet50\ntraining: {global_batch: " + std::to_string(gpus * std::stoi(f[4])) +
                             ", micro_batch: " + f[4] + ", precision: " + f[3] + ", optimizer: sgd}\nparallel: {dp: " + f[2] + "}\n";
    config::LoadContext ctx;
    auto cfg = config::load_simulate_config("resnet50.yaml", {}, ctx, yaml);
    ASSERT_TRUE(cfg.has_value()) << ctx.diagnostics.to_string();
    auto topo = hw::Topology::build(cfg->cluster);
    ASSERT_TRUE(topo.ok());
    auto res = workloads::simulate_step(*topo, cfg->inputs);
    ASSERT_TRUE(res.ok()) << res.error().to_string();
    EXPECT_TRUE(res->fits) << line << ": " << res->memory_note;
    const double published = std::stod(f[5]);
    const double predicted = res->samples_per_s;
    if (f[3] != "fp16") {
      EXPECT_LT(std::fabs(std::log(predicted / published)), std::log(kAssumedEfficiencyFactor)) << line << ": " << predicted;
    } else if (gpus == 1) {
      EXPECT_LT(std::fabs(predicted / published - 1), kMixedOneGpuTolerance) << line << ": " << predicted;
      one_gpu_published[f[1]] = published;
    } else {
      ASSERT_TRUE(one_gpu_published.count(f[1])) << "the CSV lists each system's 1-GPU row before its 8-GPU row";
      EXPECT_GT(predicted, published) << line;
      EXPECT_LT(predicted, gpus * one_gpu_published[f[1]] * (1 + kMixedOneGpuTolerance)) << line;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
}  // namespace dtsim
