// Running a plan: its phases one after another on a flow network.
#include <algorithm>
#include <memory>

#include "comm/collective.hpp"

namespace dtsim::comm {

namespace {

struct RunState {
  FlowNetwork* net;
  std::shared_ptr<const Plan> plan;
  std::size_t phase = 0;
  std::size_t outstanding = 0;
  std::function<void()> done;
};

void start_phase(const std::shared_ptr<RunState>& st) {
  while (st->phase < st->plan->phases.size() && st->plan->phases[st->phase].groups.empty()) ++st->phase;
  if (st->phase == st->plan->phases.size()) {
    auto done = std::move(st->done);
    if (done) done();
    return;
  }
  const Phase& ph = st->plan->phases[st->phase];
  st->outstanding = ph.groups.size();
  for (const FlowGroup& g : ph.groups) {
    FlowSpec spec;
    spec.uses = g.uses;
    spec.bytes = g.bytes;
    spec.latency = g.latency;
    spec.cap = g.cap;
    spec.on_complete = [st] {
      if (--st->outstanding == 0) {
        ++st->phase;
        start_phase(st);
      }
    };
    st->net->start(std::move(spec));
  }
}

}  // namespace

void execute(FlowNetwork& net, std::shared_ptr<const Plan> plan, std::function<void()> done) {
  auto st = std::make_shared<RunState>();
  st->net = &net;
  st->plan = std::move(plan);
  st->done = std::move(done);
  start_phase(st);
}

Time nccl_tests_iteration(Time collective, int gpus_per_thread, const CommParams& params) {
  return std::max(collective, params.launch_overhead * std::max(1, gpus_per_thread));
}

Time simulate_alone(const hw::Topology& topo, const Plan& plan, std::string_view sharing) {
  Simulator sim;
  FlowNetwork net(sim, make_sharing_model(sharing));
  topo.install(net);
  Time end = Time::zero();
  execute(net, plan, [&] { end = sim.now(); });
  sim.run();
  return end;
}

}  // namespace dtsim::comm
