// Builders of step graphs: the analytical transformer and CNN programs of a configuration, laid
// out on its pipeline schedule, with the communication its parallel strategies add
// (strategies.hpp). A pure function of the inputs, the layout and the cluster's GPU kinds: no
// simulator, no network.
#pragma once

#include <string>
#include <vector>

#include "hw/topology.hpp"
#include "workloads/graph.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

// The distinct GPU kinds of a cluster (node 0's first) and each rank's kind. Refused where one
// simulated rank would stand for GPUs of different kinds (a tensor- or context-parallel group
// spanning kinds) or where replicas cannot all be simulated (expert parallelism).
struct GpuKinds {
  std::vector<const hw::GpuSpec*> kinds;
  std::vector<int> kind_of_rank;
  bool mixed() const { return kinds.size() > 1; }
  int kind_of(const Layout& lay, int stage, int replica) const {
    return kind_of_rank[static_cast<std::size_t>(lay.rank(Coords{0, 0, replica, stage}))];
  }
};
Expected<GpuKinds> gpu_kinds(const hw::Topology& topo, const Layout& lay);

// The step graph of `in` on `lay`: checks the training and parallel settings (errors name fields),
// then builds every stage's graph on every GPU kind.
Expected<StepGraph> build_step_graph(const hw::Topology& topo, const StepInputs& in, const Layout& lay);

// A builder's cursor on one stage graph: the label of the pipeline op being written and, for
// eager frameworks, the host's issue cost per kernel and how far the GPU's queue runs ahead.
struct StageWriter {
  StageGraph& g;
  int label = 0;
  Time host_cost;
  Time gpu_lead;
  // The model chunk (virtual stage index within the stage) of each gradient slot, for the passes
  // that bucket them (Megatron-Core keeps one buffer per chunk).
  std::vector<int> slot_chunk = {};
  void push(OpKind kind, int a = 0, int b = 0, Time duration = Time::zero(), bool overlapped = false) {
    g.ops.push_back(GraphOp{kind, a, b, duration, overlapped, label, Time::zero(), Time::zero(), 0});
  }
  void begin(std::string label_text) {
    g.labels.push_back(std::move(label_text));
    label = static_cast<int>(g.labels.size() - 1);
  }
};

}  // namespace dtsim::workloads
