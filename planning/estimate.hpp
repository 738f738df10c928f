// A closed-form step time, for ranking thousands of candidate layouts before simulating the best
// few (dtsim plan). It uses the simulator's own pieces without running events:
//  - compute: the kernels of every layer program (program.hpp) timed by the compute model;
//  - tensor/context/expert-parallel collectives: the planner's closed form (comm::Plan::estimate,
//    the time with nothing else on the links) for the group of rank 0;
//  - pipeline: per stage s, T_s = forward + backward (+ recomputation) of one micro-batch over its
//    chunks; step = m max_s T_s + (sum_s T_s - max_s T_s) / v (1F1B and GPipe with v = 1, the
//    interleaved schedule's bubble divided by v, Narayanan et al. 2021), plus 2 (p - 1) pipeline
//    transfers (fill and drain) at the route's bottleneck bandwidth;
//  - data parallelism: the gradient reduction of the stage (all-reduce, or reduce-scatter with
//    ZeRO), its closed form scaled by the number of concurrent data-parallel groups sharing a node's
//    NICs, overlapped with the last micro-batch's backward except for one bucket; with ZeRO-1/2 the
//    all-gather of updated parameters after the optimizer; with ZeRO-3 the per-layer gathers that
//    the layer's compute does not hide;
//  - the optimizer: one memory-bound pass over the rank's (sharded) parameters, as the engine.
// Contention between groups, NCCL kernels slowing compute and the exact overlap are left to the
// simulation. Memory comes from workloads::estimate_memory (the engine's numbers exactly).
#pragma once

#include <array>
#include <map>
#include <string>

#include "comm/collective.hpp"
#include "hw/topology.hpp"
#include "sim/expected.hpp"
#include "workloads/compute.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/program.hpp"
#include "workloads/step.hpp"

namespace dtsim::planning {

struct StepEstimate {
  double step_time_s = 0;
  std::array<double, workloads::kTimeKinds> breakdown_s{};  // of the critical stage, as StepResult
  std::vector<std::array<double, workloads::kTimeKinds>> stage_time_s;  // per stage (for utilization)
  workloads::MemoryEstimate memory;
};

// One per topology and thread: it caches layer times and collective estimates.
class StepEstimator {
 public:
  StepEstimator(const hw::Topology& topo, const workloads::ComputeParams& compute, const comm::CommParams& comm);

  // Memory first (errors are the engine's layout errors); the time only when `time` is set.
  Expected<StepEstimate> estimate(const workloads::StepInputs& in, bool time = true);

 private:
  struct PassTimes {
    double fwd = 0, bwd = 0;              // one layer, one micro-batch (recomputation in bwd)
    double fwd_comm = 0, bwd_comm = 0;    // exposed tp/cp/ep communication inside those
    std::array<double, workloads::kTimeKinds> comm_by_kind{};  // forward + backward
    double params = 0;                    // parameters of the layer on one rank
  };
  struct Layers {
    PassTimes emb, block, head;
  };
  const Layers& layers(const workloads::TransformerSpec& m, const workloads::StepInputs& in, const workloads::Layout& lay);
  PassTimes pass_times(const workloads::LayerProgram& lp, const workloads::Layout& lay);
  // Closed-form time of one collective on `ranks` (cached), in seconds.
  double collective_s(CollOp op, const std::vector<int>& ranks, double bytes);
  // One send of `bytes` on its path, at most `cap` (zero: the path's rate).
  double p2p_s(int from, int to, double bytes, Bandwidth cap = {});

  const hw::Topology& topo_;
  hw::Router router_;
  comm::Planner planner_;
  workloads::ComputeModel cm_;
  comm::CommParams comm_;
  std::map<std::string, double> collectives_;
  // Layer passes by model name, program shape (every field compared) and rank order.
  struct LayersKey {
    std::string model;
    workloads::ProgramShape shape;
    std::string order;
    auto operator<=>(const LayersKey&) const = default;
  };
  std::map<LayersKey, Layers> layers_;
};

// Closed forms of the pipeline (exposed for tests): the makespan of m micro-batches over stages
// with per-micro-batch times T_s and v chunks per stage, communication free.
double pipeline_makespan(const std::vector<double>& stage_times, int micro_batches, int chunks);

}  // namespace dtsim::planning
