#include "calibrate/published.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace dtsim::calibrate {

namespace {
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream ss(line);
  while (std::getline(ss, cur, ',')) out.push_back(cur);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}
}  // namespace

Expected<std::vector<PublishedBusbw>> read_published_busbw(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(fmt::format("{}: cannot open the file", path));
  std::vector<PublishedBusbw> rows;
  std::vector<std::string> header;
  std::string line;
  int lineno = 0;
  auto col = [&](const std::string& name) -> int {
    for (std::size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
    return -1;
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto f = split_csv(line);
    if (header.empty()) {
      header = f;
      for (const char* need : {"system", "gpu", "gpus", "nccl", "algorithm", "bytes", "busbw_GBps"}) {
        if (col(need) < 0) return Error(fmt::format("{}:{}: the header has no '{}' column", path, lineno, need));
      }
      continue;
    }
    if (f.size() != header.size()) return Error(fmt::format("{}:{}: expected {} columns, found {}", path, lineno, header.size(), f.size()));
    PublishedBusbw r;
    try {
      r.system = f[static_cast<std::size_t>(col("system"))];
      r.gpu = f[static_cast<std::size_t>(col("gpu"))];
      r.gpus = std::stoi(f[static_cast<std::size_t>(col("gpus"))]);
      r.nccl = f[static_cast<std::size_t>(col("nccl"))];
      r.algorithm = f[static_cast<std::size_t>(col("algorithm"))];
      r.bytes = std::stoll(f[static_cast<std::size_t>(col("bytes"))]);
      r.busbw_GBps = std::stod(f[static_cast<std::size_t>(col("busbw_GBps"))]);
    } catch (...) {
      return Error(fmt::format("{}:{}: a number column does not hold a number", path, lineno));
    }
    if (r.gpus < 1 || r.bytes <= 0 || !(r.busbw_GBps > 0)) {
      return Error(fmt::format("{}:{}: gpus, bytes and busbw_GBps must be positive", path, lineno));
    }
    rows.push_back(r);
  }
  if (header.empty()) return Error(fmt::format("{}: no header row", path));
  return rows;
}

std::vector<BusbwComparison> predict_allreduce(const hw::Topology& topo, const comm::CommParams& params,
                                               const std::vector<PublishedBusbw>& rows, std::optional<comm::Algo> algo,
                                               int gpus_per_thread) {
  hw::Router router(topo);
  comm::Planner planner(topo, router, params);
  std::vector<BusbwComparison> out;
  for (const auto& r : rows) {
    comm::CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes(r.bytes);
    for (int i = 0; i < r.gpus; ++i) req.ranks.push_back(i);
    req.algo = algo;
    auto plan = planner.plan(req);
    DTSIM_ASSERT(plan.ok(), "published comparison: the planner refused a plain all-reduce");
    const Time t = comm::nccl_tests_iteration(comm::simulate_alone(topo, *plan), gpus_per_thread, params);
    BusbwComparison c;
    c.bytes = r.bytes;
    c.measured_GBps = r.busbw_GBps;
    c.predicted_GBps = busbw_GBps(CollOp::allreduce, r.gpus, static_cast<double>(r.bytes), t.seconds());
    c.algo = fmt::format("{}/{}", comm::to_string(plan->algo), comm::to_string(plan->protocol));
    out.push_back(c);
  }
  return out;
}

int published_gpus_per_thread(const PublishedBusbw& row) {
  // Systems whose runs are known to use one thread for all GPUs (see the header).
  static const char* const single_thread[] = {"azure-nd-h100-v5", "azure-nd-a100-v4"};
  for (const char* s : single_thread) {
    if (row.system == s) return row.gpus;
  }
  return 1;
}

}  // namespace dtsim::calibrate
