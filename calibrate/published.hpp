// Published nccl-tests measurements (data/published/*.csv) and dtsim's predictions of them.
#pragma once

#include <string>
#include <vector>

#include "comm/collective.hpp"
#include "hw/topology.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

// One row of nccl-allreduce-8gpu-published.csv.
struct PublishedBusbw {
  std::string system;
  std::string gpu;
  int gpus = 0;
  std::string nccl;
  std::string algorithm;  // as the source labels it: "nvls", "default", ...
  std::int64_t bytes = 0;
  double busbw_GBps = 0;
};

// Reads the CSV (lines starting with '#' are comments; a header row names the columns).
// Errors name the file and line.
Expected<std::vector<PublishedBusbw>> read_published_busbw(const std::string& path);

struct BusbwComparison {
  std::int64_t bytes = 0;
  double measured_GBps = 0;
  double predicted_GBps = 0;
  std::string algo;  // what dtsim ran
  double error() const { return (predicted_GBps - measured_GBps) / measured_GBps; }
};

// Predicts each measured all-reduce point on `topo` (the first `gpus` GPUs) with the given
// algorithm (nullopt: dtsim's automatic choice, like NCCL's default), as nccl-tests measures it
// with one host thread driving `gpus_per_thread` GPUs (comm::nccl_tests_iteration).
std::vector<BusbwComparison> predict_allreduce(const hw::Topology& topo, const comm::CommParams& params,
                                               const std::vector<PublishedBusbw>& rows, std::optional<comm::Algo> algo,
                                               int gpus_per_thread = 1);

// How the published curves were run: nccl-tests' -g option (GPUs per host thread). The Azure
// benchmarking guide runs `all_reduce_perf -b 8 -e 8G -f 2 -g <all GPUs> -n 40`
// (Benchmarks/NVIDIA/NCCLBandwidth.py), so its rows are one thread driving all 8 GPUs.
int published_gpus_per_thread(const PublishedBusbw& row);

}  // namespace dtsim::calibrate
