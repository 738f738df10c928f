// The classic multi-GPU setups against hand-computed cases: nn.DataParallel's traffic through GPU 0,
// a parameter server's NIC, MirroredStrategy's single all-reduce, an input pipeline's cap on
// throughput, and the time, energy and cost of a run.
#include <gtest/gtest.h>

#include "comm/collective.hpp"
#include "tests/hw/fixtures.hpp"
#include "workloads/run.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

constexpr double kResNet50Params = 25'557'032;  // torchvision's resnet50 (He et al. 2016)

hw::Topology one_node(int gpus, double nic_GBps = 50) {
  auto c = cluster(nvswitch_node(8, true, nic_GBps), 1, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = gpus;
  return std::move(hw::Topology::build(c)).value();
}

StepInputs resnet(std::int64_t global_batch, std::int64_t micro_batch) {
  StepInputs in;
  in.model = make_resnet50();
  in.training.global_batch = global_batch;
  in.training.micro_batch = micro_batch;
  in.training.precision = hw::DType::bf16;
  in.training.optimizer = Optimizer::sgd_momentum;
  in.compute.kernel_overhead = Time::zero();
  in.compute.comm_slowdown = 0;
  return in;
}

const TimelineEvent* find_event(const StepResult& r, const std::string& name) {
  for (const auto& e : r.timeline.events) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST(DataParallel, GpuZeroSendsAModelCopyToEveryOtherGpuAndReceivesEveryGradient) {
  // nn.DataParallel with plain copies: GPU 0 sends (n - 1) fp32 model copies out of its one
  // 100 GB/s NVSwitch port to replicate the module, and receives (n - 1) fp32 gradient copies into
  // it. Each takes (n - 1) x 4 P / 100 GB/s, plus one path's latency (2 x 0.3 us) and the call
  // overhead.
  const hw::Topology topo = one_node(8);
  StepInputs in = resnet(64, 8);
  in.parallel.dp_impl = DpImpl::dataparallel;
  in.parallel.dataparallel.nccl = false;
  in.record_timeline = true;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double copies = 7 * 4 * kResNet50Params / 100e9 + 0.6e-6 + in.comm.call_overhead.seconds();
  const TimelineEvent* rep = find_event(*r, "replicate the model from GPU 0");
  const TimelineEvent* red = find_event(*r, "reduce gradients onto GPU 0");
  ASSERT_NE(rep, nullptr);
  ASSERT_NE(red, nullptr);
  EXPECT_NEAR((rep->end - rep->start).seconds(), copies, 1e-6 * copies);
  EXPECT_NEAR((red->end - red->start).seconds(), copies, 1e-6 * copies);
  // The host time of the single process: 8 GPUs x the per-GPU overhead, once per call.
  EXPECT_NEAR(r->breakdown_s[static_cast<std::size_t>(TimeKind::host)], 8 * in.parallel.dataparallel.host_overhead_per_gpu.seconds(), 1e-12);

  // With NCCL (broadcast and reduce along a chain), GPU 0's port carries one copy, not seven.
  in.parallel.dataparallel.nccl = true;
  auto nccl = simulate_step(topo, in);
  ASSERT_TRUE(nccl.ok());
  const TimelineEvent* rep2 = find_event(*nccl, "replicate the model from GPU 0");
  ASSERT_NE(rep2, nullptr);
  EXPECT_LT((rep2->end - rep2->start).seconds(), copies / 3);
  EXPECT_GT(nccl->samples_per_s, r->samples_per_s);
}

TEST(DataParallel, OnlyInOneNode) {
  const auto topo = std::move(hw::Topology::build(cluster(nvswitch_node(), 2, hw::FabricKind::single_switch))).value();
  StepInputs in = resnet(64, 4);
  in.parallel.dp_impl = DpImpl::dataparallel;
  auto r = simulate_step(topo, in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "parallel.dp_impl");
  EXPECT_NE(r.error().message.find("2 nodes"), std::string::npos) << r.error().message;
  in.parallel.dp_impl = DpImpl::mirrored;
  EXPECT_EQ(simulate_step(topo, in).error().field, "parallel.dp_impl");
}

TEST(ParameterServer, OneShardIsBoundedByItsNodesNic) {
  // Four nodes with one GPU each; the one shard lives on node 0's CPU. The three remote workers'
  // gradients all enter node 0 through one 10 GB/s NIC port (the PCIe links behind it run at
  // 32 GB/s), and their weights leave through it: push and pull take 3 x 4 P / 10 GB/s each. The
  // local worker's traffic stays on PCIe. One bucket (pushed after backward) and an instant
  // update leave the data-parallel time = push + pull.
  auto c = cluster(nvswitch_node(8, true, 10), 4, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = 1;
  const auto topo = std::move(hw::Topology::build(c)).value();
  StepInputs in = resnet(4, 1);
  in.parallel.dp_impl = DpImpl::parameter_server;
  in.parallel.bucket = Bytes::GiB(1);
  in.parallel.parameter_server.update_bandwidth = Bandwidth::GBps(1e9);
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const double nic_bound = 2 * 3 * 4 * kResNet50Params / 10e9;
  const double dp = r->breakdown_s[static_cast<std::size_t>(TimeKind::dp)];
  EXPECT_GE(dp, nic_bound);
  EXPECT_NEAR(dp, nic_bound, 0.001 * nic_bound);
  // The optimizer runs on the shards, not on the GPUs.
  EXPECT_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)], 0.0);

  // Four shards, one per node: each NIC carries a quarter of the three remote workers' traffic.
  in.parallel.parameter_server.shards = 4;
  auto four = simulate_step(topo, in);
  ASSERT_TRUE(four.ok()) << four.error().to_string();
  const double dp4 = four->breakdown_s[static_cast<std::size_t>(TimeKind::dp)];
  EXPECT_NEAR(dp4, nic_bound / 4, 0.01 * nic_bound / 4);

  in.parallel.parameter_server.shards = 5;  // 4 nodes of one socket each
  EXPECT_EQ(simulate_step(topo, in).error().field, "parallel.parameter_server.shards");
}

