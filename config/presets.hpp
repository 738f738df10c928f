// The preset library (presets/*.yaml), compiled into the binary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtsim::config {

struct PresetFile {
  std::string_view path;  // as in the repository, e.g. "presets/nodes/dgx-h100.yaml"
  std::string_view text;
};

const std::vector<PresetFile>& embedded_presets();

// Finds presets/<kind>/<name>.yaml (kind: "gpus", "nodes", "clusters") or nullptr.
const PresetFile* find_preset(std::string_view kind, std::string_view name);
// Finds a top-level preset file such as "links" (presets/links.yaml).
const PresetFile* find_preset_file(std::string_view name);
// Names of the presets of one kind, sorted.
std::vector<std::string> preset_names(std::string_view kind);
// The known name closest to `name` (edit distance), or "" when nothing is close.
std::string closest(std::string_view name, const std::vector<std::string>& known);

}  // namespace dtsim::config
