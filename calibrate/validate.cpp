#include "calibrate/validate.hpp"

#include <cmath>

#include <fmt/format.h>

#include "calibrate/fit.hpp"
#include "calibrate/lsq.hpp"
#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "workloads/step.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;

Status need(const Record& r, const json& obj, const char* key, const char* where, json::value_t kind) {
  const auto it = obj.find(key);
  const bool ok = it != obj.end() && (kind == json::value_t::number_integer ? it->is_number_integer()
                                      : kind == json::value_t::number_float ? it->is_number()
                                      : kind == json::value_t::boolean      ? it->is_boolean()
                                                                            : it->is_string());
  if (!ok) return Error(fmt::format("{}: validation record '{}' has no {} \"{}.{}\"", r.where(), r.point,
                                    kind == json::value_t::string ? "string" : kind == json::value_t::boolean ? "boolean" : "number", where, key));
  return {};
}

// An optional field: absent, or of the kind `need` asks for (json's value() throws on another type).
Status may(const Record& r, const json& obj, const char* key, const char* where, json::value_t kind) {
  if (!obj.is_object() || !obj.contains(key)) return {};
  return need(r, obj, key, where, kind);
}

}  // namespace

Expected<std::vector<ValidationPoint>> validation_points(const std::vector<Record>& records, std::vector<std::string>& skipped) {
  std::vector<ValidationPoint> out;
  for (const Record& r : records) {
    if (r.schema != kValidateSchema) {
      return Error(fmt::format("{}: a {} record ({} suite), not a dtsim-validate result; `dtsim fit` reads it", r.where(), r.schema, r.suite));
    }
    if (!r.ok()) {
      skipped.push_back(fmt::format("{}: '{}' was not measured ({}: {})", r.where(), r.point, r.status, r.error));
      continue;
    }
    const auto m = r.params.find("model"), t = r.params.find("training");
    if (m == r.params.end() || !m->is_object() || t == r.params.end() || !t->is_object()) {
      return Error(fmt::format("{}: validation record '{}' needs params.model and params.training objects", r.where(), r.point));
    }
    using V = json::value_t;
    for (const char* k : {"hidden", "layers", "heads", "ffn", "vocab", "max_seq"}) {
      if (auto st = need(r, *m, k, "params.model", V::number_integer); !st) return st.error();
    }
    if (auto st = need(r, *m, "name", "params.model", V::string); !st) return st.error();
    for (const char* k : {"micro_batch", "global_batch", "seq_len"}) {
      if (auto st = need(r, *t, k, "params.training", V::number_integer); !st) return st.error();
    }
    if (auto st = need(r, *t, "precision", "params.training", V::string); !st) return st.error();
    if (auto st = need(r, r.params, "gpus", "params", V::number_integer); !st) return st.error();
    if (auto st = need(r, r.result, "step_time_s", "result", V::number_float); !st) return st.error();
    // The optional fields simulate_yaml and the measured range read (found by the issue-15 mutation run:
    // a number where a boolean belongs ended the command with json's type_error).
    for (const char* k : {"gated_mlp", "bias", "tied_embeddings"}) {
      if (auto st = may(r, *m, k, "params.model", V::boolean); !st) return st.error();
    }
    for (const char* k : {"positions", "norm"}) {
      if (auto st = may(r, *m, k, "params.model", V::string); !st) return st.error();
    }
    for (const char* k : {"grad_dtype", "attention", "optimizer"}) {
      if (auto st = may(r, *t, k, "params.training", V::string); !st) return st.error();
    }
    for (const char* k : {"step_time_min_s", "step_time_max_s"}) {
      if (auto st = may(r, r.result, k, "result", V::number_float); !st) return st.error();
    }
    if (r.params.contains("parallel") && r.params["parallel"].is_object()) {
      if (auto st = may(r, r.params["parallel"], "bucket_bytes", "params.parallel", V::number_integer); !st) return st.error();
    }
    if (r.device.is_object()) {
      if (auto st = may(r, r.device, "name", "device", V::string); !st) return st.error();
    }
    ValidationPoint p;
    p.where = r.where();
    p.point = r.point;
    p.model = *m;
    p.training = *t;
    p.gpus = r.params["gpus"].get<int>();
    if (r.params.contains("parallel") && r.params["parallel"].is_object()) {
      p.bucket_bytes = r.params["parallel"].value("bucket_bytes", p.bucket_bytes);
    }
    p.measured_s = r.result["step_time_s"].get<double>();
    p.measured_min_s = r.result.value("step_time_min_s", p.measured_s);
    p.measured_max_s = r.result.value("step_time_max_s", p.measured_s);
    if (!(p.measured_s > 0) || p.gpus < 1 || p.bucket_bytes <= 0) {
      return Error(fmt::format("{}: step_time_s, gpus and bucket_bytes must be positive", r.where()));
    }
    p.tokens_per_step = static_cast<double>((*t)["global_batch"].get<std::int64_t>()) * static_cast<double>((*t)["seq_len"].get<std::int64_t>());
    p.device_name = r.device.is_object() ? r.device.value("name", std::string()) : std::string();
    out.push_back(std::move(p));
  }
  return out;
}

