#include "sim/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

std::vector<LinkUse> merge_uses(std::vector<LinkUse> uses) {
  std::sort(uses.begin(), uses.end());
  std::vector<LinkUse> out;
  out.reserve(uses.size());
  for (const LinkUse& u : uses) {
    if (u.count == 0) continue;
    if (!out.empty() && out.back().link == u.link) out.back().count += u.count;
    else out.push_back(u);
  }
  return out;
}

FlowNetwork::FlowNetwork(Simulator& sim, std::unique_ptr<SharingModel> model)
    : sim_(sim), model_(std::move(model)) {
  DTSIM_ASSERT(model_ != nullptr, "FlowNetwork needs a sharing model");
}

LinkId FlowNetwork::add_link(Bandwidth capacity, Time latency) {
  DTSIM_ASSERT(capacity.bytes_per_s() > 0, "link capacity must be positive");
  DTSIM_ASSERT(latency >= Time::zero(), "link latency must not be negative");
  Link l;
  l.capacity = capacity.bytes_per_s();
  l.latency = latency;
  l.last = sim_.now();
  links_.push_back(std::move(l));
  return LinkId{static_cast<std::uint32_t>(links_.size() - 1)};
}

std::uint32_t FlowNetwork::allocate_flow() {
  if (!free_flows_.empty()) {
    const std::uint32_t f = free_flows_.back();
    free_flows_.pop_back();
    return f;
  }
  flows_.emplace_back();
  return static_cast<std::uint32_t>(flows_.size() - 1);
}

FlowId FlowNetwork::start(FlowSpec spec) {
  const std::uint32_t f = allocate_flow();
  Flow& fl = flows_[f];
  for (std::size_t k = 0; k < spec.uses.size(); ++k) {
    DTSIM_ASSERT(spec.uses[k].link.value < links_.size(), "flow uses an unknown link");
    DTSIM_ASSERT(spec.uses[k].count > 0, "flow uses a link zero times");
    DTSIM_ASSERT(k == 0 || spec.uses[k - 1].link < spec.uses[k].link, "flow uses must be merged (merge_uses)");
  }
  DTSIM_ASSERT(spec.bytes >= Bytes(0), "flow size must not be negative");
  fl.uses = std::move(spec.uses);
  fl.pos.assign(fl.uses.size(), 0);
  fl.remaining = spec.bytes.as_double();
  fl.rate = 0.0;
  fl.cap = spec.cap.is_zero() ? kInf : spec.cap.bytes_per_s();
  fl.on_complete = std::move(spec.on_complete);
  fl.live = true;
  fl.moving = false;
  fl.done_event = EventId{};
  ++active_;
  const FlowId id{f, fl.generation};
  if (spec.latency > Time::zero()) {
    sim_.schedule_in(spec.latency, [this, f] { activate(f); });
  } else {
    activate(f);
  }
  return id;
}

FlowId FlowNetwork::start_path(std::span<const LinkId> path, Bytes bytes, std::function<void()> on_complete) {
  FlowSpec spec;
  Time latency = Time::zero();
  spec.uses.reserve(path.size());
  for (LinkId l : path) {
    latency += links_[l.value].latency;
    spec.uses.push_back(LinkUse{l, 1});
  }
  spec.uses = merge_uses(std::move(spec.uses));
  spec.bytes = bytes;
  spec.latency = latency;
  spec.on_complete = std::move(on_complete);
  return start(std::move(spec));
}

void FlowNetwork::activate(std::uint32_t f) {
  Flow& fl = flows_[f];
  fl.last = sim_.now();
  if (fl.uses.empty() || fl.remaining <= 0.0) {
    // Nothing to share: completes at once (through the queue, never re-entrantly).
    fl.done_at = sim_.now();
    fl.done_event = sim_.schedule_in(Time::zero(), [this, f] { finish(f); });
    return;
  }
  attach(f);
}

void FlowNetwork::settle_link(Link& l) {
  const Time now = sim_.now();
  if (now > l.last) {
    l.carried += l.load * (now - l.last).seconds();
    l.last = now;
  }
}

void FlowNetwork::attach(std::uint32_t f) {
  Flow& fl = flows_[f];
  fl.moving = true;
  for (std::size_t k = 0; k < fl.uses.size(); ++k) {
    const std::uint32_t l = fl.uses[k].link.value;
    Link& link = links_[l];
    settle_link(link);
    fl.pos[k] = static_cast<std::uint32_t>(link.flows.size());
    link.flows.push_back(f);
    mark_dirty(l);
  }
  if (!model_->couples_flows()) dirty_flows_.push_back(f);
}

void FlowNetwork::detach(std::uint32_t f) {
  Flow& fl = flows_[f];
  for (std::size_t k = 0; k < fl.uses.size(); ++k) {
    const std::uint32_t l = fl.uses[k].link.value;
    Link& link = links_[l];
    settle_link(link);
    link.load = std::max(0.0, link.load - fl.rate * fl.uses[k].count);
    if (link.flows.size() == 1) link.load = 0.0;  // no rounding residue on an idle link
    const std::uint32_t p = fl.pos[k];
    const std::uint32_t moved = link.flows.back();
    link.flows[p] = moved;
    link.flows.pop_back();
    if (moved != f) {
      Flow& mf = flows_[moved];
      const auto it = std::lower_bound(mf.uses.begin(), mf.uses.end(), LinkUse{LinkId{l}, 0},
                                       [](const LinkUse& a, const LinkUse& b) { return a.link < b.link; });
      mf.pos[static_cast<std::size_t>(it - mf.uses.begin())] = p;
    }
    mark_dirty(l);
  }
  fl.moving = false;
}

