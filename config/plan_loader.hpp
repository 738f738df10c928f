// Loading a `dtsim plan` specification: a model and its training settings (as in a simulate
// configuration), candidate hardware with prices, the layout search space, constraints, and
// optionally the large-batch model of McCandlish et al. 2018. Also the pieces that the sweep
// loader shares: the critical-batch model and keeping a nested simulate configuration's lines.
//
// A plan file:
//   question: "Cheapest way to train Llama 3 70B on 2T tokens within 60 days?"
//   model: llama3-70b
//   training: {global_batch: 1024, seq_len: 8192, tokens: 2.0e12}   # any simulate training key
//   prices: {kwh: 0.12, currency: USD}     # optional (energy:, simulation:, parallel: likewise)
//   hardware:
//     - {name: H100, cluster: {node: dgx-h100}, gpus: [512, 1024], price_per_gpu_hour: 3.0}
//   search: {tp: [2, 4, 8], pp: [1, 2, 4, 8], micro_batch: [1, 2], recompute: [selective, full]}
//   constraints: {deadline: 60 days, max_cost: 5.0e6}
//   statistical_efficiency: {b_noise_tokens: 4.0e6, s_min: 2.0e5}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/reader.hpp"
#include "config/simulate_loader.hpp"
#include "workloads/schedule.hpp"
#include "workloads/training.hpp"

namespace dtsim::config {

struct HardwareProfile;

// McCandlish, Kaplan, Amodei et al. 2018, "An Empirical Model of Large-Batch Training": reaching a
// given loss takes S = S_min (1 + B_noise / B) optimizer steps and E = E_min (1 + B / B_noise)
// training examples at batch size B, with E_min = S_min x B_noise. The critical batch size B_crit
// is estimated by the gradient noise scale B_noise. Give B_noise (in samples or tokens) and one
// of S_min, E_min (samples) or E_min in tokens.
struct NoiseScale {
  double b_noise = 0;          // samples per batch
  double b_noise_tokens = 0;   // tokens per batch (divided by the sequence length)
  double s_min = 0;            // optimizer steps at an infinite batch
  double e_min = 0;            // samples at a tiny batch
  double e_min_tokens = 0;     // tokens at a tiny batch
  std::string source;          // where the figures come from (free text, echoed in reports)
};

// Reads `parent.key` (nullopt when absent or wrong; problems are reported).
std::optional<NoiseScale> read_noise_scale(MapReader& parent, const std::string& key);

// `text` with every character outside the given regions replaced by a space (newlines kept), so
// that a part of a file parses on its own with its original line and column numbers. A region
// starts at (line, column) (0-based) and ends before line `end_line`.
struct TextRegion {
  int line = 0, column = 0, end_line = 0;
};
std::string keep_regions(const std::string& text, const std::vector<TextRegion>& regions);

// The regions of the top-level keys of `root` (parsed from `text`) that `keep` accepts, each from
// its key to the next top-level key. nullopt when keys share a line (a flow-style root).
std::optional<std::vector<TextRegion>> top_level_regions(const std::string& text, const YAML::Node& root,
                                                         const std::function<bool(const std::string&)>& keep);

// A YAML value as text on one line (flow style), suitable for `apply_set("key=" + text)`.
std::string flow_yaml(const YAML::Node& n);

struct HardwareOption {
  std::string name;
  Location where;
  std::string cluster_yaml;       // the cluster mapping as written, flow style (nodes set per GPU count)
  hw::ClusterSpec cluster;        // checked, one node
  int gpus_per_node = 0;
  std::vector<int> gpus;          // GPU counts to consider
  double price_per_gpu_hour = 0;  // in the plan's currency
};

// The layouts searched. Empty lists take defaults that depend on the hardware and model (see
// docs/planning.md).
struct SearchSpace {
  std::vector<int> tp, pp, cp, ep, micro_batch, zero, virtual_stages;
  std::vector<std::int64_t> global_batch;  // empty: training.global_batch
  std::vector<workloads::Recompute> recompute;
  std::vector<workloads::PipelineSchedule> schedule;
  std::vector<bool> sequence_parallel;     // empty: on whenever tp > 1 (Megatron's recommendation)
  bool tp_within_node = true;              // keep tensor parallelism inside a node
  int simulate_top = 4;                    // full simulations per hardware option and GPU count
};

struct PlanConstraints {
  double deadline_s = 0;   // 0: none
  double max_cost = 0;     // 0: none
  std::string objective;   // "time" or "cost"; "": cost when only a deadline is given, else time
};

// One hardware option at one GPU count, resolved into a simulate configuration (cluster with its
// node count, the plan's model, training, energy and prices, the option's GPU-hour price).
struct PlanTarget {
  std::size_t hardware = 0;
  int gpus = 0;
  SimulateConfig base;
};

struct PlanSpec {
  std::string path;
  std::string question;
  std::vector<HardwareOption> hardware;
  std::vector<PlanTarget> targets;     // hardware x GPU counts, in file order
  SearchSpace search;
  PlanConstraints constraints;
  std::optional<NoiseScale> noise;
  bool bucket_given = false;           // parallel.bucket set in the file (else the engine's default per layout)
  std::string currency = "USD";
};

// Reads and checks a plan file (every field, with file:line diagnostics). A hardware profile, when
// given, applies to every target as in `dtsim simulate --hw-profile`.
std::optional<PlanSpec> load_plan_spec(const std::string& path, LoadContext& ctx, const HardwareProfile* profile = nullptr);

// Reads a duration such as "60 days", "36 h", "2 weeks" into seconds (nullopt if malformed).
std::optional<double> parse_duration_s(const std::string& text);

}  // namespace dtsim::config
