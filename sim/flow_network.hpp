// Flow-level (fluid) network model in the SimGrid style: links are resources with a capacity and
// a latency; a flow is an action with remaining bytes that moves at a rate set by a sharing model.
// Rates are re-solved only for the connected component of links and flows that a start or an end
// touched, and all changes at one instant are batched into one solve.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "sim/sharing.hpp"
#include "sim/simulator.hpp"
#include "sim/units.hpp"

namespace dtsim {

struct LinkId {
  std::uint32_t value = 0;
  auto operator<=>(const LinkId&) const = default;
};

// A link used `count` times by one flow (a coupled flow crosses some links more than once).
struct LinkUse {
  LinkId link;
  std::uint32_t count = 1;
  auto operator<=>(const LinkUse&) const = default;
};

// Sorts by link and merges repeated links into counts.
std::vector<LinkUse> merge_uses(std::vector<LinkUse> uses);

struct FlowSpec {
  std::vector<LinkUse> uses;    // merged (one entry per link)
  Bytes bytes;                  // bytes moved on each use of each link
  Time latency;                 // paid once, before the data moves
  Bandwidth cap;                // zero: no cap other than the links
  std::function<void()> on_complete;
};

struct FlowId {
  std::uint32_t index = UINT32_MAX;
  std::uint32_t generation = 0;
};

class FlowNetwork {
 public:
  FlowNetwork(Simulator& sim, std::unique_ptr<SharingModel> model);
  FlowNetwork(const FlowNetwork&) = delete;
  FlowNetwork& operator=(const FlowNetwork&) = delete;

  LinkId add_link(Bandwidth capacity, Time latency);
  std::size_t link_count() const { return links_.size(); }
  Bandwidth capacity(LinkId l) const { return Bandwidth::bytes_per_s(links_[l.value].capacity); }
  Time latency(LinkId l) const { return links_[l.value].latency; }

  // Starts a flow now. `on_complete` runs when its last byte has arrived.
  FlowId start(FlowSpec spec);
  // A point-to-point flow along `path`; its latency is the sum of the links' latencies.
  FlowId start_path(std::span<const LinkId> path, Bytes bytes, std::function<void()> on_complete);

  // Current rate of an active flow (0 during its latency phase or once finished).
  Bandwidth rate(FlowId f) const;
  std::size_t active_flows() const { return active_; }
  // Bytes carried so far by a link (counting each use), up to now().
  double carried_bytes(LinkId l) const;
  std::uint64_t solves() const { return solves_; }
  // Size of the most recent solve, in flows (shows that solves stay local).
  std::size_t last_component_flows() const { return last_component_flows_; }
  const SharingModel& model() const { return *model_; }
  Simulator& simulator() { return sim_; }

 private:
  struct Link {
    double capacity;
    Time latency;
    std::vector<std::uint32_t> flows;  // active flows crossing this link
    double load = 0.0;                 // sum over its flows of rate x count
    Time last = Time::zero();
    double carried = 0.0;
    std::uint32_t mark = 0;
    std::uint32_t local = 0;           // index inside the current SharingProblem
  };
  struct Flow {
    std::vector<LinkUse> uses;
    std::vector<std::uint32_t> pos;  // index of this flow in links_[uses[k]].flows
    double remaining = 0.0;
    double rate = 0.0;
    double cap = 0.0;                // +inf when uncapped
    Time last = Time::zero();
    Time done_at = Time::zero();     // when done_event fires
    EventId done_event;
    std::function<void()> on_complete;
    std::uint32_t generation = 0;
    std::uint32_t mark = 0;
    std::uint32_t local = 0;         // index inside the current SharingProblem
    bool live = false;               // allocated (latency or data phase)
    bool moving = false;             // in the data phase, attached to its links
  };

  void activate(std::uint32_t f);
  void finish(std::uint32_t f);
  void attach(std::uint32_t f);
  void detach(std::uint32_t f);
  void settle_link(Link& l);
  void mark_dirty(std::uint32_t link);
  void solve_dirty();
  void apply_rate(std::uint32_t f, double rate);
  std::uint32_t allocate_flow();

  Simulator& sim_;
  std::unique_ptr<SharingModel> model_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  std::vector<std::uint32_t> dirty_links_;
  std::vector<std::uint32_t> dirty_flows_;  // for models that do not couple flows
  bool solve_pending_ = false;
  std::uint32_t epoch_ = 0;
  std::size_t active_ = 0;
  std::uint64_t solves_ = 0;
  std::size_t last_component_flows_ = 0;
  SharingProblem problem_;
  std::vector<std::uint32_t> component_flows_, component_links_, queue_;
};

}  // namespace dtsim
