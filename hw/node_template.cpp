// A node's internal graph (NodeTemplate): its GPUs, CPUs, PCIe and NVLink switches and NICs, the
// links between them and the routes inside the node. The cluster around it is in topology.cpp.
#include "hw/topology.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <fmt/format.h>

namespace dtsim::hw {

namespace {

bool is_transit(VertexKind k) {
  return k == VertexKind::cpu || k == VertexKind::pcie_switch || k == VertexKind::nvswitch ||
         k == VertexKind::fabric_switch;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// NodeTemplate

int NodeTemplate::add_vertex(VertexKind kind, int index) {
  vertices_.push_back(Vertex{kind, -1, index});
  return static_cast<int>(vertices_.size() - 1);
}

void NodeTemplate::add_duplex(int a, int b, const LinkType& type, Bandwidth bw) {
  for (auto [s, d] : {std::pair{a, b}, std::pair{b, a}}) {
    TopoLink l;
    l.src = static_cast<std::uint32_t>(s);
    l.dst = static_cast<std::uint32_t>(d);
    l.kind = type.kind;
    l.bandwidth = bw;
    l.efficiency = type.efficiency;
    l.latency = type.latency;
    l.type = type.name;
    links_.push_back(std::move(l));
  }
}

Expected<NodeTemplate> NodeTemplate::build(const NodeSpec& spec, int gpus_used) {
  NodeTemplate t;
  t.spec_ = spec;
  if (spec.gpus <= 0) return Error("a node needs at least one GPU", "gpus");
  if (gpus_used <= 0 || gpus_used > spec.gpus) {
    return Error(fmt::format("{} GPUs per node requested but node '{}' has {}", gpus_used, spec.name, spec.gpus),
                 "gpus_per_node");
  }
  if (spec.cpus <= 0) return Error("a node needs at least one CPU socket", "cpus");
  if (spec.cpus > 1 && !spec.cpu_link) {
    return Error(fmt::format("node '{}' has {} CPU sockets but no cpu_interconnect link", spec.name, spec.cpus),
                 "cpu_interconnect");
  }
  t.gpus_ = gpus_used;
  for (int g = 0; g < gpus_used; ++g) t.add_vertex(VertexKind::gpu, g);
  t.first_cpu_ = static_cast<int>(t.vertices_.size());
  for (int c = 0; c < spec.cpus; ++c) t.add_vertex(VertexKind::cpu, c);
  for (int a = 0; a < spec.cpus; ++a) {
    for (int b = a + 1; b < spec.cpus; ++b) t.add_duplex(t.cpu_vertex(a), t.cpu_vertex(b), *spec.cpu_link, spec.cpu_link->bandwidth);
  }

  // PCIe: every GPU in use and every NIC must hang below exactly one group.
  std::vector<int> gpu_group(static_cast<std::size_t>(spec.gpus), -1), nic_group(static_cast<std::size_t>(spec.nics), -1);
  std::vector<int> group_vertex;
  t.gpu_cpu_.assign(static_cast<std::size_t>(gpus_used), 0);
  for (std::size_t i = 0; i < spec.pcie_groups.size(); ++i) {
    const PcieGroup& grp = spec.pcie_groups[i];
    const std::string field = fmt::format("pcie.switches[{}]", i);
    if (grp.cpu < 0 || grp.cpu >= spec.cpus) {
      return Error(fmt::format("CPU {} does not exist (the node has {})", grp.cpu, spec.cpus), field + ".cpu");
    }
    for (int g : grp.gpus) {
      if (g < 0 || g >= spec.gpus) return Error(fmt::format("GPU {} does not exist (the node has {})", g, spec.gpus), field + ".gpus");
      if (gpu_group[static_cast<std::size_t>(g)] >= 0) return Error(fmt::format("GPU {} is attached twice", g), field + ".gpus");
      gpu_group[static_cast<std::size_t>(g)] = static_cast<int>(i);
    }
    for (int n : grp.nics) {
      if (n < 0 || n >= spec.nics) return Error(fmt::format("NIC {} does not exist (the node has {})", n, spec.nics), field + ".nics");
      if (nic_group[static_cast<std::size_t>(n)] >= 0) return Error(fmt::format("NIC {} is attached twice", n), field + ".nics");
      nic_group[static_cast<std::size_t>(n)] = static_cast<int>(i);
    }
    group_vertex.push_back(grp.direct ? t.cpu_vertex(grp.cpu) : t.add_vertex(VertexKind::pcie_switch, static_cast<int>(i)));
  }
  for (int g = 0; g < gpus_used; ++g) {
    if (gpu_group[static_cast<std::size_t>(g)] < 0) {
      return Error(fmt::format("GPU {} of node '{}' is not attached to PCIe (list it under pcie.switches)", g, spec.name), "pcie.switches");
    }
  }
  for (int n = 0; n < spec.nics; ++n) {
    if (nic_group[static_cast<std::size_t>(n)] < 0) {
      return Error(fmt::format("NIC {} of node '{}' is not attached to PCIe (list it under pcie.switches)", n, spec.name), "pcie.switches");
    }
  }

  if (spec.nvlink_topology == NvlinkTopology::nvswitch) {
    if (!spec.nvlink || spec.nvlink_links_per_gpu <= 0) {
      return Error("an NVSwitch node needs nvlink.link and nvlink.links_per_gpu > 0", "nvlink");
    }
    t.nvswitch_ = t.add_vertex(VertexKind::nvswitch, 0);
  }
  t.first_nic_ = static_cast<int>(t.vertices_.size());
  for (int n = 0; n < spec.nics; ++n) t.add_vertex(VertexKind::nic, n);

  for (std::size_t i = 0; i < spec.pcie_groups.size(); ++i) {
    const PcieGroup& grp = spec.pcie_groups[i];
    const int gv = group_vertex[i];
    if (!grp.direct) t.add_duplex(gv, t.cpu_vertex(grp.cpu), spec.pcie, spec.pcie.bandwidth);
    for (int g : grp.gpus) {
      if (g >= gpus_used) continue;
      t.add_duplex(t.gpu_vertex(g), gv, spec.pcie, spec.pcie.bandwidth);
      t.gpu_cpu_[static_cast<std::size_t>(g)] = t.cpu_vertex(grp.cpu);
    }
    for (int n : grp.nics) t.add_duplex(t.nic_vertex(n), gv, spec.pcie, spec.pcie.bandwidth);
  }

  if (spec.nvlink_topology == NvlinkTopology::nvswitch) {
    const Bandwidth bw = spec.nvlink->bandwidth * static_cast<double>(spec.nvlink_links_per_gpu);
    for (int g = 0; g < gpus_used; ++g) t.add_duplex(t.gpu_vertex(g), t.nvswitch_, *spec.nvlink, bw);
  } else if (spec.nvlink_topology == NvlinkTopology::mesh) {
    if (!spec.nvlink) return Error("an NVLink mesh needs nvlink.link", "nvlink.link");
    std::vector<char> seen(static_cast<std::size_t>(spec.gpus * spec.gpus), 0);
    for (std::size_t i = 0; i < spec.nvlink_mesh.size(); ++i) {
      const NvlinkPair& p = spec.nvlink_mesh[i];
      const std::string field = fmt::format("nvlink.pairs[{}]", i);
      if (p.a < 0 || p.a >= spec.gpus || p.b < 0 || p.b >= spec.gpus || p.a == p.b) {
        return Error(fmt::format("pair ({}, {}) is not two distinct GPUs of the node's {}", p.a, p.b, spec.gpus), field);
      }
      if (p.links <= 0) return Error("the link count must be positive", field);
      const auto key = static_cast<std::size_t>(std::min(p.a, p.b) * spec.gpus + std::max(p.a, p.b));
      if (seen[key]) return Error(fmt::format("pair ({}, {}) is listed twice", p.a, p.b), field);
      seen[key] = 1;
      if (p.a >= gpus_used || p.b >= gpus_used) continue;
      t.add_duplex(t.gpu_vertex(p.a), t.gpu_vertex(p.b), *spec.nvlink, spec.nvlink->bandwidth * static_cast<double>(p.links));
    }
  }
  t.compute_routes();
  return t;
}

void NodeTemplate::compute_routes() {
  const auto nv = vertices_.size();
  LinkGraph graph(nv);
  for (std::uint32_t i = 0; i < links_.size(); ++i) {
    boost::add_edge(links_[i].src, links_[i].dst, EdgeLink{i, routing_cost(links_[i].capacity(), links_[i].latency)}, graph);
  }
  routes_.assign(nv * nv, {});
  costs_.assign(nv * nv, kUnreachableCost);
  using Edge = LinkGraph::edge_descriptor;
  for (std::size_t origin = 0; origin < nv; ++origin) {
    // GPUs and NICs are endpoints, never transit: keep an edge only if it leaves the origin or a
    // transit vertex (CPU, PCIe switch, NVSwitch).
    auto keep = [&](const Edge& e) {
      const auto s = boost::source(e, graph);
      return s == origin || is_transit(vertices_[s].kind);
    };
    boost::filtered_graph<LinkGraph, std::function<bool(const Edge&)>> fg(graph, keep);
    std::vector<std::int64_t> dist(nv, kUnreachableCost);
    std::vector<Edge> pred_edge(nv);
    auto pred_map = boost::make_iterator_property_map(pred_edge.begin(), boost::get(boost::vertex_index, graph));
    boost::dijkstra_shortest_paths(
        fg, origin,
        boost::weight_map(boost::get(&EdgeLink::cost, graph))
            .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, graph)))
            .distance_inf(kUnreachableCost)
            .visitor(boost::make_dijkstra_visitor(boost::record_edge_predecessors(pred_map, boost::on_edge_relaxed()))));
    for (std::size_t to = 0; to < nv; ++to) {
      costs_[origin * nv + to] = to == origin ? 0 : dist[to];
      if (to == origin || dist[to] >= kUnreachableCost) continue;
      std::vector<std::uint32_t> path;
      for (std::size_t v = to; v != origin; v = boost::source(pred_edge[v], graph)) {
        path.push_back(graph[pred_edge[v]].link);
      }
      std::reverse(path.begin(), path.end());
      routes_[origin * nv + to] = std::move(path);
    }
  }

