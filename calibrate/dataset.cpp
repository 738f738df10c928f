// Measurements into a fit's dataset: result records (JSON Lines) and nccl-tests logs become
// samples, and a device name its GPU and node presets. The fit itself is in fit.cpp.
#include "calibrate/fit.hpp"
#include "sim/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "calibrate/log_settings.hpp"
#include "comm/params.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Records -> samples

Expected<double> number(const Record& r, const json& obj, const char* key, const char* where_name) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) {
    return Error(fmt::format("{}: {} record '{}' has no number \"{}.{}\"", r.where(), r.suite, r.point, where_name, key));
  }
  return it->get<double>();
}

Expected<std::string> text(const Record& r, const json& obj, const char* key, const char* where_name) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return Error(fmt::format("{}: {} record '{}' has no string \"{}.{}\"", r.where(), r.suite, r.point, where_name, key));
  }
  return it->get<std::string>();
}

// An optional field of the kind of `fallback` (json's value() throws type_error on another kind:
// found by the issue-15 mutation run, a number for params.in_place).
template <class T>
Expected<T> optional_field(const Record& r, const json& obj, const char* key, T fallback) {
  const auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  bool ok = false;
  if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
  else if constexpr (std::is_integral_v<T>) ok = it->is_number_integer() && it->get<std::int64_t>() >= std::numeric_limits<T>::min() &&
                                                 it->get<std::int64_t>() <= std::numeric_limits<T>::max();
  else ok = it->is_string();
  if (!ok) {
    return Error(fmt::format("{}: {} record '{}': \"params.{}\" must be {}", r.where(), r.suite, r.point, key,
                             std::is_same_v<T, bool> ? "true or false" : std::is_integral_v<T> ? "a whole number in range" : "a string"));
  }
  return it->get<T>();
}

// A count or size read as a number, within what the integer it becomes holds.
Expected<double> whole(const Record& r, const json& obj, const char* key, const char* where_name, double max) {
  auto v = number(r, obj, key, where_name);
  if (v && !(std::fabs(*v) <= max)) {
    return Error(fmt::format("{}: {} record '{}': \"{}.{}\" of {} is beyond {:g}", r.where(), r.suite, r.point, where_name, key, *v, max));
  }
  return v;
}

Expected<double> positive_time(const Record& r) {
  auto t = number(r, r.result, "time_s", "result");
  if (!t) return t;
  if (!(*t > 0) || !std::isfinite(*t)) return Error(fmt::format("{}: record '{}': result.time_s must be positive", r.where(), r.point));
  return t;
}

#define DTSIM_TRY(var, expr)        \
  auto var##_e = (expr);            \
  if (!var##_e) return var##_e.error(); \
  const auto var = *var##_e

}  // namespace

