// The communication model the collective fit moves (fit_collective_sim.hpp).
#include "calibrate/fit_collective_sim.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "config/hardware.hpp"
#include "config/profile.hpp"

namespace dtsim::calibrate::detail {

Expected<std::unique_ptr<CollectiveSim>> CollectiveSim::make(const std::string& node, int nodes, int gpus_per_node) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{node, nodes, gpus_per_node}, ctx);
  if (!spec) return Error(ctx.diagnostics.empty() ? "cannot build the cluster" : ctx.diagnostics.items().front().message);
  auto sim = std::make_unique<CollectiveSim>();
  sim->base_ = *spec;
  sim->ranks_ = nodes * gpus_per_node;
  const hw::NodeSpec& ns = spec->groups.front().node;
  sim->intra_link_ = ns.nvlink && ns.nvlink_topology != hw::NvlinkTopology::none ? ns.nvlink->name : ns.pcie.name;
  sim->nic_link_ = spec->fabric.nic ? spec->fabric.nic->name : (ns.nic ? ns.nic->name : "");
  auto t = sim->topology(CommState{});
  if (!t) return t.error();
  return sim;
}

double CollectiveSim::link_default(const std::string& name) const {
  const hw::NodeSpec& ns = base_.groups.front().node;
  for (const auto* l : {ns.nvlink ? &*ns.nvlink : nullptr, &ns.pcie, ns.nic ? &*ns.nic : nullptr, ns.cpu_link ? &*ns.cpu_link : nullptr,
                        base_.fabric.nic ? &*base_.fabric.nic : nullptr, base_.fabric.link ? &*base_.fabric.link : nullptr}) {
    if (l && l->name == name) return l->efficiency;
  }
  return 1.0;
}

std::vector<std::pair<comm::Algo, comm::Protocol>> CollectiveSim::candidates(CollOp op, const comm::Selection& sel) {
  auto topo = topology(CommState{});
  hw::Router router(**topo);
  comm::Planner planner(**topo, router, comm::CommParams::nccl_defaults());
  const comm::CollectiveRequest req = request(op, 0, sel);
  std::vector<std::pair<comm::Algo, comm::Protocol>> out;
  for (const auto& c : planner.candidates(request(op, 0, comm::Selection{}))) {
    if (comm::selection_allows(req, c.first, c.second)) out.push_back(c);
  }
  return out;
}

Expected<double> CollectiveSim::time(const CommState& st, CollOp op, std::int64_t bytes, comm::Algo a, comm::Protocol p) {
  comm::Selection one;
  one.algo = a;
  one.protocol = p;
  return time(st, op, bytes, one);
}

Expected<double> CollectiveSim::time(const CommState& st, CollOp op, std::int64_t bytes, const comm::Selection& sel, std::string* chosen) {
  auto topo = topology(st);
  if (!topo) return topo.error();
  hw::Router router(**topo);
  comm::Planner planner(**topo, router, st.comm);
  auto plan = planner.plan(request(op, bytes, sel));
  if (!plan) return plan.error();
  if (chosen) *chosen = fmt::format("{}/{}", comm::to_string(plan->algo), comm::to_string(plan->protocol));
  return comm::simulate_alone(**topo, *plan).seconds();
}

comm::CollectiveRequest CollectiveSim::request(CollOp op, std::int64_t bytes, const comm::Selection& sel) const {
  comm::CollectiveRequest req;
  req.op = op;
  req.size = Bytes(bytes);
  for (int i = 0; i < ranks_; ++i) req.ranks.push_back(i);
  req.select(sel);
  return req;
}

Expected<hw::Topology*> CollectiveSim::topology(const CommState& st) {
  std::string key;
  for (const auto& [n, e] : st.link_eff) key += fmt::format("{}={:.17g};", n, e);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    hw::ClusterSpec spec = base_;
    config::HardwareProfile prof;
    for (const auto& [n, e] : st.link_eff) prof.links[n].efficiency = e;
    config::apply_profile(prof, spec);
    auto t = hw::Topology::build(spec);
    if (!t) return t.error();
    if (cache_.size() > 64) cache_.clear();
    it = cache_.emplace(key, std::make_unique<hw::Topology>(std::move(*t))).first;
  }
  return it->second.get();
}

