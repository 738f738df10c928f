// Writing result files: all or nothing (a temporary file renamed into place), so that a failed
// run never leaves half a file behind.
#pragma once

#include <string>

#include "sim/expected.hpp"

namespace dtsim::reports {

Status write_file_atomic(const std::string& path, const std::string& content);

}  // namespace dtsim::reports
