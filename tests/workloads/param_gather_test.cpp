// Megatron-Core's --overlap-param-gather (parallel.overlap_param_gather; docs/model.md, "Pipeline,
// data parallelism and the step"). Checked against hand-worked cases and the mechanism's own
// arithmetic, not against dtsim's output:
//  - the buckets: Megatron-Core fills them walking the parameters from the end and closes one once
//    it holds the cap, so the chunk's first bucket is the remainder (worked by hand below);
//  - the step: with compute per bucket longer than a bucket's gather and no compute slowdown, the
//    overlapped step is the after-step one less the after-step gather plus the first bucket's
//    gather (the only one the forward pass cannot hide);
//  - the dispatch: the interleaved schedule aligns the gathers across stages (all dispatched when
//    the schedule starts, run back to back); 1F1B dispatches a stage's first bucket when its
//    forward pass first needs it, after the stage's first activation has arrived; stages after
//    the first are one bucket per chunk (Megatron-Core turns bucketing off there); with
//    param_gather_start: step (Megatron-Core 0.8) every stage dispatches its first bucket as the
//    step starts, so a later stage's gather hides under the wait for its first activation and the
//    step is shorter than first-use's by that gather;
//  - a graph dumped with the gathers and run with the setting off still gathers once.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/hw/fixtures.hpp"
#include "tests/workloads/fixtures.hpp"
#include "workloads/step.hpp"
#include "workloads/strategies.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

TEST(ParamGather, BucketsAreFilledFromTheEndOfTheChunk) {
  // Layers of 10, 50, 50, 50 and 10 parameters, cap 60. From the end: 10 + 50 = 60 closes a bucket
  // starting at layer 3; 50 + 50 = 100 one starting at layer 1; layer 0's 10 is the remainder.
  const std::vector<double> starts = param_gather_buckets({10, 50, 50, 50, 10}, 60);
  EXPECT_EQ(starts, (std::vector<double>{10, 100, 0, 60, 0}));
  // A layer above the cap is a bucket of its own; nothing is lost or counted twice.
  EXPECT_EQ(param_gather_buckets({5, 200, 5}, 60), (std::vector<double>{5, 205, 0}));
  EXPECT_EQ(param_gather_buckets({}, 60), std::vector<double>{});
}

// The head holds its own vocab x h parameters (untied), so the buckets below are as counted.
TransformerSpec gpt(std::int64_t layers, std::int64_t hidden) {
  TransformerSpec m = testing::gpt(layers, hidden, 8000, 8192);
  m.tied_embeddings = false;
  return m;
}

struct Observed {
  double step_s = 0;
  std::vector<TimelineEvent> gathers;  // "dp allgather (parameters)" of (stage, replica 0)
  std::vector<TimelineEvent> after_step;  // "dp allgather (updated parameters)"
  std::vector<TimelineEvent> sends;  // pipeline sends of activations
};

// Two nodes of 8 GPUs with a 50 GB/s NIC each; `pp` stages, data parallelism 16 / pp; micro-
// batches of 8 x 8192 tokens, so that a block's forward pass (about 7 TFLOP) outlasts the
// all-gather of two blocks' parameters. Megatron-Core's bucket cap is max(40M, 1M x dp) = 40M
// parameters; a block holds 12 h^2 = 28.3M (h = 1536) and the head and embedding 8000 x 1536 =
// 12.3M each. From the end: the head and block 7 close a bucket (40.6M), then blocks 6-5, 4-3
// and 2-1, and stage 0's first bucket is the remainder, the embedding and block 0 (40.6M).
hw::Topology two_nodes() {
  return std::move(hw::Topology::build(cluster(nvswitch_node(8, true, 50), 2, hw::FabricKind::fat_tree, 40))).value();
}

