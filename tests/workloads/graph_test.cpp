// Step graphs as data: a graph written as JSON and read back runs to the same step; a graph drawn
// by hand runs to its closed-form time; a broken graph file is refused with the JSON path of the
// problem.
#include "workloads/graph_json.hpp"

#include <functional>

#include <gtest/gtest.h>

#include "tests/hw/fixtures.hpp"
#include "workloads/graph_build.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

TransformerSpec small_gpt(std::int64_t layers) {
  TransformerSpec m;
  m.name = "small";
  m.hidden = 1024;
  m.layers = layers;
  m.heads = 8;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 4096;
  m.vocab = 1024;
  m.max_seq = 2048;
  m.positions = Positions::rotary;
  m.norm = Norm::rmsnorm;
  return m;
}

StepInputs inputs(std::int64_t layers, std::int64_t global_batch, std::int64_t micro_batch) {
  StepInputs in;
  in.model = small_gpt(layers);
  in.training.global_batch = global_batch;
  in.training.micro_batch = micro_batch;
  in.training.seq_len = 1024;
  return in;
}

hw::Topology node_with(int gpus) {
  auto c = cluster(nvswitch_node(), 1, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = gpus;
  return std::move(hw::Topology::build(c)).value();
}

// Pipeline with 1F1B, interleaving, ZeRO-3, DDP buckets and tensor parallelism: the ops of every kind.
struct Case {
  const char* name;
  int gpus;
  StepInputs in;
};

std::vector<Case> cases() {
  std::vector<Case> cs;
  cs.push_back({"pp4-1f1b", 4, inputs(8, 16, 1)});
  cs.back().in.parallel.pp = 4;
  cs.push_back({"pp2-interleaved-tp2-dp2", 8, inputs(8, 16, 2)});
  cs.back().in.parallel.pp = 2;
  cs.back().in.parallel.tp = 2;
  cs.back().in.parallel.schedule = PipelineSchedule::interleaved_1f1b;
  cs.back().in.parallel.virtual_stages = 2;
  cs.push_back({"zero3-dp4", 4, inputs(4, 16, 2)});
  cs.back().in.parallel.zero = 3;
  cs.push_back({"ddp-dp8", 8, inputs(4, 32, 4)});
  return cs;
}

TEST(StepGraphJson, WrittenAndReadBackRunsToTheSameStep) {
  for (const Case& c : cases()) {
    const hw::Topology topo = node_with(c.gpus);
    auto g = build_step_graph(topo, c.in);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.error().to_string();
    const nlohmann::json j = graph_to_json(*g);
    auto back = graph_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back.ok()) << c.name << ": " << back.error().to_string();
    EXPECT_EQ(graph_to_json(*back), j) << c.name;
    auto built = simulate_step(topo, c.in);
    auto given = simulate_step(topo, c.in, &*back);
    ASSERT_TRUE(built.ok() && given.ok()) << c.name;
    EXPECT_EQ(built->step_time_s, given->step_time_s) << c.name;
    EXPECT_EQ(built->breakdown_s, given->breakdown_s) << c.name;
    EXPECT_EQ(built->events, given->events) << c.name;
  }
}

GraphOp op(OpKind k, int a = 0, int b = 0, Time d = Time::zero()) { return GraphOp{k, a, b, d, false, 0, Time::zero(), Time::zero(), 0}; }

// A graph of one GPU's step drawn by hand: compute kernels, a host gap, the end of backward and the
// optimizer step, nothing to communicate. Its step is their sum.
StageGraph hand_stage(std::initializer_list<GraphOp> ops, Time optimizer) {
  StageGraph s;
  s.ops = ops;
  s.optimizer = optimizer;
  s.layers = 1;
  return s;
}

// A one-stage graph of `s` for the GPU kinds of `topo` (as the configuration's own graph has them).
StepGraph one_stage_graph(const hw::Topology& topo, const StepInputs& in, StageGraph s) {
  auto shape = build_step_graph(topo, in);
  EXPECT_TRUE(shape.ok()) << (shape.ok() ? std::string() : shape.error().to_string());
  StepGraph g;
  if (shape.ok()) g.gpu_kinds = shape->gpu_kinds;
  g.kinds.push_back({std::move(s)});
  return g;
}

