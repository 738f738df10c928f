// `dtsim collective`: nccl-tests-style sweep of one collective over message sizes.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

// Registers the subcommand; `exit_code` receives its result when it runs.
void add_collective_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
