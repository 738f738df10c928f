#include "planning/study.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "planning/measured.hpp"
#include "planning/scaling.hpp"

namespace dtsim::planning {

namespace {

using json = nlohmann::json;

double num(const json& j, const char* key, double def = 0) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

json noise_json(const config::NoiseScale& n) {
  return {{"b_noise", n.b_noise}, {"b_noise_tokens", n.b_noise_tokens}, {"s_min", n.s_min},
          {"e_min", n.e_min},     {"e_min_tokens", n.e_min_tokens},     {"source", n.source}};
}

config::NoiseScale noise_from(const json& j) {
  config::NoiseScale n;
  n.b_noise = num(j, "b_noise");
  n.b_noise_tokens = num(j, "b_noise_tokens");
  n.s_min = num(j, "s_min");
  n.e_min = num(j, "e_min");
  n.e_min_tokens = num(j, "e_min_tokens");
  n.source = j.value("source", std::string());
  return n;
}

// Axis values that do not set the GPU count: rows with equal values form one scaling series.
std::string series_key(const json& row) {
  std::string key;
  if (!row.contains("axes")) return key;
  for (auto it = row["axes"].begin(); it != row["axes"].end(); ++it) {
    if (it.key() == "gpus" || it.key() == "cluster.nodes" || it.key() == "cluster.gpus_per_node") continue;
    key += (key.empty() ? "" : ", ") + it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  return key;
}

bool key_matches(const json& row, const std::string& column, const std::string& text) {
  json v;
  if (column == "point") v = row.value("point", json());
  else if (row.contains("axes") && row["axes"].contains(column)) v = row["axes"][column];
  else return false;
  if (v.is_number()) {
    try {
      std::size_t used = 0;
      const double d = std::stod(text, &used);
      return used == text.size() && d == v.get<double>();
    } catch (...) {
      return false;
    }
  }
  if (v.is_boolean()) return text == (v.get<bool>() ? "true" : "false");
  return v.is_string() && v.get<std::string>() == text;
}

}  // namespace

json sweep_header(const config::SweepSpec& spec) {
  json h = {{"dtsim", "sweep"},
            {"version", 1},
            {"fingerprint", spec.fingerprint},
            {"points", spec.points.size()},
            {"spec", spec.path},
            {"question", spec.question},
            {"axes", spec.axes},
            {"combine", spec.zip ? "zip" : "product"},
            {"scaling", std::string(config::to_string(spec.scaling))},
            {"base_gpus", spec.base_gpus},
            {"base_global_batch", spec.base_global_batch},
            {"measured", spec.measured}};
  h["statistical_efficiency"] = spec.noise ? noise_json(*spec.noise) : json(nullptr);
  return h;
}

json row_summary(const json& row) {
  json s = json::object();
  const json& cfg = row.contains("config") ? row["config"] : json::object();
  const json& r = row.contains("result") ? row["result"] : json::object();
  s["label"] = row.value("label", std::string());
  s["status"] = row.value("status", std::string("error"));
  if (row.contains("error")) s["error"] = row["error"];
  if (cfg.is_object()) {
    if (cfg.contains("training")) {
      s["global_batch"] = cfg["training"].value("global_batch", 0);
      s["seq_len"] = cfg["training"].value("seq_len", 0);
      s["micro_batch"] = cfg["training"].value("micro_batch", 0);
    }
    if (cfg.contains("cluster") && cfg["cluster"].is_object()) {
      s["hardware"] = cfg["cluster"].value("summary", std::string());
      s["nodes"] = cfg["cluster"].value("nodes", 0);
    }
    s["model"] = cfg.value("model", std::string());
  }
  if (!r.is_object() || r.empty()) return s;
  s["gpus"] = r.value("gpus", 0);
  s["layout"] = r.value("layout", std::string());
  s["step_time_s"] = num(r, "step_time_s");
  const double tokens = r.contains("throughput") ? num(r["throughput"], "tokens_per_s") : 0.0;
  const double samples = r.contains("throughput") ? num(r["throughput"], "samples_per_s") : 0.0;
  s["samples_per_s"] = samples;
  s["tokens_per_s"] = tokens;
  s["throughput"] = tokens > 0 ? tokens : samples;
  s["throughput_unit"] = tokens > 0 ? "tokens/s" : "samples/s";
  const int gpus = r.value("gpus", 0);
  s["throughput_per_gpu"] = gpus > 0 ? (tokens > 0 ? tokens : samples) / gpus : 0.0;
  s["mfu"] = num(r, "mfu");
  s["tflops_per_gpu"] = num(r, "tflops_per_gpu");
  if (r.contains("memory") && r["memory"].contains("peak")) {
    const json& m = r["memory"]["peak"];
    s["memory_GiB"] = num(m, "total_GiB");
    s["capacity_GiB"] = num(m, "capacity_GiB");
    s["fits"] = r["memory"].value("fits", true);
    s["memory_parts_GiB"] = {{"params", num(m, "params_GiB")},
                             {"grads", num(m, "grads_GiB")},
                             {"optimizer", num(m, "optimizer_GiB")},
                             {"activations", num(m, "activations_GiB")},
                             {"other", num(m, "reserved_GiB") + num(m, "fragmentation_GiB")}};
  }
  if (r.contains("breakdown")) s["breakdown"] = r["breakdown"];
  if (r.contains("run") && r["run"].is_object()) {
    const json& run = r["run"];
    s["steps"] = num(run, "steps");
    if (run.value("achievable", true) == false) {
      s["achievable"] = false;  // does not fit in memory: no time to train, energy or cost
      return s;
    }
    s["time_to_train_s"] = num(run, "time_to_train_s");
    s["gpu_hours"] = num(run, "gpu_hours");
    s["energy_kwh"] = num(run, "energy_kwh");
    if (run.contains("cost") && run["cost"].is_object()) {
      s["cost"] = num(run["cost"], "total");
      s["currency"] = run["cost"].value("currency", std::string());
    }
  }
  return s;
}

json parameter_sources(const json& config) {
  json out = {{"profile", nullptr}, {"calibrated", json::array()}, {"set", json::array()}};
  std::set<std::string> calibrated;
  if (config.contains("hw_profile") && config["hw_profile"].is_object()) {
    out["profile"] = config["hw_profile"].value("path", std::string());
    for (const auto& n : config["hw_profile"].value("calibrated", json::array())) {
      calibrated.insert(n.get<std::string>());
      out["calibrated"].push_back(n);
    }
  }
  if (config.contains("simulation") && config["simulation"].contains("params")) {
    const json& used = config["simulation"]["params"];
    for (const auto& [name, def, help] : config::simulate_param_list()) {
      if (!used.contains(name) || !used[name].is_string()) continue;
      if (used[name].get<std::string>() != def && !calibrated.count(name)) out["set"].push_back(name);
    }
  }
  return out;
}

Expected<json> sweep_document(const json& header, const std::vector<json>& rows) {
  json doc = header;
  doc.erase("points");
  doc["rows"] = json::array();
  std::optional<config::NoiseScale> noise;
  if (header.contains("statistical_efficiency") && header["statistical_efficiency"].is_object()) {
    noise = noise_from(header["statistical_efficiency"]);
  }
  // Summaries.
  std::vector<json> out;
  for (const json& row : rows) {
    json r = row;
    r["summary"] = row_summary(row);
    r["summary"]["series"] = series_key(row);
    out.push_back(std::move(r));
  }
  // Hardware efficiency within each series, relative to its smallest simulated run that fits.
  std::map<std::string, std::size_t> ref;
  std::map<std::string, std::set<int>> counts;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const json& s = out[i]["summary"];
    if (s.value("status", "") == "error" || num(s, "throughput") <= 0) continue;
    const std::string k = s.value("series", "");
    counts[k].insert(s.value("gpus", 0));
    if (s.value("status", "") != "ok") continue;  // a run that does not fit in memory is no reference
    const auto it = ref.find(k);
    if (it == ref.end() || s.value("gpus", 0) < out[it->second]["summary"].value("gpus", 0)) ref[k] = i;
  }
  for (json& r : out) {
    json& s = r["summary"];
    const std::string k = s.value("series", "");
    if (!ref.count(k) || counts[k].size() < 2 || num(s, "throughput") <= 0) continue;
    const json& b = out[ref[k]]["summary"];
    const double eff = hardware_efficiency(num(s, "throughput"), s.value("gpus", 0), num(b, "throughput"), b.value("gpus", 0));
    s["reference_gpus"] = b.value("gpus", 0);
    s["hardware_efficiency"] = std::round(eff * 1e6) / 1e6;
    s["speedup"] = num(s, "throughput") / num(b, "throughput");
    s["ideal_speedup"] = static_cast<double>(s.value("gpus", 0)) / b.value("gpus", 1);
  }
  // Time to a target loss under the large-batch model.
  if (noise) {
    for (json& r : out) {
      json& s = r["summary"];
      if (num(s, "step_time_s") <= 0) continue;
      auto m = resolve_noise_scale(*noise, static_cast<std::int64_t>(num(s, "seq_len")));
      if (!m) return Error(m.error().message, m.error().field);
      const double b = num(s, "global_batch");
      s["steps_to_target"] = m->steps(b);
      s["examples_to_target"] = m->examples(b);
      s["statistical_efficiency"] = m->statistical_efficiency(b);
      s["time_to_target_s"] = m->steps(b) * num(s, "step_time_s");
    }
    json ne = header["statistical_efficiency"];
    ne["assumptions"] = noise_scale_assumptions(*noise);
    doc["statistical_efficiency"] = ne;
  }
  // Measured data.
  doc["measured"] = nullptr;
  if (header.value("measured", std::string()) != "") {
    auto t = read_measured_csv(header["measured"].get<std::string>());
    if (!t) return t.error();
    int matched = 0, unpredicted = 0;
    for (json& r : out) {
      for (const auto& line : t->lines) {
        bool all = true;
        for (const auto& [col, text] : line.key) all = all && key_matches(r, col, text);
        if (!all) continue;
        json& s = r["summary"];
        const double predicted = t->metric == "step_time_s" ? num(s, "step_time_s") : t->metric == "tokens_per_s" ? num(s, "tokens_per_s") : num(s, "samples_per_s");
        if (predicted <= 0) {
          ++unpredicted;  // a failed point: nothing to compare, and never a perfect match
          break;
        }
        s["measured"] = {{"metric", t->metric}, {"value", line.value}, {"predicted", predicted},
                         {"error", predicted > 0 ? (predicted - line.value) / line.value : 0.0}};
        ++matched;
        break;
      }
    }
    doc["measured"] = {{"file", t->path}, {"metric", t->metric}, {"lines", t->lines.size()}, {"matched", matched},
                       {"without_prediction", unpredicted}};
  }
  // Setup, parameters and assumptions, from the first simulated row.
  const json* first = nullptr;
  for (const json& r : out) {
    if (r.contains("result")) {
      first = &r;
      break;
    }
  }
  json setup = {{"model", nullptr}, {"hardware", json::array()}, {"precision", nullptr}};
  std::set<std::string> hw;
  for (const json& r : out) {
    const std::string h = r["summary"].value("hardware", std::string());
    if (!h.empty() && hw.insert(h).second) setup["hardware"].push_back(h);
  }
  // The framework every row assumes, when it is not megatron (an axis over it names it per row).
  std::set<std::string> frameworks;
  for (const json& r : out) {
    if (r.contains("config") && r["config"].contains("training")) frameworks.insert(r["config"]["training"].value("framework", std::string("megatron")));
  }
  if (frameworks.size() == 1 && *frameworks.begin() != "megatron") setup["framework"] = *frameworks.begin();
  json assumptions = json::array();
  const std::string scaling = header.value("scaling", std::string("none"));
  if (scaling == "strong") assumptions.push_back("Strong scaling: the global batch stays fixed as GPUs are added (data parallelism takes the extra GPUs unless an axis sets it).");
  if (scaling == "weak") assumptions.push_back("Weak scaling: the batch per GPU stays fixed; the global batch grows with the GPU count.");
  assumptions.push_back("Hardware efficiency = throughput per GPU / throughput per GPU of the smallest run of the same series (rows that differ only in GPU count).");
  if (first) {
    const json& cfg = (*first)["config"];
    const json& res = (*first)["result"];
    setup["model"] = cfg.value("model", std::string());
    if (cfg.contains("training")) setup["precision"] = cfg["training"].value("precision", std::string());
    doc["parameters"] = parameter_sources(cfg);
    if (!res.value("symmetry_note", std::string()).empty()) assumptions.push_back(res["symmetry_note"].get<std::string>());
    if (res.contains("model") && res["model"].contains("flops_convention")) assumptions.push_back(res["model"]["flops_convention"]);
    assumptions.push_back("Each row is one simulated training step (dtsim simulate); time to train = steps x step time.");
  } else {
    doc["parameters"] = {{"profile", nullptr}, {"calibrated", json::array()}, {"set", json::array()}};
  }
  doc["setup"] = setup;
  doc["assumptions"] = assumptions;
  for (auto& r : out) doc["rows"].push_back(std::move(r));
  return doc;
}

}  // namespace dtsim::planning
