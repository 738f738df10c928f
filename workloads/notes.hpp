// Settings that cannot change this configuration's result, each with the reason, so that a user
// who sets one (or a search that varies one) is told once instead of seeing a silent tie.
#pragma once

#include <string>
#include <vector>

#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

std::vector<std::string> settings_without_effect(const StepInputs& in, const Layout& lay);

}  // namespace dtsim::workloads
