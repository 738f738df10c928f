// `dtsim fit`: from calibration results (the harness's JSON Lines, or nccl-tests logs) to a
// hardware profile whose parameters are the simulator's own (dtsim simulate --list-params).
//
//   overhead   compute.kernel_overhead = median GPU time of one empty kernel launched back to
//              back (the fixed cost every kernel of a step pays)
//   memory     compute.memory.efficiency: t = bytes / (HBM bandwidth x e) + overhead, weighted
//              least squares on the relative error (linear in 1/e)
//   gemm       compute.gemm.efficiency.<dtype> and compute.gemm.k_half: the compute model's own
//              kernel time (tile and wave quantization, depth, roofline) fitted by
//              Levenberg-Marquardt on the relative errors, in log space
//   hostlink   pinned host<->device bandwidth -> the node's PCIe link efficiency (links:)
//   nccl       per collective, communicator size and scope: piecewise alpha-beta (one line per
//              protocol regime, count chosen by BIC), then each regime is mapped onto the
//              simulator's latency and bandwidth knobs of the algorithm/protocol it stands for
//              (docs/calibration.md has the mapping)
//
// Held-out residuals: the points of each suite are sorted by size and every `holdout_every`-th
// one is left out of the fit; the residuals, (model - measured) / measured, are reported on those
// points (median and worst), for the fitted profile and for dtsim's defaults.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/lsq.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "calibrate/records.hpp"
#include "comm/params.hpp"
#include "hw/specs.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

struct GemmSample {
  hw::DType dtype = hw::DType::bf16;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  int in_bytes = 2, out_bytes = 2;
  double time_s = 0;
  std::string where;  // file:line
};

struct MemorySample {
  std::string kernel;  // copy, triad, layernorm, ...
  double bytes = 0;    // moved per launch (read + written)
  double elements = 0; // elements per launch when the record says (tokens x hidden), else 0
  double time_s = 0;
  std::string where;
};

struct OverheadSample {
  std::string what;  // kernel_gpu, launch_host, launch_sync, event_sync, stream_sync
  double time_s = 0;
  std::string where;
};

struct LinkSample {
  std::string what;  // "h2d.pinned", "d2h.pageable", "p2p.0-1", ...
  double bytes = 0;
  double time_s = 0;
  std::string where;
};

struct CollectiveSample {
  CollOp op = CollOp::allreduce;
  std::int64_t bytes = 0;  // as nccl-tests prints it
  double time_s = 0;
  int ranks = 1;
  int nodes = 1;
  bool nodes_known = true;  // false: the source did not say (nodes is then a guess of 1)
  bool in_place = false;
  // What the source says NCCL ran or was allowed to run, in NCCL_ALGO's and NCCL_PROTO's syntax
  // ("nvls", "Ring,Tree", "^nvls"; "Simple"), or a label ("default", ""): NCCL's own choice.
  std::string algo_label;
  std::string proto_label;
  // Communication parameters the run set (an nccl-tests log's NCCL_BUFFSIZE and
  // NCCL_P2P_LL_THRESHOLD, calibrate::nccl_settings): the parameter without "comm.", its value.
  std::vector<std::pair<std::string, std::string>> comm_sets;
  std::string where;
};

struct Dataset {
  std::vector<GemmSample> gemm;
  std::vector<MemorySample> memory;
  std::vector<OverheadSample> overhead;
  std::vector<LinkSample> links;
  std::vector<CollectiveSample> collectives;
  std::string device_name;                          // the GPU the data came from ("" if unknown)
  int device_sms = 0;                               // as measured (0 if unknown)
  nlohmann::json device = nlohmann::json::object(); // facts of the first record that had them
  std::vector<std::string> inputs;
  std::vector<std::string> notes;                   // points left out and why
  int failed_points = 0;                            // records with status error or skipped
  int power_points = 0;                             // power-suite records: read, nothing fitted to them yet
  bool empty() const { return gemm.empty() && memory.empty() && overhead.empty() && links.empty() && collectives.empty(); }
};

