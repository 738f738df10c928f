#include "workloads/flows.hpp"

#include <set>

#include <fmt/format.h>

#include "comm/p2p.hpp"

namespace dtsim::workloads {

namespace {
using I = std::int64_t;
// Parameter-server shard s: node s mod nodes, socket s / nodes.
std::pair<int, int> shard_home(int s, int nodes) { return {s % nodes, s / nodes}; }
}  // namespace

const Collective& CommFlows::group_collective(const CommStep& c, int stage, int replica) {
  const std::string key = fmt::format("{}|{}|{}", to_string(c.group), stage, replica);
  return collective(key, c.op, c.bytes, groups(c.group, stage, replica));
}

const Collective& CommFlows::dp_collective(int stage, bool experts, CollOp op, Bytes bytes) {
  return collective(fmt::format("{}|{}", experts ? "edp" : "dp", stage), op, bytes, dp_groups(stage, experts));
}

const Collective& CommFlows::tie_collective(int replica, Bytes bytes) {
  std::vector<std::vector<int>> gs;
  for (int t = 0; t < lay_.tp(); ++t) {
    for (int c = 0; c < lay_.cp(); ++c) {
      for (int d = 0; d < lay_.dp(); ++d) {
        if (!symmetric_ && d != replica) continue;
        gs.push_back({lay_.rank(Coords{t, c, d, 0}), lay_.rank(Coords{t, c, d, lay_.pp() - 1})});
      }
    }
  }
  return collective(fmt::format("tie|{}", replica), CollOp::allreduce, bytes, gs);
}

const Collective& CommFlows::input_copies(double bytes_per_rank) {
  std::vector<std::tuple<int, int, int, bool>> ends;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        const int r = lay_.rank(Coords{t, c, d, 0});
        const int node = topo_.node_of(r);
        const hw::NodeTemplate& nt = topo_.node_template(node);
        ends.emplace_back(r, node, nt.cpu_of_gpu(topo_.local_of(r)) - nt.cpu_vertex(0), false);  // its socket
      }
    }
  }
  return host_flows("input", ends, bytes_per_rank);
}

bool CommFlows::keep_copy(const std::vector<int>& group, const std::vector<int>& rep) const {
  // A copy that stays inside one node and shares no node with the simulated replica touches only
  // links of its own node: by symmetry it is the simulated copy's twin and need not run.
  std::set<int> nodes;
  for (int r : group) nodes.insert(topo_.node_of(r));
  if (nodes.size() > 1) return true;
  for (int r : rep) {
    if (nodes.count(topo_.node_of(r))) return true;
  }
  return false;
}

std::vector<std::vector<int>> CommFlows::groups(CommGroup g, int stage, int replica) const {
  std::vector<std::vector<int>> mine, all;
  std::vector<int> rep_ranks;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        Coords x{t, c, d, stage};
        std::vector<int> grp;
        switch (g) {
          case CommGroup::tp:
            if (t != 0) continue;
            grp = lay_.group(Dim::tp, x);
            break;
          case CommGroup::cp:
            if (c != 0) continue;
            grp = lay_.group(Dim::cp, x);
            break;
          case CommGroup::ep:
            if (d % lay_.ep() != 0) continue;
            grp = lay_.ep_group(x);
            break;
        }
        if (d == replica || (g == CommGroup::ep && d / lay_.ep() == replica / lay_.ep())) {
          mine.push_back(grp);
          rep_ranks.insert(rep_ranks.end(), grp.begin(), grp.end());
        } else {
          all.push_back(grp);
        }
      }
    }
  }
  if (!symmetric_) return mine;
  for (auto& grp : all) {
    if (keep_copy(grp, rep_ranks)) mine.push_back(std::move(grp));
  }
  return mine;
}

std::vector<std::vector<int>> CommFlows::dp_groups(int stage, bool experts) const {
  std::vector<std::vector<int>> out;
  // Gradients are reduced over dp x cp: context-parallel ranks hold the same weights.
  for (int t = 0; t < lay_.tp(); ++t) {
    if (!experts) {
      out.push_back(lay_.grad_group(Coords{t, 0, 0, stage}));
    } else {
      for (int d = 0; d < lay_.ep(); ++d) out.push_back(lay_.expert_grad_group(Coords{t, 0, d, stage}));
    }
  }
  return out;
}

