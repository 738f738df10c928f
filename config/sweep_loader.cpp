#include "config/sweep_loader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "config/profile.hpp"

namespace dtsim::config {

namespace {

constexpr std::size_t kMaxPoints = 1'000'000;
constexpr long long kMaxGpus = 1'000'000;  // a cluster has at most a million nodes (config/hardware.cpp)

std::optional<std::string> read_text(const std::string& path, const Location& where, const std::string& field, LoadContext& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.diagnostics.error(where, field, fmt::format("cannot open '{}'", path));
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_unknown_key(const Diagnostic& d, const std::string& axis) {
  if (d.field.empty()) return false;
  const bool related = axis == d.field || axis.rfind(d.field + ".", 0) == 0;
  const bool unknown = d.message.rfind("unknown field", 0) == 0 || d.message.rfind("unknown parameter", 0) == 0 ||
                       d.message.rfind("unknown memory parameter", 0) == 0;
  return related && unknown;
}

}  // namespace

std::string_view to_string(Scaling s) {
  switch (s) {
    case Scaling::none: return "none";
    case Scaling::strong: return "strong";
    case Scaling::weak: return "weak";
  }
  return "?";
}

nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : n) a.push_back(yaml_to_json(x));
    return a;
  }
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (auto it = n.begin(); it != n.end(); ++it) o[it->first.as<std::string>("")] = yaml_to_json(it->second);
    return o;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted in the file: a string
  if (s == "true") return true;
  if (s == "false") return false;
  if (s == "~" || s == "null") return nullptr;
  long long i = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return i;
  char* stop = nullptr;
  const double d = std::strtod(s.c_str(), &stop);
  if (!s.empty() && stop == s.c_str() + s.size() && std::isfinite(d)) return d;
  return s;
}