void FlowNetwork::finish(std::uint32_t f) {
  Flow& fl = flows_[f];
  if (fl.moving) detach(f);
  fl.remaining = 0.0;
  fl.rate = 0.0;
  fl.live = false;
  fl.done_event = EventId{};
  ++fl.generation;
  std::function<void()> cb = std::move(fl.on_complete);
  fl.on_complete = nullptr;
  fl.uses.clear();
  fl.pos.clear();
  free_flows_.push_back(f);
  --active_;
  if (cb) cb();
}

void FlowNetwork::mark_dirty(std::uint32_t link) {
  if (model_->couples_flows()) dirty_links_.push_back(link);
  if (!solve_pending_) {
    solve_pending_ = true;
    sim_.schedule_in(Time::zero(), [this] { solve_dirty(); });
  }
}

void FlowNetwork::solve_dirty() {
  solve_pending_ = false;
  ++epoch_;
  component_flows_.clear();
  component_links_.clear();
  if (model_->couples_flows()) {
    // Breadth-first search over link -> flows -> links from the links that changed.
    queue_.clear();
    for (std::uint32_t l : dirty_links_) {
      if (links_[l].mark != epoch_) {
        links_[l].mark = epoch_;
        queue_.push_back(l);
      }
    }
    for (std::size_t qi = 0; qi < queue_.size(); ++qi) {
      const std::uint32_t l = queue_[qi];
      component_links_.push_back(l);
      for (std::uint32_t f : links_[l].flows) {
        Flow& fl = flows_[f];
        if (fl.mark == epoch_) continue;
        fl.mark = epoch_;
        component_flows_.push_back(f);
        for (const LinkUse& u : fl.uses) {
          Link& l2 = links_[u.link.value];
          if (l2.mark != epoch_) {
            l2.mark = epoch_;
            queue_.push_back(u.link.value);
          }
        }
      }
    }
  } else {
    for (std::uint32_t f : dirty_flows_) {
      Flow& fl = flows_[f];
      if (!fl.moving || fl.mark == epoch_) continue;
      fl.mark = epoch_;
      component_flows_.push_back(f);
      for (const LinkUse& u : fl.uses) {
        Link& l2 = links_[u.link.value];
        if (l2.mark != epoch_) {
          l2.mark = epoch_;
          component_links_.push_back(u.link.value);
        }
      }
    }
  }
  dirty_links_.clear();
  dirty_flows_.clear();
  if (component_flows_.empty()) return;
  ++solves_;
  last_component_flows_ = component_flows_.size();

  const Time now = sim_.now();
  problem_.clear();
  for (std::uint32_t i = 0; i < component_links_.size(); ++i) {
    Link& link = links_[component_links_[i]];
    settle_link(link);
    link.local = i;
    problem_.capacity.push_back(link.capacity);
  }
  for (std::uint32_t i = 0; i < component_flows_.size(); ++i) {
    Flow& fl = flows_[component_flows_[i]];
    fl.local = i;
    if (now > fl.last) {
      fl.remaining = std::max(0.0, fl.remaining - fl.rate * (now - fl.last).seconds());
      fl.last = now;
    }
    for (const LinkUse& u : fl.uses) {
      problem_.use_link.push_back(links_[u.link.value].local);
      problem_.use_count.push_back(static_cast<double>(u.count));
    }
    problem_.flow_begin.push_back(static_cast<std::uint32_t>(problem_.use_link.size()));
    problem_.flow_cap.push_back(fl.cap);
  }
  model_->solve(problem_);

  for (std::uint32_t l : component_links_) links_[l].load = 0.0;
  for (std::uint32_t i = 0; i < component_flows_.size(); ++i) {
    const std::uint32_t f = component_flows_[i];
    apply_rate(f, problem_.rate[i]);
    const Flow& fl = flows_[f];
    for (const LinkUse& u : fl.uses) links_[u.link.value].load += fl.rate * u.count;
  }
}

void FlowNetwork::apply_rate(std::uint32_t f, double rate) {
  Flow& fl = flows_[f];
  if (rate == fl.rate && fl.done_event.valid()) return;  // unchanged: its completion stands
  DTSIM_ASSERT(rate > 0.0, "a flow got a zero rate");
  fl.rate = rate;
  const Time at = sim_.now() + (std::isinf(rate) ? Time::zero() : transfer_time(fl.remaining, Bandwidth::bytes_per_s(rate)));
  if (fl.done_event.valid() && at == fl.done_at) return;  // the new rate lands on the same picosecond
  sim_.cancel(fl.done_event);
  fl.done_at = at;
  fl.done_event = sim_.schedule_at(at, [this, f] { finish(f); });
}

Bandwidth FlowNetwork::rate(FlowId id) const {
  if (id.index >= flows_.size()) return Bandwidth{};
  const Flow& fl = flows_[id.index];
  if (fl.generation != id.generation || !fl.moving) return Bandwidth{};
  return Bandwidth::bytes_per_s(fl.rate);
}

double FlowNetwork::carried_bytes(LinkId l) const {
  const Link& link = links_[l.value];
  return link.carried + link.load * (sim_.now() - link.last).seconds();
}

}  // namespace dtsim