std::string simulate_yaml(const ValidationPoint& p, const std::string& node) {
  const json& m = p.model;
  const json& t = p.training;
  auto b = [](const json& j, const char* k, bool dflt) { return j.value(k, dflt) ? "true" : "false"; };
  auto s = [](const json& j, const char* k, const char* dflt) { return j.value(k, std::string(dflt)); };
  std::string y;
  y += fmt::format("# The dtsim-validate point {} ({}) as a simulate configuration.\n", p.point, p.where);
  y += fmt::format("cluster: {{node: {}, nodes: 1, gpus_per_node: {}}}\n", node, p.gpus);
  y += fmt::format(
      "model: {{name: \"{}\", kind: transformer, hidden: {}, layers: {}, heads: {}, ffn: {}, vocab: {}, max_seq: {}, "
      "gated_mlp: {}, bias: {}, tied_embeddings: {}, positions: {}, norm: {}}}\n",
      m["name"].get<std::string>(), m["hidden"].get<std::int64_t>(), m["layers"].get<std::int64_t>(), m["heads"].get<std::int64_t>(),
      m["ffn"].get<std::int64_t>(), m["vocab"].get<std::int64_t>(), m["max_seq"].get<std::int64_t>(), b(m, "gated_mlp", false),
      b(m, "bias", false), b(m, "tied_embeddings", true), s(m, "positions", "learned"), s(m, "norm", "layernorm"));
  y += fmt::format(
      "training: {{global_batch: {}, micro_batch: {}, seq_len: {}, precision: {}, grad_dtype: {}, attention: {}, optimizer: {}",
      t["global_batch"].get<std::int64_t>(), t["micro_batch"].get<std::int64_t>(), t["seq_len"].get<std::int64_t>(),
      t["precision"].get<std::string>(), s(t, "grad_dtype", "fp32"), s(t, "attention", "standard"), s(t, "optimizer", "adam"));
  // Its standard attention copies Q, K and V out by head and the context back with its own kernels.
  if (s(t, "attention", "standard") == "standard") y += ", head_layout: split";
  // The workload's dropout draws its random numbers from a 64-bit hash and regenerates its masks
  // from the seed in the backward pass (no mask is stored: calibrate/workload/gpt.cpp and
  // harness/kernels.cu), so the equivalent configuration says so.
  if (t.contains("dropout") && t["dropout"].is_number()) {
    y += fmt::format(", dropout: {}, dropout_mask: regenerated, dropout_rng: hash", t["dropout"].get<double>());
  }
  y += "}\n";
  y += fmt::format("parallel: {{dp: {}, dp_impl: ddp, bucket: {} B}}\n", p.gpus, p.bucket_bytes);
  return y;
}

Expected<std::vector<ValidationRow>> predict_points(const std::vector<ValidationPoint>& points, const ValidationOptions& o) {
  std::vector<ValidationRow> rows;
  for (const ValidationPoint& p : points) {
    std::string node = o.node;
    if (node.empty()) node = node_preset_for(gpu_preset_for(p.device_name));
    if (node.empty()) {
      return Error(fmt::format("{}: no node preset for the device '{}'; name one with --node (dtsim's presets/nodes/)", p.where,
                               p.device_name.empty() ? std::string("(unknown)") : p.device_name));
    }
    config::LoadContext ctx;
    auto cfg = config::load_simulate_config(p.where, {}, ctx, simulate_yaml(p, node), o.profile);
    if (!cfg) {
      return Error(fmt::format("{}: the equivalent simulate configuration is invalid:\n{}", p.where, ctx.diagnostics.to_string()));
    }
    auto topo = hw::Topology::build(cfg->cluster);
    if (!topo) return Error(fmt::format("{}: {}", p.where, topo.error().to_string()));
    auto res = workloads::simulate_step(*topo, cfg->inputs);
    if (!res) return Error(fmt::format("{}: {}", p.where, res.error().to_string()));
    ValidationRow row;
    row.p = p;
    row.node = node;
    row.predicted_s = res->step_time_s;
    row.error = (row.predicted_s - p.measured_s) / p.measured_s;
    row.fits = res->fits;
    rows.push_back(std::move(row));
  }
  return rows;
}

