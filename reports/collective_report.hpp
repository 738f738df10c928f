// Results of `dtsim collective` as value records, and their renderings: an nccl-tests style table
// and JSON. Renderers never compute; the command fills the records.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/metrics.hpp"

namespace dtsim::reports {

struct CollectiveRow {
  CollOp op = CollOp::allreduce;
  std::string algo;
  std::string protocol;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string type;
  std::string redop;   // "sum" or "none"
  int root = -1;       // -1 when the collective has no root
  int channels = 0;    // NCCL's channels at this size (comm::Plan::nccl_channels); 0: not an NCCL algorithm
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  double estimate_us = 0;  // closed-form alpha-beta estimate of the same plan
};

struct CollectiveReport {
  std::vector<std::string> header;  // "# ..." lines describing the run
  nlohmann::json config;            // the resolved configuration, echoed into the JSON
  std::vector<CollectiveRow> rows;
};

// nccl-tests' columns (size, count, type, redop, root, time, algbw, busbw) plus the algorithm,
// protocol dtsim chose and the channels NCCL runs them on ("-" where dtsim's algorithm is not NCCL's).
std::string render_table(const CollectiveReport& r);
// A channel count as the tables print it: the number, or "-" for 0 (not an NCCL algorithm).
std::string channels_text(int channels);
nlohmann::json to_json(const CollectiveReport& r);

}  // namespace dtsim::reports
