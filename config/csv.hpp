// One line of a comma-separated file (RFC 4180 quoting: "..." protects commas, "" is a quote),
// for the CSV inputs dtsim reads (measured step times of sweeps, kernel profiles).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtsim::config {

// The fields of `line`, each trimmed of surrounding spaces; a carriage return is dropped.
// `unclosed`, when given, is set when a quoted field does not end on this line.
std::vector<std::string> split_csv_line(std::string_view line, bool* unclosed = nullptr);

}  // namespace dtsim::config
