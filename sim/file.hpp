// Writing result files: all or nothing (a temporary file renamed into place), so that a failed
// run never leaves half a file behind. In the lowest library so that every module (the sweep
// journal in planning/, the reports) writes files the same way.
#pragma once

#include <string>

#include "sim/expected.hpp"

namespace dtsim {

Status write_file_atomic(const std::string& path, const std::string& content);

}  // namespace dtsim