StepInputs inputs(bool overlap, int pp, PipelineSchedule schedule) {
  StepInputs in;
  in.model = gpt(8, 1536);
  in.training.micro_batch = 8;
  in.training.seq_len = 8192;
  in.parallel.pp = pp;
  in.parallel.dp = 16 / pp;
  in.training.global_batch = 8 * (16 / pp) * 2 * pp;
  in.parallel.schedule = schedule;
  in.parallel.virtual_stages = schedule == PipelineSchedule::interleaved_1f1b ? 2 : 1;
  in.parallel.zero = 1;
  in.parallel.bucket = Bytes(0);  // Megatron-Core's rule
  in.parallel.overlap_param_gather = overlap;
  return in;
}

Observed run(bool overlap, int pp, PipelineSchedule schedule, int stage = 0, ParamGatherStart start = ParamGatherStart::automatic) {
  const hw::Topology topo = two_nodes();
  StepInputs in = inputs(overlap, pp, schedule);
  in.parallel.param_gather_start = start;
  in.compute.comm_slowdown = 0;
  in.record_timeline = true;
  auto r = simulate_step(topo, in);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  Observed out;
  if (!r.ok()) return out;
  out.step_s = r->step_time_s;
  for (const TimelineEvent& e : r->timeline.events) {
    if (e.stage != stage || e.replica != 0) continue;
    if (e.name == "dp allgather (parameters)") out.gathers.push_back(e);
    if (e.name == "dp allgather (updated parameters)") out.after_step.push_back(e);
    if (e.track == TimelineEvent::Track::pipeline && e.name.rfind("send activation", 0) == 0) out.sends.push_back(e);
  }
  return out;
}

TEST(ParamGather, OnlyTheFirstBucketIsExposed) {
  const Observed off = run(false, 1, PipelineSchedule::one_f_one_b);
  const Observed on = run(true, 1, PipelineSchedule::one_f_one_b);
  ASSERT_EQ(off.after_step.size(), 1u);
  EXPECT_TRUE(off.gathers.empty());
  EXPECT_TRUE(on.after_step.empty()) << "the overlapped gather replaces the one after the optimizer";
  ASSERT_EQ(on.gathers.size(), 5u);
  EXPECT_EQ(on.gathers.front().start, Time::zero());
  const double total = (off.after_step[0].end - off.after_step[0].start).seconds();
  const double first = (on.gathers.front().end - on.gathers.front().start).seconds();
  ASSERT_GT(total, 3 * first);  // 5 buckets, the first 40.6M of 251M parameters
  EXPECT_NEAR(on.step_s, off.step_s - total + first, 1e-6 * off.step_s);
}

TEST(ParamGather, InterleavedStagesGatherBackToBackFromTheStart) {
  const Observed on = run(true, 2, PipelineSchedule::interleaved_1f1b, 1);
  // Megatron-Core buckets only stage 0's first chunk: stage 1's two chunks are one bucket each.
  ASSERT_EQ(on.gathers.size(), 2u);
  EXPECT_EQ(on.gathers.front().start, Time::zero()) << "stage 1 gathers while it waits for its first activation";
  for (std::size_t i = 1; i < on.gathers.size(); ++i) EXPECT_EQ(on.gathers[i].start, on.gathers[i - 1].end) << i;
}

TEST(ParamGather, OneFOneBGathersWhenTheForwardNeedsThem) {
  const Observed first = run(true, 2, PipelineSchedule::one_f_one_b, 0);
  const Observed second = run(true, 2, PipelineSchedule::one_f_one_b, 1);
  ASSERT_FALSE(first.sends.empty());
  ASSERT_FALSE(second.gathers.empty());
  EXPECT_EQ(first.gathers.front().start, Time::zero());
  // Stage 1 is one bucket (Megatron-Core buckets only stage 0), which its forward pass first needs
  // once stage 0's first activation is in.
  EXPECT_EQ(second.gathers.size(), 1u);
  EXPECT_GE(second.gathers.front().start, first.sends.front().end);
}

