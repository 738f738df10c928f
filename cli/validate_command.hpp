// `dtsim validate`: predicted versus measured training steps of the validation workload.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_validate_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
