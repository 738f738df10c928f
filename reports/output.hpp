// Result files are written all or nothing: sim/file.hpp. The reports' name for it.
#pragma once

#include "sim/file.hpp"

namespace dtsim::reports {

using dtsim::write_file_atomic;

}  // namespace dtsim::reports
