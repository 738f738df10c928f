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
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.fn = std::move(cb);
  s.live = true;
  push(Entry{at.picoseconds(), next_seq_++, slot});
  ++pending_;
  return EventId{slot, s.generation};
}

bool Simulator::cancel(EventId id) {
  if (!id.valid() || id.slot >= slots_.size()) return false;
  Slot& s = slots_[id.slot];
  if (!s.live || s.generation != id.generation) return false;
  s.live = false;
  s.fn = nullptr;  // release captured state now; the heap entry is skipped when popped
  --pending_;
  return true;
}

void Simulator::push(Entry e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), later);
}

Simulator::Entry Simulator::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  Entry e = heap_.back();
  heap_.pop_back();
  return e;
}

// Runs the next live event if its time is <= limit. Returns false when there is none.
bool Simulator::step(Time limit) {
  while (!heap_.empty()) {
    if (heap_.front().time > limit.picoseconds()) return false;
    const Entry e = pop();
    Slot& s = slots_[e.slot];
    const bool live = s.live;
    Callback fn;
    if (live) {
      fn = std::move(s.fn);
      s.fn = nullptr;
      s.live = false;
      --pending_;
    }
    ++s.generation;  // invalidates handles to this slot before it is reused
    free_slots_.push_back(e.slot);
    if (!live) continue;
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
