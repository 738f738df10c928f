// The training-step simulation against closed forms: pipeline bubbles (Narayanan et al. 2021),
// the exposed tail of DDP's last gradient bucket, the no-overlap baseline, and the symmetry claim.
#include "workloads/step.hpp"

#include <gtest/gtest.h>

#include "tests/hw/fixtures.hpp"
#include "tests/workloads/fixtures.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

TransformerSpec small_gpt(std::int64_t layers, std::int64_t vocab, std::int64_t hidden = 1024) {
  TransformerSpec m = testing::gpt(layers, hidden, vocab, 2048);
  m.name = "small";
  m.bias = false;
  m.tied_embeddings = true;
  return m;
}

StepInputs inputs(const TransformerSpec& m, std::int64_t global_batch, std::int64_t micro_batch) {
  StepInputs in;
  in.model = m;
  in.training.global_batch = global_batch;
  in.training.micro_batch = micro_batch;
  in.training.seq_len = 2048;
  in.compute.kernel_overhead = Time::zero();
  in.compute.comm_slowdown = 0;
  return in;
}

hw::Topology node_with(int gpus) {
  auto c = cluster(nvswitch_node(), 1, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = gpus;
  return std::move(hw::Topology::build(c)).value();
}

// Time the pipeline is idle over its compute time: the step minus compute and the optimizer step
// that follows the pipeline flush.
double bubble_fraction(const StepResult& r) {
  const double compute = r.breakdown_s[static_cast<std::size_t>(TimeKind::compute)];
  const double optimizer = r.breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)];
  return (r.step_time_s - compute - optimizer) / compute;
}

TEST(PipelineBubble, OneFOneBAndGPipeLoseTheClosedFormFraction) {
  // p = 4 stages of 2 layers, m = 8 micro-batches, communication free: the bubble over the ideal
  // compute time is (p - 1) / m (Narayanan et al. 2021, section 2.2). The layers are large and the
  // embedding and head small (vocabulary 8), so that the stages are equal to within 0.2%.
  const hw::Topology topo = node_with(4);
  for (PipelineSchedule s : {PipelineSchedule::one_f_one_b, PipelineSchedule::gpipe}) {
    StepInputs in = inputs(small_gpt(8, 8, 4096), 8, 1);
    in.parallel.pp = 4;
    in.parallel.schedule = s;
    in.free_communication = true;
    auto r = simulate_step(topo, in);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_NEAR(bubble_fraction(*r), 3.0 / 8.0, 0.005) << to_string(s);
  }
}

TEST(PipelineBubble, InterleavingDividesItByTheVirtualStages) {
  // (p - 1) / (v m) with v = 2 model chunks per stage.
  const hw::Topology topo = node_with(4);
  StepInputs in = inputs(small_gpt(16, 8, 4096), 8, 1);
  in.parallel.pp = 4;
  in.parallel.schedule = PipelineSchedule::interleaved_1f1b;
  in.parallel.virtual_stages = 2;
  in.free_communication = true;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_NEAR(bubble_fraction(*r), 3.0 / 16.0, 0.005);
}

TEST(PipelineSplit, ChunksHoldingOnlyTheEmbeddingOrTheLossRunAndCountTheirStagesBlocks) {
  // 6 blocks + the embedding and the loss fill 2 stages x 4 chunks one slot each: stage 0 holds
  // the embedding chunk and 3 blocks, stage 1 three blocks and the loss chunk. Before, the step and
  // the memory estimate refused this layout (6 layers < 8 virtual stages) though the split is valid.
  const hw::Topology topo = node_with(2);
  StepInputs in = inputs(small_gpt(6, 8, 1024), 8, 1);
  in.parallel.pp = 2;
  in.parallel.schedule = PipelineSchedule::interleaved_1f1b;
  in.parallel.virtual_stages = 4;
  in.parallel.split = PipelineSplit::embedding_loss;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_EQ(r->stages[0].layers, 3);
  EXPECT_EQ(r->stages[1].layers, 3);
  auto est = estimate_memory(topo, in);
  ASSERT_TRUE(est.ok()) << est.error().to_string();
  ASSERT_EQ(est->stages.size(), 2u);
  EXPECT_EQ(est->stages[0].layers, 3);
  EXPECT_EQ(est->stages[1].layers, 3);
}

