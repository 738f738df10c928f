// `dtsim report`: HTML/Markdown/CSV/JSON reports with gnuplot charts from sweep or plan results.
#pragma once

#include <CLI/CLI.hpp>

namespace dtsim::cli {

void add_report_command(CLI::App& app, int& exit_code);

}  // namespace dtsim::cli
