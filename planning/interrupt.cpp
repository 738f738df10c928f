#include "planning/interrupt.hpp"

#include <pthread.h>

#include <csignal>

namespace dtsim::planning {

InterruptGuard::InterruptGuard() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  watcher_ = std::thread([this] {
    while (true) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (closing_.load()) return;
      if (interrupted_.exchange(true)) {
        // A second signal: the user insists. Die of it as if nothing had caught it.
        ::signal(sig, SIG_DFL);
        pthread_sigmask(SIG_UNBLOCK, &set_, nullptr);
        ::raise(sig);
      }
    }
  });
}

InterruptGuard::~InterruptGuard() {
  closing_.store(true);
  pthread_kill(watcher_.native_handle(), SIGTERM);  // wakes sigwait; consumed there
  watcher_.join();
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace dtsim::planning
