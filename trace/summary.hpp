// `dtsim trace summary`: where one profiled step's GPU time went. A value record, a table and JSON.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/ops.hpp"

namespace dtsim::trace {

struct TimeRow {
  std::string name;     // kernel name, ATen operator (with shapes), or class
  std::string cls;      // class of most of the row's time
  std::int64_t count = 0;
  std::int64_t ns = 0;  // summed GPU duration
};

struct Summary {
  std::string file, device;
  std::int64_t events = 0, cpu_ops = 0, runtime_calls = 0;
  std::int64_t kernels = 0, memcpys = 0, memsets = 0, streams = 0;
  std::int64_t window_ns = 0;  // first GPU op's start to the last one's end
  std::int64_t busy_ns = 0;    // union of GPU op intervals over all streams
  std::int64_t idle_ns = 0;    // window - busy: the GPU waited for the host
  std::int64_t summed_ns = 0;  // sum of GPU op durations (exceeds busy when streams overlap)
  std::array<TimeRow, kKernelClasses> by_class{};
  std::vector<TimeRow> top_kernels, top_ops;
  double gemm_flops = 0;       // from the GEMM kernels' linked shapes
  std::int64_t gemm_ns_with_shape = 0;
  std::int64_t gradient_bytes = 0, gradients = 0;
  std::map<std::string, std::size_t> skipped;
  std::size_t skipped_total = 0;
};

Summary summarize(const Trace& t, const StepOps& s, std::size_t top = 10);
std::string render_summary(const Summary& s);
nlohmann::json summary_json(const Summary& s);

}  // namespace dtsim::trace