TEST(TiedEmbeddings, ALaterStageKeepsItsOwnCopyOfTheTable) {
  // Megatron-Core keeps a second copy of a tied word-embedding table on the last pipeline stage
  // (language_module.py, setup_embeddings_and_output_layer), with its own gradient and optimizer
  // state: there the tied model holds what an untied one holds. On one stage the head uses the
  // embedding's table, and the tied model holds vocab x hidden 16-bit weights less.
  const hw::Topology topo = node_with(2);
  TransformerSpec untied = small_gpt(4, 32000);
  untied.tied_embeddings = false;
  const double table_bytes = 32000.0 * 1024.0 * 2.0;
  StepInputs tied_in = inputs(small_gpt(4, 32000), 8, 1), untied_in = inputs(untied, 8, 1);
  for (StepInputs* in : {&tied_in, &untied_in}) in->parallel.pp = 2;
  auto tied2 = estimate_memory(topo, tied_in), untied2 = estimate_memory(topo, untied_in);
  ASSERT_TRUE(tied2.ok() && untied2.ok());
  for (std::size_t s : {0u, 1u}) {
    EXPECT_DOUBLE_EQ(tied2->stages[s].memory.params, untied2->stages[s].memory.params) << "stage " << s;
    EXPECT_DOUBLE_EQ(tied2->stages[s].memory.optimizer, untied2->stages[s].memory.optimizer) << "stage " << s;
  }
  for (StepInputs* in : {&tied_in, &untied_in}) {
    in->parallel.pp = 1;
    in->parallel.dp = 2;
  }
  auto tied1 = estimate_memory(topo, tied_in), untied1 = estimate_memory(topo, untied_in);
  ASSERT_TRUE(tied1.ok() && untied1.ok());
  EXPECT_DOUBLE_EQ(untied1->stages[0].memory.params - tied1->stages[0].memory.params, table_bytes);
}

// The closed-form time of one data-parallel all-reduce of `bytes` over the node's 8 GPUs.
double allreduce_s(const hw::Topology& topo, const StepInputs& in, double bytes) {
  hw::Router router(topo);
  comm::Planner planner(topo, router, in.comm);
  comm::CollectiveRequest req;
  req.op = CollOp::allreduce;
  req.size = Bytes(static_cast<std::int64_t>(bytes));
  for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
  return planner.plan(req)->estimate.seconds();
}

struct DdpSetup {
  hw::Topology topo = node_with(8);
  TransformerSpec m = small_gpt(4, 8);
  StepInputs in = inputs(m, 64, 8);  // dp 8, one micro-batch of 8 sequences per GPU
  double block_params = 0, embedding_params = 0, head_params = 0;
  DdpSetup() {
    ProgramShape sh;
    sh.micro_batch = 8;
    sh.seq = 2048;
    block_params = static_cast<double>(transformer_block(m, sh).params);
    embedding_params = static_cast<double>(transformer_embedding(m, sh).params);
    head_params = static_cast<double>(transformer_head(m, sh).params);
    // PyTorch DDP's rule (docs/model.md): gradient tensors in backward order, a bucket closed once
    // it holds at least its limit, 1 MiB for the first. A block's tensors, last first: MLP down
    // (ffn x hidden, 16 MiB of fp32), MLP up, norm, projection, QKV, norm. With a cap of exactly
    // one block's fp32 gradients the buckets are {head, block 4's MLP down} (past 1 MiB),
    // {the rest of block 4, block 3's MLP down} (exactly one block), likewise for blocks 3 and 2,
    // and {the rest of block 1, the embedding}: 5 buckets, each ready when its last tensor's block
    // is done (a block's tensors are taken to be ready together, at the end of its backward).
    in.parallel.bucket = Bytes(static_cast<std::int64_t>(block_params * 4));
    mlp_down_params = static_cast<double>(m.ffn * m.hidden);
  }
  double mlp_down_params = 0;
};