Status add_records(Dataset& d, const std::vector<Record>& records) {
  for (const Record& r : records) {
    if (std::find(d.inputs.begin(), d.inputs.end(), r.file) == d.inputs.end()) d.inputs.push_back(r.file);
    if (r.schema == kValidateSchema) {
      return Error(fmt::format("{}: this is a dtsim-validate result (training steps); `dtsim validate` reads it, not `dtsim fit`", r.where()));
    }
    static const std::set<std::string> suites{"gemm", "memory", "overhead", "hostlink", "nccl", "power"};
    if (!suites.count(r.suite)) {
      return Error(fmt::format("{}: unknown suite '{}' (gemm, memory, overhead, hostlink, nccl, power)", r.where(), r.suite));
    }
    if (d.device.empty() && !r.device.empty()) {
      d.device = r.device;
      if (r.device.contains("name") && r.device["name"].is_string()) d.device_name = r.device["name"].get<std::string>();
      if (r.device.contains("sms") && r.device["sms"].is_number_integer()) d.device_sms = r.device["sms"].get<int>();
    }
    if (!r.ok()) {
      ++d.failed_points;
      d.notes.push_back(fmt::format("{}: {} '{}' was not measured ({}: {})", r.where(), r.suite, r.point, r.status, r.error));
      continue;
    }
    // The power suite measures the GEMM rate against its share of the time under the power cap;
    // no model constant is fitted to it yet (docs/calibration.md), so it is counted, not used.
    if (r.suite == "power") {
      ++d.power_points;
      continue;
    }
    DTSIM_TRY(t, positive_time(r));
    if (r.suite == "gemm") {
      GemmSample g;
      DTSIM_TRY(dt, text(r, r.params, "dtype", "params"));
      const auto dtype = hw::parse_dtype(dt);
      if (!dtype) return Error(fmt::format("{}: unknown dtype '{}'", r.where(), dt));
      g.dtype = *dtype;
      DTSIM_TRY(m, whole(r, r.params, "m", "params", 1e15));
      DTSIM_TRY(n, whole(r, r.params, "n", "params", 1e15));
      DTSIM_TRY(k, whole(r, r.params, "k", "params", 1e15));
      g.m = static_cast<std::int64_t>(m);
      g.n = static_cast<std::int64_t>(n);
      g.k = static_cast<std::int64_t>(k);
      DTSIM_TRY(batch, optional_field<std::int64_t>(r, r.params, "batch", 1));
      DTSIM_TRY(a_bytes, optional_field(r, r.params, "a_bytes", hw::dtype_bytes(g.dtype)));
      DTSIM_TRY(c_bytes, optional_field(r, r.params, "c_bytes", g.dtype == hw::DType::fp8 ? 2 : hw::dtype_bytes(g.dtype)));
      g.batch = batch;
      g.in_bytes = a_bytes;
      g.out_bytes = c_bytes;
      if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return Error(fmt::format("{}: GEMM sizes must be positive", r.where()));
      g.time_s = t;
      g.where = r.where();
      d.gemm.push_back(g);
    } else if (r.suite == "memory") {
      MemorySample s;
      DTSIM_TRY(kernel, text(r, r.params, "kernel", "params"));
      DTSIM_TRY(bytes, number(r, r.params, "bytes", "params"));
      if (!(bytes > 0)) return Error(fmt::format("{}: params.bytes must be positive", r.where()));
      s.kernel = kernel;
      s.bytes = bytes;
      if (r.params.contains("tokens") && r.params.contains("hidden") && r.params["tokens"].is_number() && r.params["hidden"].is_number()) {
        s.elements = r.params["tokens"].get<double>() * r.params["hidden"].get<double>();
      }
      s.time_s = t;
      s.where = r.where();
      d.memory.push_back(s);
    } else if (r.suite == "overhead") {
      DTSIM_TRY(what, text(r, r.params, "what", "params"));
      d.overhead.push_back(OverheadSample{what, t, r.where()});
    } else if (r.suite == "hostlink") {
      DTSIM_TRY(what, text(r, r.params, "what", "params"));
      DTSIM_TRY(bytes, number(r, r.params, "bytes", "params"));
      DTSIM_TRY(pinned, optional_field(r, r.params, "pinned", true));
      DTSIM_TRY(src, optional_field(r, r.params, "src", 0));
      DTSIM_TRY(dst, optional_field(r, r.params, "dst", 0));
      std::string w = what;
      if (what == "h2d" || what == "d2h") w += pinned ? ".pinned" : ".pageable";
      if (what == "p2p") w += fmt::format(".{}-{}", src, dst);
      d.links.push_back(LinkSample{w, bytes, t, r.where()});
    } else {  // nccl
      CollectiveSample c;
      DTSIM_TRY(opname, text(r, r.params, "op", "params"));
      const auto op = parse_coll_op(opname);
      if (!op) return Error(fmt::format("{}: unknown collective '{}'", r.where(), opname));
      c.op = *op;
      DTSIM_TRY(bytes, whole(r, r.params, "bytes", "params", 1e18));
      DTSIM_TRY(ranks, whole(r, r.params, "ranks", "params", 1e9));
      DTSIM_TRY(nodes, optional_field(r, r.params, "nodes", 1));
      DTSIM_TRY(in_place, optional_field(r, r.params, "in_place", false));
      DTSIM_TRY(algo, optional_field(r, r.params, "algo", std::string()));
      c.bytes = static_cast<std::int64_t>(bytes);
      c.ranks = static_cast<int>(ranks);
      c.nodes = nodes;
      c.in_place = in_place;
      c.algo_label = algo;
      c.time_s = t;
      c.where = r.where();
      if (c.ranks < 1 || c.nodes < 1 || c.bytes < 0) return Error(fmt::format("{}: ranks and nodes must be positive", r.where()));
      const auto wrong = r.result.find("wrong");
      if (wrong != r.result.end() && wrong->is_number() && wrong->get<double>() > 0) {
        d.notes.push_back(fmt::format("{}: {} of {} B has {} wrong values: left out", r.where(), opname, c.bytes, wrong->get<double>()));
        continue;
      }
      d.collectives.push_back(c);
    }
  }
  return {};
}

