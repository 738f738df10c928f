#include "sim/sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/expected.hpp"

namespace dtsim {

void SharingProblem::clear() {
  capacity.clear();
  flow_begin.assign(1, 0);
  use_link.clear();
  use_count.clear();
  flow_cap.clear();
  rate.clear();
}

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

struct CandidateLater {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    if (a.level != b.level) return a.level > b.level;
    if (a.is_cap != b.is_cap) return a.is_cap > b.is_cap;  // links before caps at equal level
    return a.index > b.index;
  }
};
}  // namespace

void MaxMinSharing::solve(SharingProblem& p) {
  const std::size_t nf = p.flows(), nl = p.links();
  p.rate.assign(nf, 0.0);
  if (nf == 0) return;

  // Transpose flow -> links into link -> flows.
  link_begin_.assign(nl + 1, 0);
  for (std::uint32_t l : p.use_link) ++link_begin_[l + 1];
  for (std::size_t l = 0; l < nl; ++l) link_begin_[l + 1] += link_begin_[l];
  link_flows_.resize(p.use_link.size());
  fill_.assign(link_begin_.begin(), link_begin_.end() - 1);
  for (std::uint32_t f = 0; f < nf; ++f) {
    for (std::uint32_t k = p.flow_begin[f]; k < p.flow_begin[f + 1]; ++k) {
      link_flows_[fill_[p.use_link[k]]++] = f;
    }
  }

  used_.assign(nl, 0.0);
  weight_.assign(nl, 0.0);
  frozen_.assign(nf, 0);
  for (std::size_t k = 0; k < p.use_link.size(); ++k) weight_[p.use_link[k]] += p.use_count[k];

  heap_.clear();
  const CandidateLater later;
  auto push = [&](Candidate c) {
    heap_.push_back(c);
    std::push_heap(heap_.begin(), heap_.end(), later);
  };
  auto level_of = [&](std::uint32_t l) { return std::max(0.0, p.capacity[l] - used_[l]) / weight_[l]; };
  for (std::uint32_t l = 0; l < nl; ++l) {
    if (weight_[l] > 0) push({level_of(l), l, false});
  }
  std::size_t unfrozen = 0;
  for (std::uint32_t f = 0; f < nf; ++f) {
    if (p.flow_begin[f] == p.flow_begin[f + 1]) {
      p.rate[f] = p.flow_cap[f];  // no links: only its cap limits it (possibly +inf)
      frozen_[f] = 1;
      continue;
    }
    ++unfrozen;
    if (std::isfinite(p.flow_cap[f])) push({p.flow_cap[f], f, true});
  }

  auto freeze = [&](std::uint32_t f, double rate) {
    frozen_[f] = 1;
    --unfrozen;
    p.rate[f] = rate;
    // Levels of the flow's other links only rise; their heap entries are refreshed lazily when
    // they reach the top (fewer heap operations than pushing on every change).
    for (std::uint32_t k = p.flow_begin[f]; k < p.flow_begin[f + 1]; ++k) {
      const std::uint32_t l = p.use_link[k];
      used_[l] += rate * p.use_count[k];
      weight_[l] -= p.use_count[k];
      if (weight_[l] <= 1e-9) weight_[l] = 0.0;
    }
  };

  while (unfrozen > 0 && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Candidate c = heap_.back();
    heap_.pop_back();
    if (c.is_cap) {
      if (!frozen_[c.index]) freeze(c.index, c.level);
      continue;
    }
    const std::uint32_t l = c.index;
    if (weight_[l] <= 0) continue;  // every flow on it is frozen already
    const double level = level_of(l);
    if (level > c.level) {  // risen since it was pushed: back in at its current level
      push({level, l, false});
      continue;
    }
    // Link l saturates at this level: freeze every unfrozen flow crossing it.
    for (std::uint32_t k = link_begin_[l]; k < link_begin_[l + 1]; ++k) {
      const std::uint32_t f = link_flows_[k];
      if (!frozen_[f]) freeze(f, level);
    }
  }
  DTSIM_ASSERT(unfrozen == 0, "max-min solver left flows without a rate");
}

void ConstantRateSharing::solve(SharingProblem& p) {
  const std::size_t nf = p.flows();
  p.rate.assign(nf, 0.0);
  for (std::uint32_t f = 0; f < nf; ++f) {
    double r = p.flow_cap[f];
    for (std::uint32_t k = p.flow_begin[f]; k < p.flow_begin[f + 1]; ++k) {
      r = std::min(r, p.capacity[p.use_link[k]] / p.use_count[k]);
    }
    p.rate[f] = r;
  }
}

std::unique_ptr<SharingModel> make_sharing_model(std::string_view name) {
  if (name == "max-min") return std::make_unique<MaxMinSharing>();
  if (name == "constant") return std::make_unique<ConstantRateSharing>();
  return nullptr;
}

}  // namespace dtsim
