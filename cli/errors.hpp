// How the commands report user errors: one line per problem on stderr, "dtsim: error: ...".
#pragma once

#include <string>

#include "config/reader.hpp"

namespace dtsim::cli {

// Exit codes, decided in main() from what the commands return.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the run failed (I/O and the like)
inline constexpr int kExitBadInput = 2;  // the input was wrong: nothing was simulated or written

void print_error(const std::string& message);
void print_diagnostics(const config::Diagnostics& d);

}  // namespace dtsim::cli