Status add_nccl_tests(Dataset& d, const NcclTestsLog& log, const NcclTestsInput& in) {
  d.inputs.push_back(log.path);
  // The NCCL settings the run had, as its INFO lines state them; --algo and --proto given on the
  // command line take the place of the log's NCCL_ALGO and NCCL_PROTO.
  auto given = [](const std::string& s) { return s.empty() || ascii_lower(s) == "auto" ? std::string() : s; };
  std::string algo = given(in.algo_label), proto = given(in.proto_label);
  std::vector<std::pair<std::string, std::string>> sets;
  std::vector<std::string> taken, replaced;
  const LogNcclSettings settings = nccl_settings(log);
  for (const auto& m : settings.modelled) {
    if (m.option == "algo" || m.option == "proto") {
      std::string& flag = m.option == "algo" ? algo : proto;
      if (!flag.empty()) {
        replaced.push_back(fmt::format("{} (--{} {})", m.variable, m.option, flag));
        continue;
      }
      flag = m.value;
    } else {
      if (std::find(in.set_names.begin(), in.set_names.end(), m.option) != in.set_names.end()) {
        replaced.push_back(fmt::format("{} (--set comm.{})", m.variable, m.option));
        continue;
      }
      comm::CommParams probe = comm::CommParams::nccl_defaults();
      if (auto st = comm::set_comm_param(probe, m.option, m.value); !st) {
        return Error(fmt::format("{}: the log's {}: {}", log.path, m.variable, st.error().message));
      }
      sets.emplace_back(m.option, m.value);
    }
    taken.push_back(m.variable);
  }
  if (auto sel = comm::parse_selection(algo.empty() ? "auto" : algo, proto.empty() ? "auto" : proto); !sel) {
    return Error(fmt::format("{}: the log's NCCL settings give --{} '{}': {}", log.path, sel.error().field,
                             sel.error().field == "algo" ? algo : proto, sel.error().message));
  }
  if (!taken.empty()) {
    std::string list;
    for (const auto& t : taken) list += (list.empty() ? "" : ", ") + t;
    d.notes.push_back(fmt::format("{}: fitted under the NCCL settings its NCCL INFO lines state: {}", log.path, list));
  }
  if (!replaced.empty()) {
    std::string list;
    for (const auto& t : replaced) list += (list.empty() ? "" : ", ") + t;
    d.notes.push_back(fmt::format("{}: the command line takes the place of these of its NCCL settings: {}", log.path, list));
  }
  if (!settings.not_modelled.empty()) {
    std::string list;
    for (const auto& t : settings.not_modelled) list += (list.empty() ? "" : ", ") + t;
    d.notes.push_back(fmt::format("{}: the log also sets, which dtsim does not model: {}", log.path, list));
  }
  int ranks = in.ranks.value_or(log.ranks_count());
  // The bandwidth ratio says how many GPUs took part: for a pasted table without '#  Rank' lines
  // (the settings line's nThread x nGpus counts one process's GPUs only: MPI runs have one
  // each), and for a quoted log whose rank lines were mostly cut (figures that do not fit them).
  std::optional<int> inferred, beyond;
  for (const auto& t : log.tables) {
    const auto op = in.op ? in.op : t.op;
    if (op && !inferred) inferred = ranks_from_bandwidths(t, *op);
    if (op && !beyond && !in.ranks) beyond = ranks_beyond_listed(t, *op, ranks);
  }
  const bool ranks_cut = beyond.has_value();
  if (ranks_cut) {
    d.notes.push_back(fmt::format("{}: the '#  Rank' lines list {} ranks but busbw / algbw fits {}; taking {} (pass --ranks to override)",
                                  log.path, ranks, *beyond, *beyond));
    ranks = *beyond;
  }
  if (ranks == 0) {
    if (inferred) {
      ranks = *inferred;
      d.notes.push_back(fmt::format("{}: no '#  Rank' lines; {} ranks inferred from busbw / algbw (pass --ranks to override)", log.path, ranks));
    } else if (log.nthread > 0 && log.ngpus > 0 && log.nthread * log.ngpus > 1) {
      ranks = log.nthread * log.ngpus;  // one process driving several GPUs
    } else {
      return Error(fmt::format("{}: the log has no '#  Rank' lines and its bandwidths do not tell how many GPUs took part; give "
                               "--ranks N (and --nodes M)",
                               log.path));
    }
  }
  const int nodes = in.nodes.value_or(log.nodes_count());
  const bool nodes_known = in.nodes || (!log.ranks.empty() && !ranks_cut);
  if (!nodes_known && ranks > 1) {
    d.notes.push_back(fmt::format("{}: without a '#  Rank' line for every rank the node count is unknown: taken as {}, or as many nodes "
                                  "as the {} ranks fill of the node preset; pass --nodes if they spanned others",
                                  log.path, nodes, ranks));
  }
  if (d.device_name.empty() && !log.ranks.empty()) {
    d.device_name = log.ranks.front().gpu;
    d.device["name"] = d.device_name;
  }
  for (const auto& table : log.tables) {
    const auto op = in.op ? in.op : table.op;
    if (!op) {
      return Error(fmt::format("{}:{}: cannot tell which collective this table measures: name the file after the test "
                               "(e.g. all_reduce_perf.log) or pass --op",
                               log.path, table.first_line));
    }
    for (const auto& row : table.rows) {
      for (const auto& [fig, in_place] : {std::pair{&row.out_of_place, false}, std::pair{&row.in_place, true}}) {
        if (!fig->time_us || row.bytes <= 0) continue;
        const std::string where = fmt::format("{}:{}", log.path, row.line);
        if (fig->wrong && *fig->wrong > 0) {
          d.notes.push_back(fmt::format("{}: {} B {} has {} wrong values: left out", where, row.bytes, in_place ? "in-place" : "out-of-place", *fig->wrong));
          continue;
        }
        if (!(*fig->time_us > 0)) continue;
        CollectiveSample c;
        c.op = *op;
        c.bytes = row.bytes;
        c.time_s = *fig->time_us * 1e-6;
        c.ranks = ranks;
        c.nodes = nodes;
        c.nodes_known = nodes_known;
        c.in_place = in_place;
        c.algo_label = algo;
        c.proto_label = proto;
        c.comm_sets = sets;
        c.where = where;
        d.collectives.push_back(c);
      }
    }
  }
  return {};
}

