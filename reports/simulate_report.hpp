// Results of `dtsim simulate`: the console summary and the JSON document.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/step.hpp"

namespace dtsim::reports {

struct SimulateReport {
  std::string model;
  std::string cluster;       // topology summary
  std::string precision;     // e.g. "bf16"
  nlohmann::json config;     // the resolved configuration
  workloads::StepResult result;
};

std::string render_simulate(const SimulateReport& r);
nlohmann::json simulate_json(const SimulateReport& r);

// How model FLOPs are counted (printed with every figure that uses them).
inline constexpr const char* kFlopsConvention =
    "model FLOPs = 6 x parameters used in matrix multiplies (embeddings excluded, LM head included) per token + "
    "12 x layers x heads x head_dim x seq per token for attention (PaLM appendix B; Megatron-LM); CNNs: 6 x MACs per sample. "
    "HFU counts every kernel run, recomputation included";

}  // namespace dtsim::reports
