#include "cli/plan_command.hpp"

#include "cli/errors.hpp"

namespace dtsim::cli {

// Placeholder until the command lands.
void add_plan_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("plan", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([&exit_code] {
    print_error("plan is not available yet");
    exit_code = kExitFailure;
  });
}

}  // namespace dtsim::cli
