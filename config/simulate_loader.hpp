// Loading a `dtsim simulate` configuration: cluster, model, training settings and parallel layout
// (plus optional simulation settings and parameter overrides) into plain, validated inputs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/reader.hpp"
#include "hw/specs.hpp"
#include "workloads/run.hpp"
#include "workloads/step.hpp"

namespace dtsim::config {

// `model: {trace: FILE, traced_gpu: GPU, gradients_from: MODEL}`: a profiled step instead of a
// model (docs/traces.md). The trace itself is read by the command, not here.
// Micro-batches per pipeline and step a configuration may ask for (docs/config.md, "Limits").
inline constexpr long long kMaxMicroBatches = 65'536;

struct TraceModel {
  std::string file;                          // resolved against the config's folder
  Location where;                            // the configuration's `model.trace` line, for messages
  std::optional<hw::GpuSpec> traced_gpu;     // default: from the trace's device name
  std::optional<std::int64_t> gradient_params;  // parameters of `gradients_from`, when named
  std::string gradients_from;
  std::optional<Time> profiler_overhead_per_event;  // the host model's correction (docs/traces.md)
};

struct SimulateConfig {
  hw::ClusterSpec cluster;
  workloads::StepInputs inputs;
  workloads::RunBudget budget;        // training.tokens / samples / epochs (none: one step only)
  workloads::PowerModel power;        // energy: (defaults from the GPU's TDP)
  workloads::Prices prices;           // prices: (zero when not given)
  bool has_prices = false;
  std::optional<TraceModel> trace;    // model: {trace: FILE}
  nlohmann::json resolved;  // every setting, with the defaults that were applied
  std::vector<std::string> notes;  // inherited defaults worth a word (from LoadContext::notes)
};

// Reads `path` (or, when `yaml_text` is given, that text, reported as `path`), applies the
// `--set key=value` overrides (dotted keys, e.g. parallel.tp=4) to the YAML tree first, and checks
// everything. Problems go to ctx.diagnostics with file, line and field; nullopt if any.
// A hardware profile (`profile`, may be null) is applied before the file's own
// `simulation.params`, so that precedence is: defaults < profile < the file < --set.
struct HardwareProfile;
std::optional<SimulateConfig> load_simulate_config(const std::string& path, const std::vector<std::string>& sets, LoadContext& ctx,
                                                   const std::optional<std::string>& yaml_text = std::nullopt,
                                                   const HardwareProfile* profile = nullptr);

// Applies `dotted.key=value` to a YAML tree (creating mappings as needed). The value is parsed as
// YAML, so `parallel.tp=4`, `model=llama3-8b` and `cluster={node: dgx-h100, nodes: 2}` work.
Status apply_set(YAML::Node& root, const std::string& assignment);

// Names of the model parameters `simulation.params` and `--set simulation.params.NAME=V` accept,
// with defaults and sources, for --list-params.
std::vector<std::array<std::string, 3>> simulate_param_list();

}  // namespace dtsim::config
