#include "cli/collective_command.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/errors.hpp"
#include "calibrate/log_compare.hpp"
#include "calibrate/log_settings.hpp"
#include "comm/collective.hpp"
#include "config/hardware.hpp"
#include "config/presets.hpp"
#include "config/profile.hpp"
#include "config/registry.hpp"
#include "hw/topology.hpp"
#include "reports/collective_compare.hpp"
#include "reports/collective_report.hpp"
#include "reports/output.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::string cluster;
  std::optional<int> nodes;
  std::optional<int> gpus_per_node;
  std::optional<int> gpus;
  std::string op = "allreduce";
  std::string algo = "auto";
  std::string proto = "auto";
  std::string min = "8";
  std::string max = "128M";
  int factor = 2;
  std::string dtype = "float";
  int root = 0;
  std::string fidelity = "coupled";
  std::string sharing = "max-min";
  std::vector<std::string> sets;
  std::string json;
  std::string hw_profile;
  bool list_params = false;
  std::string compare;  // an nccl-tests log
  std::string report;   // folder for the comparison's CSV, Markdown and chart
  std::optional<int> gpus_per_thread;
};

std::string nccl_type_name(hw::DType d) {
  switch (d) {
    case hw::DType::fp64: return "double";
    case hw::DType::fp32: return "float";
    case hw::DType::tf32: return "float";
    case hw::DType::bf16: return "bfloat16";
    case hw::DType::fp16: return "half";
    case hw::DType::fp8: return "fp8";
  }
  return "float";
}

int list_params() {
  // [data: ...] names the datasets of data/registry.yaml a default was derived from.
  config::LoadContext rctx;
  const auto reg = config::embedded_registry(rctx);
  if (!reg) {
    print_diagnostics(rctx.diagnostics);
    return kExitFailure;
  }
  const comm::CommParams p = comm::CommParams::nccl_defaults();
  std::printf("%-40s %-12s %s\n", "parameter", "default", "meaning (source) [datasets it was derived from]");
  for (const auto& info : comm::comm_param_table()) {
    const std::string name = "comm." + info.name;
    std::printf("%-40s %-12s %s (%s) [%s]\n", name.c_str(), info.get(p).c_str(), info.help.c_str(), info.source.c_str(),
                config::data_sources_note(*reg, name).c_str());
  }
  config::print_preset_constants(*reg, "links.", stdout);
  return kExitOk;
}

calibrate::LogCompareOptions compare_options(const Options& o, const calibrate::NcclTestsLog& log, std::optional<CollOp> op,
                                             const comm::Selection& choice) {
  calibrate::LogCompareOptions opt;
  opt.choice = choice;
  opt.gpus = o.gpus;
  opt.gpus_per_thread = o.gpus_per_thread;
  opt.sharing = o.sharing;
  if (log.tables.size() > 1) opt.op = op;  // --op picks the table of a log holding several
  return opt;
}

// A node preset without --nodes or --gpus-per-node, sized to the log: when its rank lines name
// several hosts holding as many ranks each (at most the node's GPUs), as many nodes with that
// many GPUs each; else, when the log (or --gpus) counts more GPUs than the node has, as many nodes
// as they fill. Returns the line that says so, empty when the one node stays. Errors: more GPUs
// than any cluster dtsim builds.
Expected<std::string> size_to_log(const calibrate::LogShape& shape, hw::ClusterSpec& spec) {
  if (spec.groups.size() != 1 || spec.groups.front().count != 1) return std::string();
  hw::NodeGroup& g = spec.groups.front();
  const int per_node = g.node.gpus;
  if (per_node < 1) return std::string();
  const bool from_log = shape.gpus_from != "--gpus";
  const bool by_hosts = from_log && shape.nodes > 1 && shape.per_host > 0 && shape.per_host <= per_node;
  if (!by_hosts && shape.gpus <= per_node) return std::string();
  if (shape.gpus > config::kMaxClusterGpus) {
    return Error(fmt::format("the log ran on {} GPUs, beyond the {} GPUs a cluster may have", shape.gpus, config::kMaxClusterGpus),
                 "compare");
  }
  if (by_hosts) {
    g.count = shape.nodes;
    if (shape.per_host < per_node) g.gpus_per_node = shape.per_host;
  } else {
    g.count = (shape.gpus + per_node - 1) / per_node;
  }
  const std::string why = by_hosts ? fmt::format("its {} hosts of {} ranks", shape.nodes, shape.per_host) : fmt::format("{} GPUs a node", per_node);
  return fmt::format("# {} nodes of {} for {} {} GPUs ({}; --nodes and --gpus-per-node choose otherwise)\n", g.count, g.node.name,
                     from_log ? "the log's" : "--gpus", shape.gpus, why);
}