  // Staged transfers: without peer-to-peer, GPU-to-GPU data goes through the source GPU's CPU
  // memory; without GPUDirect RDMA, GPU<->NIC data goes through the GPU's CPU memory.
  auto via = [&](int from, int mid, int to) {
    std::vector<std::uint32_t> path = routes_[static_cast<std::size_t>(from) * nv + static_cast<std::size_t>(mid)];
    const auto& second = routes_[static_cast<std::size_t>(mid) * nv + static_cast<std::size_t>(to)];
    if ((from != mid && path.empty()) || (mid != to && second.empty())) return std::vector<std::uint32_t>{};
    path.insert(path.end(), second.begin(), second.end());
    return path;
  };
  auto set = [&](int from, int to, std::vector<std::uint32_t> path) {
    std::int64_t c = path.empty() ? kUnreachableCost : 0;
    for (auto l : path) c += routing_cost(links_[l].capacity(), links_[l].latency);
    costs_[static_cast<std::size_t>(from) * nv + static_cast<std::size_t>(to)] = c;
    routes_[static_cast<std::size_t>(from) * nv + static_cast<std::size_t>(to)] = std::move(path);
  };
  if (!spec_.pcie_p2p) {
    for (int a = 0; a < gpus_; ++a)
      for (int b = 0; b < gpus_; ++b) {
        if (a == b) continue;
        // NVLink peers still talk directly; only PCIe peer traffic is staged.
        const auto& direct = route(a, b);
        const bool over_nvlink = !direct.empty() && std::all_of(direct.begin(), direct.end(), [&](std::uint32_t l) {
          return links_[l].kind == LinkKind::nvlink;
        });
        if (!over_nvlink) set(a, b, via(a, cpu_of_gpu(a), b));
      }
  }
  if (!spec_.gpudirect_rdma) {
    for (int g = 0; g < gpus_; ++g)
      for (int n = 0; n < spec_.nics; ++n) {
        set(g, nic_vertex(n), via(g, cpu_of_gpu(g), nic_vertex(n)));
        set(nic_vertex(n), g, via(nic_vertex(n), cpu_of_gpu(g), g));
      }
  }
}

const std::vector<std::uint32_t>& NodeTemplate::route(int from, int to) const {
  return routes_[static_cast<std::size_t>(from) * vertices_.size() + static_cast<std::size_t>(to)];
}

std::int64_t NodeTemplate::route_cost(int from, int to) const {
  return costs_[static_cast<std::size_t>(from) * vertices_.size() + static_cast<std::size_t>(to)];
}

int NodeTemplate::nearest_nic(int gpu) const {
  const int nics_used = nics();
  int best = -1;
  std::int64_t best_cost = kUnreachableCost;
  double best_skew = 0;
  const double ideal = static_cast<double>(gpu) * nics_used / std::max(1, spec_.gpus);
  for (int n = 0; n < nics_used; ++n) {
    const std::int64_t c = route_cost(gpu, nic_vertex(n));
    const double skew = std::fabs(n - ideal);
    if (c < best_cost || (c == best_cost && c < kUnreachableCost && skew < best_skew)) {
      best = n;
      best_cost = c;
      best_skew = skew;
    }
  }
  return best_cost < kUnreachableCost ? best : -1;
}

}  // namespace dtsim::hw