// Megatron-Core 0.8's zero_grad dispatches every stage's first bucket before the schedule runs.
// Stage 1's one bucket then gathers while stage 0 runs its first forward pass, and is in before
// stage 1's first activation; under first-use the same gather starts only after that activation
// and holds up stage 1, and the pipeline behind it, by its whole length.
TEST(ParamGather, StepStartHidesALaterStagesGatherUnderThePipelineFill) {
  const Observed use0 = run(true, 2, PipelineSchedule::one_f_one_b, 0, ParamGatherStart::first_use);
  const Observed use1 = run(true, 2, PipelineSchedule::one_f_one_b, 1, ParamGatherStart::first_use);
  const Observed step0 = run(true, 2, PipelineSchedule::one_f_one_b, 0, ParamGatherStart::step);
  const Observed step1 = run(true, 2, PipelineSchedule::one_f_one_b, 1, ParamGatherStart::step);
  ASSERT_EQ(use1.gathers.size(), 1u);
  ASSERT_EQ(step1.gathers.size(), 1u);
  ASSERT_FALSE(step0.sends.empty());
  EXPECT_EQ(step1.gathers.front().start, Time::zero());
  EXPECT_LE(step1.gathers.front().end, step0.sends.front().end) << "the gather is in before the first activation";
  // Stage 0 dispatches its first bucket at the start under both rules, and the same buckets.
  ASSERT_FALSE(use0.gathers.empty());
  EXPECT_EQ(step0.gathers.size(), use0.gathers.size());
  EXPECT_EQ(use0.gathers.front().start, Time::zero());
  EXPECT_EQ(step0.gathers.front().start, Time::zero());
  const double gather = (use1.gathers.front().end - use1.gathers.front().start).seconds();
  EXPECT_NEAR(use1.step_s - step1.step_s, gather, 1e-6 * use1.step_s);
}

// A step graph carries its gathers: built with the setting on and run with it off (a graph file
// given to a configuration that differs), the parameters are still gathered once, under the
// forward pass, and the step is the one the setting on gives.
TEST(ParamGather, AGraphWithGatherWaitsDoesNotGatherAgainAfterTheStep) {
  const hw::Topology topo = two_nodes();
  StepInputs in = inputs(true, 1, PipelineSchedule::one_f_one_b);
  auto graph = build_step_graph(topo, in);
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  auto with = simulate_step(topo, in, &*graph);
  ASSERT_TRUE(with.ok());
  in.parallel.overlap_param_gather = false;
  auto off_config = simulate_step(topo, in, &*graph);
  ASSERT_TRUE(off_config.ok());
  EXPECT_EQ(off_config->step_time_s, with->step_time_s);
}

// Megatron-Core's gradient buckets follow the same rule: stage 0's first chunk is bucketed by the
// cap, every other stage and chunk is one bucket, and no bucket spans two chunks.
TEST(ParamGather, MegatronBucketsOnlyTheFirstStagesFirstChunk) {
  const hw::Topology topo = two_nodes();
  // Megatron-Core's rule: max(40M, 1M x 8) = 40M parameters.
  StepInputs in = inputs(false, 2, PipelineSchedule::interleaved_1f1b);
  in.training.micro_batch = 1;
  in.training.seq_len = 1024;
  in.training.global_batch = 8 * 4;
  auto graph = build_step_graph(topo, in);
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  const auto& stages = graph->kinds[0];
  // Stage 0 holds chunks 0 (the embedding, blocks 0-1) and 2 (blocks 4-5); stage 1 chunks 1
  // (blocks 2-3) and 3 (blocks 6-7, the head). Chunk 0 from its end: blocks 1 and 0 (56.6M) close a
  // bucket, the embedding (12.3M) is the remainder; chunk 2 is one bucket. Stage 1: one per chunk.
  EXPECT_EQ(stages[0].buckets.size(), 3u);
  EXPECT_EQ(stages[1].buckets.size(), 2u);
  double stage1 = 0;
  for (const Bucket& b : stages[1].buckets) stage1 += b.params;
  EXPECT_NEAR(stage1, 4 * 12 * 1536.0 * 1536.0 + 8000 * 1536.0, 1e-3 * stage1);  // blocks 2, 3, 6, 7 and the head, with norms
}

}  // namespace
}  // namespace dtsim::workloads