// Adds harness records. Errors name file:line: an unknown suite, a record without its numbers.
Status add_records(Dataset& d, const std::vector<Record>& records);

struct NcclTestsInput {
  std::optional<CollOp> op;      // overrides what the log's name or header says
  std::optional<int> ranks;      // when the log has no "#  Rank" lines
  std::optional<int> nodes;
  // The command line's --algo and --proto ("" or "auto": the log's NCCL settings, else NCCL's
  // choice); they take the place of the log's NCCL_ALGO and NCCL_PROTO.
  std::string algo_label;
  std::string proto_label;
  std::vector<std::string> set_names;  // parameters the command line sets (--set): the log's are left out
};
// Reads the log's rows, and the NCCL settings its INFO lines state (calibrate::nccl_settings):
// NCCL_ALGO, NCCL_PROTO and NCCL_NVLS_ENABLE=0 restrict what the fit simulates; NCCL_BUFFSIZE and
// NCCL_P2P_LL_THRESHOLD set the parameters it simulates under. A value dtsim cannot take is an
// error naming the log and the variable.
Status add_nccl_tests(Dataset& d, const NcclTestsLog& log, const NcclTestsInput& in);

// GPU and node presets for a device name as CUDA reports it ("NVIDIA H100 80GB HBM3" ->
// h100-sxm -> dgx-h100); "" when unknown.
std::string gpu_preset_for(const std::string& device_name);
std::string node_preset_for(const std::string& gpu_preset);

struct FitOptions {
  std::string gpu;                  // GPU preset; "" = from the device name
  std::string node;                 // node preset for collectives; "" = from the GPU preset
  // What NCCL ran, in --algo's and --proto's syntax ("ring", "Ring,Tree", "^nvls"; "Simple"); ""
  // or "auto": the data's labels (a log's NCCL_ALGO, NCCL_PROTO), else NCCL's choice. Each takes
  // the place of the data's own for its part.
  std::string algo, proto;
  // --set comm.NAME=VALUE (NAME without "comm."): the fit simulates under them, in place of what
  // the data states for the same parameter, and writes them into the profile.
  std::vector<std::pair<std::string, std::string>> sets;
  int holdout_every = 4;            // 0 or 1: no held-out points
};

struct SuiteResiduals {
  std::string suite;  // "gemm.bf16", "memory.triad", "nccl.allreduce.8x1" (ranks x nodes)
  std::string model;  // "profile" (dtsim with the fitted profile), "defaults", "alpha-beta"
  int points = 0, fitted = 0, held_out = 0;
  double median = 0, worst = 0;  // |relative error| over the held-out points (all points if none)
  double median_all = 0, worst_all = 0;
  std::string worst_where;
};

struct FitResult {
  std::string gpu_preset, node_preset;
  std::map<std::string, std::string> params;      // profile params: name -> value text
  std::map<std::string, double> link_efficiency;  // profile links: type -> efficiency
  std::vector<SuiteResiduals> residuals;
  nlohmann::json fit = nlohmann::json::object();     // the profile's free-form fit: section
  nlohmann::json source = nlohmann::json::object();  // the profile's free-form source: section
  std::vector<std::string> notes;
  // Fitted parameter -> the suites and algorithm/protocol pairs it was fitted for.
  std::map<std::string, std::string> coverage;
  // Where the fitted profile will not apply (the tuner picks pairs the fit did not set).
  std::vector<std::string> warnings;
};

Expected<FitResult> fit_profile(const Dataset& d, const FitOptions& o);

// The profile as YAML text (config/profile.hpp's format, format 1).
std::string profile_yaml(const FitResult& r, const std::string& description);
// The residual table printed by `dtsim fit`.
std::string residual_table(const FitResult& r);

}  // namespace dtsim::calibrate
