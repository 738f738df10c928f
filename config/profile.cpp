#include "config/profile.hpp"
#include "config/presets.hpp"

#include <filesystem>

#include <charconv>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace dtsim::config {

namespace {

Status set_memory_param(workloads::MemoryParams& m, std::string_view name, std::string_view value) {
  if (name == "reserved") {
    auto b = parse_bytes(value);
    if (!b) return b.error();
    m.reserved = *b;
    return {};
  }
  if (name == "fragmentation") {
    double x = -1;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
    if (ec != std::errc() || ptr != value.data() + value.size() || x < 0 || x > 1) {
      return Error(fmt::format("'{}' is not a fraction in [0, 1]", value));
    }
    m.fragmentation = x;
    return {};
  }
  if (name == "cuda_context" || name == "cublas_workspace") {
    auto b = parse_bytes(value);
    if (!b) return b.error();
    (name == "cuda_context" ? m.cuda_context : m.cublas_workspace) = *b;
    return {};
  }
  return Error(fmt::format("unknown memory parameter '{}' (reserved, fragmentation, cuda_context, cublas_workspace)", name));
}

void override_link(const HardwareProfile& p, hw::LinkType& t) {
  const auto it = p.links.find(t.name);
  if (it == p.links.end()) return;
  if (it->second.efficiency) t.efficiency = *it->second.efficiency;
  if (it->second.latency) t.latency = *it->second.latency;
}

void override_link(const HardwareProfile& p, std::optional<hw::LinkType>& t) {
  if (t) override_link(p, *t);
}

}  // namespace

Status set_model_param(workloads::StepInputs& in, const std::string& name, const std::string& value) {
  const auto dot = name.find('.');
  const std::string family = name.substr(0, dot), rest = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (family == "comm") return comm::set_comm_param(in.comm, rest, value);
  if (family == "compute") return workloads::set_compute_param(in.compute, rest, value);
  if (family == "memory") return set_memory_param(in.memory, rest, value);
  return Error(fmt::format("unknown parameter '{}' (names start with comm., compute. or memory.; dtsim simulate --list-params)", name));
}

std::map<std::string, LinkOverride> read_link_overrides(MapReader& parent, const std::string& key, LoadContext& ctx) {
  std::map<std::string, LinkOverride> out;
  auto links = parent.map(key);
  if (!links) return out;
  // Pairs copied out first, as for params: a lookup through the reader may add to the mapping.
  std::vector<std::pair<YAML::Node, YAML::Node>> pairs;
  for (const auto& kv : parent.node(key)) pairs.emplace_back(kv.first, kv.second);
  for (const auto& [name_node, value] : pairs) {
    if (!name_node.IsScalar()) continue;  // links->finish() reports it
    const std::string name = name_node.Scalar();
    links->node(name);
    MapReader lr(value, links->field(name), parent.file(), ctx);
    LinkOverride o;
    if (auto e = lr.number("efficiency", false, 1e-3, 1.0)) o.efficiency = *e;
    if (auto t = lr.time("latency")) o.latency = *t;
    lr.finish();
    out[name] = o;
  }
  links->finish();
  return out;
}

std::vector<std::string> link_type_names(const hw::ClusterSpec& cluster) {
  std::set<std::string> names;
  const auto add = [&](const std::optional<hw::LinkType>& t) {
    if (t) names.insert(t->name);
  };
  for (const auto& g : cluster.groups) {
    add(g.node.nvlink);
    names.insert(g.node.pcie.name);
    add(g.node.nic);
    add(g.node.cpu_link);
  }
  add(cluster.fabric.nic);
  add(cluster.fabric.link);
  names.erase("");
  return {names.begin(), names.end()};
}

std::optional<HardwareProfile> load_profile(const std::string& path, LoadContext& ctx) {
  // A file, or the name of a shipped profile (presets/profiles/<name>.yaml).
  std::optional<YAML::Node> doc;
  std::error_code ec;
  const PresetFile* shipped = nullptr;
  if (!std::filesystem::exists(path, ec) && path.find('/') == std::string::npos) shipped = find_preset("profiles", path);
  if (shipped != nullptr) {
    doc = parse_yaml(std::string(shipped->text), std::string(shipped->path), ctx);
  } else if (!std::filesystem::exists(path, ec) && path.find('/') == std::string::npos && path.find(".y") == std::string::npos) {
    const auto known = preset_names("profiles");
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    const std::string near = closest(path, known);
    ctx.diagnostics.error(Location{path, 0, 0}, "--hw-profile",
                        fmt::format("no file and no shipped profile named '{}'{} (shipped: {})", path,
                                    near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", near), list.empty() ? "none" : list));
    return std::nullopt;
  } else {
    doc = load_yaml_file(path, ctx);
  }
  if (!doc) return std::nullopt;
  const std::size_t errors = ctx.diagnostics.size();
  HardwareProfile p;
  p.path = path;
  MapReader r(*doc, "", path, ctx);
  if (auto v = r.integer("profile", true, 1, 1); !v) {
    if (r.has("profile")) r.error("profile", "this dtsim reads profile format 1");
  }
  p.description = r.string("description").value_or("");
  r.node("source");  // free-form, echoed
  r.node("fit");
  if (auto params = r.map("params")) {
    // The pairs are copied out first: looking a key up through the reader may add it to the
    // mapping, which would invalidate an iterator over it.
    std::vector<std::pair<YAML::Node, YAML::Node>> pairs;
    for (const auto& kv : r.node("params")) pairs.emplace_back(kv.first, kv.second);
    workloads::StepInputs probe;  // every value is checked by setting it on a scratch copy
    for (const auto& [key, value] : pairs) {
      if (!key.IsScalar()) continue;  // params->finish() reports it
      const std::string name = key.Scalar();
      params->node(name);
      if (!value.IsScalar()) {
        params->error(name, "expected a single value");
        continue;
      }
      if (auto st = set_model_param(probe, name, value.Scalar()); !st) {
        params->error(name, st.error().message);
        continue;
      }
      p.params[name] = value.Scalar();
    }
    params->finish();
  }
  p.links = read_link_overrides(r, "links", ctx);
  r.finish();
  if (ctx.diagnostics.size() != errors) return std::nullopt;
  return p;
}

Status apply_profile(const HardwareProfile& p, workloads::StepInputs& in) {
  for (const auto& [name, value] : p.params) {
    if (auto st = set_model_param(in, name, value); !st) return Error(fmt::format("{}: {}", p.path, st.error().message), name);
  }
  return {};
}

Status apply_profile(const HardwareProfile& p, comm::CommParams& comm) {
  for (const auto& [name, value] : p.params) {
    if (name.rfind("comm.", 0) != 0) continue;
    if (auto st = comm::set_comm_param(comm, name.substr(5), value); !st) return Error(fmt::format("{}: {}", p.path, st.error().message), name);
  }
  return {};
}

void apply_profile(const HardwareProfile& p, hw::ClusterSpec& cluster) {
  for (auto& g : cluster.groups) {
    override_link(p, g.node.nvlink);
    override_link(p, g.node.pcie);
    override_link(p, g.node.nic);
    override_link(p, g.node.cpu_link);
  }
  override_link(p, cluster.fabric.nic);
  override_link(p, cluster.fabric.link);
}

}  // namespace dtsim::config
