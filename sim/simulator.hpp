// Discrete-event simulator: an object, not a singleton, so sweeps and tests can run many at once.
// Events are ordered by (time, sequence number): equal-time events run in the order they were
// scheduled, so a run is a pure function of its inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/callback.hpp"
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
  using Callback = dtsim::Callback;

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
  // 16 bytes: the time, and the sequence number (high 40 bits) with the slot (low 24 bits).
  struct Entry {
    std::int64_t time;
    std::uint64_t seqslot;
    std::uint32_t slot() const { return static_cast<std::uint32_t>(seqslot & kSlotMask); }
  };
  static constexpr std::uint64_t kSlotBits = 24;
  static constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << kSlotBits) - 1;

  struct Slot {
    Callback fn;
    std::uint32_t generation = 0;
    bool live = false;
  };

  // The queue is a radix heap over event times. Times leave in increasing order (time never goes
  // back), so an entry lives in the bucket of the highest bit in which its time differs from the
  // current minimum and only ever moves to lower buckets: O(1) amortized per event, whatever the
  // queue depth. Bucket 0 holds the entries at the current minimum time, consumed front to back in
  // sequence order (a redistributed bucket is sorted by sequence; entries scheduled at that time
  // later have larger sequence numbers anyway).
  static constexpr int kBuckets = 65;
  static int bucket_of(std::int64_t t, std::int64_t last) {
    const auto x = static_cast<std::uint64_t>(t ^ last);
    return x == 0 ? 0 : 64 - __builtin_clzll(x);
  }
  void push(Entry e);
  // Takes out the next entry if its time is <= limit.
  bool pop_until(Time limit, Entry& out);
  // Drops cancelled entries when they outnumber live ones (flow re-solves reschedule often).
  void compact();
  bool step(Time limit);

  Time now_ = Time::zero();
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
  std::size_t pending_ = 0;            // live events
  std::size_t queued_ = 0;             // entries in the queue, cancelled ones included
  std::size_t cancelled_in_queue_ = 0;
  bool stopped_ = false;
  std::vector<Entry> buckets_[kBuckets];
  std::int64_t bucket_min_[kBuckets] = {};  // smallest time in each bucket (valid when non-empty)
  std::uint64_t nonempty_ = 0;               // bit b set when bucket b (1..64) has entries
  std::int64_t last_ = 0;                    // the time of bucket 0
  std::size_t head0_ = 0;                    // next entry of bucket 0
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
};

}  // namespace dtsim
