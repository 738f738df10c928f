// `dtsim trace summary FILE`: where a profiled step's GPU time went; and the trace-driven branch of
// `dtsim simulate` (model: {trace: FILE}).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"

namespace dtsim::cli {

void add_trace_command(CLI::App& app, int& exit_code);

// What `dtsim simulate` writes besides its report (each left out when empty).
struct TraceRunOutputs {
  std::string json;         // the result as JSON
  std::string dump_graph;   // the step graph built from the trace
  std::string trace;        // the simulated step as a Chrome trace / Perfetto JSON
  std::string trace_ranks;  // the ranks it shows (default: rank 0)
};

// Simulates the configuration's traced step on `topo`; prints the report and writes `out`.
// Returns the exit code.
int simulate_trace(const config::SimulateConfig& cfg, const hw::Topology& topo, const TraceRunOutputs& out);

}  // namespace dtsim::cli