// The parameter a --set names, without its "comm." prefix ("comm.buffsize=8M" -> "buffsize").
std::string set_key(const std::string& set) {
  std::string key = set.substr(0, set.find('='));
  return key.rfind("comm.", 0) == 0 ? key.substr(5) : key;
}

// The log's NCCL settings (calibrate::nccl_settings) applied where the command line left them:
// --algo and --proto at auto, no --set for the parameter. Returns the selection to run and the
// comment lines that say what was taken and what dtsim has no model of; an error names the
// variable whose value dtsim cannot take.
struct LogSettingsApplied {
  comm::Selection choice;
  std::string note;
};
Expected<LogSettingsApplied> log_settings(const Options& o, const calibrate::NcclTestsLog& log, comm::CommParams& params) {
  const calibrate::LogNcclSettings s = calibrate::nccl_settings(log);
  std::string algo = o.algo, proto = o.proto;
  std::vector<std::string> taken;
  for (const auto& m : s.modelled) {
    if (m.option == "algo" || m.option == "proto") {
      std::string& flag = m.option == "algo" ? algo : proto;
      if (flag != "auto") continue;  // the command line's
      flag = m.value;
      taken.push_back(fmt::format("{} (--{} {})", m.variable, m.option, m.value));
      continue;
    }
    if (std::any_of(o.sets.begin(), o.sets.end(), [&](const std::string& set) { return set_key(set) == m.option; })) continue;
    if (auto st = comm::set_comm_param(params, m.option, m.value); !st) {
      return Error(fmt::format("the log's {}: {}", m.variable, st.error().message), "compare");
    }
    taken.push_back(fmt::format("{} (comm.{})", m.variable, m.option));
  }
  auto choice = comm::parse_selection(algo, proto);
  if (!choice) return Error(fmt::format("the log's NCCL settings give --{} '{}': {}", choice.error().field, choice.error().field == "algo" ? algo : proto, choice.error().message), "compare");
  LogSettingsApplied out{*choice, ""};
  auto line = [](const std::string& head, const std::vector<std::string>& items) {
    std::string l = head;
    for (std::size_t i = 0; i < items.size(); ++i) l += (i ? ", " : " ") + items[i];
    return l + "\n";
  };
  if (!taken.empty()) out.note += line("# the log's NCCL settings (its NCCL INFO lines):", taken);
  if (!s.not_modelled.empty()) out.note += line("# the log also sets, which dtsim does not model:", s.not_modelled);
  return out;
}

// --compare LOG: the log's collective, GPU count and sizes, simulated beside its measurements.
int run_compare(const Options& o, const calibrate::NcclTestsLog& log, const hw::Topology& topo, const comm::CommParams& params,
                const calibrate::LogCompareOptions& opt, const std::string& sizing) {
  auto cmp = calibrate::compare_log(topo, params, log, opt);
  if (!cmp) {
    print_error("--" + cmp.error().field + ": " + cmp.error().message);
    return kExitBadInput;
  }
  std::fputs(sizing.c_str(), stdout);
  std::fputs(reports::render_comparison(*cmp, topo.summary()).c_str(), stdout);
  if (!o.report.empty()) {
    if (auto st = reports::write_comparison_report(*cmp, topo.summary(), o.report); !st) {
      print_error("--report: " + st.error().message);
      return kExitFailure;
    }
  }
  return kExitOk;
}

