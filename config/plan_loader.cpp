#include "config/plan_loader.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "config/hardware.hpp"
#include "config/presets.hpp"
#include "workloads/run.hpp"

namespace dtsim::config {

namespace {

// Top-level keys a plan passes on to the simulate configuration of every candidate.
const std::vector<std::string> kSimulateKeys = {"model", "training", "parallel", "simulation", "energy", "prices"};
// The most GPUs one target may have: a cluster has at most a million nodes (config/hardware.cpp),
// and the sweep loader takes the same bound for its GPU counts.
constexpr std::int64_t kMaxGpus = 1'000'000;
// Parallel settings the search chooses: a plan lists their values under search: instead.
const std::vector<std::string> kSearchedParallel = {"tp", "pp", "dp", "cp", "ep", "zero", "schedule", "virtual_stages", "sequence_parallel"};

bool is_simulate_key(const std::string& k) { return std::find(kSimulateKeys.begin(), kSimulateKeys.end(), k) != kSimulateKeys.end(); }

std::optional<std::string> read_text(const std::string& path, LoadContext& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ctx.diagnostics.error(Location{path, 0, 0}, "", "cannot open the file");
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

template <class T, class Parse>
std::vector<T> enum_list(MapReader& r, const std::string& key, Parse parse, const char* options) {
  std::vector<T> out;
  YAML::Node n = r.node(key);
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence() || n.size() == 0) {
    r.error(key, fmt::format("expected a non-empty list of values ({})", options));
    return out;
  }
  for (std::size_t i = 0; i < n.size(); ++i) {
    const std::string s = n[i].IsScalar() ? n[i].Scalar() : std::string();
    auto v = parse(s);
    if (!v) {
      r.context().diagnostics.error(location_of(n[i], r.file()), fmt::format("{}[{}]", r.field(key), i),
                                    fmt::format("unknown value '{}' ({})", s, options));
      continue;
    }
    if (std::find(out.begin(), out.end(), *v) != out.end()) {
      r.context().diagnostics.error(location_of(n[i], r.file()), fmt::format("{}[{}]", r.field(key), i),
                                    fmt::format("'{}' is listed twice (each value is searched once)", s));
      continue;
    }
    out.push_back(*v);
  }
  return out;
}

// A search list must not repeat a value: duplicates would be searched, simulated and listed twice.
template <typename T>
void refuse_repeats(MapReader& r, const std::string& key, const std::vector<T>& values) {
  const YAML::Node n = r.node(key);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::find(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(i), values[i]) == values.begin() + static_cast<std::ptrdiff_t>(i)) continue;
    const Location at = n.IsSequence() && i < n.size() ? location_of(n[i], r.file()) : r.location(key);
    r.context().diagnostics.error(at, fmt::format("{}[{}]", r.field(key), i), fmt::format("{} is listed twice (each value is searched once)", values[i]));
  }
}

std::vector<int> small_int_list(MapReader& r, const std::string& key, int min, int max) {
  std::vector<int> out;
  if (!r.has(key)) {
    r.node(key);
    return out;
  }
  auto v = r.int_list(key, false, min, max);
  if (!v) return out;
  if (v->empty()) r.error(key, "the list is empty");
  refuse_repeats(r, key, *v);
  for (auto x : *v) out.push_back(static_cast<int>(x));
  return out;
}

}  // namespace

std::optional<NoiseScale> read_noise_scale(MapReader& parent, const std::string& key) {
  auto r = parent.map(key);
  if (!r) return std::nullopt;
  const std::size_t errors = r->context().diagnostics.size();
  NoiseScale n;
  if (auto v = r->number("b_noise", false, 1e-9, 1e18)) n.b_noise = *v;
  if (auto v = r->number("b_noise_tokens", false, 1e-9, 1e21)) n.b_noise_tokens = *v;
  if (auto v = r->number("s_min", false, 1e-9, 1e18)) n.s_min = *v;
  if (auto v = r->number("e_min", false, 1e-9, 1e21)) n.e_min = *v;
  if (auto v = r->number("e_min_tokens", false, 1e-9, 1e24)) n.e_min_tokens = *v;
  n.source = r->string("source").value_or("");
  const int b = (r->has("b_noise") ? 1 : 0) + (r->has("b_noise_tokens") ? 1 : 0);
  const int s = (r->has("s_min") ? 1 : 0) + (r->has("e_min") ? 1 : 0) + (r->has("e_min_tokens") ? 1 : 0);
  if (b != 1) r->error_here("give the critical batch as exactly one of b_noise (samples) or b_noise_tokens");
  if (s != 1) r->error_here("give exactly one of s_min (steps), e_min (samples) or e_min_tokens");
  r->finish();
  if (r->context().diagnostics.size() != errors) return std::nullopt;
  return n;
}

