// Routes between GPUs and NICs over a built topology: local routes from the node templates'
// tables, fabric routes by shortest path with destination-based (D-mod-k) or, under ECMP
// routing, per-connection hashed choice among equal-cost next hops.
#include <functional>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/reverse_graph.hpp>

#include "hw/topology.hpp"

namespace dtsim::hw {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser: a fixed, portable hash
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void Router::append_local(int node, int from, int to, Path& out) const {
  for (std::uint32_t l : topo_.node_template(node).route(from, to)) out.push_back(topo_.link_id(node, l));
}

const std::vector<std::int64_t>& Router::distances_to(int anchor) {
  auto it = dist_.find(anchor);
  if (it != dist_.end()) return it->second;
  const LinkGraph& g = topo_.fabric_graph();
  const auto nv = boost::num_vertices(g);
  // Distances *to* the anchor: Dijkstra from it over the reversed graph, through switches only.
  using Reverse = boost::reverse_graph<LinkGraph, const LinkGraph&>;
  Reverse rg(g);
  const auto& verts = topo_.vertices();
  auto keep = [&](std::size_t v) {
    return static_cast<int>(v) == anchor || verts[topo_.global_of_fabric(static_cast<int>(v))].kind == VertexKind::fabric_switch;
  };
  boost::filtered_graph<Reverse, boost::keep_all, std::function<bool(std::size_t)>> fg(rg, boost::keep_all{}, keep);
  std::vector<std::int64_t> dist(nv, kUnreachableCost);
  boost::dijkstra_shortest_paths(
      fg, static_cast<std::size_t>(anchor),
      boost::weight_map(boost::get(&EdgeLink::cost, rg))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, g)))
          .distance_inf(kUnreachableCost));
  return dist_.emplace(anchor, std::move(dist)).first->second;
}

void Router::append_fabric(std::uint32_t src_nic, std::uint32_t dst_nic, std::uint64_t label, Path& out) {
  const bool ecmp = topo_.routing() == FabricRouting::ecmp;
  // The connection's hash under ECMP, chained so that no two fields overlap.
  const std::uint64_t flow = ecmp ? mix(mix(mix(label) ^ src_nic) ^ dst_nic) : 0;
  const LinkGraph& g = topo_.fabric_graph();
  const int src = topo_.fabric_vertex(src_nic), dst = topo_.fabric_vertex(dst_nic);
  DTSIM_ASSERT(src >= 0 && dst >= 0, "fabric route between vertices that are not fabric NICs");
  if (src == dst) return;
  const auto& verts = topo_.vertices();
  auto is_switch = [&](std::size_t v) {
    return verts[topo_.global_of_fabric(static_cast<int>(v))].kind == VertexKind::fabric_switch;
  };
  // Anchor: the destination NIC's switch when all its uplinks go to that one switch (distance
  // tables are then shared by every NIC below it), else the NIC itself.
  int anchor = -1;
  for (auto [e, end] = boost::in_edges(static_cast<std::size_t>(dst), g); e != end; ++e) {
    const int s = static_cast<int>(boost::source(*e, g));
    anchor = (anchor == -1 || anchor == s) ? s : dst;
  }
  DTSIM_ASSERT(anchor >= 0, "destination NIC has no uplink");
  if (!is_switch(static_cast<std::size_t>(anchor))) anchor = dst;
  const auto& dist = distances_to(anchor);

  std::size_t cur = static_cast<std::size_t>(src);
  const std::int64_t position = topo_.tree_position(dst);
  std::int64_t divisor = 1;
  std::vector<LinkGraph::edge_descriptor> best;
  for (int hops = 0; static_cast<int>(cur) != dst; ++hops) {
    DTSIM_ASSERT(hops < 64, "fabric route does not converge");
    best.clear();
    std::int64_t best_cost = kUnreachableCost;
    for (auto [e, end] = boost::out_edges(cur, g); e != end; ++e) {
      const std::size_t v = boost::target(*e, g);
      std::int64_t total;
      if (static_cast<int>(cur) == anchor) {
        if (static_cast<int>(v) != dst) continue;  // at the anchor switch: straight down
        total = g[*e].cost;
      } else {
        if (!(is_switch(v) || static_cast<int>(v) == anchor) || dist[v] >= kUnreachableCost) continue;
        total = g[*e].cost + dist[v];
      }
      if (total < best_cost) {
        best_cost = total;
        best.assign(1, *e);
      } else if (total == best_cost) {
        best.push_back(*e);
      }
    }
    DTSIM_ASSERT(!best.empty(), "no fabric route (the topology was validated as connected)");
    // Destination-based spreading over the equal-cost next links (D-mod-k: Zahavi et al., "D-Mod-K
    // Routing Providing Non-Blocking Traffic for Shift Permutations on Real Life Fat Trees", 2010;
    // OpenSM's ftree routing engine): the k-th upward choice takes digit k of the destination's
    // tree position in the mixed radix of the choices so far. Flows to distinct NICs of a leaf
    // thus leave over distinct uplinks, so a ring's flows never pile onto one, as hashing each
    // flow (a balls-into-bins draw) would let them.
    // ECMP instead hashes the flow (its endpoints and label, as a switch hashes the five-tuple of
    // a RoCE connection: addresses and the UDP source port its queue pair sets) with the switch
    // (each switch seeds its hash), so connections may share an uplink while another idles.
    std::size_t pick = 0;
    if (best.size() > 1 && ecmp) {
      pick = static_cast<std::size_t>(mix(flow ^ mix(cur)) % static_cast<std::uint64_t>(best.size()));
    } else if (best.size() > 1) {
      pick = static_cast<std::size_t>((position / divisor) % static_cast<std::int64_t>(best.size()));
      divisor *= static_cast<std::int64_t>(best.size());
    }
    const auto e = best[pick];
    out.push_back(LinkId{g[e].link});
    cur = boost::target(e, g);
  }
}

