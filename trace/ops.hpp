// The GPU operations of one profiled step, linked to what launched them: the CUDA runtime call
// (by correlation id) and the ATen operator (by external id), classified, with GEMM shapes and
// math types where the operator's recorded input shapes give them.
#pragma once

#include <optional>
#include <vector>

#include "trace/classify.hpp"
#include "trace/reader.hpp"

namespace dtsim::trace {

struct StepOp {
  const GpuOp* op = nullptr;
  KernelClass cls = KernelClass::other;
  const CpuOp* launcher = nullptr;          // innermost ATen operator, when linked
  const RuntimeCall* launch = nullptr;      // the launch call, when linked
  std::optional<GemmShape> gemm;            // GEMM kernels launched by mm/addmm/bmm/baddbmm
  std::optional<hw::DType> dtype;           // from the launcher's input types
};

// A parameter gradient accumulated during the backward pass (torch::autograd::AccumulateGrad):
// its size and the host time it was accumulated.
struct GradientOp {
  std::int64_t bytes = 0;
  std::int64_t host_start_ns = 0;
  std::int64_t host_end_ns = 0;
};

// Autograd's link from a forward operator to the backward node made of it (a "fwdbwd" flow
// arrow): the host start of each.
struct AutogradEdge {
  std::int64_t forward_ns = 0;
  std::int64_t backward_ns = 0;
};

struct StepOps {
  std::vector<StepOp> ops;            // GPU operations by start time
  std::int64_t gpu_begin_ns = 0, gpu_end_ns = 0;
  std::int64_t host_begin_ns = 0;     // the ProfilerStep's start, else the first host event
  std::vector<std::int64_t> host_event_starts;  // every recorded host event (operators, runtime calls, annotations), sorted
  std::vector<GradientOp> gradients;  // in host order
  std::vector<AutogradEdge> autograd; // by backward start (empty: the trace has no fwdbwd arrows)
  std::vector<Interval> profiler_overhead;  // the profiler's own spans (host time it took)
  std::size_t linked_launches = 0, linked_operators = 0;
};

// Kernels inside the optimizer step's GPU range (gpu_user_annotation "Optimizer.step#...") are
// classified `optimizer`.
StepOps link_step(const Trace& t);

}  // namespace dtsim::trace
