// Properties of the model over randomly generated valid configurations (a fixed seed, so that a
// failure reproduces): the result must react to the configuration the way the hardware would.
//   - faster links (every link type's bandwidth doubled) never make a step slower;
//   - more memory per GPU never turns a fit into an out-of-memory;
//   - doubling the global batch at a fixed layout never lowers the step time;
//   - the same input gives byte-identical output (the JSON `dtsim simulate --json` writes).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/simulate_command.hpp"
#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "reports/simulate_report.hpp"
#include "workloads/step.hpp"

namespace {

using dtsim::config::SimulateConfig;

// A small random configuration: up to 4 nodes of 8 GPUs, a model of up to 1.3B parameters, a
// layout that divides the GPUs. Deterministic for a seed (only the engine's raw output is used).
struct Generator {
  std::mt19937_64 rng;
  explicit Generator(std::uint64_t seed) : rng(seed) {}
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[rng() % v.size()]; }

  std::string config() {
    const std::string node = pick<std::string>({"dgx-h100", "dgx-a100-80g", "dgx-a100-40g", "pcie-8x-l40s"});
    const int nodes = pick<int>({1, 1, 2, 4});
    const std::string model = pick<std::string>({"gpt3-125m", "gpt2-124m", "gpt3-350m", "llama3.2-1b", "gpt3-1.3b"});
    const int tp = pick<int>({1, 2, 4});
    const int pp = pick<int>({1, 1, 2});
    const int dp = nodes * 8 / (tp * pp);
    const int micro = pick<int>({1, 2, 4});
    const int accumulation = pick<int>({1, 2, 4});
    const std::string recompute = pick<std::string>({"none", "selective", "full"});
    const int zero = pick<int>({0, 1, 2});
    return fmt::format(
        "cluster: {{node: {}, nodes: {}}}\nmodel: {}\ntraining: {{global_batch: {}, micro_batch: {}, seq_len: 1024, recompute: {}}}\n"
        "parallel: {{tp: {}, pp: {}, zero: {}}}\n",
        node, nodes, model, dp * micro * accumulation, micro, recompute, tp, pp, zero);
  }
};

std::optional<SimulateConfig> load(const std::string& yaml) {
  dtsim::config::LoadContext ctx;
  auto cfg = dtsim::config::load_simulate_config("property.yaml", {}, ctx, yaml);
  if (!cfg) ADD_FAILURE() << "a generated configuration does not load:\n" << yaml << ctx.diagnostics.to_string();
  return cfg;
}

std::optional<dtsim::workloads::StepResult> run(const SimulateConfig& cfg) {
  auto topo = dtsim::hw::Topology::build(cfg.cluster);
  if (!topo) return std::nullopt;
  auto r = dtsim::workloads::simulate_step(*topo, cfg.inputs);
  if (!r) return std::nullopt;
  return *r;
}

void scale(std::optional<dtsim::hw::LinkType>& l, double k) {
  if (l) l->bandwidth = l->bandwidth * k;
}

// Every link type of the cluster, `k` times the bandwidth.
SimulateConfig faster_links(SimulateConfig cfg, double k) {
  auto scale_fabric = [k](dtsim::hw::FabricSpec& f) {
    scale(f.nic, k);
    scale(f.link, k);
  };
  for (auto& g : cfg.cluster.groups) {
    scale(g.node.nvlink, k);
    scale(g.node.nic, k);
    scale(g.node.cpu_link, k);
    g.node.pcie.bandwidth = g.node.pcie.bandwidth * k;
    if (g.node.reference_fabric) scale_fabric(*g.node.reference_fabric);
  }
  scale_fabric(cfg.cluster.fabric);
  return cfg;
}

constexpr int kConfigs = 24;
constexpr std::uint64_t kSeed = 15;

// The generated configurations that load and simulate (some layouts do not divide a model).
std::vector<std::pair<std::string, SimulateConfig>> valid_configs() {
  std::vector<std::pair<std::string, SimulateConfig>> out;
  Generator gen(kSeed);
  for (int i = 0; i < kConfigs; ++i) {
    const std::string yaml = gen.config();
    dtsim::config::LoadContext ctx;
    auto cfg = dtsim::config::load_simulate_config("property.yaml", {}, ctx, yaml);
    if (!cfg || !run(*cfg)) continue;
    out.emplace_back(yaml, std::move(*cfg));
  }
  return out;
}

TEST(Properties, EnoughGeneratedConfigurationsAreValid) { EXPECT_GE(valid_configs().size(), static_cast<std::size_t>(kConfigs / 2)); }

TEST(Properties, FasterLinksNeverMakeAStepSlower) {
  for (const auto& [yaml, cfg] : valid_configs()) {
    const auto base = run(cfg);
    const auto fast = run(faster_links(cfg, 2.0));
    ASSERT_TRUE(base && fast) << yaml;
    EXPECT_LE(fast->step_time_s, base->step_time_s * (1 + 1e-12)) << yaml;
  }
}

TEST(Properties, MoreMemoryPerGpuNeverTurnsAFitIntoAnOom) {
  for (const auto& [yaml, cfg] : valid_configs()) {
    const auto base = run(cfg);
    SimulateConfig more = cfg;
    for (auto& g : more.cluster.groups) g.node.gpu.memory = g.node.gpu.memory * 2;
    const auto big = run(more);
    ASSERT_TRUE(base && big) << yaml;
    if (base->fits) {
      EXPECT_TRUE(big->fits) << yaml;
    }
  }
}

TEST(Properties, DoublingTheGlobalBatchAtAFixedLayoutNeverLowersTheStepTime) {
  for (const auto& [yaml, cfg] : valid_configs()) {
    const auto base = run(cfg);
    SimulateConfig twice = cfg;
    twice.inputs.training.global_batch *= 2;
    const auto big = run(twice);
    ASSERT_TRUE(base && big) << yaml;
    EXPECT_GE(big->step_time_s, base->step_time_s) << yaml;
  }
}

// What `dtsim simulate --json` writes for `yaml`, loaded and simulated from scratch.
std::string json_output(const std::string& yaml) {
  auto cfg = load(yaml);
  auto topo = dtsim::hw::Topology::build(cfg->cluster);
  auto r = dtsim::workloads::simulate_step(*topo, cfg->inputs);
  auto rec = dtsim::cli::simulate_record(*cfg, *topo, std::move(*r));
  return dtsim::reports::simulate_json(*rec).dump(2);
}

TEST(Properties, TheSameInputGivesByteIdenticalOutput) {
  for (const auto& [yaml, cfg] : valid_configs()) EXPECT_EQ(json_output(yaml), json_output(yaml)) << yaml;
}

}  // namespace
