// Mistakes the fuzzers and the issue-15 mutation run turned up: each must give one error, at the
// field that is wrong, and none about other fields (a failed field must not cascade).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "config/simulate_loader.hpp"

namespace {

dtsim::config::Diagnostics load(const std::string& yaml) {
  dtsim::config::LoadContext ctx;
  auto cfg = dtsim::config::load_simulate_config("mistake.yaml", {}, ctx, yaml);
  EXPECT_FALSE(cfg.has_value()) << yaml;
  return ctx.diagnostics;
}

// Exactly one diagnostic, on `field`, whose message contains `words`.
void expect_one_error(const std::string& yaml, const std::string& field, const std::string& words) {
  const auto d = load(yaml);
  ASSERT_EQ(d.size(), 1U) << yaml << "\n" << d.to_string();
  EXPECT_EQ(d.items()[0].field, field) << d.to_string();
  EXPECT_NE(d.items()[0].message.find(words), std::string::npos) << d.to_string();
  EXPECT_GT(d.items()[0].where.line, 0) << d.to_string();
}

const std::string kRest = "model: gpt2-124m\ntraining: {global_batch: 8}\n";

TEST(FuzzMessages, EmptyNodeListWithNodeIsOneErrorOnNodes) {
  expect_one_error("cluster: {node: dgx-h100, nodes: []}\n" + kRest, "cluster.nodes", "number of nodes as a number");
}

TEST(FuzzMessages, NodeCountAsAListIsOneErrorOnNodes) {
  expect_one_error("cluster: {node: dgx-h100, nodes: [1]}\n" + kRest, "cluster.nodes", "number of nodes as a number");
}

TEST(FuzzMessages, UnknownModelPresetDoesNotCascadeIntoSeqLen) {
  expect_one_error("cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt2-124mx\ntraining: {global_batch: 8, seq_len: 1024}\n", "model",
                   "gpt2-124mx");
}

TEST(FuzzMessages, SeqLenBeyondLearnedPositionsOfAKnownModelIsStillAnError) {
  expect_one_error("cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt2-124m\ntraining: {global_batch: 8, seq_len: 4096}\n",
                   "training.seq_len", "1024 positions");
}

TEST(FuzzMessages, UnknownNodeDoesNotCascadeIntoLinkOverrides) {
  expect_one_error("cluster: {node: dgx-h100x, nodes: 1}\n" + kRest + "simulation: {links: {nvlink4: {efficiency: 0.9}}}\n",
                   "cluster.node", "dgx-h100x");
}

// Limits (docs/config.md, "Limits"): refused while loading, naming the field and the limit.
TEST(FuzzMessages, AClusterBeyondTheGpuLimitIsRefusedAtNodes) {
  expect_one_error("cluster: {node: dgx-h100, nodes: 200000}\n" + kRest, "cluster.nodes", "1048576 GPUs");
}

TEST(FuzzMessages, ACustomLinkCountBeyondItsLimitIsRefused) {
  const std::string cluster =
      "cluster:\n  node: dgx-h100\n  nodes: 2\n  fabric:\n    kind: custom\n    nic: ib-ndr\n    switches: [a, b]\n"
      "    links:\n      - [a, b, 5000]\n    attach:\n      - {nodes: 0, switch: a}\n      - {nodes: 1, switch: b}\n";
  const auto d = load(cluster + kRest);
  ASSERT_GE(d.size(), 1U) << d.to_string();
  EXPECT_NE(d.to_string().find("from 1 to 4096"), std::string::npos) << d.to_string();
}

// Found by the issue-15 mutation run (dtsim-mutation-run, docs/fuzzing.md).

TEST(FuzzMessages, AnUnknownClusterNameInAFileIsPlacedAtItsLineNotAtTheOption) {
  const auto d = load("cluster: 0.5\n" + kRest);
  ASSERT_EQ(d.size(), 1U) << d.to_string();
  EXPECT_EQ(d.items()[0].where.file, "mistake.yaml") << d.to_string();
  EXPECT_EQ(d.items()[0].where.line, 1) << d.to_string();
  EXPECT_NE(d.items()[0].message.find("unknown cluster or node preset '0.5'"), std::string::npos) << d.to_string();
}

TEST(FuzzMessages, AnEmptyModelNameIsAnUnknownPresetNotTheConfigFolder) {
  expect_one_error("cluster: {node: dgx-h100, nodes: 1}\nmodel: \"\"\ntraining: {global_batch: 8}\n", "model", "unknown model preset ''");
}

TEST(FuzzMessages, UnusedGpusOfANodeCountTowardsTheGpuLimit) {
  // 200,000 DGX nodes of which one GPU each is used: 1,600,000 GPUs (and their NICs) are built.
  expect_one_error("cluster: {node: dgx-h100, nodes: 200000, gpus_per_node: 1}\n" + kRest, "cluster.nodes", "1600000 GPUs in all");
}

TEST(FuzzMessages, MicroBatchesBeyondTheLimitAreRefusedAtGlobalBatch) {
  // 8,000,000 / (8 x 1) = 1,000,000 micro-batches on one GPU; 65,536 x 8 = 524,288 is the most.
  expect_one_error("cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\n"
                   "training: {global_batch: 8000000, micro_batch: 8}\n",
                   "training.global_batch", "1000000 micro-batches per step");
  const auto ok = [](const std::string& yaml) {
    dtsim::config::LoadContext ctx;
    return dtsim::config::load_simulate_config("ok.yaml", {}, ctx, yaml).has_value();
  };
  EXPECT_TRUE(ok("cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\ntraining: {global_batch: 524288, micro_batch: 8}\n"));
  EXPECT_FALSE(ok("cluster: {node: dgx-h100, nodes: 1, gpus_per_node: 1}\nmodel: gpt2-124m\ntraining: {global_batch: 524296, micro_batch: 8}\n"));
  // Counted per data-parallel replica: dp 8 takes eight times the batch.
  EXPECT_TRUE(ok("cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt2-124m\ntraining: {global_batch: 4194304, micro_batch: 8}\n"));
}

// A dtsim-validate record whose optional model, training or result fields have the wrong type is
// refused with the record's place, not ended by json's type_error when the point is simulated.
TEST(FuzzMessages, AValidationRecordWithANumberForABooleanIsRefusedWithItsLine) {
  const std::string good_model = R"("model":{"name":"gpt-350m","hidden":1024,"layers":24,"heads":16,"ffn":4096,"vocab":50304,"max_seq":1024)";
  const std::string training = R"("training":{"global_batch":2,"micro_batch":2,"seq_len":1024,"precision":"bf16"})";
  const auto record = [&](const std::string& model_extra, const std::string& result_extra) {
    return R"({"schema":"dtsim-validate/1","suite":"train_step","point":"p","status":"ok","params":{"gpus":1,)" + good_model +
           model_extra + "}," + training + R"(},"result":{"step_time_s":0.036)" + result_extra + "}}\n";
  };
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "dtsim-fuzz-messages-validate.jsonl";
  for (const auto& [model_extra, result_extra, field] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{R"(,"gated_mlp":1e-320)", "", "params.model.gated_mlp"},
                                                                      {R"(,"norm":[])", "", "params.model.norm"},
                                                                      {"", R"(,"step_time_min_s":"fast")", "result.step_time_min_s"}}) {
    std::ofstream(file) << record(model_extra, result_extra);
    auto records = dtsim::calibrate::read_records(file.string());
    ASSERT_TRUE(records) << records.error().to_string();
    std::vector<std::string> skipped;
    auto points = dtsim::calibrate::validation_points(*records, skipped);
    ASSERT_FALSE(points) << field;
    EXPECT_NE(points.error().to_string().find(field), std::string::npos) << points.error().to_string();
    EXPECT_NE(points.error().to_string().find(file.string() + ":1"), std::string::npos) << points.error().to_string();
  }
  std::filesystem::remove(file);
}