TEST(StepGraphJson, AHandDrawnGraphRunsToItsClosedForm) {
  const hw::Topology topo = node_with(1);
  const StepInputs in = inputs(2, 1, 1);
  StageGraph s = hand_stage({op(OpKind::compute, 0, 0, Time::ms(1)), op(OpKind::transfer, 0, 0, Time::zero()),
                             op(OpKind::compute, 0, 0, Time::ms(2)), op(OpKind::end_backward)},
                            Time::us(500));
  s.transfers.push_back(Transfer{Transfer::Kind::host, 0, Time::us(250), "host gap"});
  const StepGraph g = one_stage_graph(topo, in, s);
  // Through JSON, as a user's file would come.
  auto back = graph_from_json(nlohmann::json::parse(graph_to_json(g).dump()));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  auto r = simulate_step(topo, in, &*back);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_DOUBLE_EQ(r->step_time_s, 3.75e-3);  // 1 + 0.25 + 2 + 0.5 ms
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::compute)], 3e-3);
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::host)], 0.25e-3);
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)], 0.5e-3);
}

GraphOp launched(Time d, Time host_gap, Time delay, int stream = 0) {
  return GraphOp{OpKind::compute, 0, 0, d, false, 0, host_gap, delay, stream};
}

// Host-launched ops (a traced step's), by hand, in ms. The host launches at 2, 2.5, 3 and 6 (gaps
// 2, 0.5, 0.5, 3). Op A (1 ms) starts at launch 2 + delay 0.5 = 2.5 and ends at 3.5. Op B (4 ms) is
// on stream 1: max(launch 2.5, stream free 0) + 0 = 2.5 to 6.5, beside the compute stream. Op C
// (1 ms) waits for nothing but stream 0: max(3, 3.5) + delay 0.25 = 3.75 to 4.75. end_backward
// and the 0.5 ms optimizer step: 4.75 to 5.25. Op D after it (0.5 ms): max(launch 6, 5.25) = 6 to
// 6.5. The step ends at 6.5 (D and B). Stream 0 waited 2.5 (A) + 0.25 (C) + 0.75 (D) on the host.
TEST(StepGraphJson, HostLaunchesDelaysAndASideStreamByHand) {
  const hw::Topology topo = node_with(1);
  const StepInputs in = inputs(2, 1, 1);
  const StepGraph g = one_stage_graph(topo, in, hand_stage({launched(Time::ms(1), Time::ms(2), Time::us(500)),
                                                            launched(Time::ms(4), Time::us(500), Time::zero(), 1),
                                                            launched(Time::ms(1), Time::us(500), Time::us(250)), op(OpKind::end_backward),
                                                            launched(Time::us(500), Time::ms(3), Time::zero())},
                                                           Time::us(500)));
  const nlohmann::json j = graph_to_json(g);
  auto back = graph_from_json(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(graph_to_json(*back), j);  // host_gap_ps, delay_ps and stream survive the round trip
  const GraphOp& b = back->kinds[0][0].ops[1];
  EXPECT_EQ(b.host_gap, Time::us(500));
  EXPECT_EQ(b.stream, 1);
  auto r = simulate_step(topo, in, &*back);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_DOUBLE_EQ(r->step_time_s, 6.5e-3);
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::compute)], 2.5e-3);  // A, C, D
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::host)], 3.5e-3);
  EXPECT_DOUBLE_EQ(r->breakdown_s[static_cast<std::size_t>(TimeKind::optimizer)], 0.5e-3);
}

// ZeRO-1 on two GPUs with ops after end_backward (a traced step's optimizer kernels): the updated
// shards are gathered once those ops are done, not before them. The graph: 1 ms of backward that
// makes one bucket of 1M parameters final, end_backward, then a 2 ms optimizer kernel launched at
// once. The gather must start at or after that kernel's end and the step end after the gather.
TEST(StepGraphJson, ZeroGatherFollowsTheOpsAfterTheOptimizer) {
  const hw::Topology topo = node_with(2);
  StepInputs in = inputs(2, 2, 1);
  in.parallel.zero = 1;
  in.record_timeline = true;
  StageGraph s = hand_stage({op(OpKind::compute, 0, 0, Time::ms(1)), op(OpKind::grads_ready, 0), op(OpKind::end_backward),
                             op(OpKind::compute, 0, 0, Time::ms(2))},
                            Time::zero());
  s.grad_slots.push_back(LayerSlot{1e6, 0, {}, false});
  s.buckets.push_back(Bucket{1e6, 0});
  s.slot_bucket.push_back(0);
  s.dense_params = 1e6;
  const StepGraph g = one_stage_graph(topo, in, s);
  auto r = simulate_step(topo, in, &g);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  Time kernel_end, gather_start = Time::max(), gather_end;
  for (const auto& e : r->timeline.events) {
    if (e.track == TimelineEvent::Track::compute) kernel_end = std::max(kernel_end, e.end);
    if (e.name.find("updated parameters") != std::string::npos) gather_start = e.start, gather_end = e.end;
  }
  ASSERT_NE(gather_start, Time::max()) << "no parameter gather in the timeline";
  EXPECT_GE(gather_start, kernel_end);
  EXPECT_GE(kernel_end, Time::ms(3));  // 1 ms, the reduce-scatter, then the 2 ms kernel
  EXPECT_DOUBLE_EQ(r->step_time_s, gather_end.seconds());
}