TEST(DataParallel, DdpExposesOnlyTheLastBucketsAllReduce) {
  // The buckets closed at blocks 4, 3 and 2 are reduced while backward still computes; the last
  // two (closed by block 1 and by the embedding, whose backward is a few microseconds) are ready
  // only when backward ends. The step is compute, then those two all-reduces, then the optimizer.
  DdpSetup d;
  auto r = simulate_step(d.topo, d.in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double tail = allreduce_s(d.topo, d.in, d.block_params * 4) +
                      allreduce_s(d.topo, d.in, (d.block_params - d.mlp_down_params + d.embedding_params) * 4);
  // The embedding's backward (one memory-bound pass over [tokens, hidden]) runs beside the first
  // of the two: the exposed time is the tail less that pass.
  ProgramShape sh;
  sh.micro_batch = 8;
  sh.seq = 2048;
  const ComputeModel cm(d.topo.node_template(0).spec().gpu, d.in.compute);
  double embedding_backward = 0;
  for (const auto& seg : transformer_embedding(d.m, sh).backward.segments) {
    for (const auto& k : seg.kernels) embedding_backward += cm.kernel_time(k).seconds();
  }
  const double dp = r->breakdown_s[static_cast<std::size_t>(TimeKind::dp)];
  EXPECT_NEAR(dp, tail - embedding_backward, 0.01 * tail);
  const double compute = r->breakdown_s[static_cast<std::size_t>(TimeKind::compute)];
  const double optimizer = r->breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)];
  EXPECT_NEAR(r->step_time_s, compute + dp + optimizer, 1e-6 * r->step_time_s);
}

