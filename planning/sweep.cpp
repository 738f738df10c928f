#include "planning/sweep.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "planning/journal.hpp"
#include "planning/pool.hpp"

namespace dtsim::planning {

namespace {

enum Tag : int { kRow = 1, kDone = 2 };

// Rows from the worker threads to the thread that owns the file and MPI.
class RowQueue {
 public:
  void push(nlohmann::json row) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back(std::move(row));
    }
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(m_);
      closed_ = true;
    }
    cv_.notify_one();
  }
  // The next row, waiting up to `wait`; nullopt when none came (check drained()).
  std::optional<nlohmann::json> pop(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, wait, [this] { return !q_.empty() || closed_; });
    if (q_.empty()) return std::nullopt;
    nlohmann::json r = std::move(q_.front());
    q_.pop_front();
    return r;
  }
  bool drained() {
    std::lock_guard<std::mutex> lock(m_);
    return closed_ && q_.empty();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> q_;
  bool closed_ = false;
};

}  // namespace

nlohmann::json failed_row(std::size_t point, const std::string& reason) {
  return {{"point", point}, {"status", "error"}, {"error", reason}};
}

Expected<SweepRun> run_sweep(std::size_t points, const nlohmann::json& header, const PointEvaluator& evaluate, const SweepRunOptions& o) {
  const MpiSession* mpi = o.mpi != nullptr && o.mpi->active() ? o.mpi : nullptr;
  const int rank = mpi ? mpi->rank() : 0;
  const int size = mpi ? mpi->size() : 1;
  SweepRun run;
  run.root = rank == 0;

  // Rank 0 opens the results file and tells the others which points are done.
  std::map<std::size_t, nlohmann::json> rows;
  std::optional<Journal> journal;
  std::string shared;
  std::optional<Error> open_error;
  if (rank == 0) {
    if (!o.journal.empty()) {
      auto j = Journal::open(o.journal, header, o.resume, rows);
      if (!j) {
        open_error = j.error();
        shared = "!" + j.error().message;
      } else {
        journal.emplace(std::move(*j));
      }
    }
    if (shared.empty()) {
      nlohmann::json done = nlohmann::json::array();
      for (const auto& [i, r] : rows) done.push_back(i);
      shared = done.dump();
    }
  }
  if (mpi) mpi->broadcast(shared, 0);
  if (open_error) return *open_error;
  if (!shared.empty() && shared[0] == '!') return Error(shared.substr(1));
  std::vector<char> done(points, 0);
  for (const auto& i : nlohmann::json::parse(shared)) {
    if (i.get<std::size_t>() < points) done[i.get<std::size_t>()] = 1;
  }
  run.reused = rows.size();

  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < points; ++i) {
    if (!done[i] && static_cast<int>(i % static_cast<std::size_t>(size)) == rank) mine.push_back(i);
  }
  RowQueue queue;
  const int threads = o.threads > 0 ? o.threads : default_threads();
  std::thread workers([&] {
    parallel_for(
        mine.size(), threads,
        [&](std::size_t k) {
          nlohmann::json row;
          try {
            row = evaluate(mine[k]);
          } catch (const std::exception& e) {
            row = failed_row(mine[k], std::string("internal error: ") + e.what());
          }
          queue.push(std::move(row));
        },
        o.stop);
    queue.close();
  });

  std::size_t total_done = rows.size();
  int ranks_done = 1;  // this one, once its queue is drained
  Status io;  // the first failure to write the results file
  auto take = [&](nlohmann::json row) {
    const std::size_t i = row.value("point", points);
    if (i >= points || rows.count(i)) return;
    if (journal && io.ok()) {
      if (auto st = journal->append(row); !st) io = st;
    }
    rows[i] = std::move(row);
    ++total_done;
    ++run.computed;
    if (o.progress) o.progress(total_done, points);
  };
  if (rank == 0 && o.progress) o.progress(total_done, points);
  bool local_drained = false;
  while (true) {
    if (!local_drained) {
      if (auto row = queue.pop(std::chrono::milliseconds(mpi ? 5 : 200))) {
        if (rank == 0) take(std::move(*row));
        else mpi->send(0, kRow, row->dump());
        continue;
      }
      local_drained = queue.drained();
      if (local_drained && rank != 0) mpi->send(0, kDone, "");
    }
    if (rank != 0) {
      if (local_drained) break;
      continue;
    }
    bool got = false;
    while (mpi) {
      auto msg = mpi->probe();
      if (!msg) break;
      got = true;
      const std::string data = mpi->receive(msg->first, msg->second);
      if (msg->second == kDone) {
        ++ranks_done;
      } else {
        nlohmann::json row = nlohmann::json::parse(data, nullptr, false);
        if (!row.is_discarded()) take(std::move(row));
      }
    }
    if (local_drained && ranks_done == size) break;
    if (local_drained && !got) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  workers.join();
  if (!io.ok()) return io.error();
  if (rank != 0) return run;

  run.interrupted = rows.size() != points;
  run.rows.reserve(rows.size());
  for (auto& [i, r] : rows) run.rows.push_back(std::move(r));
  if (journal && !run.interrupted) {
    if (auto st = journal->finish(run.rows); !st) return st.error();
  }
  return run;
}

}  // namespace dtsim::planning