TEST(FuzzMessages, AGpuPeakRateOrMemoryBandwidthTooSmallForSimulatedTimeIsRefused) {
  // fp32 at 1e-9 TFLOP/s made a step's compute time overflow int64 picoseconds (an assertion).
  const std::string node_head = "cluster:\n  node:\n    name: n\n    gpus: 1\n    pcie: {link: pcie4-x16, switches: [{cpu: 0, gpus: [0], nics: []}]}\n";
  const std::string gpu_rest = "      memory: {capacity: 80 GiB, bandwidth: 2 TB/s}\n      sms: 100\n";
  const std::string training = "model: gpt2-124m\ntraining: {global_batch: 8, precision: fp32}\n";
  expect_one_error(node_head + "    gpu:\n      name: slow\n      peak: {fp32: 1e-9 TFLOP/s}\n" + gpu_rest + training,
                   "cluster.node.gpu.peak.fp32", "below 1 GFLOP/s");
  expect_one_error(node_head + "    gpu:\n      name: slow\n      peak: {fp32: 10 TFLOP/s}\n      memory: {capacity: 80 GiB, bandwidth: 1 KB/s}\n"
                   "      sms: 100\n" + training,
                   "cluster.node.gpu.memory.bandwidth", "below 1 GB/s");
}

}  // namespace
