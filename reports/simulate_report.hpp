// Results of `dtsim simulate`: the console summary and the JSON document.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/run.hpp"
#include "workloads/step.hpp"

namespace dtsim::reports {

struct SimulateReport {
  std::string model;
  std::string cluster;       // topology summary
  std::string precision;     // e.g. "bf16"
  nlohmann::json config;     // the resolved configuration
  workloads::StepResult result;
  workloads::RunEstimate run;         // energy per step always; the run's figures when budget.any()
  workloads::RunBudget budget;
  workloads::PowerModel power;
  workloads::Prices prices;
  bool has_prices = false;
};

// "41.3 days", "5.2 h", "12 min", "8.1 s".
std::string human_duration(double seconds);

std::string render_simulate(const SimulateReport& r);
nlohmann::json simulate_json(const SimulateReport& r);

// How model FLOPs are counted (printed with every figure that uses them).
inline constexpr const char* kFlopsConvention =
    "model FLOPs = 6 x parameters used in matrix multiplies (embeddings excluded, LM head included) per token + "
    "12 x layers x heads x head_dim x seq per token for attention (PaLM appendix B; Megatron-LM); CNNs: 6 x MACs per sample. "
    "HFU counts every kernel run, recomputation included";

}  // namespace dtsim::reports
