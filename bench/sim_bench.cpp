// Simulator micro-benchmarks. Targets (docs/performance.md): >= 20 M events/s on one core;
// max-min updates cheap at 1k and 10k concurrent flows; a 1 GiB ring all-reduce over 1024 GPUs in
// < 1 s and over 4096 GPUs in < 5 s and < 1 GiB.
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <random>

#include "comm/collective.hpp"
#include "config/hardware.hpp"
#include "config/simulate_loader.hpp"
#include "sim/flow_network.hpp"
#include "sim/simulator.hpp"

namespace {

using namespace dtsim;

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

// Raw event throughput: `pending` self-rescheduling events keep the queue at a fixed depth.
void BM_EventThroughput(benchmark::State& state) {
  const int pending = static_cast<int>(state.range(0));
  const std::int64_t events = 10'000'000;
  // Each event reschedules itself at a pseudo-random delay; its callback captures one pointer,
  // as the simulator's own callbacks do (no allocation per event).
  struct Ticker {
    Simulator sim;
    std::int64_t left;
    std::uint64_t x = 88172645463325252ULL;
    void tick() {
      if (--left <= 0) return;
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      sim.schedule_in(Time::ns(1 + static_cast<std::int64_t>(x % 1000)), [this] { tick(); });
    }
  };
  for (auto _ : state) {
    auto t = std::make_unique<Ticker>();
    t->left = events;
    for (int i = 0; i < pending; ++i) t->sim.schedule_in(Time::ns(i), [p = t.get()] { p->tick(); });
    t->sim.run();
    benchmark::DoNotOptimize(t->sim.events_executed());
  }
  state.SetItemsProcessed(state.iterations() * events);
}
BENCHMARK(BM_EventThroughput)->Arg(1)->Arg(1000)->Arg(100000)->Unit(benchmark::kMillisecond);

// Cost of one flow arriving and leaving while `flows` long flows share 1000 links in one connected
// component: two max-min re-solves of the whole component.
void BM_MaxMinUpdate(benchmark::State& state) {
  const int flows = static_cast<int>(state.range(0));
  Simulator sim;
  FlowNetwork net(sim, std::make_unique<MaxMinSharing>());
  std::vector<LinkId> links;
  for (int i = 0; i < 1000; ++i) links.push_back(net.add_link(Bandwidth::GBps(10 + i % 7), Time::zero()));
  std::mt19937_64 rng(7);
  auto path = [&] {
    std::vector<LinkId> p;
    for (int h = 0; h < 4; ++h) p.push_back(links[rng() % links.size()]);
    return p;
  };
  for (int i = 0; i < flows; ++i) net.start_path(path(), Bytes(std::int64_t{1} << 50), [] {});
  sim.run_until(Time::ns(1));
  for (auto _ : state) {
    net.start_path(path(), Bytes(1), [] {});
    sim.run_until(sim.now() + Time::ns(10));
  }
  state.counters["component_flows"] = static_cast<double>(net.last_component_flows());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MaxMinUpdate)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// A 1 GiB ring all-reduce over `nodes` DGX H100 (8 GPUs each) on a fat-tree of radix-64 switches
// (two tiers up to 2048 NICs, three beyond): topology, plan and flow-level simulation.
void BM_RingAllReduce(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const auto fidelity = static_cast<comm::Fidelity>(state.range(1));
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{"dgx-h100", nodes, std::nullopt}, ctx);
  spec->fabric.kind = hw::FabricKind::fat_tree;
  double simulated_us = 0;
  for (auto _ : state) {
    auto topo = hw::Topology::build(*spec);
    hw::Router router(*topo);
    comm::Planner planner(*topo, router, comm::CommParams::nccl_defaults());
    comm::CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes::GiB(1);
    for (int i = 0; i < topo->gpus(); ++i) req.ranks.push_back(i);
    req.algo = comm::Algo::ring;
    req.protocol = comm::Protocol::simple;
    req.fidelity = fidelity;
    auto plan = planner.plan(req);
    simulated_us = comm::simulate_alone(*topo, *plan).microseconds();
  }
  state.counters["gpus"] = nodes * 8;
  state.counters["simulated_ms"] = simulated_us / 1000;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_RingAllReduce)
    ->ArgNames({"nodes", "fidelity"})
    ->Args({128, static_cast<int>(comm::Fidelity::coupled)})
    ->Args({512, static_cast<int>(comm::Fidelity::coupled)})
    ->Args({128, static_cast<int>(comm::Fidelity::per_edge)})
    ->Args({512, static_cast<int>(comm::Fidelity::per_edge)})
    ->Args({16, static_cast<int>(comm::Fidelity::per_step)})
    ->Unit(benchmark::kMillisecond);

// One training step of a bundled example (topology build and simulation, config loading excluded).
void BM_SimulateStep(benchmark::State& state, const char* example) {
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/" + example, {}, ctx);
  if (!cfg) {
    state.SkipWithError(ctx.diagnostics.to_string().c_str());
    return;
  }
  double step = 0, events = 0;
  for (auto _ : state) {
    auto topo = hw::Topology::build(cfg->cluster);
    auto r = workloads::simulate_step(*topo, cfg->inputs);
    step = r->step_time_s;
    events = static_cast<double>(r->events);
  }
  state.counters["simulated_step_s"] = step;
  state.counters["events"] = events;
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK_CAPTURE(BM_SimulateStep, gpt3_175b_1024_gpus, "gpt3-175b-a100.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_SimulateStep, llama3_405b_16384_gpus, "llama3-405b-16k.yaml")->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