TEST(DataParallel, NoOverlapReducesEveryBucketAfterBackward) {
  DdpSetup d;
  d.in.parallel.dp_impl = DpImpl::no_overlap;
  auto r = simulate_step(d.topo, d.in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double expected = allreduce_s(d.topo, d.in, (d.head_params + d.mlp_down_params) * 4) +
                          3 * allreduce_s(d.topo, d.in, d.block_params * 4) +
                          allreduce_s(d.topo, d.in, (d.block_params - d.mlp_down_params + d.embedding_params) * 4);
  EXPECT_NEAR(r->breakdown_s[static_cast<std::size_t>(TimeKind::dp)], expected, 0.01 * expected);
}

TEST(Symmetry, OneReplicaPerStageGivesTheSameStepAsAllReplicas) {
  // 4 nodes of 8 GPUs on one switch (every replica sees identical links): tp 8 x pp 2 x dp 2.
  const auto topo = std::move(hw::Topology::build(cluster(nvswitch_node(), 4, hw::FabricKind::single_switch))).value();
  StepInputs in = inputs(small_gpt(8, 32000), 32, 2);
  in.parallel.tp = 8;
  in.parallel.pp = 2;
  in.compute.comm_slowdown = 0.1;
  auto sym = simulate_step(topo, in);
  in.symmetric = false;
  auto all = simulate_step(topo, in);
  ASSERT_TRUE(sym.ok() && all.ok());
  EXPECT_NEAR(sym->step_time_s, all->step_time_s, 1e-9 * all->step_time_s);
  EXPECT_NE(sym->symmetry_note.find("1 of 2 data-parallel replicas"), std::string::npos);
  EXPECT_GT(all->events, sym->events);
}

TEST(Step, SameInputGivesIdenticalResults) {
  DdpSetup d;
  auto a = simulate_step(d.topo, d.in);
  auto b = simulate_step(d.topo, d.in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->step_time_s, b->step_time_s);
  EXPECT_EQ(a->breakdown_s, b->breakdown_s);
  EXPECT_EQ(a->events, b->events);
}

TEST(Step, ImpossibleLayoutsAreClearErrors) {
  const hw::Topology topo = node_with(8);
  StepInputs in = inputs(small_gpt(8, 8), 64, 1);
  in.parallel.tp = 3;
  in.parallel.dp = 2;
  auto r = simulate_step(topo, in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "parallel");
  EXPECT_NE(r.error().message.find("= 6 but the cluster has 8 GPUs"), std::string::npos) << r.error().message;

  in.parallel = ParallelSpec{};
  in.training.global_batch = 12;  // dp 8 x micro-batch 1 does not divide 12
  EXPECT_EQ(simulate_step(topo, in).error().field, "training.global_batch");

  in.training.global_batch = 64;
  in.parallel.pp = 8;
  in.parallel.dp = 1;
  in.model = small_gpt(4, 8);  // 4 layers cannot fill 8 stages
  EXPECT_EQ(simulate_step(topo, in).error().field, "parallel.pp");
}

TEST(Step, OutOfMemoryIsReportedNotAnError) {
  const hw::Topology topo = node_with(1);
  TransformerSpec big = small_gpt(80, 32000);
  big.hidden = 8192;
  big.head_dim = 128;
  big.heads = 64;
  big.kv_heads = 64;
  big.ffn = 28672;  // about 70 B parameters on one GPU
  auto r = simulate_step(topo, inputs(big, 1, 1));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(r->fits);
  EXPECT_NE(r->memory_note.find("rank 0"), std::string::npos);
  EXPECT_NE(r->memory_note.find("80.0 GiB"), std::string::npos) << r->memory_note;
}

TEST(Timeline, OneFOneBOrderAndComputeTotals) {
  // p = 4, m = 8, 1F1B: stage 0 runs p - 1 = 3 warm-up forwards, then alternates one forward and
  // one backward, then drains the remaining 3 backwards (Narayanan et al. 2021, figure 4). Its
  // compute events never overlap and add up to the compute time in the breakdown.
  const hw::Topology topo = node_with(4);
  StepInputs in = inputs(small_gpt(8, 8, 4096), 8, 1);
  in.parallel.pp = 4;
  in.record_timeline = true;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const Timeline& tl = r->timeline;
  ASSERT_EQ(tl.ranks.size(), 4U);
  std::vector<std::string> order;
  double compute = 0;
  Time last_end = Time::zero();
  int sends = 0;
  for (const TimelineEvent& e : tl.events) {
    EXPECT_LE(e.start, e.end);
    EXPECT_LE(e.end.seconds(), r->step_time_s * (1 + 1e-12));
    if (e.stage != 0) continue;
    if (e.track == TimelineEvent::Track::pipeline) ++sends;
    if (e.track != TimelineEvent::Track::compute) continue;
    EXPECT_GE(e.start, last_end) << e.name;
    last_end = e.end;
    compute += (e.end - e.start).seconds();
    if (e.name != "optimizer step") order.push_back(e.name.substr(0, e.name.find(' ')) + e.name.substr(e.name.rfind(' ')));
  }
  const std::vector<std::string> expected{"forward 0", "forward 1", "forward 2", "forward 3", "backward 0", "forward 4", "backward 1",
                                          "forward 5", "backward 2", "forward 6", "backward 3", "forward 7", "backward 4",
                                          "backward 5", "backward 6", "backward 7"};
  EXPECT_EQ(order, expected);
  EXPECT_EQ(sends, 8);  // one activation per micro-batch to stage 1; stage 0 sends no gradients
  const double booked = r->stages[0].time_s[static_cast<std::size_t>(TimeKind::compute)] +
                        r->stages[0].time_s[static_cast<std::size_t>(TimeKind::optimizer)];
  EXPECT_NEAR(compute, booked, 1e-9 * booked);
}

TEST(Timeline, StageFilterAndDataParallelBuckets) {
  // DDP with five buckets (DdpSetup): the dp track holds exactly five all-reduces; a filter for
  // stage 1 of a one-stage run records nothing.
  DdpSetup d;
  d.in.record_timeline = true;
  auto r = simulate_step(d.topo, d.in);
  ASSERT_TRUE(r.ok());
  int dp = 0;
  for (const auto& e : r->timeline.events) dp += e.track == TimelineEvent::Track::dp ? 1 : 0;
  EXPECT_EQ(dp, 5);
  ASSERT_EQ(r->timeline.ranks.size(), 1U);
  EXPECT_EQ(r->timeline.ranks[0], std::vector<int>{0});
  d.in.timeline_stages = {1};
  auto none = simulate_step(d.topo, d.in);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->timeline.events.empty());
  EXPECT_EQ(none->step_time_s, r->step_time_s);
}

}  // namespace
}  // namespace dtsim::workloads