TEST(StepGraphJson, APipelineOfTwoHandDrawnStagesWaitsForTheActivation) {
  // Stage 0 computes 1 ms and sends micro-batch 0's activation (1 MiB over NVLink: microseconds);
  // stage 1 receives it, computes 2 ms. The step is 3 ms plus the message; stage 1 idles the first
  // millisecond as pipeline bubble.
  const hw::Topology topo = node_with(2);
  StepInputs in = inputs(2, 1, 1);
  in.parallel.pp = 2;
  auto shape = build_step_graph(topo, in);
  ASSERT_TRUE(shape.ok()) << shape.error().to_string();
  StepGraph g;
  g.stages = 2;
  g.virtual_stages = 2;
  g.act_msg_bytes = 1 << 20;
  g.gpu_kinds = shape->gpu_kinds;
  g.kinds.push_back({hand_stage({op(OpKind::compute, 0, 0, Time::ms(1)), op(OpKind::send_act, 0, 0), op(OpKind::end_backward)}, Time::zero()),
                     hand_stage({op(OpKind::recv_act, 0, 1), op(OpKind::compute, 0, 0, Time::ms(2)), op(OpKind::end_backward)}, Time::zero())});
  auto r = simulate_step(topo, in, &g);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_GT(r->step_time_s, 3e-3);
  EXPECT_LT(r->step_time_s, 3.05e-3);
  ASSERT_EQ(r->stages.size(), 2u);
  const auto& s1 = r->stages[1].time_s;
  EXPECT_NEAR(s1[static_cast<std::size_t>(TimeKind::bubble)] + s1[static_cast<std::size_t>(TimeKind::pp)], r->step_time_s - 2e-3, 1e-9);
  EXPECT_GE(s1[static_cast<std::size_t>(TimeKind::bubble)], 1e-3);
}

TEST(StepGraphJson, AReceiveWithNoSendIsADeadlockNamedNotAHang) {
  const hw::Topology topo = node_with(2);
  StepInputs in = inputs(2, 1, 1);
  in.parallel.pp = 2;
  auto shape = build_step_graph(topo, in);
  ASSERT_TRUE(shape.ok());
  StepGraph g;
  g.stages = 2;
  g.virtual_stages = 2;
  g.gpu_kinds = shape->gpu_kinds;
  g.kinds.push_back({hand_stage({op(OpKind::compute, 0, 0, Time::ms(1)), op(OpKind::end_backward)}, Time::zero()),
                     hand_stage({op(OpKind::recv_act, 0, 1), op(OpKind::end_backward)}, Time::zero())});
  auto r = simulate_step(topo, in, &g);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("stage 1"), std::string::npos) << r.error().message;
}

