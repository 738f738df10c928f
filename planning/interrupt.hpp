// Ctrl-C as a flag: while an InterruptGuard lives, SIGINT and SIGTERM are blocked in the thread
// that made it and in every thread started afterwards (MPI's included, when the guard comes
// first), and one watcher thread waits for them with sigwait and raises the flag. Long runs
// (sweeps) check the flag, stop handing out work and keep what finished. No handler and no global
// state; the signal mask is restored when the guard goes. A second signal ends the process.
#pragma once

#include <signal.h>

#include <atomic>
#include <thread>

namespace dtsim::planning {

class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  const std::atomic<bool>& flag() const { return interrupted_; }
  bool interrupted() const { return interrupted_.load(); }

 private:
  sigset_t previous_{};
  sigset_t set_{};
  std::atomic<bool> interrupted_{false};
  std::atomic<bool> closing_{false};
  std::thread watcher_;
};

}  // namespace dtsim::planning