int run(const Options& o) {
  if (o.list_params) return list_params();
  if (o.cluster.empty()) {
    print_error("--cluster is required (a cluster or node preset, or a YAML file)");
    return kExitBadInput;
  }
  // Everything the user typed is checked before anything runs.
  std::vector<std::string> errors;
  const auto op = parse_coll_op(o.op);
  if (!op) errors.push_back(fmt::format("--op: unknown collective '{}' (allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv)", o.op));
  // One name runs that algorithm (hierarchical too); a list or '^' lets the tuner choose.
  auto choice = comm::parse_selection(o.algo, o.proto);
  if (!choice) errors.push_back("--" + choice.error().field + ": " + choice.error().message);
  const auto min = parse_bytes(o.min);
  if (!min) errors.push_back("--min: " + min.error().message);
  const auto max = parse_bytes(o.max);
  if (!max) errors.push_back("--max: " + max.error().message);
  if (min && max && *min > *max) errors.push_back(fmt::format("--min ({}) is larger than --max ({})", o.min, o.max));
  if (max && *max > Bytes(std::int64_t{1} << 40)) errors.push_back(fmt::format("--max: {} is beyond what dtsim simulates (1 TiB per call)", o.max));
  if (o.factor < 2) errors.push_back("--factor must be 2 or more");
  if (o.gpus && *o.gpus < 1) errors.push_back(fmt::format("--gpus: {} GPUs requested; give at least 1", *o.gpus));
  const auto dtype = hw::parse_dtype(o.dtype);
  if (!dtype) errors.push_back(fmt::format("--dtype: unknown type '{}' (float, half, bfloat16, double, fp8)", o.dtype));
  const auto fidelity = comm::parse_fidelity(o.fidelity);
  if (!fidelity) errors.push_back(fmt::format("--fidelity: unknown '{}' (coupled, per-edge, per-step)", o.fidelity));
  if (!make_sharing_model(o.sharing)) errors.push_back(fmt::format("--sharing: unknown model '{}' (max-min, constant)", o.sharing));
  comm::CommParams params = comm::CommParams::nccl_defaults();
  for (const auto& s : o.sets) {
    const auto eq = s.find('=');
    const std::string key = set_key(s);
    if (eq == std::string::npos) {
      errors.push_back(fmt::format("--set: '{}' is not key=value", s));
      continue;
    }
    if (auto st = comm::set_comm_param(params, key, s.substr(eq + 1)); !st) errors.push_back("--set " + st.error().to_string());
  }

  config::LoadContext ctx;
  std::optional<config::HardwareProfile> profile;
  if (!o.hw_profile.empty()) profile = config::load_profile(o.hw_profile, ctx);
  auto spec = config::load_cluster(config::ClusterRequest{o.cluster, o.nodes, o.gpus_per_node}, ctx);
  for (const auto& e : errors) print_error(e);
  if (!spec || (!o.hw_profile.empty() && !profile)) {
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (profile) {
    config::apply_profile(*profile, *spec);
    // The profile first, then --set on top of it.
    comm::CommParams calibrated = comm::CommParams::nccl_defaults();
    if (auto st = config::apply_profile(*profile, calibrated); !st) {
      print_error(st.error().message);
      return kExitBadInput;
    }
    for (const auto& s : o.sets) {
      (void)comm::set_comm_param(calibrated, set_key(s), s.substr(s.find('=') + 1));
    }
    params = calibrated;
  }
  // --compare reads its log before the cluster is built: a node preset is sized to the log.
  std::optional<calibrate::NcclTestsLog> log;
  calibrate::LogCompareOptions compare_opt;
  std::string sizing;  // what size_to_log chose, printed with the comparison
  if (!o.compare.empty() && errors.empty()) {
    auto read = calibrate::read_nccl_tests(o.compare);
    if (!read) {
      print_error("--compare: " + read.error().message);
      return kExitBadInput;
    }
    log = std::move(*read);
    // The NCCL settings the log states (its NCCL INFO lines), where the command line does not.
    auto settings = log_settings(o, *log, params);
    if (!settings) {
      print_error("--compare: " + o.compare + ": " + settings.error().message);
      return kExitBadInput;
    }
    choice = settings->choice;
    sizing = settings->note;
    compare_opt = compare_options(o, *log, op, *choice);
    auto shape = calibrate::log_shape(*log, compare_opt);
    if (!shape) {
      print_error("--" + shape.error().field + ": " + shape.error().message);
      return kExitBadInput;
    }
    // Only a node preset: a cluster file says its own node count.
    const bool node_preset = !config::looks_like_path(o.cluster) && config::find_preset("clusters", o.cluster) == nullptr &&
                             config::find_preset("nodes", o.cluster) != nullptr;
    if (node_preset && !o.nodes && !o.gpus_per_node && errors.empty()) {
      auto note = size_to_log(*shape, *spec);
      if (!note) {
        print_error("--" + note.error().field + ": " + o.compare + ": " + note.error().message);
        return kExitBadInput;
      }
      sizing += *note;
    }
  }
  auto topo = hw::Topology::build(*spec);
  if (!topo) {
    ctx.report(topo.error());
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (!errors.empty()) return kExitBadInput;

  if (log) return run_compare(o, *log, *topo, params, compare_opt, sizing);
  if (!o.report.empty()) {
    print_error("--report draws a comparison: it needs --compare LOG");
    return kExitBadInput;
  }
  const int gpus = o.gpus.value_or(topo->gpus());
  if (gpus < 1 || gpus > topo->gpus()) {
    print_error(fmt::format("--gpus: {} GPUs requested but the cluster has {}", gpus, topo->gpus()));
    return kExitBadInput;
  }
  std::vector<int> ranks(static_cast<std::size_t>(gpus));
  for (int i = 0; i < gpus; ++i) ranks[static_cast<std::size_t>(i)] = i;
  if (o.root < 0 || o.root >= gpus) {
    print_error(fmt::format("--root: {} is not a rank of the {} GPUs", o.root, gpus));
    return kExitBadInput;
  }

  hw::Router router(*topo);
  comm::Planner planner(*topo, router, params);
  const int elem = hw::dtype_bytes(*dtype);
  const bool rooted = *op == CollOp::broadcast || *op == CollOp::reduce;
  const bool reducing = *op == CollOp::allreduce || *op == CollOp::reducescatter || *op == CollOp::reduce;

  reports::CollectiveReport report;
  report.header.push_back(fmt::format("dtsim collective: {} over {} GPUs, algorithm {}, protocol {}, {} fidelity, {} sharing",
                                      o.op, gpus, o.algo, o.proto, o.fidelity, o.sharing));
  report.header.push_back("cluster: " + topo->summary());
  report.header.push_back("model: NCCL-style algorithms as flows on the topology; latency from NCCL's tuning tables, link "
                          "efficiency from the presets (dtsim collective --list-params; docs/model.md)");
  nlohmann::json cfg;
  cfg["command"] = "collective";
  cfg["cluster"] = {{"request", o.cluster}, {"summary", topo->summary()}, {"gpus", topo->gpus()}, {"nodes", topo->nodes()},
                    {"fabric", std::string(hw::to_string(spec->fabric.kind))}};
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : spec->groups) {
    groups.push_back({{"node", g.node.name}, {"count", g.count}, {"gpus_per_node", g.gpus_per_node > 0 ? g.gpus_per_node : g.node.gpus},
                      {"gpu", g.node.gpu.name}, {"nic", g.node.nic ? g.node.nic->name : std::string("none")}});
  }
  cfg["cluster"]["node_groups"] = groups;
  cfg["options"] = {{"op", o.op}, {"algo", o.algo}, {"proto", o.proto}, {"gpus", gpus}, {"min", min->count()}, {"max", max->count()},
                    {"factor", o.factor}, {"dtype", nccl_type_name(*dtype)}, {"root", o.root}, {"fidelity", o.fidelity},
                    {"sharing", o.sharing}};
  nlohmann::json pj;
  for (const auto& info : comm::comm_param_table()) pj[info.name] = info.get(params);
  cfg["comm_params"] = pj;
  cfg["hw_profile"] = profile ? nlohmann::json{{"path", profile->path}, {"description", profile->description}} : nlohmann::json(nullptr);
  report.config = cfg;

  for (std::int64_t size = min->count(); size <= max->count(); size *= o.factor) {
    const std::int64_t count = std::max<std::int64_t>(1, size / elem);
    const Bytes bytes(count * elem);
    comm::CollectiveRequest req;
    req.op = *op;
    req.size = bytes;
    req.ranks = ranks;
    req.root = o.root;
    req.select(*choice);
    req.fidelity = *fidelity;
    auto plan = planner.plan(req);
    if (!plan) {
      print_error("--" + plan.error().field + ": " + plan.error().message);
      return kExitBadInput;
    }
    const Time t = comm::simulate_alone(*topo, *plan, o.sharing);
    reports::CollectiveRow row;
    row.op = *op;
    row.algo = std::string(comm::to_string(plan->algo));
    row.protocol = std::string(comm::to_string(plan->protocol));
    row.channels = plan->nccl_channels;
    row.bytes = bytes.count();
    row.count = count;
    row.type = nccl_type_name(*dtype);
    row.redop = reducing ? "sum" : "none";
    row.root = rooted ? o.root : -1;
    row.time_us = t.microseconds();
    row.algbw_GBps = algbw_GBps(bytes.as_double(), t.seconds());
    row.busbw_GBps = busbw_GBps(*op, gpus, bytes.as_double(), t.seconds());
    row.estimate_us = plan->estimate.microseconds();
    report.rows.push_back(row);
    // Next size; stop before it passes --max (or would overflow).
    if (size == 0 || size > max->count() / o.factor) break;
  }

  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, reports::to_json(report).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::fputs(reports::render_table(report).c_str(), stdout);
  return kExitOk;
}

}  // namespace