const Collective& CommFlows::collective(const std::string& key, CollOp op, Bytes bytes, const std::vector<std::vector<int>>& gs) {
  const std::string full = fmt::format("{}|{}|{}", key, static_cast<int>(op), bytes.count());
  auto it = cache_.find(full);
  if (it != cache_.end()) return *it->second;
  auto c = std::make_unique<Collective>();
  for (const auto& g : gs) {
    if (g.size() < 2) continue;
    comm::CollectiveRequest req;
    req.op = op;
    req.size = bytes;
    req.ranks = g;
    auto plan = planner_.plan(req);
    DTSIM_ASSERT(plan.ok(), "a collective of a validated layout could not be planned");
    c->plans.push_back(std::make_shared<const comm::Plan>(std::move(*plan)));
  }
  return *cache_.emplace(full, std::move(c)).first->second;
}

const Collective& CommFlows::p2p(int from_stage, int to_stage, int replica, Bytes bytes) {
  const std::string key = fmt::format("p2p|{}|{}|{}|{}", from_stage, to_stage, replica, bytes.count());
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  // One flow per rank pair; every replica's pairs that cross nodes or share one with ours.
  std::vector<std::pair<int, int>> mine, others;
  std::vector<int> rep;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        const int a = lay_.rank(Coords{t, c, d, from_stage}), b = lay_.rank(Coords{t, c, d, to_stage});
        if (d == replica) {
          mine.emplace_back(a, b);
          rep.push_back(a);
          rep.push_back(b);
        } else if (symmetric_) {
          others.emplace_back(a, b);
        }
      }
    }
  }
  for (auto [a, b] : others) {
    if (keep_copy({a, b}, rep)) mine.emplace_back(a, b);
  }
  auto plan = std::make_shared<comm::Plan>();
  plan->op = CollOp::sendrecv;
  comm::Phase ph;
  const auto& lat = in_.comm.lat(comm::Algo::ring, comm::Protocol::simple);
  for (auto [a, b] : mine) {
    const hw::Path path = router_.route(a, b, static_cast<std::uint64_t>(a) * 7919 + static_cast<std::uint64_t>(b));
    std::vector<LinkUse> uses;
    for (LinkId l : path) uses.push_back(LinkUse{l, 1});
    const bool cross = topo_.node_of(a) != topo_.node_of(b);
    const Time latency = lat.base + lat.step[static_cast<std::size_t>(cross ? comm::Transport::net : comm::Transport::nvlink)] +
                         in_.comm.call_overhead;
    ph.groups.push_back(comm::FlowGroup{merge_uses(std::move(uses)), bytes, latency,
                                        pipeline_send_cap(topo_, lay_, in_.comm, in_.parallel.overlap_p2p, a, b, bytes)});
  }
  plan->phases.push_back(std::move(ph));
  auto c = std::make_unique<Collective>();
  c->plans.push_back(std::move(plan));
  return *cache_.emplace(key, std::move(c)).first->second;
}

std::unique_ptr<Collective> CommFlows::paths_collective(const std::vector<hw::Path>& paths, double bytes) const {
  auto plan = std::make_shared<comm::Plan>();
  plan->op = CollOp::sendrecv;
  comm::Phase ph;
  for (const hw::Path& path : paths) {
    std::vector<LinkUse> uses;
    for (LinkId l : path) uses.push_back(LinkUse{l, 1});
    ph.groups.push_back(comm::FlowGroup{merge_uses(std::move(uses)), Bytes(static_cast<I>(bytes)), router_.latency(path) + in_.comm.call_overhead});
  }
  plan->phases.push_back(std::move(ph));
  auto c = std::make_unique<Collective>();
  c->plans.push_back(std::move(plan));
  return c;
}

std::unique_ptr<Collective> CommFlows::pairwise(const std::vector<std::pair<int, int>>& pairs, double bytes) {
  std::vector<hw::Path> paths;
  for (auto [a, b] : pairs) paths.push_back(router_.route(a, b, static_cast<std::uint64_t>(a) * 7919 + static_cast<std::uint64_t>(b)));
  return paths_collective(paths, bytes);
}

