// `dtsim simulate`: one training step of a model on a cluster with a parallel layout.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_simulate_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