std::string keep_regions(const std::string& text, const std::vector<TextRegion>& regions) {
  std::string out = text;
  int line = 0, col = 0;
  for (char& c : out) {
    if (c == '\n') {
      ++line;
      col = 0;
      continue;
    }
    bool kept = false;
    for (const TextRegion& r : regions) {
      if (line < r.end_line && (line > r.line || (line == r.line && col >= r.column))) {
        kept = true;
        break;
      }
    }
    if (!kept && c != '\r') c = ' ';
    ++col;
  }
  return out;
}

std::optional<std::vector<TextRegion>> top_level_regions(const std::string& text, const YAML::Node& root,
                                                         const std::function<bool(const std::string&)>& keep) {
  struct Key {
    std::string name;
    int line, column;
  };
  std::vector<Key> keys;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const YAML::Mark m = it->first.Mark();
    keys.push_back(Key{it->first.as<std::string>(""), m.line, m.column});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) { return a.line < b.line; });
  for (std::size_t i = 1; i < keys.size(); ++i) {
    if (keys[i].line == keys[i - 1].line) return std::nullopt;
  }
  const int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;
  std::vector<TextRegion> out;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!keep(keys[i].name)) continue;
    out.push_back(TextRegion{keys[i].line, keys[i].column, i + 1 < keys.size() ? keys[i + 1].line : lines});
  }
  return out;
}

std::string flow_yaml(const YAML::Node& n) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

std::optional<double> parse_duration_s(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  unit.erase(unit.find_last_not_of(' ') + 1);
  if (!std::isfinite(v) || v < 0) return std::nullopt;
  static const std::pair<const char*, double> units[] = {{"s", 1},        {"sec", 1},       {"min", 60},        {"h", 3600},
                                                         {"hour", 3600},  {"hours", 3600},  {"d", 86400},       {"day", 86400},
                                                         {"days", 86400}, {"week", 604800}, {"weeks", 604800}};
  for (const auto& [name, k] : units) {
    if (unit == name) return v * k;
  }
  return std::nullopt;
}

