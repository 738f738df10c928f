// Runs a step graph on the event engine and the flow-level network: one executor per simulated
// (stage, data-parallel replica) walks its stage graph's ops in order; collectives, pipeline
// messages, gradient buckets (reduced on a data-parallel stream beside the compute stream),
// ZeRO-3 gathers (on a stream of their own) and nn.DataParallel transfers become flows
// (flows.hpp). The data-parallel implementation's runtime behaviour (DDP's stream, Horovod's
// fusion cycle, parameter servers, reductions after the backward pass) and the settings of the
// collectives come from the inputs; the ops, their durations and the buckets from the graph.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hw/topology.hpp"
#include "workloads/graph.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

// What one simulated rank spent its step on, and when it ended.
struct RankRecord {
  int stage = 0;
  int replica = 0;
  std::array<double, kTimeKinds> time{};
  Time end;
};

struct ExecutionRecord {
  int replicas = 1;                  // data-parallel replicas simulated per stage
  bool symmetric = true;             // one replica stood for all (false: every replica simulated)
  std::vector<RankRecord> ranks;     // [stage * replicas + replica]
  Time h2d_end;                      // when the step's input copies (training.data) finished
  std::uint64_t events = 0;
  std::uint64_t collectives = 0;
  std::vector<TimelineEvent> timeline;  // when StepInputs::record_timeline, unsorted
};

// `graph` must match `lay` (stages, virtual stages) and the cluster's GPU kinds; graph_json.hpp's
// check_graph_shape says so for a graph read from a file. A graph whose sends and receives never
// meet ends in an error naming a stage that did not finish.
Expected<ExecutionRecord> execute_step_graph(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph);

}  // namespace dtsim::workloads
