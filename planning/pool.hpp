// A fixed set of worker threads over independent tasks (simulations are independent objects: no
// shared state but the read-only inputs).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>

namespace dtsim::planning {

// The machine's hardware threads (at least 1): the default for sweeps and plans.
int default_threads();

// Runs task(i) for every i in [0, n) on min(threads, n) threads, each taking the next index in
// turn; returns when all have finished. Once *stop is true no new index is handed out. A task that
// throws is a bug (tasks report errors as values); the exception is rethrown here.
void parallel_for(std::size_t n, int threads, const std::function<void(std::size_t)>& task, const std::atomic<bool>* stop = nullptr);

}  // namespace dtsim::planning
