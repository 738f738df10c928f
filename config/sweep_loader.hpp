// Loading a `dtsim sweep` specification: a base simulate configuration and axes of values, each
// axis a dotted simulate key (the semantics of `dtsim simulate --set`) or the derived `gpus` axis
// (strong or weak scaling), combined as a product or zipped, into a list of points.
//
//   question: "How does GPT-3 13B scale on H100 from 8 to 256 GPUs?"
//   base: base.yaml                   # or an inline simulate configuration
//   axes:                             # in order; the first varies slowest
//     gpus: [8, 16, 32, 64]           # derived: cluster.nodes (and gpus_per_node), dp, global_batch
//     parallel.tp: [4, 8]
//   combine: product                  # or zip (all axes the same length)
//   scaling: strong                   # strong: fixed global batch; weak: fixed batch per GPU
//   statistical_efficiency: {b_noise: 2048, s_min: 30000}   # optional (plan_loader.hpp)
//   measured: measured.csv            # optional: measured data to compare with
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/plan_loader.hpp"
#include "config/reader.hpp"

namespace dtsim::config {

struct HardwareProfile;

enum class Scaling { none, strong, weak };
std::string_view to_string(Scaling s);

struct SweepPoint {
  std::size_t index = 0;
  nlohmann::json axes = nlohmann::json::object();  // axis key -> value, as written
  std::string label;                               // "gpus=16, parallel.tp=8"
  std::vector<std::string> sets;                   // applied to the base as `--set` would
  std::vector<std::string> set_axis;               // the axis each assignment comes from
};

struct SweepSpec {
  std::string path;                  // the spec file
  std::string question;
  std::string base_path;             // where the base's lines are (the spec, or the base file)
  std::string base_text;             // the base configuration, lines aligned with base_path
  std::vector<std::string> axes;     // in order
  std::vector<Location> axis_where;
  bool zip = false;
  Scaling scaling = Scaling::none;
  int base_gpus = 0;                 // GPUs of the base configuration
  std::int64_t base_global_batch = 0;
  std::vector<SweepPoint> points;
  std::optional<NoiseScale> noise;
  std::string measured;              // CSV path (resolved), or ""
  std::string fingerprint;           // identifies the points (for --resume)
};

// Reads and checks a sweep spec: the base must load (with the profile, when given) and every axis
// key must be one the simulate configuration knows (an unknown axis is an error at its line).
// Values that make a point invalid (tp = 3 for 32 heads, say) are not errors here: the point's row
// carries the reason.
std::optional<SweepSpec> load_sweep_spec(const std::string& path, LoadContext& ctx, const HardwareProfile* profile = nullptr);

// Loads the simulate configuration of one point. Problems go to `ctx` (the --set pseudo-file is
// renamed to the spec's axis where the assignment came from).
std::optional<SimulateConfig> load_sweep_point(const SweepSpec& spec, const SweepPoint& point, LoadContext& ctx,
                                               const HardwareProfile* profile = nullptr);

// A YAML scalar or structure as JSON (numbers and booleans typed, the rest strings).
nlohmann::json yaml_to_json(const YAML::Node& n);

}  // namespace dtsim::config
