// Trace-driven simulation at scale (docs/traces.md, docs/performance.md): one traced H100 rank of
// Llama-3.2-1B's shape expanded to 1,024 H100s (128 DGX H100) with DDP. Target: under 5 s,
// reading the trace included.
#include <benchmark/benchmark.h>

#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "trace/replay.hpp"

namespace {

using namespace dtsim;

void BM_TraceDdp(benchmark::State& state, const char* example) {
  const std::string path = std::string(DTSIM_SOURCE_DIR) + "/examples/traces/" + example;
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(path, {}, ctx);
  if (!cfg || !cfg->trace) {
    state.SkipWithError("cannot load the example");
    return;
  }
  auto topo = hw::Topology::build(cfg->cluster);
  if (!topo) {
    state.SkipWithError("cannot build the cluster");
    return;
  }
  const hw::GpuSpec gpu = topo->node_template(0).spec().gpu;
  double step = 0;
  for (auto _ : state) {
    auto t = trace::read_trace(cfg->trace->file);
    if (!t) {
      state.SkipWithError(t.error().message.c_str());
      return;
    }
    const trace::StepOps ops = trace::link_step(*t);
    trace::ReplayInputs in;
    in.ops = &ops;
    in.traced_gpu = gpu;
    in.compute = cfg->inputs.compute;
    in.comm = cfg->inputs.comm;
    in.dp = topo->gpus();
    if (cfg->inputs.parallel.bucket.count() > 0) in.params.bucket = cfg->inputs.parallel.bucket;  // as dtsim simulate
    in.sharing = cfg->inputs.sharing;
    auto r = trace::replay_step(*topo, in);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    step = r->step_s;
  }
  state.counters["gpus"] = topo->gpus();
  state.counters["step_ms"] = step * 1e3;
}

}  // namespace

BENCHMARK_CAPTURE(BM_TraceDdp, llama_1b_trace_1024_h100, "llama-1b-1024xh100-ddp.yaml")->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
