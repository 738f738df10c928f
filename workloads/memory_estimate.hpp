// Memory per GPU without simulating: the per-stage decomposition of a step (layers, parameters,
// micro-batches in flight, activations) and the memory model of memory.hpp, computed exactly as
// the step engine computes them, plus the layout checks the engine makes before it runs
// (divisibility of heads, batch and sequence, stages versus layers). For searches over thousands
// of layouts (`dtsim plan`): microseconds instead of a simulation.
#pragma once

#include <vector>

#include "hw/topology.hpp"
#include "sim/expected.hpp"
#include "workloads/memory_eager.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

struct StageFootprint {
  int stage = 0;
  int layers = 0;                // transformer blocks (CNN: weighted layers)
  double dense_params = 0;       // parameters this rank holds
  double expert_params = 0;
  int in_flight = 0;             // micro-batch activations held at the peak of the schedule
  double activation_bytes = 0;
  bool has_embedding = false, has_head = false;
  double matmul_params = 0;      // eager frameworks: GEMM / convolution weights (autocast casts them)
  LossBuffers loss;              // eager frameworks: loss buffers over the vocabulary (last stage)
  MemoryBreakdown memory;
};

struct MemoryEstimate {
  int micro_batches = 0;              // per pipeline per step
  std::vector<StageFootprint> stages;
  MemoryBreakdown peak;               // of the stage that needs the most
  bool fits = true;
  std::string note;                   // as StepResult::memory_note
};

// The memory per GPU of every pipeline stage for `in` on `topo`, equal to what simulate_step
// reports in StepResult::stages[].memory. Errors are the engine's (same messages and fields) for
// invalid layouts.
Expected<MemoryEstimate> estimate_memory(const hw::Topology& topo, const StepInputs& in);

}  // namespace dtsim::workloads
