// Loading hardware descriptions (GPUs, link types, nodes, fabrics, clusters) from presets and
// user files into the plain structs of hw/specs.hpp.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "config/reader.hpp"
#include "hw/specs.hpp"

namespace dtsim::config {

// Resolves preset names and files; caches the link-type table. One per load.
class HardwareLoader {
 public:
  explicit HardwareLoader(LoadContext& ctx) : ctx_(ctx) {}

  // `r.key` holds a link-type name (presets/links.yaml) or an inline {kind, bandwidth, latency}.
  std::optional<hw::LinkType> link_type(MapReader& r, const std::string& key, bool required);
  // `r.key` holds a GPU preset name, a path to a GPU file, or an inline mapping.
  std::optional<hw::GpuSpec> gpu(MapReader& r, const std::string& key);
  // `r.key` holds a node preset name, a path to a node file, or an inline mapping.
  std::optional<hw::NodeSpec> node(MapReader& r, const std::string& key);
  // Reads a fabric mapping on top of `base` (the node's reference fabric, say).
  std::optional<hw::FabricSpec> fabric(MapReader& r, hw::FabricSpec base);
  // Reads a cluster mapping: {node, nodes, gpus_per_node, fabric} or {nodes: [{node, count}], fabric}.
  std::optional<hw::ClusterSpec> cluster(MapReader& r);

  std::optional<hw::GpuSpec> gpu_from(MapReader& r);
  std::optional<hw::NodeSpec> node_from(MapReader& r);

  // Resolves a preset reference: the YAML of presets/<kind>/<name>.yaml or of a file.
  // Returns the parsed document and the file name to report; reports unknown names.
  std::optional<std::pair<YAML::Node, std::string>> resolve(const std::string& kind, const std::string& ref,
                                                            const Location& where, const std::string& field);

 private:
  // The mapping that `r.key` refers to: inline, a file, or a preset of `kind` ("gpu", "node").
  std::optional<MapReader> reference(MapReader& r, const std::string& key, const std::string& kind, const std::string& example);
  bool load_links();
  std::optional<hw::LinkType> link_from(MapReader& r, const std::string& name);

  LoadContext& ctx_;
  bool links_loaded_ = false;
  std::map<std::string, hw::LinkType> links_;
  std::map<std::string, std::string> aliases_;
};

// Sizes past which a cluster is refused with a message, not built (the topology's memory grows with
// the GPUs; each parallel switch-to-switch link of a custom fabric is a link of the flow network).
inline constexpr long long kMaxClusterGpus = 1'048'576;
inline constexpr int kMaxCustomLinkCount = 4096;

// What `--cluster X [--nodes N] [--gpus-per-node G]` asks for.
struct ClusterRequest {
  std::string name_or_path;         // cluster preset, node preset, or a YAML file
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
};

// Resolves a cluster request. A node preset becomes N such nodes joined by the node's reference
// fabric. Problems are reported to ctx.diagnostics; returns nullopt if there were any.
std::optional<hw::ClusterSpec> load_cluster(const ClusterRequest& req, LoadContext& ctx);
// The same, with errors about the name placed at `where` (a configuration's `cluster:` line)
// rather than at the --cluster option.
std::optional<hw::ClusterSpec> load_cluster(const ClusterRequest& req, LoadContext& ctx, const Location& where);

// True when `s` names a file rather than a preset (contains '/' or ends in .yaml/.yml).
bool looks_like_path(const std::string& s);

}  // namespace dtsim::config
