// When a configuration does not fit in GPU memory: the smallest single changes that would make it
// fit, found by re-estimating memory (estimate_memory, the engine's own memory model) with one
// setting changed at a time, from the least to the most disruptive: recomputation, ZeRO stage,
// micro-batch size (more gradient accumulation, same global batch), more pipeline stages, more
// tensor parallelism (both taken from data parallelism, same GPU count). When no single change is
// enough, the cumulative combination that first fits is named instead.
#pragma once

#include <string>
#include <vector>

#include "hw/topology.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

struct MemoryFix {
  std::string change;        // "parallel.zero: 1" or "training.recompute: full + parallel.zero: 3"
  double peak_bytes = 0;     // the peak per GPU with the change
  double capacity_bytes = 0;
};

// Empty when `in` already fits or nothing tried fits.
std::vector<MemoryFix> memory_fixes(const hw::Topology& topo, const StepInputs& in);

// "parallel.zero: 1 (61.2 of 80.0 GiB); training.micro_batch: 1 (70.3 of 80.0 GiB)".
std::string describe(const std::vector<MemoryFix>& fixes);

}  // namespace dtsim::workloads