std::optional<PlanSpec> load_plan_spec(const std::string& path, LoadContext& ctx, const HardwareProfile* profile) {
  auto text = read_text(path, ctx);
  if (!text) return std::nullopt;
  auto doc = parse_yaml(*text, path, ctx);
  if (!doc) return std::nullopt;
  const std::size_t errors = ctx.diagnostics.size();
  PlanSpec spec;
  spec.path = path;
  MapReader root(*doc, "", path, ctx);
  if (!root.ok()) return std::nullopt;
  spec.question = root.string("question").value_or("");
  if (root.has("cluster")) root.error("cluster", "a plan compares hardware options: list them under hardware: (each with cluster, gpus, price_per_gpu_hour)");
  if (!root.has("model")) root.error_here("model is required (a preset such as llama3-70b, a file, or a mapping)");
  if (!root.has("training")) root.error_here("training is required (global_batch, seq_len, and tokens, samples or epochs)");

  // Fixed parallel settings may be given; the searched ones may not.
  YAML::Node par = (*doc)["parallel"];
  if (par.IsDefined() && par.IsMap()) {
    MapReader pr(par, "parallel", path, ctx);
    for (const auto& k : kSearchedParallel) {
      if (pr.has(k)) pr.error(k, fmt::format("is chosen by the search: list the values to try under search.{}", k == "dp" ? "(dp follows from the GPU count)" : k));
    }
    spec.bucket_given = pr.has("bucket");
  }
  // prices must be a mapping here: each option's price is later set inside it (a list there made
  // the error name --set, not this file: found by the issue-15 mutation run).
  const YAML::Node prices = root.node("prices");
  if (prices.IsDefined() && !prices.IsNull() && !prices.IsMap()) root.error("prices", "expected a mapping (gpu_hour, kwh, currency)");
  const bool global_price = prices.IsMap() && prices["gpu_hour"].IsDefined();
  if (prices.IsMap()) {
    // A const lookup of an absent key gives an invalid node: IsDefined() first (Type() would throw).
    if (const YAML::Node cur = prices["currency"]; cur.IsDefined() && cur.IsScalar()) spec.currency = cur.Scalar();
  }

  // Hardware options.
  YAML::Node hwn = root.node("hardware");
  if (!hwn.IsDefined() || hwn.IsNull()) {
    root.error("hardware", "is required: a list of options such as {name: H100, cluster: {node: dgx-h100}, gpus: [256, 512], price_per_gpu_hour: 3.0}");
  } else if (!hwn.IsSequence() || hwn.size() == 0) {
    root.error("hardware", "expected a non-empty list of hardware options");
  } else {
    for (std::size_t i = 0; i < hwn.size(); ++i) {
      MapReader h(hwn[i], fmt::format("hardware[{}]", i), path, ctx);
      if (!h.ok()) continue;
      HardwareOption opt;
      opt.where = h.location();
      opt.name = h.string("name", true).value_or(fmt::format("option {}", i + 1));
      YAML::Node cn = h.node("cluster");
      YAML::Node cluster_map;
      if (!cn.IsDefined() || cn.IsNull()) {
        h.error("cluster", "is required: a node preset (dgx-h100) or {node: ..., fabric: {...}}");
      } else if (cn.IsScalar()) {
        if (find_preset("nodes", cn.Scalar()) == nullptr && !looks_like_path(cn.Scalar())) {
          const std::string hint = closest(cn.Scalar(), preset_names("nodes"));
          h.error("cluster", fmt::format("unknown node preset '{}'{} (a plan sizes clusters itself: name a node kind)", cn.Scalar(),
                                         hint.empty() ? std::string() : fmt::format("; did you mean '{}'?", hint)));
        } else {
          cluster_map = YAML::Node(YAML::NodeType::Map);
          cluster_map["node"] = cn.Scalar();
        }
      } else if (!cn.IsMap()) {
        h.error("cluster", "expected a node preset name or a mapping {node: ..., fabric: {...}}");
      } else if (cn["nodes"].IsDefined()) {
        MapReader cr(cn, h.field("cluster"), path, ctx);
        cr.error("nodes", "follows from gpus: give the GPU counts to consider under gpus instead");
      } else {
        cluster_map = YAML::Clone(cn);
      }
      if (cluster_map.IsDefined() && cluster_map.IsMap()) {
        // Checked as written (one node), with the file's own lines.
        HardwareLoader hl(ctx);
        const std::size_t before = ctx.diagnostics.size();
        MapReader cr(cn.IsMap() ? cn : cluster_map, h.field("cluster"), path, ctx);
        if (auto c = hl.cluster(cr)) {
          if (c->groups.size() != 1) {
            h.error("cluster", "a hardware option has one node kind (give several options to compare kinds)");
          } else {
            opt.cluster = *c;
            const hw::NodeGroup& g = c->groups.front();
            opt.gpus_per_node = g.gpus_per_node > 0 ? g.gpus_per_node : g.node.gpus;
            opt.cluster_yaml = flow_yaml(cluster_map);
          }
        } else if (ctx.diagnostics.size() == before) {
          h.error("cluster", "could not be read");
        }
      }
      if (auto g = h.int_list("gpus", true, 1, std::numeric_limits<std::int32_t>::max())) {
        if (g->empty()) h.error("gpus", "the list is empty");
        for (std::size_t k = 0; k < g->size(); ++k) {
          const std::int64_t n = (*g)[k];
          const Location at = location_of(h.node("gpus")[k], path);
          const std::string field = fmt::format("{}[{}]", h.field("gpus"), k);
          if (n > kMaxGpus) {
            ctx.diagnostics.error(at, field,
                                  fmt::format("{} GPUs is more than a plan considers (at most {}: a cluster has at most a million nodes)", n, kMaxGpus));
            continue;
          }
          if (const auto first = std::find(opt.gpus.begin(), opt.gpus.end(), static_cast<int>(n)); first != opt.gpus.end()) {
            ctx.diagnostics.error(at, field, fmt::format("{} GPUs is listed twice (first at {}[{}])", n, h.field("gpus"), first - opt.gpus.begin()));
            continue;
          }
          if (opt.gpus_per_node > 0 && n > opt.gpus_per_node && n % opt.gpus_per_node != 0) {
            ctx.diagnostics.error(at, field, fmt::format("{} GPUs is not a whole number of {}-GPU nodes", n, opt.gpus_per_node));
          }
          opt.gpus.push_back(static_cast<int>(n));
        }
      }
      if (auto p = h.number("price_per_gpu_hour", false, 0, 1e6)) {
        opt.price_per_gpu_hour = *p;
      } else if (!h.has("price_per_gpu_hour") && !global_price) {
        h.error_here(fmt::format("hardware option '{}' has no price: give price_per_gpu_hour (or prices.gpu_hour for every option)", opt.name));
      } else {
        opt.price_per_gpu_hour = -1;  // the global price
      }
      h.finish();
      spec.hardware.push_back(opt);
    }
  }

  // Search space.
  if (auto s = root.map("search")) {
    SearchSpace& ss = spec.search;
    ss.tp = small_int_list(*s, "tp", 1, 1024);
    ss.pp = small_int_list(*s, "pp", 1, 1024);
    ss.cp = small_int_list(*s, "cp", 1, 1024);
    ss.ep = small_int_list(*s, "ep", 1, 1024);
    ss.micro_batch = small_int_list(*s, "micro_batch", 1, 1 << 20);
    ss.zero = small_int_list(*s, "zero", 0, 3);
    ss.virtual_stages = small_int_list(*s, "virtual_stages", 2, 64);
    if (s->has("global_batch")) {
      if (auto v = s->int_list("global_batch", false, 1, 100'000'000)) {
        refuse_repeats(*s, "global_batch", *v);
        ss.global_batch = *v;
      }
    } else {
      s->node("global_batch");
    }
    ss.recompute = enum_list<workloads::Recompute>(*s, "recompute", workloads::parse_recompute, "none, selective, full");
    ss.schedule = enum_list<workloads::PipelineSchedule>(*s, "schedule", workloads::parse_pipeline_schedule, "gpipe, 1f1b, interleaved-1f1b");
    ss.sequence_parallel = enum_list<bool>(
        *s, "sequence_parallel",
        [](const std::string& v) -> std::optional<bool> {
          if (v == "true") return true;
          if (v == "false") return false;
          return std::nullopt;
        },
        "true, false");
    if (auto v = s->boolean("tp_within_node")) ss.tp_within_node = *v;
    if (auto v = s->integer("simulate_top", false, 1, 1000)) ss.simulate_top = static_cast<int>(*v);
    s->finish();
  }
  if (auto c = root.map("constraints")) {
    if (auto d = c->string("deadline")) {
      if (auto s = parse_duration_s(*d); s && *s > 0) spec.constraints.deadline_s = *s;
      else c->error("deadline", fmt::format("'{}' is not a duration such as \"60 days\", \"36 h\" or \"2 weeks\"", *d));
    }
    if (auto v = c->number("max_cost", false, 0, 1e15)) spec.constraints.max_cost = *v;
    if (auto v = c->string("objective")) {
      if (*v == "time" || *v == "cost") spec.constraints.objective = *v;
      else c->error("objective", fmt::format("unknown value '{}' (time: fastest; cost: cheapest)", *v));
    }
    c->finish();
  }
  if (root.has("statistical_efficiency")) spec.noise = read_noise_scale(root, "statistical_efficiency");
  for (const auto& k : kSimulateKeys) root.node(k);
  root.finish();
  if (ctx.diagnostics.size() != errors) return std::nullopt;

  // The simulate part of the file, with its own lines, for every target.
  std::string base_text;
  if (auto regions = top_level_regions(*text, *doc, is_simulate_key)) {
    base_text = keep_regions(*text, *regions);
  } else {
    YAML::Node sub(YAML::NodeType::Map);
    for (const auto& k : kSimulateKeys) {
      if ((*doc)[k].IsDefined()) sub[k] = (*doc)[k];
    }
    base_text = YAML::Dump(sub);
  }
  for (std::size_t i = 0; i < spec.hardware.size(); ++i) {
    const HardwareOption& opt = spec.hardware[i];
    for (int g : opt.gpus) {
      YAML::Node cl = YAML::Load(opt.cluster_yaml);
      if (g < opt.gpus_per_node) {
        cl["nodes"] = 1;
        cl["gpus_per_node"] = g;
      } else {
        cl["nodes"] = g / opt.gpus_per_node;
      }
      std::vector<std::string> sets{"cluster=" + flow_yaml(cl)};
      if (opt.price_per_gpu_hour >= 0) sets.push_back(fmt::format("prices.gpu_hour={}", opt.price_per_gpu_hour));
      const std::size_t before = ctx.diagnostics.size();
      auto cfg = load_simulate_config(path, sets, ctx, base_text, profile);
      if (!cfg) {
        if (ctx.diagnostics.size() == before) ctx.diagnostics.error(opt.where, "hardware", "the configuration could not be read");
        return std::nullopt;
      }
      if (cfg->trace) {
        root.error("model", "model: {trace: ...} runs with dtsim simulate only (plans search layouts of a model; docs/traces.md)");
        return std::nullopt;
      }
      if (!cfg->budget.any() && !spec.noise) {
        root.error("training", "a plan needs the amount of training: training.tokens, samples or epochs (or statistical_efficiency)");
        return std::nullopt;
      }
      // The budget must give a number of steps for every global batch searched (a token budget
      // needs a model with a sequence length; epochs need the dataset's size), as in simulate.
      if (!spec.noise) {
        const workloads::TrainingSpec& t = cfg->inputs.training;
        const std::int64_t seq = std::holds_alternative<workloads::TransformerSpec>(cfg->inputs.model) ? t.seq_len : 0;
        const std::vector<std::int64_t> batches = spec.search.global_batch.empty() ? std::vector<std::int64_t>{t.global_batch} : spec.search.global_batch;
        for (std::int64_t b : batches) {
          if (auto steps = workloads::steps_for(cfg->budget, b, seq); !steps) {
            ctx.report(steps.error());
            return std::nullopt;
          }
        }
      }
      spec.targets.push_back(PlanTarget{i, g, std::move(*cfg)});
    }
  }
  return spec;
}

}  // namespace dtsim::config