// A field path and message fragment for each broken document.
TEST(StepGraphJson, BrokenDocumentsNameTheJsonPath) {
  const hw::Topology topo = node_with(4);
  StepInputs in = inputs(8, 16, 1);
  in.parallel.pp = 4;
  auto g = build_step_graph(topo, in);
  ASSERT_TRUE(g.ok());
  const nlohmann::json good = graph_to_json(*g);
  struct Broken {
    std::function<void(nlohmann::json&)> edit;
    std::string field, message;
  };
  const std::vector<Broken> broken = {
      {[](auto& j) { j["format"] = "chakra"; }, "format", "not a dtsim step graph"},
      {[](auto& j) { j["version"] = 7; }, "version", "not supported"},
      {[](auto& j) { j.erase("micro_batches"); }, "micro_batches", "missing"},
      {[](auto& j) { j["stages"] = "four"; }, "stages", "expected an integer"},
      {[](auto& j) { j["kinds"][0]["stages"].erase(3); }, "kinds[0].stages", "3 stage graphs for 4"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "sleep"}}; }, "kinds[0].stages[1].ops[0].kind", "unknown value 'sleep'"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "compute"}, {"duration_ps", -1}}; }, "kinds[0].stages[1].ops[0].duration_ps", "out of range"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "comm"}, {"comm", 100000}}; }, "kinds[0].stages[1].ops[0].comm", "no comms to refer to"},  // tp 1: no collectives on the stage
      // A host-launched op's fields (a traced step's): no negative gap or delay, streams 0-1023.
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "compute"}, {"duration_ps", 1}, {"host_gap_ps", -5}}; },
       "kinds[0].stages[1].ops[0].host_gap_ps", "out of range"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "compute"}, {"duration_ps", 1}, {"delay_ps", "soon"}}; },
       "kinds[0].stages[1].ops[0].delay_ps", "expected an integer"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "compute"}, {"duration_ps", 1}, {"stream", 1024}}; },
       "kinds[0].stages[1].ops[0].stream", "out of range"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "send_act"}, {"micro_batch", 0}, {"virtual_stage", 3}}; },
       "kinds[0].stages[1].ops[0].virtual_stage", "out of range [0, 2]"},
      {[](auto& j) { j["kinds"][0]["stages"][1]["ops"][0] = {{"kind", "recv_act"}, {"micro_batch", 99}, {"virtual_stage", 1}}; },
       "kinds[0].stages[1].ops[0].micro_batch", "out of range"},
      {[](auto& j) { j["kinds"][0]["stages"][2]["slot_bucket"].push_back(0); }, "kinds[0].stages[2].slot_bucket", "entries for"},
      {[](auto& j) { j["kinds"][0]["stages"][0]["labels"] = nlohmann::json::array(); }, "kinds[0].stages[0].labels", "at least one"},
      // Parameters whose bytes the collective planner would refuse (it takes at most 2^50).
      {[](auto& j) { j["kinds"][0]["stages"][0]["dense_params"] = 1e15; }, "kinds[0].stages[0].dense_params", "out of range"},
      // One host transfer of 10^4 s used 20 times: 2 x 10^5 s, past the clock's budget per stage.
      {[](auto& j) {
         auto& st = j["kinds"][0]["stages"][0];
         st["transfers"] = {{{"kind", "host"}, {"bytes", 0}, {"duration_ps", 10'000'000'000'000'000}, {"name", "host"}}};
         for (int i = 0; i < 20; ++i) st["ops"].push_back({{"kind", "transfer"}, {"transfer", 0}});
       },
       "kinds[0].stages[0].ops", "more than 100000 s"},
      {[](auto& j) {
         auto& ops = j["kinds"][0]["stages"][3]["ops"];
         ops.push_back({{"kind", "end_backward"}});
       },
       "kinds[0].stages[3].ops", "exactly one end_backward"},
  };
  for (const Broken& b : broken) {
    nlohmann::json j = good;
    b.edit(j);
    auto r = graph_from_json(j);
    ASSERT_FALSE(r.ok()) << b.field;
    EXPECT_EQ(r.error().field, b.field) << r.error().to_string();
    EXPECT_NE(r.error().message.find(b.message), std::string::npos) << r.error().to_string();
  }
}

TEST(StepGraphJson, AGraphOfAnotherShapeIsRefusedForTheConfiguration) {
  const hw::Topology topo = node_with(4);
  StepInputs in = inputs(8, 16, 1);
  in.parallel.pp = 4;
  auto g = build_step_graph(topo, in);
  ASSERT_TRUE(g.ok());
  in.training.global_batch = 32;  // 32 micro-batches where the graph has 16
  auto r = simulate_step(topo, in, &*g);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "graph");
  EXPECT_NE(r.error().message.find("16 micro-batches where the configuration has 32"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace dtsim::workloads

namespace dtsim::workloads {
namespace {

TEST(StepGraphJson, LongerKernelsNeverMakeTheStepShorter) {
  // Every compute op of every stage 1.5x as long (a slower GPU, as far as the graph goes): the step
  // ends later on every layout.
  for (const Case& c : cases()) {
    const hw::Topology topo = node_with(c.gpus);
    auto g = build_step_graph(topo, c.in);
    ASSERT_TRUE(g.ok()) << c.name;
    StepGraph slow = *g;
    for (auto& kind : slow.kinds) {
      for (StageGraph& s : kind) {
        for (GraphOp& o : s.ops) o.duration = Time::ps(o.duration.picoseconds() * 3 / 2);
      }
    }
    auto base = simulate_step(topo, c.in, &*g);
    auto longer = simulate_step(topo, c.in, &slow);
    ASSERT_TRUE(base.ok() && longer.ok()) << c.name;
    EXPECT_GT(longer->step_time_s, base->step_time_s) << c.name;
  }
}

}  // namespace
}  // namespace dtsim::workloads
