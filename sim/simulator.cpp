#include "sim/simulator.hpp"

#include <algorithm>

namespace dtsim {

EventId Simulator::schedule_at(Time at, Callback cb) {
  DTSIM_ASSERT(at >= now_, "cannot schedule an event in the past");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    DTSIM_ASSERT(slot <= kSlotMask, "more than 16 million events pending");
    slots_.emplace_back();
  }
  DTSIM_ASSERT(next_seq_ < (std::uint64_t{1} << (64 - kSlotBits)), "event sequence numbers exhausted");
  Slot& s = slots_[slot];
  s.fn = std::move(cb);
  s.live = true;
  push(Entry{at.picoseconds(), (next_seq_++ << kSlotBits) | slot});
  ++pending_;
  return EventId{slot, s.generation};
}

bool Simulator::cancel(EventId id) {
  if (!id.valid() || id.slot >= slots_.size()) return false;
  Slot& s = slots_[id.slot];
  if (!s.live || s.generation != id.generation) return false;
  s.live = false;
  s.fn.reset();  // release captured state now; the queue entry is skipped when taken out
  --pending_;
  ++cancelled_in_queue_;
  if (cancelled_in_queue_ > 4096 && cancelled_in_queue_ * 2 > queued_) compact();
  return true;
}

void Simulator::push(Entry e) {
  DTSIM_ASSERT(e.time >= last_, "events must not be queued before the current minimum time");
  const int b = bucket_of(e.time, last_);
  std::vector<Entry>& v = buckets_[b];
  if (b != 0) {
    if (v.empty() || e.time < bucket_min_[b]) bucket_min_[b] = e.time;
    nonempty_ |= std::uint64_t{1} << (b - 1);
  }
  v.push_back(e);
  ++queued_;
}

bool Simulator::pop_until(Time limit, Entry& out) {
  if (queued_ == 0) return false;
  std::vector<Entry>& zero = buckets_[0];
  if (head0_ == zero.size()) {
    zero.clear();
    head0_ = 0;
    const int b = 1 + __builtin_ctzll(nonempty_);  // queued_ > 0, so some bucket is non-empty
    std::vector<Entry>& src = buckets_[b];
    const std::int64_t m = bucket_min_[b];
    if (m > limit.picoseconds()) return false;
    // Commit the new minimum and move the bucket's entries down to where they now belong.
    last_ = m;
    nonempty_ &= ~(std::uint64_t{1} << (b - 1));
    for (const Entry& e : src) {
      const int nb = bucket_of(e.time, last_);
      std::vector<Entry>& dst = buckets_[nb];
      if (nb != 0) {
        if (dst.empty() || e.time < bucket_min_[nb]) bucket_min_[nb] = e.time;
        nonempty_ |= std::uint64_t{1} << (nb - 1);
      }
      dst.push_back(e);
    }
    src.clear();
    if (zero.size() > 1) {
      std::sort(zero.begin(), zero.end(), [](const Entry& a, const Entry& c) { return a.seqslot < c.seqslot; });
    }
  }
  if (zero[head0_].time > limit.picoseconds()) return false;
  out = zero[head0_++];
  --queued_;
  return true;
}

void Simulator::compact() {
  buckets_[0].erase(buckets_[0].begin(), buckets_[0].begin() + static_cast<std::ptrdiff_t>(head0_));
  head0_ = 0;
  for (int b = 0; b < kBuckets; ++b) {
    std::vector<Entry>& v = buckets_[b];
    std::size_t kept = 0;
    for (const Entry& e : v) {
      Slot& s = slots_[e.slot()];
      if (s.live) {
        v[kept++] = e;
      } else {
        ++s.generation;
        free_slots_.push_back(e.slot());
      }
    }
    v.resize(kept);
    if (b == 0) continue;
    if (kept == 0) {
      nonempty_ &= ~(std::uint64_t{1} << (b - 1));
    } else {
      bucket_min_[b] = v.front().time;
      for (const Entry& e : v) bucket_min_[b] = std::min(bucket_min_[b], e.time);
    }
  }
  queued_ = pending_;
  cancelled_in_queue_ = 0;
}

// Runs the next live event if its time is <= limit. Returns false when there is none.
bool Simulator::step(Time limit) {
  Entry e{};
  while (pop_until(limit, e)) {
    Slot& s = slots_[e.slot()];
    ++s.generation;  // invalidates handles to this slot before it is reused
    free_slots_.push_back(e.slot());
    if (!s.live) {
      --cancelled_in_queue_;
      continue;
    }
    s.live = false;
    --pending_;
    Callback fn = std::move(s.fn);  // the callback may schedule events and grow slots_
    now_ = Time::ps(e.time);
    ++executed_;
    fn();
    return true;
  }
  return false;
}

void Simulator::run() {
  stopped_ = false;
  while (!stopped_ && step(Time::max())) {
  }
}

void Simulator::run_until(Time until) {
  stopped_ = false;
  while (!stopped_ && step(until)) {
  }
  if (!stopped_ && until > now_) now_ = until;
}

}  // namespace dtsim
