// `dtsim fit`: fit a hardware profile from calibration results or nccl-tests logs (CPU only).
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_fit_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
