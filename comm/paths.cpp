// The planner's routes: paths from a GPU to a NIC and between ranks, the orders of GPUs inside a
// node, the NICs a communicator owns and the ring channels through them.
#include <algorithm>
#include <numeric>

#include "comm/collective.hpp"
#include "comm/channels.hpp"

namespace dtsim::comm {

// ----------------------------------------------------------------------------------------------
// Paths and orders

void Planner::append_to_nic(int rank, int nic, hw::Path& out) {
  const int node = topo_.node_of(rank);
  const hw::NodeTemplate& t = topo_.node_template(node);
  const int g = topo_.local_of(rank);
  // The GPU the NIC belongs to (the first one that prefers it).
  int own = -1;
  for (int x = 0; x < t.gpus() && own < 0; ++x) {
    if (t.nearest_nic(x) == nic) own = x;
  }
  if (own >= 0 && own != g) {
    const auto& hop = t.route(g, own);
    const bool nvlink = !hop.empty() && std::all_of(hop.begin(), hop.end(), [&](std::uint32_t l) {
      return t.links()[l].kind == hw::LinkKind::nvlink;
    });
    if (nvlink) {  // PXN: over NVLink to the NIC's own GPU, then down its PCIe switch
      router_.append_local(node, g, own, out);
      router_.append_local(node, own, t.nic_vertex(nic), out);
      return;
    }
  }
  router_.append_local(node, g, t.nic_vertex(nic), out);
}

hw::Path Planner::edge_path(int from_rank, int to_rank, int nic, int to_nic, std::uint64_t label) {
  const int a = topo_.node_of(from_rank), b = topo_.node_of(to_rank);
  if (a == b) return router_.route(from_rank, to_rank, label);
  hw::Path p;
  const int src_nic = nic % std::max(1, topo_.fabric_nics(a));
  const int dst_nic = to_nic % std::max(1, topo_.fabric_nics(b));
  append_to_nic(from_rank, src_nic, p);
  const hw::NodeTemplate& tb = topo_.node_template(b);
  router_.append_fabric(topo_.vertex(a, topo_.node_template(a).nic_vertex(src_nic)), topo_.vertex(b, tb.nic_vertex(dst_nic)), label, p);
  router_.append_local(b, tb.nic_vertex(dst_nic), topo_.local_of(to_rank), p);
  return p;
}

std::vector<std::vector<int>> Planner::mesh_cycles(const hw::NodeTemplate& t) {
  auto it = mesh_cache_.find(&t);
  if (it != mesh_cache_.end()) return it->second;
  const int g = t.gpus();
  // NVLink multiplicity between GPU pairs.
  std::vector<int> links(static_cast<std::size_t>(g * g), 0);
  for (const auto& p : t.spec().nvlink_mesh) {
    if (p.a < g && p.b < g) {
      links[static_cast<std::size_t>(p.a * g + p.b)] = p.links;
      links[static_cast<std::size_t>(p.b * g + p.a)] = p.links;
    }
  }
  std::vector<std::vector<int>> cycles;
  if (g >= 3 && g <= 8) {
    // All Hamiltonian cycles of the NVLink graph through GPU 0 (one direction each), then a greedy
    // pick that spreads load over the links, as NCCL's ring search does: K = links per GPU / 2.
    std::vector<std::vector<int>> all;
    std::vector<int> perm(static_cast<std::size_t>(g - 1));
    std::iota(perm.begin(), perm.end(), 1);
    do {
      if (perm.front() > perm.back()) continue;  // skip the reversed duplicate
      std::vector<int> cyc{0};
      cyc.insert(cyc.end(), perm.begin(), perm.end());
      bool ok = true;
      for (int i = 0; i < g && ok; ++i) ok = links[static_cast<std::size_t>(cyc[static_cast<std::size_t>(i)] * g + cyc[static_cast<std::size_t>((i + 1) % g)])] > 0;
      if (ok) all.push_back(cyc);
    } while (std::next_permutation(perm.begin(), perm.end()));
    int max_links = 0;
    for (int a = 0; a < g; ++a) {
      int s = 0;
      for (int b = 0; b < g; ++b) s += links[static_cast<std::size_t>(a * g + b)];
      max_links = std::max(max_links, s);
    }
    std::vector<int> load(static_cast<std::size_t>(g * g), 0);
    for (int k = 0; k < std::max(1, max_links / 2) && !all.empty(); ++k) {
      std::size_t best = 0;
      double best_cost = 1e300;
      for (std::size_t c = 0; c < all.size(); ++c) {
        double cost = 0;
        for (int i = 0; i < g; ++i) {
          const auto e = static_cast<std::size_t>(all[c][static_cast<std::size_t>(i)] * g + all[c][static_cast<std::size_t>((i + 1) % g)]);
          cost = std::max(cost, (load[e] + 1.0) / links[e]);
        }
        if (cost < best_cost) {
          best_cost = cost;
          best = c;
        }
      }
      for (int i = 0; i < g; ++i) {
        const int a = all[best][static_cast<std::size_t>(i)], b = all[best][static_cast<std::size_t>((i + 1) % g)];
        ++load[static_cast<std::size_t>(a * g + b)];
        ++load[static_cast<std::size_t>(b * g + a)];
      }
      cycles.push_back(all[best]);
    }
  }
  // Each cycle is used in both directions (full-duplex links).
  std::vector<std::vector<int>> both;
  for (const auto& c : cycles) {
    both.push_back(c);
    both.emplace_back(c.rbegin(), c.rend());
  }
  mesh_cache_[&t] = both;
  return both;
}

std::vector<std::vector<int>> Planner::intra_orders(const NodePart& part) {
  const hw::NodeTemplate& t = topo_.node_template(part.node);
  if (t.spec().nvlink_topology == hw::NvlinkTopology::mesh) {
    const auto cycles = mesh_cycles(t);
    if (!cycles.empty()) {
      std::vector<std::vector<int>> out;
      for (const auto& c : cycles) {
        std::vector<int> o;
        for (int x : c) {
          if (std::find(part.locals.begin(), part.locals.end(), x) != part.locals.end()) o.push_back(x);
        }
        out.push_back(o);
      }
      return out;
    }
  }
  return {part.locals};
}

std::vector<Planner::OwnNic> Planner::own_nics(const NodePart& part) const {
  // The nearest NIC of each of the communicator's GPUs on the node, in local order, with the first
  // GPU that owns it. NCCL's topology search builds inter-node rings (and picks NVLS tree heads)
  // through NICs local to the communicator's GPUs, so two data-parallel groups that take every
  // fourth GPU of a node (tensor parallelism 4) leave it through different NICs, not both
  // through the node's first ones.
  const hw::NodeTemplate& t = topo_.node_template(part.node);
  std::vector<OwnNic> own;
  for (int x : part.locals) {
    const int k = t.nearest_nic(x);
    const bool seen = std::any_of(own.begin(), own.end(), [k](const OwnNic& o) { return o.nic == k; });
    if (k >= 0 && !seen) own.push_back(OwnNic{k, x});
  }
  if (own.empty()) own.push_back(OwnNic{0, part.locals.empty() ? 0 : part.locals.front()});
  return own;
}

std::vector<Planner::RingChannel> Planner::ring_channels(const Layout& lay) {
  std::vector<RingChannel> channels;
  if (lay.nodes.size() == 1) {
    for (auto& o : intra_orders(lay.nodes[0])) {
      RingChannel ch;
      for (int l : o) ch.order.push_back(topo_.first_rank(lay.nodes[0].node) + l);
      ch.nic = {0};
      channels.push_back(std::move(ch));
    }
    return channels;
  }
  std::vector<std::vector<OwnNic>> node_nics;
  for (const auto& part : lay.nodes) node_nics.push_back(own_nics(part));
  int nch = 1;
  if (lay.max_per_node > 1) {
    nch = INT32_MAX;
    for (const auto& own : node_nics) nch = std::min(nch, static_cast<int>(own.size()));
  }
  for (int c = 0; c < nch; ++c) {
    RingChannel ch;
    for (std::size_t k = 0; k < lay.nodes.size(); ++k) {
      const auto& part = lay.nodes[k];
      const hw::NodeTemplate& t = topo_.node_template(part.node);
      const auto orders = intra_orders(part);
      std::vector<int> o = orders[static_cast<std::size_t>(c) % orders.size()];
      const auto& own = node_nics[k];
      const int nic = own[static_cast<std::size_t>(c) % own.size()].nic;
      // Start the node's segment at a GPU whose own NIC is this channel's.
      int first = -1;
      for (int x : o) {
        if (nch > 1 && t.nearest_nic(x) == nic) {
          first = x;
          break;
        }
      }
      if (first < 0) first = o[static_cast<std::size_t>(c) % o.size()];
      std::rotate(o.begin(), std::find(o.begin(), o.end(), first), o.end());
      for (int l : o) ch.order.push_back(topo_.first_rank(part.node) + l);
      ch.nic.push_back(nch > 1 ? nic : std::max(0, t.nearest_nic(first)));
    }
    channels.push_back(std::move(ch));
  }
  return channels;
}

hw::Path Planner::switch_round(int node, int local) const {
  const hw::NodeTemplate& t = topo_.node_template(node);
  hw::Path round;
  router_.append_local(node, local, t.nvswitch_vertex(), round);
  router_.append_local(node, t.nvswitch_vertex(), local, round);
  return round;
}

}  // namespace dtsim::comm