TEST(Mirrored, OneAllReduceOfEveryGradientAfterBackward) {
  // MirroredStrategy packs every gradient into one NCCL all-reduce (num_packs = 1) after the
  // backward pass: the exposed data-parallel time is that all-reduce's.
  const hw::Topology topo = one_node(8);
  StepInputs in = resnet(64, 8);
  in.parallel.dp_impl = DpImpl::mirrored;
  auto r = simulate_step(topo, in);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  hw::Router router(topo);
  comm::Planner planner(topo, router, in.comm);
  comm::CollectiveRequest req;
  req.op = CollOp::allreduce;
  req.size = Bytes(static_cast<std::int64_t>(4 * kResNet50Params));
  for (int i = 0; i < 8; ++i) req.ranks.push_back(i);
  const double expected = planner.plan(req)->estimate.seconds();
  EXPECT_NEAR(r->breakdown_s[static_cast<std::size_t>(TimeKind::dp)], expected, 0.01 * expected);
}

InputPipeline loader(double decode_rate) {
  InputPipeline ip;
  ip.dataset = "test";
  ip.samples = 1e6;
  ip.sample_bytes = Bytes(100'000);
  ip.input_bytes = Bytes(150'528);  // 3 x 224 x 224 uint8
  ip.read_bandwidth = Bandwidth::GBps(100);
  ip.decoder = InputPipeline::Decoder::gpu;
  ip.decode_rate = decode_rate;
  return ip;
}

TEST(InputPipeline, ALoaderOfRSamplesPerSecondCapsThroughputAtR) {
  const hw::Topology topo = one_node(8);
  StepInputs in = resnet(256, 32);
  auto free_run = simulate_step(topo, in);
  ASSERT_TRUE(free_run.ok());
  // 8 GPUs decoding 50 images/s each: R = 400 images/s, far below what the GPUs could take.
  in.training.data = loader(50);
  auto capped = simulate_step(topo, in);
  ASSERT_TRUE(capped.ok()) << capped.error().to_string();
  EXPECT_NEAR(capped->samples_per_s, 400.0, 1e-9 * 400);
  EXPECT_EQ(capped->input.bound_by, "decode");
  EXPECT_NEAR(capped->breakdown_s[static_cast<std::size_t>(TimeKind::input)], 256.0 / 400 - free_run->step_time_s, 1e-9);
  // A loader faster than the GPUs costs nothing (its copies use PCIe, the all-reduces NVLink).
  in.training.data = loader(1e6);
  auto fast = simulate_step(topo, in);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->input.bound_by, "gpus");
  EXPECT_EQ(fast->step_time_s, free_run->step_time_s);
  // Each GPU's 32 images (4.8 MB) come over its own PCIe link at 32 GB/s, two GPUs per switch
  // sharing the switch's 32 GB/s uplink from the CPU: 2 x 4.82 MB / 32 GB/s.
  EXPECT_NEAR(fast->input.h2d_s, 2 * 32 * 150'528 / 32e9, 0.02 * 2 * 32 * 150'528 / 32e9);
  // Storage-bound: one node reads its 256 samples of 100 kB at 0.1 GB/s.
  InputPipeline slow_disk = loader(1e6);
  slow_disk.read_bandwidth = Bandwidth::GBps(0.1);
  in.training.data = slow_disk;
  auto disk = simulate_step(topo, in);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ(disk->input.bound_by, "storage");
  EXPECT_NEAR(disk->step_time_s, 256 * 100'000 / 0.1e9, 1e-9);
}

StepResult one_stage_step(double step_s, double compute_s, double comm_s, int gpus, std::int64_t seq) {
  StepResult s;
  s.step_time_s = step_s;
  s.gpus = gpus;
  s.seq = seq;
  StageReport st;
  st.time_s[static_cast<std::size_t>(TimeKind::compute)] = compute_s;
  st.time_s[static_cast<std::size_t>(TimeKind::dp)] = comm_s;
  s.stages.push_back(st);
  return s;
}

TEST(Run, EnergyAtConstantPowerIsPowerTimesTimeTimesPue) {
  // 16 GPUs at a constant 500 W for a 2 s step in a PUE 1.25 data centre: 16 x 500 x 2 x 1.25 J.
  PowerModel pm;
  pm.gpu_idle_w = 500;
  pm.gpu_max_w = 500;
  pm.pue = 1.25;
  auto e = estimate_run(one_stage_step(2.0, 1.0, 0.5, 16, 2048), 512, RunBudget{}, pm, Prices{}, 2);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_NEAR(e->step_energy_kwh, 16 * 500 * 2.0 * 1.25 / 3.6e6, 1e-15);
  EXPECT_DOUBLE_EQ(e->gpu_power_w, 500);
}

TEST(Run, PowerFollowsUtilization) {
  // Idle 100 W, max 700 W; half the step computing, a quarter only communicating (30% of the span),
  // a quarter idle: 100 + 600 x (0.5 + 0.3 x 0.25) = 445 W. 8 GPUs and one 1 kW node, PUE 1.
  PowerModel pm;
  pm.gpu_idle_w = 100;
  pm.gpu_max_w = 700;
  pm.comm_active = 0.3;
  pm.node_overhead_w = 1000;
  auto e = estimate_run(one_stage_step(4.0, 2.0, 1.0, 8, 0), 64, RunBudget{}, pm, Prices{}, 1);
  ASSERT_TRUE(e.ok());
  EXPECT_DOUBLE_EQ(e->utilization, 0.5);
  EXPECT_DOUBLE_EQ(e->gpu_power_w, 445);
  EXPECT_NEAR(e->step_energy_kwh, (8 * 445.0 + 1000) * 4.0 / 3.6e6, 1e-15);
}

TEST(Run, StepsTimeAndCostOfABudget) {
  // 1e12 tokens at 1,024 sequences of 4,096 tokens per step: ceil(1e12 / 4,194,304) = 238,419
  // steps; at 3 s each on 1,024 GPUs, 715,257 s and 203,451 GPU-hours.
  PowerModel pm;
  pm.gpu_idle_w = pm.gpu_max_w = 1000;
  Prices prices;
  prices.gpu_hour = 2.0;
  prices.kwh = 0.1;
  RunBudget b;
  b.tokens = 1e12;
  auto e = estimate_run(one_stage_step(3.0, 3.0, 0, 1024, 4096), 1024, b, pm, prices, 128);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->steps, 238'419);
  EXPECT_DOUBLE_EQ(e->time_to_train_s, 238'419 * 3.0);
  EXPECT_NEAR(e->gpu_hours, 238'419 * 3.0 * 1024 / 3600, 1e-6);
  EXPECT_NEAR(e->energy_kwh, 1024 * 1000.0 * 238'419 * 3.0 / 3.6e6, 1e-6);
  EXPECT_NEAR(e->cost, e->gpu_hours * 2.0 + e->energy_kwh * 0.1, 1e-6);

  // 90 ImageNet epochs at 1,024 images per step: ceil(1,281,167 / 1,024) = 1,252 steps per epoch;
  // 30 s of evaluation per epoch.
  RunBudget ep;
  ep.epochs = 90;
  ep.dataset_samples = 1'281'167;
  ep.per_epoch_overhead = Time::s(30);
  auto f = estimate_run(one_stage_step(0.5, 0.5, 0, 8, 0), 1024, ep, pm, prices, 1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->steps, 90 * 1252);
  EXPECT_DOUBLE_EQ(f->time_to_train_s, 90 * 1252 * 0.5 + 90 * 30.0);

  // Tokens for a CNN, and epochs without a dataset, are errors.
  EXPECT_FALSE(estimate_run(one_stage_step(0.5, 0.5, 0, 8, 0), 1024, b, pm, prices, 1).ok());
  ep.dataset_samples = 0;
  EXPECT_EQ(estimate_run(one_stage_step(0.5, 0.5, 0, 8, 0), 1024, ep, pm, prices, 1).error().field, "training.data");
}

}  // namespace
}  // namespace dtsim::workloads