std::optional<SweepSpec> load_sweep_spec(const std::string& path, LoadContext& ctx, const HardwareProfile* profile) {
  auto text = read_text(path, Location{path, 0, 0}, "", ctx);
  if (!text) return std::nullopt;
  auto doc = parse_yaml(*text, path, ctx);
  if (!doc) return std::nullopt;
  const std::size_t errors = ctx.diagnostics.size();
  SweepSpec spec;
  spec.path = path;
  MapReader root(*doc, "", path, ctx);
  if (!root.ok()) return std::nullopt;
  spec.question = root.string("question").value_or("");

  // The base configuration: a file, or inline (its lines kept).
  YAML::Node bn = root.node("base");
  if (!bn.IsDefined() || bn.IsNull()) {
    root.error("base", "is required: a simulate configuration (inline) or the path of one");
  } else if (bn.IsScalar()) {
    spec.base_path = resolve_path(bn.Scalar(), path);
    if (auto t = read_text(spec.base_path, root.location("base"), "base", ctx)) spec.base_text = *t;
  } else if (bn.IsMap()) {
    spec.base_path = path;
    // The value only, from where it starts to the next top-level key.
    std::optional<TextRegion> region;
    const YAML::Mark m = bn.Mark();
    if (const auto regions = top_level_regions(*text, *doc, [](const std::string&) { return true; }); regions && !m.is_null()) {
      for (const TextRegion& r : *regions) {
        if (r.line <= m.line && m.line < r.end_line) region = TextRegion{m.line, m.column, r.end_line};
      }
    }
    spec.base_text = region ? keep_regions(*text, {*region}) : YAML::Dump(bn);
  } else {
    root.error("base", "expected a simulate configuration (a mapping) or the path of one");
  }

  // Axes.
  struct Axis {
    std::string key;
    Location where;
    YAML::Node values;
  };
  std::vector<Axis> axes;
  YAML::Node an = root.node("axes");
  if (!an.IsDefined() || an.IsNull()) {
    root.error("axes", "is required: a mapping of keys to lists of values, e.g. {gpus: [8, 16, 32], parallel.tp: [4, 8]}");
  } else if (!an.IsMap()) {
    root.error("axes", "expected a mapping of keys to lists of values");
  } else if (an.size() == 0) {
    root.error("axes", "the sweep is empty: give at least one axis with values");
  } else {
    for (auto it = an.begin(); it != an.end(); ++it) {
      Axis a{it->first.as<std::string>(""), location_of(it->first, path), it->second};
      if (!a.values.IsSequence()) {
        ctx.diagnostics.error(a.where, "axes." + a.key, "expected a list of values, e.g. [1, 2, 4]");
        continue;
      }
      if (a.values.size() == 0) {
        ctx.diagnostics.error(a.where, "axes." + a.key, "the axis has no values: the sweep would be empty");
        continue;
      }
      axes.push_back(a);
    }
  }
  if (auto c = root.string("combine")) {
    if (*c == "zip") spec.zip = true;
    else if (*c != "product") root.error("combine", fmt::format("unknown value '{}' (product, zip)", *c));
  }
  const bool has_gpus = std::any_of(axes.begin(), axes.end(), [](const Axis& a) { return a.key == "gpus"; });
  if (auto s = root.string("scaling")) {
    if (*s == "strong") spec.scaling = Scaling::strong;
    else if (*s == "weak") spec.scaling = Scaling::weak;
    else root.error("scaling", fmt::format("unknown value '{}' (strong: fixed global batch; weak: fixed batch per GPU)", *s));
    if (!has_gpus) root.error("scaling", "needs a gpus axis (the GPU counts to scale over)");
  } else if (has_gpus) {
    spec.scaling = Scaling::strong;
  }
  if (root.has("statistical_efficiency")) spec.noise = read_noise_scale(root, "statistical_efficiency");
  if (auto m = root.string("measured")) {
    // Absolute, so that `dtsim report` finds it from any directory.
    spec.measured = std::filesystem::absolute(resolve_path(*m, path)).lexically_normal().string();
    std::ifstream probe(spec.measured);
    if (!probe) root.error("measured", fmt::format("cannot open '{}'", spec.measured));
  }
  root.finish();
  // Problems so far do not stop the checks below (the base, every axis): a sweep reports every
  // problem at once.

  if (spec.base_text.empty()) return std::nullopt;  // no base to check the axes against (said above)

  // The base must load on its own.
  const std::map<std::string, std::string> inputs_before = ctx.inputs;
  auto base = load_simulate_config(spec.base_path, {}, ctx, spec.base_text, profile);
  if (!base) return std::nullopt;
  if (base->trace) {
    root.error("base", "model: {trace: ...} runs with dtsim simulate only (a traced step is not swept yet; docs/traces.md)");
    return std::nullopt;
  }
  std::map<std::string, std::string> base_inputs;
  for (const auto& [file, hash] : ctx.inputs) {
    if (!inputs_before.count(file)) base_inputs[file] = hash;
  }
  // A large-batch model given in tokens needs a sequence length: say so now, not after every point ran.
  if (spec.noise && std::holds_alternative<workloads::CnnSpec>(base->inputs.model) &&
      (spec.noise->b_noise_tokens > 0 || spec.noise->e_min_tokens > 0)) {
    const std::string key = spec.noise->b_noise_tokens > 0 ? "b_noise_tokens" : "e_min_tokens";
    ctx.diagnostics.error(ctx.sources.find("statistical_efficiency." + key), "statistical_efficiency." + key,
                          fmt::format("{} needs a model with a sequence length; the base model is a CNN: give {} in samples", key,
                                      key == "b_noise_tokens" ? "b_noise" : "e_min"));
    return std::nullopt;
  }
  for (const auto& g : base->cluster.groups) spec.base_gpus += g.count * (g.gpus_per_node > 0 ? g.gpus_per_node : g.node.gpus);
  spec.base_global_batch = base->inputs.training.global_batch;

  // Each axis's assignments, per value.
  std::vector<std::vector<std::vector<std::string>>> sets(axes.size());
  for (std::size_t ai = 0; ai < axes.size(); ++ai) {
    const Axis& a = axes[ai];
    spec.axes.push_back(a.key);
    spec.axis_where.push_back(a.where);
    if (a.key == "gpus") {
      YAML::Node base_doc;
      try {
        base_doc = YAML::Load(spec.base_text);
      } catch (const YAML::Exception&) {
      }
      const YAML::Node cl = base_doc["cluster"];
      if (!cl.IsMap() || !cl["node"].IsDefined() || base->cluster.groups.size() != 1) {
        ctx.diagnostics.error(a.where, "axes.gpus", "the gpus axis needs a base cluster of one node kind written as {node: ..., nodes: N}");
        continue;
      }
      const hw::NodeGroup& grp = base->cluster.groups.front();
      const int per_node = grp.gpus_per_node > 0 ? grp.gpus_per_node : grp.node.gpus;
      for (std::size_t k = 0; k < a.values.size(); ++k) {
        const YAML::Node v = a.values[k];
        // The whole scalar must be an integer: "2.5", "8abc" and "1e1" are errors, not 2, 8 and 1.
        long long g = 0;
        const std::string scalar = v.IsScalar() ? v.Scalar() : std::string();
        const auto [end, ec] = std::from_chars(scalar.data(), scalar.data() + scalar.size(), g);
        const bool whole = !scalar.empty() && ec == std::errc() && end == scalar.data() + scalar.size();
        const Location at = location_of(v, path);
        const std::string field = fmt::format("axes.gpus[{}]", k);
        if (!whole || g < 1 || g > kMaxGpus) {
          ctx.diagnostics.error(at, field, fmt::format("expected a GPU count (a whole number from 1 to {}), got '{}'", kMaxGpus, scalar));
          continue;
        }
        std::vector<std::string> s;
        if (g <= per_node) {
          s.push_back("cluster.nodes=1");
          s.push_back(fmt::format("cluster.gpus_per_node={}", g));
        } else if (g % per_node == 0) {
          s.push_back(fmt::format("cluster.nodes={}", g / per_node));
        } else {
          ctx.diagnostics.error(at, field, fmt::format("{} GPUs is not a whole number of {}-GPU nodes", g, per_node));
          continue;
        }
        s.push_back("parallel.dp=~");  // derived from the GPU count
        if (spec.scaling == Scaling::weak) {
          const std::int64_t num = spec.base_global_batch * g;
          if (num % spec.base_gpus != 0) {
            ctx.diagnostics.error(at, field,
                                  fmt::format("weak scaling keeps {} samples per GPU ({} / {} GPUs): {} GPUs would need a fractional global batch",
                                              static_cast<double>(spec.base_global_batch) / spec.base_gpus, spec.base_global_batch,
                                              spec.base_gpus, g));
            continue;
          }
          s.push_back(fmt::format("training.global_batch={}", num / spec.base_gpus));
        }
        sets[ai].push_back(s);
      }
      continue;
    }
    for (std::size_t k = 0; k < a.values.size(); ++k) sets[ai].push_back({a.key + "=" + flow_yaml(a.values[k])});
    // The key must be one the configuration knows: try the first value on the base.
    LoadContext probe;
    load_simulate_config(spec.base_path, sets[ai].front(), probe, spec.base_text, profile);
    for (const Diagnostic& d : probe.diagnostics.items()) {
      if (d.where.file == "--set" || is_unknown_key(d, a.key)) {
        ctx.diagnostics.error(a.where, "axes." + a.key, fmt::format("unknown axis '{}': {}{}", a.key, d.field.empty() ? "" : d.field + ": ", d.message));
        break;
      }
    }
  }
  if (ctx.diagnostics.size() != errors) return std::nullopt;

  // Points: the product (first axis slowest) or the zip of the axes.
  std::size_t count = 1;
  if (spec.zip) {
    count = sets.front().size();
    for (std::size_t ai = 1; ai < sets.size(); ++ai) {
      if (sets[ai].size() != count) {
        ctx.diagnostics.error(spec.axis_where[ai], "axes." + spec.axes[ai],
                              fmt::format("combine: zip needs axes of one length: {} has {} values, {} has {}", spec.axes.front(), count,
                                          spec.axes[ai], sets[ai].size()));
      }
    }
  } else {
    for (const auto& s : sets) {
      count *= s.size();
      if (count > kMaxPoints) {
        root.error("axes", fmt::format("the product of the axes has more than {} points", kMaxPoints));
        break;
      }
    }
  }
  if (ctx.diagnostics.size() != errors) return std::nullopt;
  // The fingerprint: what --resume checks before keeping rows. The base's text, the contents of
  // every file its load read (included files, Hugging Face configs) and of the hardware profile,
  // and every point's assignments. Files named only in axis values count by their names.
  std::string all = spec.base_text;
  // (By contents only, sorted: the same files reached by another relative path are the same.)
  std::vector<std::string> hashes;
  for (const auto& [file, hash] : base_inputs) hashes.push_back(hash);
  std::sort(hashes.begin(), hashes.end());
  for (const auto& h : hashes) all += "\nfile:" + h;
  if (profile != nullptr) {
    std::ifstream pin(profile->path, std::ios::binary);
    std::ostringstream pss;
    pss << pin.rdbuf();
    all += "\nprofile:" + content_hash(pss.str());
  }
  for (std::size_t i = 0; i < count; ++i) {
    SweepPoint p;
    p.index = i;
    std::size_t rest = i;
    std::vector<std::size_t> pick(axes.size());
    for (std::size_t ai = axes.size(); ai-- > 0;) {
      if (spec.zip) {
        pick[ai] = i;
      } else {
        pick[ai] = rest % sets[ai].size();
        rest /= sets[ai].size();
      }
    }
    for (std::size_t ai = 0; ai < axes.size(); ++ai) {
      const YAML::Node v = axes[ai].values[pick[ai]];
      p.axes[axes[ai].key] = yaml_to_json(v);
      p.label += fmt::format("{}{}={}", ai ? ", " : "", axes[ai].key, v.IsScalar() ? v.Scalar() : flow_yaml(v));
      for (const auto& s : sets[ai][pick[ai]]) {
        p.sets.push_back(s);
        p.set_axis.push_back(axes[ai].key);
      }
    }
    for (const auto& s : p.sets) all += "\n" + s;
    all += "\n--";
    spec.points.push_back(std::move(p));
  }
  spec.fingerprint = content_hash(all);
  return spec;
}

std::optional<SimulateConfig> load_sweep_point(const SweepSpec& spec, const SweepPoint& point, LoadContext& ctx,
                                               const HardwareProfile* profile) {
  LoadContext local;
  auto cfg = load_simulate_config(spec.base_path, point.sets, local, spec.base_text, profile);
  for (const Diagnostic& d : local.diagnostics.items()) {
    Location where = d.where;
    if (where.file == "--set") {
      for (std::size_t k = 0; k < point.sets.size(); ++k) {
        const std::string key = point.sets[k].substr(0, point.sets[k].find('='));
        if (d.field.find(key) != std::string::npos) {
          for (std::size_t ai = 0; ai < spec.axes.size(); ++ai) {
            if (spec.axes[ai] == point.set_axis[k]) where = spec.axis_where[ai];
          }
        }
      }
    }
    ctx.diagnostics.error(where, d.field, d.message);
  }
  ctx.sources = local.sources;
  return cfg;
}

}  // namespace dtsim::config
