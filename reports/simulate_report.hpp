// Results of `dtsim simulate`: the console summary and the JSON document.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/memory_fixes.hpp"
#include "workloads/run.hpp"
#include "workloads/step.hpp"

namespace dtsim::reports {

struct SimulateReport {
  std::string model;
  std::string cluster;       // topology summary
  std::string precision;     // e.g. "bf16"
  // training.framework when it is not the default (megatron): its header line and JSON field say
  // which framework's kernels and host costs were assumed.
  std::string framework;
  nlohmann::json config;     // the resolved configuration
  workloads::StepResult result;
  workloads::RunEstimate run;         // energy per step always; the run's figures when budget.any()
  workloads::RunBudget budget;
  workloads::PowerModel power;
  workloads::Prices prices;
  bool has_prices = false;
  // When the step does not fit in memory: the smallest changes that would make it fit.
  std::vector<workloads::MemoryFix> memory_fixes;
  // Settings without effect on this configuration and defaults it inherited, each said once.
  std::vector<std::string> notes;
};

// "41.3 days", "5.2 h", "12 min", "8.1 s".
std::string human_duration(double seconds);

std::string render_simulate(const SimulateReport& r);
nlohmann::json simulate_json(const SimulateReport& r);

// How model FLOPs are counted (printed with every figure that uses them).
inline constexpr const char* kFlopsConvention =
    "model FLOPs = 6 x parameters used in matrix multiplies (embeddings excluded, LM head included) per token + "
    "12 x layers x heads x head_dim x seq per token for attention, the full score matrix even when causal (the Megatron-LM and "
    "PaLM appendix B convention); CNNs: 6 x MACs per sample. HFU = the same model FLOPs + the recomputed kernels' FLOPs "
    "(Korthikanti et al. 2022), so HFU >= MFU";

}  // namespace dtsim::reports
