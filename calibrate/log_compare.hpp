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
  int channels = 0;  // the channels NCCL runs it on (comm::Plan::nccl_channels; 0: not an NCCL algorithm)
  // (simulated - measured) / measured bus bandwidth, as docs/validation.md reports errors.
  double error() const { return (simulated_busbw_GBps - measured_busbw_GBps) / measured_busbw_GBps; }
};

struct LogComparison {
  std::string log;  // path
  CollOp op = CollOp::allreduce;
  int gpus = 0;
  std::string gpus_from;    // where the GPU count came from: "rank lines", "busbw / algbw", "nThread x nGpus", "--gpus"
  int nodes = 0;            // hosts named in the log (0 when it names none, or only some ranks)
  bool hosts_cut = false;   // its rank lines list only some ranks, so its hosts were not counted
  int gpus_per_thread = 1;  // nccl-tests -g: GPUs one host thread drives
  bool in_place = true;     // which of the log's two columns was compared
  std::vector<LogComparePoint> points;
};

struct LogCompareOptions {
  comm::Selection choice;                  // empty: dtsim's choice (NCCL's default)
  std::optional<int> gpus;                 // nullopt: the log's rank count
  std::optional<int> gpus_per_thread;      // nullopt: the log's nGpus (1 when absent)
  std::optional<CollOp> op;                // which table of a multi-table log; nullopt: the first
  std::string sharing = "max-min";
};

// The table a comparison reads, and the GPUs and hosts it ran on.
struct LogShape {
  const NcclTestsTable* table = nullptr;  // points into the log
  CollOp op = CollOp::allreduce;
  int gpus = 0;
  std::string gpus_from;  // as LogComparison::gpus_from
  int nodes = 0;          // hosts the '#  Rank' lines name; 0 when they name none or list only some ranks
  int per_host = 0;       // ranks on each of those hosts when every host holds as many; else 0
  bool hosts_cut = false; // the rank lines list only some ranks (the count came from the bandwidths)
};

// The GPU count: --gpus, else the log's '#  Rank' lines, else the ratio of its bus to algorithm
// bandwidth (an MPI run's settings line counts one process's GPUs), else nThread x nGpus. Rank
// lines whose count the printed bandwidths do not fit give way to a larger count they do fit (a
// log quoted with "..." in place of most of them; ranks_beyond_listed).
// Errors: no table of the requested collective, no collective named, no GPU count told, or a
// one-GPU collective whose bus bandwidth is zero by definition.
Expected<LogShape> log_shape(const NcclTestsLog& log, const LogCompareOptions& opt);

// The log's table compared on the cluster: log_shape, then the same collective at each of its
// sizes. Errors: those of log_shape, the log's GPU count does not fit the cluster, the planner
// refuses (an algorithm that cannot run it), or no row has a time.
Expected<LogComparison> compare_log(const hw::Topology& topo, const comm::CommParams& params, const NcclTestsLog& log,
                                    const LogCompareOptions& opt);

// Median of |error| over the points of at least `min_bytes` (0 when there are none).
double median_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes = 0);
double max_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes = 0);

}  // namespace dtsim::calibrate