const Collective& CommFlows::transfer(const Transfer& t) {
  const std::string key = fmt::format("xfer|{}|{}", static_cast<int>(t.kind), t.bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  const int n = lay_.dp();
  std::vector<std::pair<int, int>> from0, to0;
  for (int r = 1; r < n; ++r) {
    from0.emplace_back(0, r);
    to0.emplace_back(r, 0);
  }
  std::unique_ptr<Collective> c;
  const bool nccl = in_.parallel.dataparallel.nccl;
  switch (t.kind) {
    case Transfer::Kind::host: c = std::make_unique<Collective>(); break;
    case Transfer::Kind::h2d: {
      const hw::NodeTemplate& nt = topo_.node_template(0);
      return host_flows(key, {{0, 0, nt.cpu_of_gpu(0) - nt.cpu_vertex(0), false}}, t.bytes);
    }
    case Transfer::Kind::scatter: c = pairwise(from0, t.bytes); break;
    case Transfer::Kind::gather: c = pairwise(to0, t.bytes); break;
    case Transfer::Kind::replicate:
    case Transfer::Kind::reduce: {
      if (!nccl) {
        c = pairwise(t.kind == Transfer::Kind::replicate ? from0 : to0, t.bytes);
        break;
      }
      std::vector<int> ranks(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
      return collective(key, t.kind == Transfer::Kind::replicate ? CollOp::broadcast : CollOp::reduce, Bytes(static_cast<I>(t.bytes)), {ranks});
    }
  }
  return *cache_.emplace(key, std::move(c)).first->second;
}

// GPU rank <-> CPU socket `cpu` of `node`: inside a node over PCIe (and the socket link); across
// nodes through the GPU's nearest NIC, the fabric, and the NIC nearest to that socket.
hw::Path CommFlows::host_path(int rank, int node, int cpu, bool to_host, std::uint64_t label) {
  const int gnode = topo_.node_of(rank);
  const hw::NodeTemplate& gt = topo_.node_template(gnode);
  const hw::NodeTemplate& ht = topo_.node_template(node);
  const int gv = gt.gpu_vertex(topo_.local_of(rank)), cv = ht.cpu_vertex(cpu);
  hw::Path p;
  if (gnode == node) {
    to_host ? router_.append_local(node, gv, cv, p) : router_.append_local(node, cv, gv, p);
    return p;
  }
  const int gnic = gt.nic_vertex(gt.nearest_nic(topo_.local_of(rank)));
  int hnic = ht.nic_vertex(0);
  for (int k = 1; k < topo_.fabric_nics(node); ++k) {
    if (ht.route_cost(ht.nic_vertex(k), cv) < ht.route_cost(hnic, cv)) hnic = ht.nic_vertex(k);
  }
  if (to_host) {
    router_.append_local(gnode, gv, gnic, p);
    router_.append_fabric(topo_.vertex(gnode, gnic), topo_.vertex(node, hnic), label, p);
    router_.append_local(node, hnic, cv, p);
  } else {
    router_.append_local(node, cv, hnic, p);
    router_.append_fabric(topo_.vertex(node, hnic), topo_.vertex(gnode, gnic), label, p);
    router_.append_local(gnode, gnic, gv, p);
  }
  return p;
}

// One flow per (rank, node, cpu, to_host) end, `bytes` each.
const Collective& CommFlows::host_flows(const std::string& key, const std::vector<std::tuple<int, int, int, bool>>& ends, double bytes) {
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  std::vector<hw::Path> paths;
  for (const auto& [rank, node, cpu, to_host] : ends) {
    paths.push_back(host_path(rank, node, cpu, to_host, static_cast<std::uint64_t>(rank) * 7919 + static_cast<std::uint64_t>(node)));
  }
  return *cache_.emplace(key, paths_collective(paths, bytes)).first->second;
}

// Every worker sends its gradients' 1/shards to every shard (push) or pulls its weights' 1/shards
// from every shard (pull); all workers use all shards.
const Collective& CommFlows::ps_flows(const char* what, double bytes, bool to_host) {
  const int shards = in_.parallel.parameter_server.shards;
  std::vector<std::tuple<int, int, int, bool>> ends;
  for (int w = 0; w < lay_.dp(); ++w) {
    for (int s = 0; s < shards; ++s) {
      const auto [node, cpu] = shard_home(s, topo_.nodes());
      ends.emplace_back(w, node, cpu, to_host);
    }
  }
  return host_flows(fmt::format("{}|{}", what, bytes), ends, bytes / shards);
}

const Collective& CommFlows::ps_push(double grad_bytes) { return ps_flows("ps-push", grad_bytes, true); }

const Collective& CommFlows::ps_pull(double param_bytes) { return ps_flows("ps-pull", param_bytes, false); }

Bandwidth pipeline_send_cap(const hw::Topology& topo, const Layout& lay, const comm::CommParams& comm, bool overlap_p2p, int from, int to,
                            Bytes bytes) {
  if (bytes <= comm.p2p_ll_threshold) return Bandwidth{};
  std::vector<int> ranks{from, to};
  if (!overlap_p2p) {
    const Coords at = lay.coords(from);
    ranks.clear();
    for (int s = 0; s < lay.pp(); ++s) ranks.push_back(lay.rank(Coords{at.tp, at.cp, at.dp, s}));
  }
  const int node = topo.node_of(from);
  std::vector<int> locals;
  for (int r : ranks) {
    if (topo.node_of(r) != node) return Bandwidth{};
    locals.push_back(topo.local_of(r));
  }
  return comm::nccl_p2p_node_rate(topo.node_template(node).spec(), comm, locals, bytes).cap;
}

}  // namespace dtsim::workloads
