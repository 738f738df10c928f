// The memory estimate used to prune layouts equals the step engine's own memory figures (it must:
// a plan that pruned a layout the simulator would fit, or kept one it would not, would mislead),
// and matches a hand-computed case.
#include "workloads/memory_estimate.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "config/simulate_loader.hpp"

namespace dtsim::workloads {
namespace {

struct Loaded {
  config::SimulateConfig cfg;
  hw::Topology topo;
};

Loaded load(const std::string& path, const std::vector<std::string>& sets = {}, const std::optional<std::string>& text = std::nullopt) {
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(path, sets, ctx, text);
  EXPECT_TRUE(cfg.has_value()) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(cfg->cluster);
  EXPECT_TRUE(topo.ok());
  return Loaded{std::move(*cfg), std::move(*topo)};
}

// As few micro-batches as keep every stage's peak (one per stage), so that the simulation is short.
StepInputs shortened(const Loaded& l) {
  StepInputs in = l.cfg.inputs;
  auto lay = Layout::make(in.parallel, l.topo.gpus());
  if (lay) in.training.global_batch = in.training.micro_batch * lay->dp() * lay->pp();
  return in;
}

void expect_same_memory(const Loaded& l, const std::string& what) {
  const StepInputs in = shortened(l);
  auto est = estimate_memory(l.topo, in);
  ASSERT_TRUE(est.ok()) << what << ": " << est.error().message;
  auto sim = simulate_step(l.topo, in);
  ASSERT_TRUE(sim.ok()) << what << ": " << sim.error().message;
  ASSERT_EQ(est->stages.size(), sim->stages.size()) << what;
  EXPECT_EQ(est->micro_batches, sim->micro_batches) << what;
  for (std::size_t s = 0; s < est->stages.size(); ++s) {
    const MemoryBreakdown& a = est->stages[s].memory;
    const MemoryBreakdown& b = sim->stages[s].memory;
    EXPECT_DOUBLE_EQ(a.params, b.params) << what << " stage " << s;
    EXPECT_DOUBLE_EQ(a.grads, b.grads) << what << " stage " << s;
    EXPECT_DOUBLE_EQ(a.optimizer, b.optimizer) << what << " stage " << s;
    EXPECT_DOUBLE_EQ(a.activations, b.activations) << what << " stage " << s;
    EXPECT_DOUBLE_EQ(a.total, b.total) << what << " stage " << s;
    EXPECT_EQ(est->stages[s].in_flight, sim->stages[s].in_flight) << what << " stage " << s;
  }
  EXPECT_EQ(est->fits, sim->fits) << what;
  EXPECT_EQ(est->note, sim->memory_note) << what;
}

TEST(MemoryEstimate, EqualsTheEnginesMemoryForEverySimulateExample) {
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate")) {
    if (e.path().extension() != ".yaml") continue;
    const Loaded l = load(e.path().string());
    if (l.topo.gpus() > 4096) continue;  // 16k GPUs take seconds to simulate even for one pipeline round
    expect_same_memory(l, e.path().filename().string());
    ++seen;
  }
  EXPECT_GE(seen, 10);
}

TEST(MemoryEstimate, EqualsTheEngineAcrossSchedulesZeroStagesAndRecomputation) {
  const std::string base = std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama2-70b-tp-sp-pp.yaml";
  for (const char* zero : {"parallel.zero=0", "parallel.zero=2", "parallel.zero=3"}) {
    for (const char* sched : {"parallel.schedule=gpipe", "parallel.schedule=1f1b"}) {
      for (const char* rc : {"training.recompute=none", "training.recompute=full"}) {
        const Loaded l = load(base, {zero, sched, rc});
        expect_same_memory(l, std::string(zero) + " " + sched + " " + rc);
      }
    }
  }
  const Loaded il = load(base, {"parallel.schedule=interleaved-1f1b", "parallel.virtual_stages=2"});
  expect_same_memory(il, "interleaved");
}

TEST(MemoryEstimate, HandComputedDataParallelCase) {
  // GPT-3 1.3B (1,315,723,264 parameters; docs/models.md) on 8
  // GPUs, pure data parallelism with ZeRO-1, bf16 with fp32 gradients and Adam:
  // parameters 2 B/param, gradients 4 B/param, optimizer (fp32 master + two moments) 12 B/param / 8.
  const std::string text =
      "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-1.3b\ntraining: {global_batch: 8, micro_batch: 1, seq_len: 2048}\n"
      "parallel: {zero: 1}\n";
  const Loaded l = load("inline.yaml", {}, text);
  auto est = estimate_memory(l.topo, l.cfg.inputs);
  ASSERT_TRUE(est.ok());
  ASSERT_EQ(est->stages.size(), 1u);
  const double p = est->stages[0].dense_params;
  EXPECT_NEAR(p, 1.3e9, 0.05e9);
  const MemoryBreakdown& m = est->stages[0].memory;
  EXPECT_DOUBLE_EQ(m.params, 2.0 * p);
  EXPECT_DOUBLE_EQ(m.grads, 4.0 * p);
  EXPECT_DOUBLE_EQ(m.optimizer, 12.0 * p / 8.0);
  EXPECT_EQ(est->stages[0].in_flight, 1);
  EXPECT_TRUE(est->fits);
}

TEST(MemoryEstimate, LayoutErrorsAreTheEngines) {
  const std::string base = std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama2-70b-tp-sp-pp.yaml";
  const Loaded l = load(base, {"training.global_batch=3"});
  auto est = estimate_memory(l.topo, l.cfg.inputs);
  auto sim = simulate_step(l.topo, l.cfg.inputs);
  ASSERT_FALSE(est.ok());
  ASSERT_FALSE(sim.ok());
  EXPECT_EQ(est.error().message, sim.error().message);
  EXPECT_EQ(est.error().field, "training.global_batch");
}

}  // namespace
}  // namespace dtsim::workloads
