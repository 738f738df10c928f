// The trace importer as a builder of step graphs (workloads/graph.hpp): a profiled step becomes
// the one-stage graph of every data-parallel rank. Its compute ops are the trace's GPU operations
// in host launch order, each with its measured duration (re-timed by kernel class on another GPU),
// the host interval before its launch (less the profiler's own recording cost), the GPU-side delay
// measured after it could start, and its stream; the traced NCCL kernels are left out (the
// executor simulates data parallelism instead). The gradients the backward pass accumulates
// (torch::autograd::AccumulateGrad) become gradient slots after the op that made them, grouped
// into DDP's buckets; end_backward stands before the optimizer's first kernel, the optimizer's
// kernels after it. With FSDP (ZeRO-3) the parameters are gathered unit by unit before their
// forward and again before their backward, each unit's gradients reduce-scattered once its backward
// is done, and the optimizer's kernels update a 1/dp shard (as with ZeRO-1/2, whose DDP-style
// buckets are reduce-scattered and whose updated shards the executor gathers after the optimizer's
// kernels). See docs/traces.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hw/specs.hpp"
#include "sim/expected.hpp"
#include "trace/ops.hpp"
#include "workloads/compute.hpp"
#include "workloads/graph.hpp"

namespace dtsim::trace {

struct ReplayParams {
  // Host time the profiler adds per recorded host event (record_shapes=True). Fitted on the
  // ResNet-50 trace of data/traces/h100-2026-11-23 (in-sample); GPT-2 and Llama held out.
  Time profiler_overhead_per_event = Time::ns(3000);
  Bytes bucket = Bytes::MiB(25);              // DDP bucket_cap_mb default (torch/nn/parallel/distributed.py)
  Bytes first_bucket = Bytes::MiB(1);         // DDP _DEFAULT_FIRST_BUCKET_BYTES
};

struct ClassTime {
  std::int64_t traced_ns = 0;   // summed measured durations
  std::int64_t replay_ns = 0;   // summed re-timed durations on the target GPU (before any slowdown)
  std::int64_t count = 0;
};

struct TraceGraphInputs {
  const StepOps* ops = nullptr;
  hw::GpuSpec traced_gpu;                      // the GPU the trace was taken on
  std::vector<const hw::GpuSpec*> targets;     // one stage graph per GPU kind (workloads::GpuKinds order)
  workloads::ComputeParams compute;            // the efficiency model that re-times kernels
  bool data_parallel = false;                  // gradients and buckets are needed
  int dp = 1;                                  // data-parallel ranks (FSDP's shard count)
  bool fsdp = false;                           // ZeRO-3 / FSDP full sharding instead of DDP
  bool shard_optimizer = false;                // ZeRO-1/2/3: each rank updates 1/dp of the parameters
  std::optional<std::int64_t> gradient_bytes;  // from a model named beside the trace (else the trace's)
  ReplayParams params;
};

// The graph, with what a report says about how it was made.
struct TraceGraph {
  workloads::StepGraph graph;
  std::int64_t gradient_bytes = 0;   // bytes of gradients per rank (fp32, as PyTorch's .grad)
  std::string gradient_source;       // "trace (N AccumulateGrad operators)" or "model"
  std::size_t removed_comm_ops = 0;  // traced NCCL kernels left out
  std::int64_t main_stream = 0;      // the trace's stream that became stream 0
  // FSDP: the wrapped units (a repeated block of parameters, transformer layers or bottlenecks) and
  // the rest (the root unit: embeddings, final norm, ...).
  int fsdp_units = 0;                // wrapped units, root not counted
  int fsdp_unit_tensors = 0;         // parameter tensors per wrapped unit
  std::int64_t fsdp_root_bytes = 0;  // parameters of the root unit
  // Of the first target kind: per kernel class, and the measured delays kept.
  std::array<ClassTime, kKernelClasses> classes{};
  double gpu_delay_s = 0;            // summed GraphOp::delay, every stream
  double main_delay_s = 0;           // of which on stream 0
  double side_busy_s = 0;            // summed durations of the ops on other streams
};

// Errors name the field: model.trace (no compute ops, no gradient sizes with data parallelism).
Expected<TraceGraph> build_trace_graph(const TraceGraphInputs& in);

}  // namespace dtsim::trace
