// ZeRO-3 / FSDP gradient reduction per micro-batch (docs/model.md, "ZeRO-3 gradient reduction per
// micro-batch"). PyTorch FSDP reduce-scatters each layer's gradients at the end of every backward
// unless the step runs inside no_sync(), which keeps unsharded gradients and so gives up what
// FULL_SHARD saves; DeepSpeed ZeRO stage 3 reduces at every micro-step too. The distributed
// optimizer (zero 1) reduces once, after the last micro-batch (Megatron-LM).
// Closed forms checked: with M micro-batches per step, ZeRO-3 issues exactly M times the
// reduce-scatters of a one-micro-batch step; ZeRO-1 issues the same number for every M; the
// optimizer updates each tensor once whatever M (its time does not grow with M).
// One NCCL stream per process group (docs/model.md, "One stream for the data-parallel group"):
// FSDP issues its all-gathers and reduce-scatters to one process group, and "any collectives,
// even if issued in different streams, contend for the same per-device NCCL stream"
// (torch/distributed/fsdp/api.py, BackwardPrefetch). Checked: with the shared stream no gather
// overlaps a reduce-scatter, and when communication outlasts compute the backward pass's
// collectives run back to back in FSDP's BACKWARD_PRE issue order (gather of layer l - 1, then
// layer l's reduce-scatter), so their span is the sum of their times; with
// separate_gather_group they overlap.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/hw/fixtures.hpp"
#include "tests/workloads/fixtures.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;
using testing::gpt;


struct Counted {
  int reduce_scatters = 0;
  double optimizer_s = 0;
};

// Two nodes of 8 GPUs, data parallelism 16, `micro` micro-batches of one sequence per step.
Counted run(int zero, int micro, Bytes bucket = Bytes::MiB(25)) {
  auto topo = std::move(hw::Topology::build(cluster(nvswitch_node(8, true, 25), 2, hw::FabricKind::fat_tree, 40))).value();
  StepInputs in;
  in.model = gpt(4, 2048);
  in.training.global_batch = 16 * micro;
  in.training.micro_batch = 1;
  in.training.seq_len = 1024;
  in.parallel.zero = zero;
  in.parallel.bucket = bucket;
  in.record_timeline = true;
  auto r = simulate_step(topo, in);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  Counted c;
  if (!r.ok()) return c;
  for (const TimelineEvent& e : r->timeline.events) {
    if (e.stage == 0 && e.replica == 0 && e.track == TimelineEvent::Track::dp && e.name.rfind("dp reducescatter", 0) == 0) ++c.reduce_scatters;
  }
  c.optimizer_s = r->breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)];
  return c;
}

TEST(Zero3, ReduceScattersGradientsAfterEveryMicroBatch) {
  const Counted one = run(3, 1);
  ASSERT_GT(one.reduce_scatters, 0);
  for (int m : {2, 4}) {
    const Counted many = run(3, m);
    EXPECT_EQ(many.reduce_scatters, m * one.reduce_scatters) << m << " micro-batches";
    EXPECT_DOUBLE_EQ(many.optimizer_s, one.optimizer_s) << "the optimizer updates each shard once";
  }
}

// Without a bucket size (the configuration's default for zero 3), ZeRO-3 reduce-scatters per
// unit, as FSDP reduces each unit's FlatParameter: the 4 layers plus the embedding's and the
// head's units (the same units it gathers), 6 per micro-batch. With DDP's 25 MiB buckets a
// 2048-wide layer (12 x 2048^2 = 50.3 M parameters, 201 MB of fp32 gradients) is cut into several.
TEST(Zero3, ReduceScattersOneUnitAtATimeUnlessABucketIsGiven) {
  const Counted units = run(3, 1, Bytes(0));
  EXPECT_EQ(units.reduce_scatters, 6);
  EXPECT_EQ(run(3, 2, Bytes(0)).reduce_scatters, 12);
  EXPECT_GT(run(3, 1).reduce_scatters, units.reduce_scatters);
}

struct DpEvent {
  bool gather = false;
  double start = 0, end = 0;
};