ValidationSummary summarize(const std::vector<ValidationRow>& rows) {
  ValidationSummary s;
  std::vector<double> e;
  for (const auto& r : rows) e.push_back(r.error);
  s.points = static_cast<int>(rows.size());
  for (double x : e) s.mape += std::fabs(x);
  if (!e.empty()) s.mape /= static_cast<double>(e.size());
  s.median = median_abs(e);
  s.worst = max_abs(e);
  return s;
}

std::string validation_table(const std::vector<ValidationRow>& rows) {
  std::string out = fmt::format("{:<16} {:>6} {:>7} {:>5}  {:>13} {:>14} {:>8}  {:>14} {:>15}\n", "model", "seq", "mbatch", "gpus",
                                "measured(ms)", "predicted(ms)", "error", "measured tok/s", "predicted tok/s");
  for (const auto& r : rows) {
    const auto& t = r.p.training;
    out += fmt::format("{:<16} {:>6} {:>7} {:>5}  {:>13.2f} {:>14.2f} {:>+7.1f}%  {:>14.0f} {:>15.0f}{}\n", r.p.model["name"].get<std::string>(),
                       t["seq_len"].get<std::int64_t>(), t["micro_batch"].get<std::int64_t>(), r.p.gpus, r.p.measured_s * 1e3,
                       r.predicted_s * 1e3, 100 * r.error, r.p.tokens_per_step / r.p.measured_s, r.p.tokens_per_step / r.predicted_s,
                       r.fits ? "" : "  (dtsim: does not fit in memory)");
  }
  const ValidationSummary s = summarize(rows);
  out += fmt::format("{} points: mean |error| (MAPE) {:.1f}%, median {:.1f}%, worst {:.1f}%\n", s.points, 100 * s.mape, 100 * s.median,
                     100 * s.worst);
  return out;
}

std::string validation_csv(const std::vector<ValidationRow>& rows) {
  std::string out =
      "point,model,seq_len,micro_batch,global_batch,gpus,node,measured_step_s,predicted_step_s,error,measured_tokens_per_s,"
      "predicted_tokens_per_s,device\n";
  for (const auto& r : rows) {
    const auto& t = r.p.training;
    out += fmt::format("{},{},{},{},{},{},{},{:.6g},{:.6g},{:.4f},{:.6g},{:.6g},\"{}\"\n", r.p.point, r.p.model["name"].get<std::string>(),
                       t["seq_len"].get<std::int64_t>(), t["micro_batch"].get<std::int64_t>(), t["global_batch"].get<std::int64_t>(), r.p.gpus,
                       r.node, r.p.measured_s, r.predicted_s, r.error, r.p.tokens_per_step / r.p.measured_s,
                       r.p.tokens_per_step / r.predicted_s, r.p.device_name);
  }
  return out;
}

nlohmann::json validation_json(const std::vector<ValidationRow>& rows, const std::string& profile_path) {
  json arr = json::array();
  for (const auto& r : rows) {
    arr.push_back(json{{"point", r.p.point},
                       {"where", r.p.where},
                       {"model", r.p.model},
                       {"training", r.p.training},
                       {"gpus", r.p.gpus},
                       {"bucket_bytes", r.p.bucket_bytes},
                       {"node", r.node},
                       {"device", r.p.device_name},
                       {"measured_step_s", r.p.measured_s},
                       {"measured_min_s", r.p.measured_min_s},
                       {"measured_max_s", r.p.measured_max_s},
                       {"predicted_step_s", r.predicted_s},
                       {"error", r.error},
                       {"fits", r.fits}});
  }
  const ValidationSummary s = summarize(rows);
  return json{{"rows", arr},
              {"hw_profile", profile_path.empty() ? json(nullptr) : json(profile_path)},
              {"summary", {{"points", s.points}, {"mape", s.mape}, {"median_abs_error", s.median}, {"worst_abs_error", s.worst}}}};
}

}  // namespace dtsim::calibrate
