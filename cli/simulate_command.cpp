#include "cli/simulate_command.hpp"

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/errors.hpp"
#include "cli/trace_command.hpp"
#include "config/profile.hpp"
#include "config/registry.hpp"
#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "reports/output.hpp"
#include "reports/simulate_report.hpp"
#include "reports/trace.hpp"
#include "workloads/graph_json.hpp"
#include "workloads/notes.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::string config;
  std::vector<std::string> sets;
  std::string json;
  std::string hw_profile;
  bool list_params = false;
  std::string trace;        // Chrome trace / Perfetto JSON of the step
  std::string trace_ranks;  // which ranks it shows ("0-7,64"); default: the first rank of each stage
  std::string dump_graph;   // write the step graph the configuration builds (JSON)
  std::string graph;        // run this step graph (JSON) instead of the configuration's own
};

int run(const Options& o) {
  if (o.list_params) {
    // [data: ...] names the datasets of data/registry.yaml a default was derived from.
    config::LoadContext rctx;
    const auto reg = config::embedded_registry(rctx);
    if (!reg) {
      print_diagnostics(rctx.diagnostics);
      return kExitFailure;
    }
    std::printf("%-44s %-12s %s\n", "parameter", "default", "meaning (source) [datasets it was derived from]");
    for (const auto& [name, value, help] : config::simulate_param_list()) {
      std::printf("%-44s %-12s %s [%s]\n", name.c_str(), value.c_str(), help.c_str(), config::data_sources_note(*reg, name).c_str());
    }
    config::print_preset_constants(*reg, "links.", stdout);
    return kExitOk;
  }
  if (o.config.empty()) {
    print_error("simulate needs a configuration file (dtsim simulate CONFIG.yaml); see examples/");
    return kExitBadInput;
  }
  config::LoadContext ctx;
  std::optional<config::HardwareProfile> profile;
  if (!o.hw_profile.empty()) {
    profile = config::load_profile(o.hw_profile, ctx);
    if (!profile) {
      print_diagnostics(ctx.diagnostics);
      return kExitBadInput;
    }
  }
  auto cfg = config::load_simulate_config(o.config, o.sets, ctx, std::nullopt, profile ? &*profile : nullptr);
  if (!cfg) {
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  auto topo = hw::Topology::build(cfg->cluster);
  if (!topo) {
    Error e = topo.error();
    if (ctx.sources.find("cluster." + e.field).line > 0) e.field = "cluster." + e.field;
    ctx.report(e);
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (cfg->trace) {  // model: {trace: FILE}
    if (!o.graph.empty()) {
      print_error("--graph: a traced step (model: {trace: ...}) builds its graph from the trace; run a graph file with a configuration "
                  "that names a model, or write the traced step's graph with --dump-graph");
      return kExitBadInput;
    }
    return simulate_trace(*cfg, *topo, TraceRunOutputs{o.json, o.dump_graph, o.trace, o.trace_ranks});
  }
  // The step graph: read from --graph, or built from the configuration for --dump-graph.
  std::optional<workloads::StepGraph> given;
  if (!o.graph.empty()) {
    auto g = workloads::read_graph_file(o.graph);
    if (!g) {
      print_error(g.error().to_string());
      return kExitBadInput;
    }
    given = std::move(*g);
  }
  if (!o.dump_graph.empty()) {
    std::optional<workloads::StepGraph> built;
    if (!given) {
      auto g = workloads::build_step_graph(*topo, cfg->inputs);
      if (!g) {
        ctx.report(g.error());
        print_diagnostics(ctx.diagnostics);
        return kExitBadInput;
      }
      built = std::move(*g);
    }
    if (auto st = workloads::write_graph_file(o.dump_graph, given ? *given : *built); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  // A trace records the timeline of the executors that stand for the chosen ranks.
  reports::TraceSelection trace;
  std::optional<workloads::Layout> trace_layout;
  if (!o.trace.empty()) {
    if (auto lay = workloads::Layout::make(cfg->inputs.parallel, topo->gpus())) {
      std::vector<int> requested;
      if (!o.trace_ranks.empty()) {
        auto ranks = reports::parse_rank_list(o.trace_ranks, topo->gpus());
        if (!ranks) {
          print_error(ranks.error().field + ": " + ranks.error().message);
          return kExitBadInput;
        }
        requested = *ranks;
      }
      trace = reports::select_trace_ranks(requested, *lay, cfg->inputs.symmetric);
      if (trace.cut) {
        std::fprintf(stderr, "dtsim: warning: the trace shows at most %d simulated executors (stage, replica); ranks beyond them are left out\n",
                     reports::kMaxTraceExecutors);
      }
      cfg->inputs.record_timeline = true;
      cfg->inputs.timeline_stages = trace.stages;
      trace_layout = *lay;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto result = workloads::simulate_step(*topo, cfg->inputs, given ? &*given : nullptr);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result) {
    if (given && result.error().field == "graph") {
      print_error(fmt::format("{}: {}", o.graph, result.error().message));
      return kExitBadInput;
    }
    ctx.report(result.error());
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  auto record = simulate_record(*cfg, *topo, std::move(*result));
  if (!record) {
    ctx.report(record.error());
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (given) record->notes.push_back(fmt::format("the step ran the step graph read from {} (--graph), not the one the configuration builds", o.graph));
  const reports::SimulateReport& rep = *record;
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, reports::simulate_json(rep).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (trace_layout) {
    const reports::TraceInfo info{rep.model + " on " + rep.cluster, rep.result.layout, rep.result.symmetry_note};
    if (auto st = reports::write_file_atomic(o.trace, reports::chrome_trace(rep.result, *trace_layout, *topo, trace, info)); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::fputs(reports::render_simulate(rep).c_str(), stdout);
  std::fprintf(stderr, "dtsim: simulated in %.2f s (%llu events, %llu collectives)\n", wall,
               static_cast<unsigned long long>(rep.result.events), static_cast<unsigned long long>(rep.result.collectives));
  return kExitOk;
}

}  // namespace

Expected<reports::SimulateReport> simulate_record(const config::SimulateConfig& cfg, const hw::Topology& topo,
                                                  workloads::StepResult result) {
  reports::SimulateReport rep;
  rep.model = workloads::model_name(cfg.inputs.model);
  rep.cluster = topo.summary();
  rep.precision = std::string(hw::to_string(cfg.inputs.training.precision));
  if (cfg.inputs.training.framework != workloads::Framework::megatron) rep.framework = std::string(workloads::to_string(cfg.inputs.training.framework));
  rep.config = cfg.resolved;
  rep.config["cluster"] = {{"summary", topo.summary()}, {"gpus", topo.gpus()}, {"nodes", topo.nodes()},
                           {"fabric", std::string(hw::to_string(cfg.cluster.fabric.kind))}};
  rep.result = std::move(result);
  // Time to train, energy and cost (training.tokens, energy:, prices:).
  rep.budget = cfg.budget;
  rep.power = cfg.power;
  rep.prices = cfg.prices;
  rep.has_prices = cfg.has_prices;
  auto run = workloads::estimate_run(rep.result, cfg.inputs.training.global_batch, cfg.budget, cfg.power, cfg.prices, topo.nodes());
  if (!run) return run.error();
  rep.run = *run;
  if (!rep.result.fits) rep.memory_fixes = workloads::memory_fixes(topo, cfg.inputs);
  rep.notes = cfg.notes;
  if (auto lay = workloads::Layout::make(cfg.inputs.parallel, topo.gpus())) {
    for (auto& n : workloads::settings_without_effect(cfg.inputs, *lay)) rep.notes.push_back(std::move(n));
  }
  return rep;
}

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate one training step of a model on a cluster with a parallel layout");
  cmd->add_option("config", o->config, "Configuration YAML (cluster, model, training, parallel); see examples/");
  cmd->add_option("--set", o->sets, "Override any key, e.g. --set parallel.tp=4 --set model=llama3-8b");
  cmd->add_option("--json", o->json, "Also write {config, result} as JSON to this file");
  cmd->add_option("--hw-profile", o->hw_profile, "A calibrated hardware profile (from dtsim fit) replacing the default parameters");
  CLI::Option* trace = cmd->add_option("--trace", o->trace, "Write the simulated step as Chrome trace / Perfetto JSON (open in ui.perfetto.dev or chrome://tracing)");
  cmd->add_option("--trace-ranks", o->trace_ranks, "Ranks the trace shows, e.g. 0-7,64 (default: the first rank of each pipeline stage)")->needs(trace);
  cmd->add_option("--dump-graph", o->dump_graph, "Write the step graph that runs (the configuration's own, or the one --graph gives; per-stage ops, collectives, buckets; JSON, docs/config.md) to this file");
  cmd->add_option("--graph", o->graph, "Run this step graph (a --dump-graph file, possibly edited) on the configuration's cluster and layout");
  cmd->add_flag("--list-params", o->list_params, "List the model parameters (communication, compute, memory) with defaults and sources");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
