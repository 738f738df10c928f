// Running the points of a sweep: a thread pool per process, optionally several processes under
// mpirun (points dealt round-robin; rank 0 receives every row and writes the results file), a
// results file appended as points finish, and resumption from it.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planning/mpi.hpp"
#include "sim/expected.hpp"

namespace dtsim::planning {

// One point's row: {"point": i, "status": "ok" | "oom" | "error", ...}. Must not throw; it is
// called from worker threads, concurrently.
using PointEvaluator = std::function<nlohmann::json(std::size_t point)>;

struct SweepRunOptions {
  int threads = 0;                              // per process; 0: default_threads()
  std::string journal;                          // results file (JSON Lines); "" for none
  bool resume = false;                          // keep the rows already in `journal`
  const std::atomic<bool>* stop = nullptr;      // raised by Ctrl-C: finish the points under way, start no more
  std::function<void(std::size_t done, std::size_t total)> progress;  // on rank 0's calling thread
  const MpiSession* mpi = nullptr;              // several processes when active
};

struct SweepRun {
  bool root = true;                      // this process holds the merged rows (rank 0)
  std::vector<nlohmann::json> rows;      // in point order (on the root); complete unless interrupted
  std::size_t reused = 0;                // rows kept from the results file
  std::size_t computed = 0;              // rows computed now (all processes)
  bool interrupted = false;
};

// Runs `points` points. `header` goes first in the results file and must carry "fingerprint" and
// "points". Rows come out in point order, whatever the threads, processes or resumption.
Expected<SweepRun> run_sweep(std::size_t points, const nlohmann::json& header, const PointEvaluator& evaluate, const SweepRunOptions& o);

// A row for a point whose evaluation failed for a reason the evaluator did not catch.
nlohmann::json failed_row(std::size_t point, const std::string& reason);

}  // namespace dtsim::planning
