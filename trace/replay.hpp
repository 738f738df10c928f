// Trace-driven simulation of one training step: the profiled step becomes each rank's step graph
// (trace_graph.hpp: the GPU operations with their measured durations, re-timed by class on another
// GPU, and the host time between their launches, kept less the profiler's own recording cost), and
// the step-graph executor (workloads/executor.hpp) runs it with data parallelism on the cluster's
// network: PyTorch DDP's gradient buckets, reduced on a stream of their own while the backward pass
// runs, the optimizer's kernels waiting for the last one.
//
// Host model (the mechanism that makes a profiled step slower than the same step unprofiled): the
// GPU starts op i at max(host launch of i, end of the previous op on its stream) plus the delay
// measured in the trace after both were done (launch latency, or the inter-kernel gap);
// the host launches op i a host interval after op i-1, the interval measured in the trace minus
// the profiler's recording cost (`profiler_overhead_per_event` per operator, runtime call and
// annotation recorded in it, plus the profiler's own "overhead" spans). See docs/traces.md.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "comm/params.hpp"
#include "hw/specs.hpp"
#include "hw/topology.hpp"
#include "trace/ops.hpp"
#include "trace/trace_graph.hpp"
#include "workloads/compute.hpp"
#include "workloads/step.hpp"

namespace dtsim::trace {

struct ReplayInputs {
  const StepOps* ops = nullptr;
  hw::GpuSpec traced_gpu;                 // the GPU the trace was taken on
  workloads::ComputeParams compute;       // efficiency model and comm_slowdown
  comm::CommParams comm = comm::CommParams::nccl_defaults();
  int dp = 1;                             // data-parallel ranks: GPUs 0..dp-1 of the topology
  int zero = 0;                           // 0: DDP; 1, 2: ZeRO (sharded optimizer, reduce-scatter); 3: FSDP full sharding
  std::string sharing = "max-min";        // bandwidth sharing of the network's flows
  bool timeline = false;                  // keep the run's timeline (ReplayResult::timeline)
  std::optional<std::int64_t> gradient_bytes;  // from a model named beside the trace (else the trace's)
  ReplayParams params;
};

struct ReplayResult {
  std::string traced_gpu, target_gpu;
  bool retimed = false;               // target differs from the traced GPU
  int gpus = 1;
  bool mixed = false;                 // the ranks are of several GPU kinds (target_gpu: node 0's)
  double step_s = 0;                  // host step start to the last GPU op or all-reduce end (slowest rank)
  double gpu_busy_s = 0;              // sum of (re-timed) op durations, comm slowdown included
  double host_wait_s = 0;             // compute stream idle, waiting for launches
  double dp_wait_s = 0;               // compute stream idle, waiting for gradient all-reduces
  double gpu_delay_s = 0;             // measured launch latencies and inter-kernel gaps, kept
  double side_stream_s = 0;           // ops on other streams than the compute stream (beside it)
  double traced_window_s = 0;         // the profile's GPU window (first op start to last end)
  std::int64_t gradient_bytes = 0;
  std::string gradient_source;        // "trace (N AccumulateGrad ops)" or the model's name
  int buckets = 0;
  int zero = 0;                       // as ReplayInputs::zero (0 on one GPU)
  bool fsdp = false;                  // FSDP: buckets are units, reduce-scattered; parameters gathered
  int fsdp_units = 0, fsdp_unit_tensors = 0;
  std::int64_t fsdp_root_bytes = 0;
  int gathers = 0;                    // FSDP parameter all-gathers
  double gather_s = 0;                // their summed times
  double allreduce_s = 0;             // summed gradient reductions (all-reduce; FSDP: reduce-scatter)
  double exposed_allreduce_s = 0;     // the compute stream waited for data parallelism (= dp_wait_s; with
                                      // ZeRO/FSDP the parameter gathers' waits are in it too)
  std::uint64_t events = 0;           // simulator events
  std::size_t removed_comm_ops = 0;   // traced NCCL kernels left out (DDP is simulated instead)
  std::array<ClassTime, kKernelClasses> classes{};
  workloads::Timeline timeline;       // when ReplayInputs::timeline (rank 0's; every replica, on mixed clusters)
  bool symmetric = true;              // one replica stood for all
};

// The step graph every rank runs (one stage graph per GPU kind of GPUs 0..dp-1).
Expected<TraceGraph> trace_step_graph(const hw::Topology& topo, const ReplayInputs& in);
// Builds that graph and runs it on the cluster (workloads::execute_step_graph).
Expected<ReplayResult> replay_step(const hw::Topology& topo, const ReplayInputs& in);

// The GPU preset name a trace's device name stands for ("NVIDIA H100 80GB HBM3" -> h100-sxm), or
// empty when unknown.
std::string gpu_preset_for_device(std::string_view device);

}  // namespace dtsim::trace