// Stage 0, replica 0's data-parallel collectives of a communication-bound ZeRO-3 step (short
// sequences, 2048-wide layers over a 25 Gb/s network), in start order.
std::vector<DpEvent> dp_events(bool separate) {
  auto topo = std::move(hw::Topology::build(cluster(nvswitch_node(8, true, 25), 2, hw::FabricKind::fat_tree, 40))).value();
  StepInputs in;
  in.model = gpt(4, 2048);
  in.training.global_batch = 16;
  in.training.micro_batch = 1;
  in.training.seq_len = 128;
  in.parallel.zero = 3;
  in.parallel.bucket = Bytes(0);
  in.parallel.separate_gather_group = separate;
  in.record_timeline = true;
  auto r = simulate_step(topo, in);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  std::vector<DpEvent> out;
  if (!r.ok()) return out;
  for (const TimelineEvent& e : r->timeline.events) {
    if (e.stage != 0 || e.replica != 0 || e.track != TimelineEvent::Track::dp) continue;
    const bool gather = e.name.rfind("dp allgather (parameters)", 0) == 0;
    if (!gather && e.name.rfind("dp reducescatter", 0) != 0) continue;
    out.push_back({gather, e.start.seconds(), e.end.seconds()});
  }
  std::sort(out.begin(), out.end(), [](const DpEvent& a, const DpEvent& b) { return a.start < b.start; });
  return out;
}

TEST(Zero3, GathersAndReduceScattersShareTheGroupsStream) {
  const std::vector<DpEvent> ev = dp_events(false);
  // 6 units (4 layers, the embedding and the head): gathered for the forward and again for the
  // backward pass (the last unit's forward gather serves its backward), 6 reduce-scatters.
  ASSERT_GE(ev.size(), 12U);
  for (std::size_t i = 1; i < ev.size(); ++i) {
    EXPECT_GE(ev[i].start, ev[i - 1].end - 1e-9) << "collective " << i << " starts before collective " << i - 1 << " ends";
  }
  // From the first reduce-scatter on, each collective starts as the one before ends: the stream
  // is never idle, since each waits only for collectives issued before it and compute is shorter
  // than either. Gathers and reduce-scatters alternate until the gathers run out (the embedding's
  // is the last); its reduce-scatter and then the embedding's follow.
  std::size_t first_rs = 0, last_gather = 0;
  while (first_rs < ev.size() && ev[first_rs].gather) ++first_rs;
  for (std::size_t i = 0; i < ev.size(); ++i) last_gather = ev[i].gather ? i : last_gather;
  ASSERT_LT(first_rs + 3, last_gather);
  EXPECT_EQ(ev.size() - last_gather, 3U) << "two reduce-scatters after the last gather";
  for (std::size_t i = first_rs + 1; i < ev.size(); ++i) {
    if (i <= last_gather) {
      EXPECT_NE(ev[i].gather, ev[i - 1].gather) << "collective " << i << " (BACKWARD_PRE order: gather, reduce-scatter, ...)";
    }
    EXPECT_NEAR(ev[i].start, ev[i - 1].end, 1e-9) << "collective " << i;
  }
}

TEST(Zero3, ASeparateGatherGroupOverlapsGathersWithReduceScatters) {
  const std::vector<DpEvent> ev = dp_events(true);
  bool overlap = false;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    for (std::size_t j = i + 1; j < ev.size(); ++j) {
      if (ev[i].gather != ev[j].gather && ev[j].start < ev[i].end - 1e-9 && ev[i].start < ev[j].end - 1e-9) overlap = true;
    }
  }
  EXPECT_TRUE(overlap);
}

// Every data-parallel implementation ZeRO-3 accepts finishes its step with the gathers on the
// group's stream, with every replica simulated and with two micro-batches (a bucket left queued
// behind a gather that waits for it would deadlock: no-overlap's buckets are reduced only after
// the backward pass, so they do not take the stream's turns before it).
TEST(Zero3, EveryDataParallelImplementationFinishesItsStep) {
  auto topo = std::move(hw::Topology::build(cluster(nvswitch_node(8, true, 25), 2, hw::FabricKind::fat_tree, 40))).value();
  for (DpImpl impl : {DpImpl::ddp, DpImpl::no_overlap, DpImpl::horovod}) {
    for (bool symmetric : {true, false}) {
      StepInputs in;
      in.model = gpt(4, 2048);
      in.training.global_batch = 32;
      in.training.micro_batch = 1;
      in.training.seq_len = 128;
      in.parallel.zero = 3;
      in.parallel.bucket = Bytes(0);
      in.parallel.dp_impl = impl;
      in.symmetric = symmetric;
      auto r = simulate_step(topo, in);
      EXPECT_TRUE(r.ok()) << to_string(impl) << (symmetric ? "" : ", every replica") << ": " << (r.ok() ? std::string() : r.error().to_string());
    }
  }
}

TEST(Zero3, DistributedOptimizerReducesOnceAfterTheLastMicroBatch) {
  const Counted one = run(1, 1);
  ASSERT_GT(one.reduce_scatters, 0);
  EXPECT_EQ(run(1, 4).reduce_scatters, one.reduce_scatters);
}

}  // namespace
}  // namespace dtsim::workloads