std::string gpu_preset_for(const std::string& device_name) {
  const std::string n = ascii_lower(device_name);
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("h200")) return "h200-sxm";
  if (has("h100")) {
    if (has("pcie")) return "h100-pcie";
    if (has("nvl")) return "";
    return "h100-sxm";
  }
  if (has("a100")) {
    if (has("pcie")) return "";
    return has("40gb") ? "a100-sxm4-40g" : "a100-sxm4-80g";
  }
  if (has("b200")) return "b200";
  if (has("l40s")) return "l40s";
  if (has("4090")) return "rtx-4090";
  if (has("v100")) return has("pcie") ? "v100-pcie-32g" : "v100-sxm2-32g";
  if (has("p100")) return has("pcie") ? "p100-pcie" : "p100-sxm2";
  if (has(" t4") || n == "t4") return "t4";
  if (has(" l4") || n == "l4") return "l4";
  return "";
}

std::string node_preset_for(const std::string& gpu_preset) {
  static const std::map<std::string, std::string> nodes{
      {"h100-sxm", "dgx-h100"},        {"h200-sxm", "hgx-h200"},        {"a100-sxm4-80g", "dgx-a100-80g"},
      {"a100-sxm4-40g", "dgx-a100-40g"}, {"b200", "dgx-b200"},          {"l40s", "pcie-8x-l40s"},
      {"rtx-4090", "workstation-4x-rtx4090"}, {"v100-sxm2-32g", "dgx1-v100"}, {"p100-sxm2", "dgx1-p100"}};
  const auto it = nodes.find(gpu_preset);
  return it == nodes.end() ? "" : it->second;
}

}  // namespace dtsim::calibrate
