// ZeRO-3 / FSDP gradient reduction per micro-batch (docs/model.md, "ZeRO-3 gradient reduction per
// micro-batch"). PyTorch FSDP reduce-scatters each layer's gradients at the end of every backward
// unless the step runs inside no_sync(), which keeps unsharded gradients and so gives up what
// FULL_SHARD saves; DeepSpeed ZeRO stage 3 reduces at every micro-step too. The distributed
// optimizer (zero 1) reduces once, after the last micro-batch (Megatron-LM).
// Closed forms checked: with M micro-batches per step, ZeRO-3 issues exactly M times the
// reduce-scatters of a one-micro-batch step; ZeRO-1 issues the same number for every M; the
// optimizer updates each tensor once whatever M (its time does not grow with M).
#include <string>

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

TEST(Zero3, DistributedOptimizerReducesOnceAfterTheLastMicroBatch) {
  const Counted one = run(1, 1);
  ASSERT_GT(one.reduce_scatters, 0);
  EXPECT_EQ(run(1, 4).reduce_scatters, one.reduce_scatters);
}

}  // namespace
}  // namespace dtsim::workloads
