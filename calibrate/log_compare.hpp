// dtsim's collective model beside a measured nccl-tests log: the same collective, GPU count and
// sizes as the log, simulated on a given cluster, with the error per size. Backs
// `dtsim collective --compare LOG`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "calibrate/nccl_tests_log.hpp"
#include "comm/collective.hpp"
#include "hw/topology.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

struct LogComparePoint {
  std::int64_t bytes = 0;
  double measured_us = 0;
  double simulated_us = 0;
  double measured_busbw_GBps = 0;
  double simulated_busbw_GBps = 0;
  std::string algo;  // what dtsim ran, "ring/LL"
  int channels = 0;
  // (simulated - measured) / measured bus bandwidth, as docs/validation.md reports errors.
  double error() const { return (simulated_busbw_GBps - measured_busbw_GBps) / measured_busbw_GBps; }
};

struct LogComparison {
  std::string log;  // path
  CollOp op = CollOp::allreduce;
  int gpus = 0;
  std::string gpus_from;    // where the GPU count came from: "rank lines", "busbw / algbw", "nThread x nGpus", "--gpus"
  int nodes = 0;            // hosts named in the log (0 when it names none)
  int gpus_per_thread = 1;  // nccl-tests -g: GPUs one host thread drives
  bool in_place = true;     // which of the log's two columns was compared
  std::vector<LogComparePoint> points;
};

struct LogCompareOptions {
  std::optional<comm::Algo> algo;          // nullopt: dtsim's choice (NCCL's default)
  std::optional<comm::Protocol> protocol;  // likewise
  std::optional<int> gpus;                 // nullopt: the log's rank count
  std::optional<int> gpus_per_thread;      // nullopt: the log's nGpus (1 when absent)
  std::optional<CollOp> op;                // which table of a multi-table log; nullopt: the first
  std::string sharing = "max-min";
};

// The GPU count: --gpus, else the log's '#  Rank' lines, else the ratio of its bus to algorithm
// bandwidth (an MPI run's settings line counts one process's GPUs), else nThread x nGpus.
// Errors: no GPU count can be told, a one-GPU collective whose bus bandwidth is zero by
// definition (all-reduce, all-gather, reduce-scatter, all-to-all), the log's GPU count does not fit the cluster, the log holds no table of the requested
// collective, the planner refuses (an algorithm that cannot run it), or no row has a time.
Expected<LogComparison> compare_log(const hw::Topology& topo, const comm::CommParams& params, const NcclTestsLog& log,
                                    const LogCompareOptions& opt);

// Median of |error| over the points of at least `min_bytes` (0 when there are none).
double median_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes = 0);
double max_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes = 0);

}  // namespace dtsim::calibrate
