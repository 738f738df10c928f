// `dtsim simulate`: one training step of a model on a cluster with a parallel layout.
#pragma once

#include <CLI/CLI.hpp>

#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"
#include "reports/simulate_report.hpp"
#include "sim/expected.hpp"

namespace dtsim::cli {

void add_simulate_command(CLI::App& app, int& exit_code);

// The record of one simulated step as `dtsim simulate` reports it (and every sweep row holds it):
// the resolved configuration with the cluster, the result, and time to train, energy and cost. An
// error when the run's budget does not apply to the model.
Expected<reports::SimulateReport> simulate_record(const config::SimulateConfig& cfg, const hw::Topology& topo,
                                                  workloads::StepResult result);

}  // namespace dtsim::cli
