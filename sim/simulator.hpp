// Discrete-event simulator: an object, not a singleton, so sweeps and tests can run many at once.
// Events are ordered by (time, sequence number): equal-time events run in the order they were
// scheduled, so a run is a pure function of its inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/units.hpp"

namespace dtsim {

// Handle of a scheduled event, for cancel(). Stale handles (event already run or cancelled) are
// recognised and ignored.
struct EventId {
  std::uint32_t slot = UINT32_MAX;
  std::uint32_t generation = 0;
  bool valid() const { return slot != UINT32_MAX; }
};

class Simulator {
 public:
  using Callback = std::function<void()>;

  Simulator() = default;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  Time now() const { return now_; }

  // Schedules `cb` at absolute time `at` (>= now()).
  EventId schedule_at(Time at, Callback cb);
  // Schedules `cb` after `delay` (>= 0) from now().
  EventId schedule_in(Time delay, Callback cb) { return schedule_at(now_ + delay, std::move(cb)); }
  // Cancels a pending event. Returns false if it already ran or was cancelled.
  bool cancel(EventId id);

  // Runs events until none are left or stop() is called.
  void run();
  // Runs events with time <= `until`, then sets now() to `until` (if it is later than now()).
  void run_until(Time until);
  // Makes run()/run_until() return after the current event.
  void stop() { stopped_ = true; }

  std::uint64_t events_executed() const { return executed_; }
  std::size_t pending() const { return pending_; }

 private:
  struct Entry {
    std::int64_t time;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  struct Slot {
    Callback fn;
    std::uint32_t generation = 0;
    bool live = false;
  };

  static bool later(const Entry& a, const Entry& b) {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
  void push(Entry e);
  Entry pop();
  bool step(Time limit);

  Time now_ = Time::zero();
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
  std::size_t pending_ = 0;
  bool stopped_ = false;
  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
};

}  // namespace dtsim