Time* time_field(comm::CommParams& p, const std::string& name) {
  if (name == "nvls.latency") return &p.nvls_latency;
  if (name == "nvls.net_latency") return &p.nvls_net_latency;
  for (comm::Algo a : {comm::Algo::ring, comm::Algo::tree}) {
    for (comm::Protocol pr : comm::kAllProtocols) {
      const std::string prefix = fmt::format("{}.{}.", comm::to_string(a), comm::to_string(pr));
      if (name == prefix + "base_latency") return &p.lat(a, pr).base;
      if (name == prefix + "step_latency.net") return &p.lat(a, pr).step[static_cast<std::size_t>(comm::Transport::net)];
    }
  }
  return nullptr;
}

double* fraction_field(comm::CommParams& p, const std::string& name) {
  if (name == "nvls.efficiency") return &p.nvls_efficiency;
  if (name == "nvls.tree_factor") return &p.nvls_tree_factor;
  if (name == "ring.LL.bandwidth_factor.allreduce") return &p.ring_ll_allreduce;
  if (name == "ring.LL.bandwidth_factor.other") return &p.ring_ll_other;
  if (name == "ring.LL128.bandwidth_factor") return &p.ring_ll128;
  if (name == "tree.Simple.bandwidth_factor") return &p.tree_simple;
  if (name == "tree.LL.bandwidth_factor") return &p.tree_ll;
  if (name == "tree.LL128.bandwidth_factor") return &p.tree_ll128;
  if (name == "tree.LL128.bandwidth_factor.multinode") return &p.tree_ll128_multinode;
  return nullptr;
}

double get_knob(CommState& st, const Knob& k, const CollectiveSim& sim) {
  switch (k.kind) {
    case Knob::Kind::time: return time_field(st.comm, k.name)->seconds();
    case Knob::Kind::fraction: return *fraction_field(st.comm, k.name);
    case Knob::Kind::link: {
      const auto it = st.link_eff.find(k.name);
      return it == st.link_eff.end() ? sim.link_default(k.name) : it->second;
    }
  }
  return 0;
}

void set_knob(CommState& st, const Knob& k, double v) {
  switch (k.kind) {
    case Knob::Kind::time: *time_field(st.comm, k.name) = Time::from_seconds(std::max(0.0, v)); break;
    case Knob::Kind::fraction: *fraction_field(st.comm, k.name) = std::clamp(v, 1e-3, 1.0); break;
    case Knob::Kind::link: st.link_eff[k.name] = std::clamp(v, 1e-3, 1.0); break;
  }
}

std::pair<Knob, Knob> knobs_of(comm::Algo a, comm::Protocol p, CollOp op, bool multinode, const CollectiveSim& sim) {
  const std::string P(comm::to_string(p));
  Knob lat, bw;
  lat.kind = Knob::Kind::time;
  if (a == comm::Algo::nvls) {
    // Across nodes, the NVLS tree: its per-node latency and the ratio that sets both its NVLink
    // and its network rate.
    lat.name = multinode ? "nvls.net_latency" : "nvls.latency";
    bw = Knob{Knob::Kind::fraction, multinode ? "nvls.tree_factor" : "nvls.efficiency"};
    return {lat, bw};
  }
  const std::string table = a == comm::Algo::tree ? "tree" : "ring";
  lat.name = multinode ? fmt::format("{}.{}.step_latency.net", table, P) : fmt::format("{}.{}.base_latency", table, P);
  if (a == comm::Algo::tree) {
    // Tree LL128 has its own rate across nodes (comm::Planner::bandwidth_factor).
    const bool own = multinode && p == comm::Protocol::ll128;
    bw = Knob{Knob::Kind::fraction, fmt::format("tree.{}.bandwidth_factor{}", P, own ? ".multinode" : "")};
  } else if (p == comm::Protocol::ll) {
    const bool ar = multinode || op == CollOp::allreduce || op == CollOp::reduce;
    bw = Knob{Knob::Kind::fraction, ar ? "ring.LL.bandwidth_factor.allreduce" : "ring.LL.bandwidth_factor.other"};
  } else if (p == comm::Protocol::ll128) {
    bw = Knob{Knob::Kind::fraction, "ring.LL128.bandwidth_factor"};
  } else {
    bw = Knob{Knob::Kind::link, multinode ? sim.nic_link() : sim.intra_link()};
  }
  return {lat, bw};
}

}  // namespace dtsim::calibrate::detail
