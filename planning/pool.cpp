#include "planning/pool.hpp"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dtsim::planning {

int default_threads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& task, const std::atomic<bool>* stop) {
  if (n == 0) return;
  const std::size_t workers = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, threads)));
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    while (true) {
      if (stop != nullptr && stop->load()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(n);
        return;
      }
    }
  };
  if (workers == 1) {
    work();
  } else {
    std::vector<std::thread> pool;
    pool.reserve(workers);
    for (std::size_t w = 0; w < workers; ++w) pool.emplace_back(work);
    for (auto& t : pool) t.join();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace dtsim::planning
