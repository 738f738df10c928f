#include "workloads/layout.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {
const char* dim_name(int d) {
  static constexpr const char* names[] = {"tp", "cp", "dp", "pp"};
  return names[d];
}
}  // namespace

Expected<Layout> Layout::make(const ParallelSpec& p, int gpus) {
  Layout l;
  l.gpus_ = gpus;
  for (auto [v, name] : {std::pair{p.tp, "tp"}, std::pair{p.pp, "pp"}, std::pair{p.cp, "cp"}, std::pair{p.ep, "ep"}}) {
    if (v < 1) return Error(fmt::format("{} must be at least 1, got {}", name, v), std::string("parallel.") + name);
  }
  if (p.dp < 0) return Error(fmt::format("dp must be at least 1 (or 0 to derive it), got {}", p.dp), "parallel.dp");
  const long long model = static_cast<long long>(p.tp) * p.pp * p.cp;
  int dp = p.dp;
  if (dp == 0) {
    if (gpus % model != 0) {
      return Error(fmt::format("tp x pp x cp = {} x {} x {} = {} does not divide the {} GPUs", p.tp, p.pp, p.cp, model, gpus),
                   "parallel");
    }
    dp = static_cast<int>(gpus / model);
  }
  if (model * dp != gpus) {
    return Error(fmt::format("tp x pp x cp x dp = {} x {} x {} x {} = {} but the cluster has {} GPUs", p.tp, p.pp, p.cp, dp,
                             model * dp, gpus),
                 "parallel");
  }
  if (dp % p.ep != 0) {
    return Error(fmt::format("ep ({}) must divide the data-parallel size ({})", p.ep, dp), "parallel.ep");
  }
  l.ep_ = p.ep;
  l.size_ = {p.tp, p.cp, dp, p.pp};
  // Strides from the order, innermost first.
  std::array<int, 4> pos{-1, -1, -1, -1};
  int next = 0;
  std::size_t start = 0;
  while (start <= p.order.size()) {
    const std::size_t dash = p.order.find('-', start);
    const std::string name = p.order.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    int d = -1;
    for (int i = 0; i < 4; ++i) {
      if (name == dim_name(i)) d = i;
    }
    if (d < 0 || pos[static_cast<std::size_t>(d)] >= 0 || next >= 4) {
      return Error(fmt::format("'{}' is not an order of tp, cp, dp and pp such as tp-cp-dp-pp", p.order), "parallel.order");
    }
    pos[static_cast<std::size_t>(d)] = next++;
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (next != 4) return Error(fmt::format("'{}' must name tp, cp, dp and pp once each", p.order), "parallel.order");
  l.order_ = p.order;
  int stride = 1;
  for (int k = 0; k < 4; ++k) {
    for (int d = 0; d < 4; ++d) {
      if (pos[static_cast<std::size_t>(d)] == k) {
        l.stride_[static_cast<std::size_t>(d)] = stride;
        stride *= l.size_[static_cast<std::size_t>(d)];
      }
    }
  }
  return l;
}

int Layout::rank(const Coords& c) const {
  return c.tp * stride_[0] + c.cp * stride_[1] + c.dp * stride_[2] + c.pp * stride_[3];
}

Coords Layout::coords(int r) const {
  Coords c;
  c.tp = (r / stride_[0]) % size_[0];
  c.cp = (r / stride_[1]) % size_[1];
  c.dp = (r / stride_[2]) % size_[2];
  c.pp = (r / stride_[3]) % size_[3];
  return c;
}

std::vector<int> Layout::group(Dim d, const Coords& c) const {
  std::vector<int> out;
  Coords x = c;
  for (int i = 0; i < size(d); ++i) {
    switch (d) {
      case Dim::tp: x.tp = i; break;
      case Dim::cp: x.cp = i; break;
      case Dim::dp: x.dp = i; break;
      case Dim::pp: x.pp = i; break;
    }
    out.push_back(rank(x));
  }
  return out;
}

std::vector<int> Layout::ep_group(const Coords& c) const {
  std::vector<int> out;
  Coords x = c;
  const int base = (c.dp / ep_) * ep_;
  for (int i = 0; i < ep_; ++i) {
    x.dp = base + i;
    out.push_back(rank(x));
  }
  return out;
}

std::vector<int> Layout::expert_dp_group(const Coords& c) const {
  std::vector<int> out;
  Coords x = c;
  for (int i = c.dp % ep_; i < dp(); i += ep_) {
    x.dp = i;
    out.push_back(rank(x));
  }
  return out;
}

std::vector<int> Layout::grad_group(const Coords& c) const {
  std::vector<int> out;
  Coords x = c;
  for (int k = 0; k < cp(); ++k) {
    x.cp = k;
    for (int r : group(Dim::dp, x)) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> Layout::expert_grad_group(const Coords& c) const {
  std::vector<int> out;
  Coords x = c;
  for (int k = 0; k < cp(); ++k) {
    x.cp = k;
    for (int r : expert_dp_group(x)) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Layout::describe() const {
  std::string s = fmt::format("tp {} x pp {} x cp {} x dp {}", tp(), pp(), cp(), dp());
  if (ep_ > 1) s += fmt::format(" (ep {})", ep_);
  return s + fmt::format(", order {}", order_);
}

}  // namespace dtsim::workloads
