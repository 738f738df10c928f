// The memory suite's fit (`dtsim fit`): each harness kernel stands for one of the compute model's
// memory-bound kinds (copy, memcpy and triad: stream; layernorm_fwd: norm; ...; dropout_residual:
// dropout; adam: optimizer), and each kind gets its own achieved bandwidth and fixed cost,
//   t = overhead + bytes / (HBM bandwidth x efficiency),
// fitted by weighted least squares on the relative error; dropout's random numbers give it
//   t = overhead + elements x ops / fp32 peak   when that is longer than its bytes' time.
// A kind whose fit is worse than the defaults on its own held-out points keeps the defaults.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/fit.hpp"
#include "hw/specs.hpp"
#include "workloads/compute.hpp"

namespace dtsim::calibrate {

// The compute model's kernel for a harness memory kernel (kind, bytes, elements); nullopt for a
// harness kernel name dtsim does not know.
std::optional<workloads::Kernel> memory_kernel_of(const MemorySample& s);

// Which samples are held out: sorted by (kernel, bytes), every `every`-th (none for every < 2).
std::vector<bool> memory_held_out(const std::vector<MemorySample>& samples, int every);

struct MemoryFit {
  std::map<std::string, std::string> params;  // compute.* name -> value text
  nlohmann::json fit = nlohmann::json::object();
  std::vector<std::string> notes;
};

// `kernel_overhead`: the overhead suite's fixed cost, used for the stream kind (nullopt: fitted
// as the stream kind's intercept and written as compute.kernel_overhead). `base`: the parameters
// fitted so far (defaults elsewhere).
MemoryFit fit_memory_kinds(const std::vector<MemorySample>& samples, const hw::GpuSpec& gpu, std::optional<double> kernel_overhead,
                           const workloads::ComputeParams& base, int holdout_every);

}  // namespace dtsim::calibrate
