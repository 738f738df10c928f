// Planning and sweep benchmarks. Target (docs/planning.md): a plan search over a few thousand
// candidate layouts of Llama 3 70B on up to 1,024 GPUs in well under a minute on 2 cores.
//   build/release/bench/dtsim-plan-bench --benchmark_filter=Plan
#include <benchmark/benchmark.h>

#include <atomic>

#include "config/plan_loader.hpp"
#include "config/sweep_loader.hpp"
#include "planning/estimate.hpp"
#include "planning/search.hpp"
#include "planning/sweep.hpp"

namespace {

using namespace dtsim;

config::PlanSpec load_plan(const std::string& rel) {
  config::LoadContext ctx;
  auto spec = config::load_plan_spec(std::string(DTSIM_SOURCE_DIR) + "/" + rel, ctx);
  if (!spec) throw std::runtime_error(ctx.diagnostics.to_string());
  return std::move(*spec);
}

// The whole search of examples/plans/llama3-70b-2t-tokens.yaml: H100, H200 and A100 at 256 to
// 1,024 GPUs (8 targets), about 5,600 candidates, the best 3 of each target simulated.
void BM_PlanLlama3_70B(benchmark::State& state) {
  const config::PlanSpec spec = load_plan("examples/plans/llama3-70b-2t-tokens.yaml");
  planning::PlanOptions o;
  o.threads = static_cast<int>(state.range(0));
  std::size_t enumerated = 0, estimated = 0, simulated = 0;
  double est_s = 0, sim_s = 0;
  for (auto _ : state) {
    auto r = planning::run_plan(spec, o);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    enumerated = r->enumerated;
    estimated = r->estimated;
    simulated = r->simulations;
    est_s = r->estimate_wall_s;
    sim_s = r->simulate_wall_s;
  }
  state.counters["candidates"] = static_cast<double>(enumerated);
  state.counters["estimated"] = static_cast<double>(estimated);
  state.counters["simulated"] = static_cast<double>(simulated);
  state.counters["estimate_s"] = est_s;
  state.counters["simulate_s"] = sim_s;
}
BENCHMARK(BM_PlanLlama3_70B)->Arg(2)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The closed-form estimate of one Llama 3 70B layout on 1,024 H100 (cached layer times: the cost
// per candidate inside a search).
void BM_StepEstimate(benchmark::State& state) {
  const config::PlanSpec spec = load_plan("examples/plans/llama3-70b-2t-tokens.yaml");
  const config::PlanTarget* target = nullptr;
  for (const auto& t : spec.targets) {
    if (t.gpus == 1024 && spec.hardware[t.hardware].name == "H100") target = &t;
  }
  auto topo = hw::Topology::build(target->base.cluster);
  workloads::StepInputs in = target->base.inputs;
  in.parallel.tp = 8;
  in.parallel.pp = 8;
  in.parallel.dp = 16;
  in.parallel.zero = 1;
  in.parallel.sequence_parallel = true;
  in.training.recompute = workloads::Recompute::selective;
  planning::StepEstimator est(*topo, in.compute, in.comm);
  for (auto _ : state) {
    auto e = est.estimate(in);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StepEstimate)->Unit(benchmark::kMicrosecond);

// A sweep's throughput: the 6 points of examples/sweeps/gpt3-13b-strong-scaling-h100.yaml (8 to
// 256 GPUs), loading and simulating each point, on 1 and 2 threads.
void BM_SweepStrongScaling(benchmark::State& state) {
  config::LoadContext ctx;
  auto spec = config::load_sweep_spec(std::string(DTSIM_SOURCE_DIR) + "/examples/sweeps/gpt3-13b-strong-scaling-h100.yaml", ctx);
  if (!spec) {
    state.SkipWithError("cannot load the sweep");
    return;
  }
  planning::SweepRunOptions o;
  o.threads = static_cast<int>(state.range(0));
  const nlohmann::json header = {{"dtsim", "sweep"}, {"fingerprint", spec->fingerprint}, {"points", spec->points.size()}};
  for (auto _ : state) {
    auto r = planning::run_sweep(spec->points.size(), header, [&](std::size_t i) {
      config::LoadContext c;
      auto cfg = config::load_sweep_point(*spec, spec->points[i], c);
      auto topo = hw::Topology::build(cfg->cluster);
      auto res = workloads::simulate_step(*topo, cfg->inputs);
      return nlohmann::json{{"point", i}, {"step_time_s", res ? res->step_time_s : 0.0}};
    }, o);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(spec->points.size()));
  state.counters["points_per_s"] = benchmark::Counter(static_cast<double>(state.iterations() * spec->points.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SweepStrongScaling)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
