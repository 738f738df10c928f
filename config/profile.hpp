// Hardware profiles: calibrated parameter values (written by `dtsim fit`, read by
// `--hw-profile FILE`) that replace dtsim's defaults.
//
// Format (YAML):
//   profile: 1                       # format version
//   description: "8x H100 SXM, driver 580, NCCL 2.27 (dtsim fit, 2026-11-21)"
//   source: {...}                    # free-form: device facts, command, date (echoed, not used)
//   params:                          # any name that `dtsim simulate --list-params` prints
//     compute.gemm.efficiency.bf16: 0.78
//     compute.kernel_overhead: 3.1 us
//     comm.ring.Simple.base_latency: 11.2 us
//   links:                           # per link type (presets/links.yaml names)
//     nvlink4: {efficiency: 0.83, latency: 0.3 us}
//   fit: {...}                       # free-form: residuals per suite (echoed, not used)
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/reader.hpp"
#include "hw/specs.hpp"
#include "workloads/step.hpp"

namespace dtsim::config {

struct LinkOverride {
  std::optional<double> efficiency;
  std::optional<Time> latency;
};

struct HardwareProfile {
  std::string path;
  std::string description;
  std::map<std::string, std::string> params;       // name -> value text
  std::map<std::string, LinkOverride> links;        // link type name -> override
};

// Reads `key:` of `parent` as {link type name: {efficiency, latency}} (a profile's `links:`, a
// simulate configuration's `simulation.links:`).
std::map<std::string, LinkOverride> read_link_overrides(MapReader& parent, const std::string& key, LoadContext& ctx);
// The link type names a cluster uses (nodes' NVLink, PCIe, NIC and socket links; the fabric's).
std::vector<std::string> link_type_names(const hw::ClusterSpec& cluster);

// Reads and checks a profile (every parameter name and value, every link field).
std::optional<HardwareProfile> load_profile(const std::string& path, LoadContext& ctx);

// Applies the parameters (comm.*, compute.*, memory.*) to `in`. Parameters of other families are
// errors. Returns the first problem.
Status apply_profile(const HardwareProfile& p, workloads::StepInputs& in);
// Applies only the comm.* parameters (for `dtsim collective`).
Status apply_profile(const HardwareProfile& p, comm::CommParams& comm);
// Overrides the efficiency and latency of every link of the named types in the cluster.
void apply_profile(const HardwareProfile& p, hw::ClusterSpec& cluster);

// Sets one parameter by its --list-params name (comm.*, compute.*, memory.*).
Status set_model_param(workloads::StepInputs& in, const std::string& name, const std::string& value);

}  // namespace dtsim::config
