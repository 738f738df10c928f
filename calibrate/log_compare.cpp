#include "calibrate/log_compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace dtsim::calibrate {

namespace {

std::vector<double> abs_errors(const std::vector<LogComparePoint>& points, std::int64_t min_bytes) {
  std::vector<double> e;
  for (const auto& p : points) {
    if (p.bytes >= min_bytes) e.push_back(std::fabs(p.error()));
  }
  return e;
}

}  // namespace

double median_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes) {
  std::vector<double> e = abs_errors(points, min_bytes);
  if (e.empty()) return 0;
  std::sort(e.begin(), e.end());
  const std::size_t m = e.size() / 2;
  return e.size() % 2 == 1 ? e[m] : (e[m - 1] + e[m]) / 2;
}

double max_abs_error(const std::vector<LogComparePoint>& points, std::int64_t min_bytes) {
  const std::vector<double> e = abs_errors(points, min_bytes);
  return e.empty() ? 0 : *std::max_element(e.begin(), e.end());
}

Expected<LogShape> log_shape(const NcclTestsLog& log, const LogCompareOptions& opt) {
  LogShape out;
  for (const auto& t : log.tables) {
    if (!opt.op || t.op == opt.op) {
      out.table = &t;
      break;
    }
  }
  if (!out.table) {
    return Error(fmt::format("{}: no {} table in the log", log.path, opt.op ? to_string(*opt.op) : "collective"), "compare");
  }
  if (!out.table->op) {
    return Error(fmt::format("{}:{}: the log does not say which collective it measured (name the file after the nccl-tests binary, "
                             "e.g. all_reduce_perf.log)",
                             log.path, out.table->first_line),
                 "compare");
  }
  out.op = *out.table->op;
  const auto beyond = ranks_beyond_listed(*out.table, out.op, log.ranks_count());
  out.hosts_cut = beyond.has_value();
  if (opt.gpus) {
    out.gpus = *opt.gpus;
    out.gpus_from = "--gpus";
  } else if (beyond) {
    out.gpus = *beyond;
    out.gpus_from = fmt::format("busbw / algbw; the rank lines list only {}", log.ranks_count());
  } else if (log.ranks_count() > 0) {
    out.gpus = log.ranks_count();
    out.gpus_from = "rank lines";
  } else if (const auto inferred = ranks_from_bandwidths(*out.table, out.op)) {
    out.gpus = *inferred;
    out.gpus_from = "busbw / algbw";
  } else {
    out.gpus = std::max(0, log.nthread) * std::max(0, log.ngpus);
    out.gpus_from = "nThread x nGpus";
  }
  if (out.gpus < 1) {
    return Error(fmt::format("{}: the log names no ranks and no nThread/nGpus; give the GPU count with --gpus", log.path), "gpus");
  }
  if (out.gpus == 1 && out.gpus_from == "nThread x nGpus") {
    return Error(fmt::format("{}: the log has no '#  Rank' lines and its settings line counts 1 GPU (one MPI process's); give the "
                             "run's GPU count with --gpus N",
                             log.path),
                 "gpus");
  }
  if (out.gpus == 1 && bus_bandwidth_factor(out.op, 1) == 0) {
    return Error(fmt::format("{}: {} GPU count 1 ({}): a one-GPU {} moves nothing and its bus bandwidth is 0, so there is no error to "
                             "compute; an MPI run without '#  Rank' lines needs --gpus N",
                             log.path, out.gpus_from == "--gpus" ? "the" : "the log's", out.gpus_from, to_string(out.op)),
                 "gpus");
  }
  if (!log.ranks.empty() && !out.hosts_cut) {
    std::map<std::string, int> per_host;
    for (const auto& r : log.ranks) ++per_host[r.host];
    out.nodes = static_cast<int>(per_host.size());
    out.per_host = per_host.begin()->second;
    for (const auto& [host, count] : per_host) {
      if (count != out.per_host) out.per_host = 0;
    }
  }
  return out;
}

Expected<LogComparison> compare_log(const hw::Topology& topo, const comm::CommParams& params, const NcclTestsLog& log,
                                    const LogCompareOptions& opt) {
  auto shape = log_shape(log, opt);
  if (!shape) return shape.error();
  const NcclTestsTable* table = shape->table;
  LogComparison out;
  out.log = log.path;
  out.op = shape->op;
  out.gpus = shape->gpus;
  out.gpus_from = shape->gpus_from;
  out.nodes = shape->nodes;
  out.hosts_cut = shape->hosts_cut;
  if (out.gpus > topo.gpus()) {
    return Error(fmt::format("{}: the log ran on {} GPUs but the cluster has {} (give a larger cluster, or --gpus)", log.path, out.gpus,
                             topo.gpus()),
                 "gpus");
  }
  out.gpus_per_thread = opt.gpus_per_thread.value_or(log.ngpus > 0 ? log.ngpus : 1);
  if (out.gpus_per_thread < 1) return Error("--gpus-per-thread must be at least 1", "gpus-per-thread");

  // The in-place column when the log has it (nccl-tests' headline figures), else out-of-place.
  out.in_place = std::any_of(table->rows.begin(), table->rows.end(), [](const NcclTestsRow& r) { return r.in_place.time_us.has_value(); });
  hw::Router router(topo);
  comm::Planner planner(topo, router, params);
  std::vector<int> ranks(static_cast<std::size_t>(out.gpus));
  for (int i = 0; i < out.gpus; ++i) ranks[static_cast<std::size_t>(i)] = i;
  for (const NcclTestsRow& row : table->rows) {
    const NcclTestsFigures& f = out.in_place ? row.in_place : row.out_of_place;
    if (!f.time_us || *f.time_us <= 0 || row.bytes <= 0) continue;  // N/A, or a size-0 row
    comm::CollectiveRequest req;
    req.op = out.op;
    req.size = Bytes(row.bytes);
    req.ranks = ranks;
    req.root = std::clamp(row.root, 0, out.gpus - 1);
    req.select(opt.choice);
    auto plan = planner.plan(req);
    if (!plan) return Error(fmt::format("{}:{}: {}", log.path, row.line, plan.error().message), plan.error().field);
    const Time t = comm::nccl_tests_iteration(comm::simulate_alone(topo, *plan, opt.sharing), out.gpus_per_thread, params);
    LogComparePoint p;
    p.bytes = row.bytes;
    p.measured_us = *f.time_us;
    p.simulated_us = t.microseconds();
    p.measured_busbw_GBps = busbw_GBps(out.op, out.gpus, static_cast<double>(row.bytes), *f.time_us * 1e-6);
    p.simulated_busbw_GBps = busbw_GBps(out.op, out.gpus, static_cast<double>(row.bytes), t.seconds());
    p.algo = fmt::format("{}/{}", comm::to_string(plan->algo), comm::to_string(plan->protocol));
    p.channels = plan->nccl_channels;
    out.points.push_back(std::move(p));
  }
  if (out.points.empty()) return Error(fmt::format("{}: no row of the log has a measured time", log.path), "compare");
  return out;
}

}  // namespace dtsim::calibrate
