// Mistakes the fuzzers and the issue-15 mutation run turned up: each must give one error, at the
// field that is wrong, and none about other fields (a failed field must not cascade).
#include <gtest/gtest.h>

#include <string>

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

}  // namespace
