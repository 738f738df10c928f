// dtsim: simulator of distributed deep-learning training. Exit codes are decided here only.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "cli/collective_command.hpp"
#include "cli/errors.hpp"
#include "cli/fit_command.hpp"
#include "cli/plan_command.hpp"
#include "cli/report_command.hpp"
#include "cli/simulate_command.hpp"
#include "cli/sweep_command.hpp"
#include "cli/trace_command.hpp"
#include "cli/validate_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dtsim: simulate distributed deep-learning training on GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dtsim 0.1.0");
  int exit_code = dtsim::cli::kExitOk;
  dtsim::cli::add_collective_command(app, exit_code);
  dtsim::cli::add_simulate_command(app, exit_code);
  dtsim::cli::add_sweep_command(app, exit_code);
  dtsim::cli::add_plan_command(app, exit_code);
  dtsim::cli::add_report_command(app, exit_code);
  dtsim::cli::add_fit_command(app, exit_code);
  dtsim::cli::add_validate_command(app, exit_code);
  dtsim::cli::add_trace_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return dtsim::cli::kExitBadInput;
  } catch (const std::exception& e) {
    dtsim::cli::print_error(std::string("unexpected failure: ") + e.what());
    return dtsim::cli::kExitFailure;
  }
  return exit_code;
}
