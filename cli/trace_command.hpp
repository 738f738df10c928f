// `dtsim trace summary FILE`: where a profiled step's GPU time went; and the trace-driven branch of
// `dtsim simulate` (model: {trace: FILE}).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"

namespace dtsim::cli {

void add_trace_command(CLI::App& app, int& exit_code);

// Simulates the configuration's traced step on `topo`; prints the report, writes JSON when
// `json` is not empty and the step graph built from the trace when `dump_graph` is not. Returns
// the exit code.
int simulate_trace(const config::SimulateConfig& cfg, const hw::Topology& topo, const std::string& json, const std::string& dump_graph);

}  // namespace dtsim::cli