void add_collective_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("collective", "Simulate one collective over a range of message sizes (like nccl-tests)");
  cmd->add_option("--cluster", o->cluster, "Cluster preset, node preset (with --nodes), or a cluster YAML file");
  cmd->add_option("--nodes", o->nodes, "Number of nodes (with a node preset: joined by the node's reference fabric)");
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "Use only the first G GPUs of every node");
  cmd->add_option("--gpus", o->gpus, "Use only the first N GPUs of the cluster (default: all)");
  cmd->add_option("--op", o->op, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv")->capture_default_str();
  cmd->add_option("--algo", o->algo,
                  "ring, tree, nvls, hierarchical, direct, or auto (fastest, as NCCL's tuner); a list (ring,tree) or ^list "
                  "(^nvls) lets the tuner choose among those, as NCCL_ALGO does")
      ->capture_default_str();
  cmd->add_option("--proto", o->proto, "LL, LL128, Simple, or auto; a list or ^list as NCCL_PROTO")->capture_default_str();
  cmd->add_option("-b,--min", o->min, "Smallest size, e.g. 8, 1M (K/M/G = 1024-based, as nccl-tests)")->capture_default_str();
  cmd->add_option("-e,--max", o->max, "Largest size, e.g. 8G")->capture_default_str();
  cmd->add_option("-f,--factor", o->factor, "Multiply the size by this between rows")->capture_default_str();
  cmd->add_option("-d,--dtype", o->dtype, "Element type: float, half, bfloat16, double, fp8")->capture_default_str();
  cmd->add_option("-r,--root", o->root, "Root rank of broadcast and reduce")->capture_default_str();
  cmd->add_option("--fidelity", o->fidelity, "coupled (one flow group per ring channel), per-edge, per-step (O(n^2))")->capture_default_str();
  cmd->add_option("--sharing", o->sharing, "Bandwidth sharing: max-min, or constant (no contention)")->capture_default_str();
  cmd->add_option("--set", o->sets, "Override a model parameter, e.g. --set comm.ring.Simple.base_latency=5us");
  cmd->add_option("--json", o->json, "Also write {config, rows} as JSON to this file");
  cmd->add_option("--hw-profile", o->hw_profile, "A calibrated hardware profile (from dtsim fit) replacing the default parameters");
  cmd->add_flag("--list-params", o->list_params, "List the communication-model parameters with defaults and sources");
  cmd->add_option("--compare", o->compare,
                  "An nccl-tests log: simulate its collective, GPU count and sizes and print both with the error per size");
  cmd->add_option("--report", o->report, "With --compare: write compare.csv, compare.md and compare.svg (gnuplot) into this folder");
  cmd->add_option("--gpus-per-thread", o->gpus_per_thread,
                  "With --compare: GPUs one nccl-tests thread drove (its -g; default: the log's nGpus, else 1)");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
