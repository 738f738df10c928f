// `dtsim plan`: search parallel layouts and hardware options, rank by time-to-train and cost.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_plan_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