Path Router::route_via(int src_rank, int src_nic, int dst_nic, int dst_rank, std::uint64_t label) {
  Path p;
  const int sn = topo_.node_of(src_rank), dn = topo_.node_of(dst_rank);
  const NodeTemplate& st = topo_.node_template(sn);
  const NodeTemplate& dt = topo_.node_template(dn);
  append_local(sn, topo_.local_of(src_rank), st.nic_vertex(src_nic), p);
  append_fabric(topo_.vertex(sn, st.nic_vertex(src_nic)), topo_.vertex(dn, dt.nic_vertex(dst_nic)),
                mix(label ^ (static_cast<std::uint64_t>(src_rank) << 32) ^ static_cast<std::uint64_t>(dst_rank)), p);
  append_local(dn, dt.nic_vertex(dst_nic), topo_.local_of(dst_rank), p);
  return p;
}

Path Router::route(int src_rank, int dst_rank, std::uint64_t label) {
  const int sn = topo_.node_of(src_rank), dn = topo_.node_of(dst_rank);
  if (sn == dn) {
    Path p;
    append_local(sn, topo_.local_of(src_rank), topo_.local_of(dst_rank), p);
    return p;
  }
  const int snic = topo_.node_template(sn).nearest_nic(topo_.local_of(src_rank));
  const int dnic = topo_.node_template(dn).nearest_nic(topo_.local_of(dst_rank));
  return route_via(src_rank, snic, dnic, dst_rank, label);
}

Time Router::latency(const Path& p) const {
  Time t = Time::zero();
  for (LinkId l : p) t += topo_.link(l).latency;
  return t;
}

Bandwidth Router::bottleneck(const Path& p) const {
  if (p.empty()) return Bandwidth{};
  Bandwidth b = topo_.link(p.front()).capacity();
  for (LinkId l : p) b = std::min(b, topo_.link(l).capacity());
  return b;
}

}  // namespace dtsim::hw
