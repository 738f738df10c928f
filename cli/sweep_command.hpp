// `dtsim sweep`: many simulations over axes (GPU count, batch, layouts, hardware), one row per point.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_sweep_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
