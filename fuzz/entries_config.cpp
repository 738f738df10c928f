// Fuzz entries of the YAML loaders: simulate configurations (with --set), clusters, plans, sweeps,
// hardware profiles and Hugging Face config.json, each through the functions cli/ calls.
#include <algorithm>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/hardware.hpp"
#include "config/model_loader.hpp"
#include "config/plan_loader.hpp"
#include "config/profile.hpp"
#include "config/simulate_loader.hpp"
#include "config/sweep_loader.hpp"
#include "fuzz/entries.hpp"
#include "hw/topology.hpp"
#include "workloads/graph_json.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::fuzz {

namespace {

// A failed load must say why: at least one diagnostic, each with a message.
void require_reasons(const config::Diagnostics& d, const char* what) {
  if (d.empty()) contract_broken(std::string(what) + ": the load failed without a diagnostic");
  for (const auto& item : d.items()) {
    if (item.message.empty()) contract_broken(std::string(what) + ": a diagnostic without a message (field '" + item.field + "')");
  }
}

void require_reason(const Error& e, const char* what) {
  if (e.message.empty()) contract_broken(std::string(what) + ": an error without a message (field '" + e.field + "')");
}

// Where a fuzzed configuration claims to be: relative references (hf_config: ..., a cluster
// file) resolve as they would for the bundled examples.
std::string example_path(const char* folder, const char* name) {
  return std::string(DTSIM_SOURCE_DIR) + "/examples/" + folder + "/" + name;
}

// Small enough to simulate in milliseconds (fuzz/entries.hpp).
bool small_enough(const hw::Topology& topo, const workloads::StepInputs& in) {
  if (topo.gpus() > kMaxSimulatedGpus) return false;
  const auto* t = std::get_if<workloads::TransformerSpec>(&in.model);
  if (t != nullptr && t->layers > kMaxSimulatedLayers) return false;
  const auto lay = workloads::Layout::make(in.parallel, topo.gpus());
  if (!lay) return true;  // simulate_step reports the layout's error
  const long long per_pipeline = std::max<long long>(1, lay->dp()) * std::max<long long>(1, in.training.micro_batch);
  const long long micro_batches = in.training.global_batch / per_pipeline;
  const long long layers = t != nullptr ? t->layers : 1;
  return micro_batches <= kMaxSimulatedMicroBatches && layers * micro_batches <= kMaxSimulatedLayerPasses &&
         in.parallel.virtual_stages <= kMaxSimulatedLayers;
}

// What `dtsim simulate` does after loading: the cluster's topology, then one step.
void simulate_loaded(const config::SimulateConfig& cfg) {
  if (cfg.trace) return;  // a profiled step: the trace target covers the trace reader
  auto topo = hw::Topology::build(cfg.cluster);
  if (!topo) {
    require_reason(topo.error(), "cluster topology");
    return;
  }
  if (!small_enough(*topo, cfg.inputs)) return;
  auto result = workloads::simulate_step(*topo, cfg.inputs);
  if (!result) require_reason(result.error(), "simulate_step");
}

}  // namespace

void simulate(std::string_view input) {
  const std::string text(input);
  std::vector<std::string> sets;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    if (line.starts_with(kSetPrefix)) sets.emplace_back(line.substr(kSetPrefix.size()));
    at = end + 1;
  }
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(example_path("simulate", "fuzz-input.yaml"), sets, ctx, text);
  if (!cfg) {
    require_reasons(ctx.diagnostics, "simulate config");
    return;
  }
  simulate_loaded(*cfg);
}

void cluster(std::string_view input) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{scratch_file(input, "yaml"), std::nullopt, std::nullopt}, ctx);
  if (!spec) {
    require_reasons(ctx.diagnostics, "cluster");
    return;
  }
  auto topo = hw::Topology::build(*spec);
  if (!topo) require_reason(topo.error(), "cluster topology");
}

void plan(std::string_view input) {
  config::LoadContext ctx;
  auto spec = config::load_plan_spec(scratch_file(input, "yaml"), ctx);
  if (!spec) require_reasons(ctx.diagnostics, "plan");
}

void sweep(std::string_view input) {
  config::LoadContext ctx;
  auto spec = config::load_sweep_spec(scratch_file(input, "yaml"), ctx);
  if (!spec) {
    require_reasons(ctx.diagnostics, "sweep");
    return;
  }
  // `dtsim sweep` loads each point as its row (a point's error is the row's reason).
  const std::size_t n = std::min<std::size_t>(spec->points.size(), kMaxSweepPoints);
  for (std::size_t i = 0; i < n; ++i) {
    config::LoadContext pctx;
    auto cfg = config::load_sweep_point(*spec, spec->points[i], pctx);
    if (!cfg) require_reasons(pctx.diagnostics, "sweep point");
  }
}

void profile(std::string_view input) {
  config::LoadContext ctx;
  auto p = config::load_profile(scratch_file(input, "yaml"), ctx);
  if (!p) {
    require_reasons(ctx.diagnostics, "hardware profile");
    return;
  }
  // As --hw-profile does: applied to a configuration before its own settings.
  config::LoadContext sctx;
  const std::string base = "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt2-124m\ntraining: {global_batch: 8}\n";
  auto cfg = config::load_simulate_config(example_path("simulate", "fuzz-input.yaml"), {}, sctx, base, &*p);
  if (!cfg) require_reasons(sctx.diagnostics, "simulate config with a hardware profile");
}

void hf_config(std::string_view input) {
  config::LoadContext ctx;
  auto t = config::load_hf_config(scratch_file(input, "json"), "model.hf_config", ctx);
  if (!t) require_reasons(ctx.diagnostics, "Hugging Face config.json");
}

void graph(std::string_view input) {
  auto g = workloads::read_graph_file(scratch_file(input, "json"));
  if (!g) {
    require_reason(g.error(), "step graph");
    return;
  }
  // `dtsim simulate CONFIG --graph FILE` with the configuration the seeds were written from
  // (examples/graphs/): a graph of its shape runs on the executor; another shape is refused.
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(example_path("graphs", "tiny-tp2-pp2-dp2.yaml"), {}, ctx);
  if (!cfg) contract_broken("examples/graphs/tiny-tp2-pp2-dp2.yaml does not load");
  auto topo = hw::Topology::build(cfg->cluster);
  if (!topo) contract_broken("examples/graphs/tiny-tp2-pp2-dp2.yaml: no topology");
  auto result = workloads::simulate_step(*topo, cfg->inputs, &*g);
  if (!result) require_reason(result.error(), "simulate_step with a step graph");
}

}  // namespace dtsim::fuzz
