#include "cli/errors.hpp"

#include <cstdio>

namespace dtsim::cli {

void print_error(const std::string& message) { std::fprintf(stderr, "dtsim: error: %s\n", message.c_str()); }

void print_diagnostics(const config::Diagnostics& d) {
  for (const auto& item : d.items()) print_error(item.to_string());
}

}  // namespace dtsim::cli
