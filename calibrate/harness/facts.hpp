// The facts recorded with every result: the device (name, SMs, clocks, memory, driver, CUDA,
// cuBLASLt and NCCL versions) and the run (host, date, command line, ranks, NCCL settings).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::harness {

Expected<nlohmann::json> device_facts(int device);
nlohmann::json run_facts(int argc, char** argv, int rank, int ranks, int nodes);
// 0 with no usable device, with the reason in *why.
int device_count(std::string* why);

}  // namespace dtsim::harness
