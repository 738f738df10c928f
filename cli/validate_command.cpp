#include "cli/validate_command.hpp"

#include "cli/errors.hpp"

namespace dtsim::cli {

// Placeholder until the command lands.
void add_validate_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("validate", "(not yet available)");
  cmd->allow_extras();
  cmd->callback([&exit_code] {
    print_error("validate is not available yet");
    exit_code = kExitFailure;
  });
}

}  // namespace dtsim::cli
