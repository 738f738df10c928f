#include "hw/topology.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <fmt/format.h>

namespace dtsim::hw {

namespace {

std::string_view kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::gpu: return "gpu";
    case VertexKind::cpu: return "cpu";
    case VertexKind::pcie_switch: return "pcie";
    case VertexKind::nvswitch: return "nvswitch";
    case VertexKind::nic: return "nic";
    case VertexKind::fabric_switch: return "switch";
  }
  return "?";
}

}  // namespace

std::int64_t routing_cost(Bandwidth bw, Time latency) {
  const double mib_ps = std::ceil(1048576.0 / bw.bytes_per_s() * 1e12);
  return latency.picoseconds() + static_cast<std::int64_t>(mib_ps);
}

// ---------------------------------------------------------------------------------------------
// Topology and fabric construction

class FabricBuilder {
 public:
  // Switch-to-switch links are `link` (latency: the link type's when given explicitly, else 0
  // for a short cable); every link entering a switch adds `switch_latency`.
  FabricBuilder(Topology& t, LinkType nic, LinkType link, Time switch_latency)
      : t_(t), nic_(std::move(nic)), link_(std::move(link)), switch_latency_(switch_latency) {}

  std::uint32_t add_switch(std::string name) {
    const auto v = static_cast<std::uint32_t>(t_.vertices_.size());
    t_.vertices_.push_back(Vertex{VertexKind::fabric_switch, -1, static_cast<int>(t_.switch_names_.size())});
    t_.switch_names_.push_back(std::move(name));
    return v;
  }
  // `count` parallel links, each `width` links of `type` wide (a trunk: one link of width x the
  // bandwidth, for a bundle whose traffic is spread evenly).
  void connect(std::uint32_t a, std::uint32_t b, const LinkType& type, int count = 1, int width = 1) {
    for (int i = 0; i < count; ++i) {
      for (auto [s, d] : {std::pair{a, b}, std::pair{b, a}}) {
        TopoLink l;
        l.src = s;
        l.dst = d;
        l.kind = type.kind;
        l.bandwidth = type.bandwidth * static_cast<double>(width);
        l.efficiency = type.efficiency;
        l.latency = type.latency;
        if (t_.vertices_[d].kind == VertexKind::fabric_switch) l.latency += switch_latency_;
        l.type = type.name;
        t_.links_.push_back(std::move(l));
      }
    }
  }
  // NIC `k` of `node` to a switch, with the NIC's link type.
  void attach(int node, int k, std::uint32_t sw) {
    connect(t_.vertex(node, t_.node_template(node).nic_vertex(k)), sw, nic_);
  }
  const LinkType& link() const { return link_; }

 private:
  Topology& t_;
  LinkType nic_, link_;
  Time switch_latency_;
};

std::uint32_t Topology::vertex(int node, int local_vertex) const {
  return nodes_[static_cast<std::size_t>(node)].first_vertex + static_cast<std::uint32_t>(local_vertex);
}

LinkId Topology::link_id(int node, std::uint32_t local_link) const {
  return LinkId{nodes_[static_cast<std::size_t>(node)].first_link + local_link};
}

int Topology::fabric_vertex(std::uint32_t v) const {
  const auto it = fabric_index_.find(v);
  return it == fabric_index_.end() ? -1 : it->second;
}

namespace {

struct Ports {
  int down = 0, up = 0;
};

Expected<Ports> leaf_ports(const FabricSpec& f) {
  if (f.radix < 2) return Error(fmt::format("a switch needs at least 2 ports, got {}", f.radix), "fabric.radix");
  if (!(f.oversubscription >= 1.0) || f.oversubscription > 64) {
    return Error(fmt::format("oversubscription must be between 1 and 64 (down:up), got {}", f.oversubscription),
                 "fabric.oversubscription");
  }
  Ports p;
  p.down = static_cast<int>(std::floor(f.radix * f.oversubscription / (1.0 + f.oversubscription)));
  p.down = std::clamp(p.down, 1, f.radix - 1);
  p.up = f.radix - p.down;
  return p;
}

// The node with `n` of its NICs, spread over its PCIe switches: each switch's first NIC, then
// each one's second, and so on, whole rounds while they fit and the last round's NICs evenly
// (on a DGX A100, whose 4 switches hold two NICs each, 4 keep one per switch and 2 one per CPU,
// as servers built with fewer NICs have them); renumbered 0..n-1 in their order. The node must
// be valid: every NIC on exactly one switch.
NodeSpec with_nics(NodeSpec node, int n) {
  if (n <= 0 || n >= node.nics) return node;
  std::vector<std::vector<int>> rounds;
  for (const PcieGroup& g : node.pcie_groups) {
    for (std::size_t r = 0; r < g.nics.size(); ++r) {
      if (rounds.size() <= r) rounds.emplace_back();
      rounds[r].push_back(g.nics[r]);
    }
  }
  std::vector<int> keep;
  for (const std::vector<int>& round : rounds) {
    const int left = n - static_cast<int>(keep.size()), size = static_cast<int>(round.size());
    if (left <= 0) break;
    if (left >= size) {
      keep.insert(keep.end(), round.begin(), round.end());
      continue;
    }
    for (int k = 0; k < left; ++k) keep.push_back(round[static_cast<std::size_t>(k * size / left)]);
  }
  std::sort(keep.begin(), keep.end());
  std::map<int, int> renumbered;  // old index -> new
  for (std::size_t k = 0; k < keep.size(); ++k) renumbered[keep[k]] = static_cast<int>(k);
  for (PcieGroup& g : node.pcie_groups) {
    std::vector<int> nics;
    for (int x : g.nics) {
      if (auto it = renumbered.find(x); it != renumbered.end()) nics.push_back(it->second);
    }
    g.nics = std::move(nics);
  }
  node.nics = static_cast<int>(keep.size());
  return node;
}

}  // namespace

Expected<Topology> Topology::build(const ClusterSpec& spec) {
  Topology t;
  t.spec_ = spec;
  if (spec.groups.empty()) return Error("a cluster needs at least one node", "nodes");

  // Node templates, one per group.
  int rank = 0;
  for (std::size_t gi = 0; gi < spec.groups.size(); ++gi) {
    const NodeGroup& grp = spec.groups[gi];
    const std::string prefix = spec.groups.size() > 1 ? fmt::format("nodes[{}].", gi) : "";
    if (grp.count <= 0) return Error(fmt::format("node count must be positive, got {}", grp.count), prefix + "count");
    if (grp.count > 1'000'000) return Error(fmt::format("{} nodes is beyond what dtsim simulates", grp.count), prefix + "count");
    const int used = grp.gpus_per_node > 0 ? grp.gpus_per_node : grp.node.gpus;
    auto tmpl = NodeTemplate::build(grp.node, used);
    // Across nodes the fabric may use fewer of the node's NICs: the node is checked whole first,
    // so that its errors name its own NICs.
    const bool multinode = spec.groups.size() > 1 || grp.count > 1;
    if (tmpl && multinode && spec.fabric.nics_per_node > 0 && spec.fabric.nics_per_node < grp.node.nics) {
      tmpl = NodeTemplate::build(with_nics(grp.node, spec.fabric.nics_per_node), used);
    }
    if (!tmpl) {
      Error e = tmpl.error();
      e.message = fmt::format("node '{}': {}", grp.node.name, e.message);
      if (e.field == "gpus_per_node") e.field = prefix + "gpus_per_node";
      else e.field = prefix + "node." + e.field;
      return e;
    }
    t.templates_.push_back(std::make_unique<NodeTemplate>(std::move(*tmpl)));
    const NodeTemplate& nt = *t.templates_.back();
    for (int c = 0; c < grp.count; ++c) {
      NodeInstance ni;
      ni.tmpl = gi;
      ni.group = static_cast<int>(gi);
      ni.first_rank = rank;
      ni.first_vertex = static_cast<std::uint32_t>(t.vertices_.size());
      ni.first_link = static_cast<std::uint32_t>(t.links_.size());
      const int node = static_cast<int>(t.nodes_.size());
      for (Vertex v : nt.vertices()) {
        v.node = node;
        t.vertices_.push_back(v);
      }
      for (TopoLink l : nt.links()) {
        l.src += ni.first_vertex;
        l.dst += ni.first_vertex;
        t.links_.push_back(std::move(l));
      }
      for (int g = 0; g < nt.gpus(); ++g) t.gpu_node_.push_back(node);
      rank += nt.gpus();
      t.nodes_.push_back(ni);
    }
  }
  if (t.gpu_node_.size() > 4'000'000) return Error("more than 4 million GPUs is beyond what dtsim simulates", "nodes");

  // Inside every node kind: all GPUs must reach each other.
  for (const auto& tmpl : t.templates_) {
    for (int a = 0; a < tmpl->gpus(); ++a)
      for (int b = 0; b < tmpl->gpus(); ++b) {
        if (!tmpl->reachable(a, b)) {
          return Error(fmt::format("node '{}': GPU {} has no route to GPU {} inside the node", tmpl->spec().name, a, b), "node");
        }
      }
  }

  const FabricSpec& f = spec.fabric;
  if (t.nodes() == 1) {
    t.fabric_summary_ = "single node, no fabric";
    return t;
  }

  // NIC types and counts per node.
  std::optional<LinkType> nic_type = f.nic;
  for (std::size_t n = 0; n < t.nodes_.size(); ++n) {
    NodeInstance& ni = t.nodes_[n];
    const NodeTemplate& nt = *t.templates_[ni.tmpl];
    if (nt.nics() == 0) {
      return Error(fmt::format("node {} ('{}') has no NIC, so it cannot join a {}-node cluster", n, nt.spec().name, t.nodes()),
                   "nodes");
    }
    if (!f.nic && !nt.spec().nic) return Error(fmt::format("node '{}' names no NIC type; set fabric.nic", nt.spec().name), "fabric.nic");
    if (!nic_type) nic_type = nt.spec().nic;
    if (f.nics_per_node < 0 || f.nics_per_node > nt.nics()) {
      return Error(fmt::format("{} NICs per node requested but node '{}' has {}", f.nics_per_node, nt.spec().name, nt.nics()),
                   "fabric.nics_per_node");
    }
    ni.nics_used = nt.nics();  // the template keeps only the NICs the fabric uses (with_nics)
    for (int g = 0; g < nt.gpus(); ++g) {
      if (nt.nearest_nic(g) < 0) {
        return Error(fmt::format("node '{}': GPU {} has no route to any of the {} NICs it keeps", nt.spec().name, g, ni.nics_used), "node");
      }
    }
  }
  LinkType isl = f.link ? *f.link : *nic_type;
  if (!f.link) isl.latency = Time::zero();
  FabricBuilder fb(t, *nic_type, isl, f.switch_latency.value_or(nic_type->switch_latency));
  std::vector<std::pair<int, int>> nics;  // (node, nic), node-major
  for (int n = 0; n < t.nodes(); ++n)
    for (int k = 0; k < t.nodes_[static_cast<std::size_t>(n)].nics_used; ++k) nics.emplace_back(n, k);
  const int total_nics = static_cast<int>(nics.size());

  // Above the leaves: one tier of `up` spines when every leaf fits on a spine's ports, else pods
  // of radix/2 leaves with `up` spines each, joined by `up` groups of radix/2 core switches
  // (spine s of every pod to core group s), the three-tier fat-tree.
  // With adaptive routing every flow spreads evenly over the equal-cost paths, so each tier's
  // switches act as one: a tier is built as one pooled switch, joined to each leaf (and each pod)
  // by a trunk as wide as the links it stands for. Link for link the load is the even split's.
  // Unset: adaptive where the NIC type routes adaptively (InfiniBand), else by destination (a
  // tuned Ethernet fabric's path pinning; `ecmp` models one left to hash each flow).
  FabricRouting routing = f.routing ? *f.routing : nic_type->adaptive_routing ? FabricRouting::adaptive : FabricRouting::static_paths;
  // A custom fabric routes by destination unless told to hash (adaptive, if asked for, is refused below).
  if (f.kind == FabricKind::custom && routing == FabricRouting::adaptive) routing = FabricRouting::static_paths;
  const bool adaptive = routing == FabricRouting::adaptive;
  t.routing_ = routing;
  bool spines = false;  // a tier above the leaves, where routing has a choice
  int leaf_fill = 1;     // NICs on the fullest leaf (fill_leaves, rail-optimized: nodes per unit)
  int leaf_stride = 0;   // a leaf's downlink ports, where the fabric is built from a radix
  auto upper_tiers = [&](const std::vector<std::uint32_t>& leaves, int up, bool force_three) -> Expected<std::string> {
    const int nleaves = static_cast<int>(leaves.size());
    if (nleaves <= 1 && !force_three) return std::string("no spine");
    spines = true;
    // Static routing builds every switch of a tier; adaptive routing one pooled switch ("spine0-7"
    // for 8), whose links stand for `up` (leaf to spines) or `up x half` (pod to cores) links.
    const int groups = adaptive ? 1 : up;
    auto spine = [&](const std::string& prefix, int s) {
      return fb.add_switch(adaptive ? fmt::format("{}spine0-{}", prefix, up - 1) : fmt::format("{}spine{}", prefix, s));
    };
    if (nleaves <= f.radix && !force_three) {
      for (int s = 0; s < groups; ++s) {
        const std::uint32_t sp = spine("", s);
        for (std::uint32_t lf : leaves) fb.connect(lf, sp, fb.link(), 1, adaptive ? up : 1);
      }
      return fmt::format("{} spine", up);
    }
    const int half = std::max(1, f.radix / 2);
    const int pods = (nleaves + half - 1) / half;
    if (pods > f.radix) {
      // radix pods of radix/2 leaves; at most radix^3/4 NICs when the nodes fill every downlink.
      const long long max_leaves = static_cast<long long>(f.radix) * half;
      return Error(fmt::format("{} NICs need {} leaf switches in {} pods, more than radix-{} switches can connect in three tiers "
                               "(at most {} leaves: {} NICs at the {} a leaf takes here); raise the radix",
                               total_nics, nleaves, pods, f.radix, max_leaves, max_leaves * leaf_fill, leaf_fill),
                   "fabric.radix");
    }
    std::vector<std::vector<std::uint32_t>> cores(static_cast<std::size_t>(groups));
    if (pods > 1) {
      for (int s = 0; s < groups; ++s)
        for (int c = 0; c < (adaptive ? 1 : half); ++c)
          cores[static_cast<std::size_t>(s)].push_back(
              fb.add_switch(adaptive ? fmt::format("core0-{}", up * half - 1) : fmt::format("core{}", s * half + c)));
    }
    for (int p = 0; p < pods; ++p) {
      for (int s = 0; s < groups; ++s) {
        const std::uint32_t sp = spine(fmt::format("pod{}-", p), s);
        for (int l = p * half; l < std::min(nleaves, (p + 1) * half); ++l) fb.connect(leaves[static_cast<std::size_t>(l)], sp, fb.link(), 1, adaptive ? up : 1);
        for (std::uint32_t c : cores[static_cast<std::size_t>(s)]) fb.connect(sp, c, fb.link(), 1, adaptive ? up * half : 1);
      }
    }
    return fmt::format("three tiers: {} pod(s) of {} spine, {} core", pods, up, pods > 1 ? up * half : 0);
  };
  // Leaves filled with NICs in node-major order, whole nodes to a leaf: a node whose NICs do not
  // fit in the current leaf's free downlinks starts the next one (as a server is cabled to one
  // top-of-rack switch), so a leaf of 20 ports takes 2 nodes of 8 NICs and leaves 4 ports free.
  // Only a node with more NICs than a leaf has downlinks is split, over fresh leaves.
  // (Nodes straddling leaves made destination routing collide: the ring's flows out of a leaf
  // went to two leaves at the same port positions, 2x slower at 48 nodes of 8 on 20-port leaves
  // than at 40 or 56.)
  auto fill_leaves = [&](int down) {
    std::vector<std::uint32_t> leaves;
    int used = down;  // ports taken on the current leaf; "full" starts the first one
    for (std::size_t i = 0; i < nics.size();) {
      const int node = nics[i].first;
      std::size_t end = i;
      while (end < nics.size() && nics[end].first == node) ++end;
      const int count = static_cast<int>(end - i);
      if (used + count > down) used = down;  // the node moves to a fresh leaf
      for (; i < end; ++i) {
        if (used == down) {
          leaves.push_back(fb.add_switch(fmt::format("leaf{}", leaves.size())));
          used = 0;
        }
        fb.attach(nics[i].first, nics[i].second, leaves.back());
        leaf_fill = std::max(leaf_fill, ++used);
      }
    }
    return leaves;
  };

  std::string detail;
  switch (f.kind) {
    case FabricKind::single_switch: {
      if (total_nics > f.radix * 64) {
        return Error(fmt::format("{} NICs on one switch is not a real switch; use a fat-tree", total_nics), "fabric.kind");
      }
      const std::uint32_t sw = fb.add_switch("switch0");
      for (auto [n, k] : nics) fb.attach(n, k, sw);
      detail = "1 switch";
      break;
    }
    case FabricKind::fat_tree:
    case FabricKind::clos3: {
      auto ports = leaf_ports(f);
      if (!ports) return ports.error();
      const std::vector<std::uint32_t> leaves = fill_leaves(ports->down);
      leaf_stride = ports->down;
      auto upper = upper_tiers(leaves, ports->up, f.kind == FabricKind::clos3);
      if (!upper) return upper.error();
      detail = fmt::format("{} leaf, {}, {}:1 oversubscribed", leaves.size(), *upper, f.oversubscription);
      break;
    }
    case FabricKind::rail_optimized: {
      auto ports = leaf_ports(f);
      if (!ports) return ports.error();
      const int rails = t.nodes_[0].nics_used;
      for (const auto& ni : t.nodes_) {
        if (ni.nics_used != rails) return Error("a rail-optimized fabric needs the same NIC count on every node", "fabric.nics_per_node");
      }
      const int per_su = ports->down;
      const int sus = (t.nodes() + per_su - 1) / per_su;
      leaf_fill = std::min(t.nodes(), per_su);
      leaf_stride = per_su;
      std::vector<std::uint32_t> leaves;
      for (int su = 0; su < sus; ++su)
        for (int r = 0; r < rails; ++r) {
          const std::uint32_t lf = fb.add_switch(fmt::format("su{}-rail{}", su, r));
          leaves.push_back(lf);
          for (int n = su * per_su; n < std::min(t.nodes(), (su + 1) * per_su); ++n) fb.attach(n, r, lf);
        }
      auto upper = upper_tiers(leaves, ports->up, false);
      if (!upper) return upper.error();
      detail = fmt::format("{} rails x {} unit(s) of up to {} nodes: {} leaf, {}", rails, sus, per_su, leaves.size(), *upper);
      break;
    }
    case FabricKind::custom: {
      if (f.routing == FabricRouting::adaptive) {
        return Error("adaptive routing is modelled on fat-tree, clos3 and rail-optimized fabrics; a custom fabric routes by destination "
                     "or by a hash of each connection (give routing: static or ecmp, or leave it out)",
                     "fabric.routing");
      }
      std::unordered_map<std::string, std::uint32_t> by_name;
      for (std::size_t i = 0; i < f.switches.size(); ++i) {
        if (by_name.count(f.switches[i])) {
          return Error(fmt::format("switch '{}' is declared twice", f.switches[i]), fmt::format("fabric.switches[{}]", i));
        }
        by_name[f.switches[i]] = fb.add_switch(f.switches[i]);
      }
      auto find = [&](const std::string& name, const std::string& field) -> Expected<std::uint32_t> {
        const auto it = by_name.find(name);
        if (it == by_name.end()) return Error(fmt::format("unknown switch '{}' (declare it under fabric.switches)", name), field);
        return it->second;
      };
      for (std::size_t i = 0; i < f.links.size(); ++i) {
        const std::string field = fmt::format("fabric.links[{}]", i);
        auto a = find(f.links[i].a, field);
        if (!a) return a.error();
        auto b = find(f.links[i].b, field);
        if (!b) return b.error();
        if (*a == *b) return Error(fmt::format("switch '{}' is linked to itself", f.links[i].a), field);
        if (f.links[i].count <= 0) return Error("the link count must be positive", field);
        fb.connect(*a, *b, fb.link(), f.links[i].count);
      }
      std::vector<char> attached(static_cast<std::size_t>(t.nodes()), 0);
      for (std::size_t i = 0; i < f.attach.size(); ++i) {
        const CustomAttach& at = f.attach[i];
        const std::string field = fmt::format("fabric.attach[{}]", i);
        auto sw = find(at.switch_name, field);
        if (!sw) return sw.error();
        if (at.first_node < 0 || at.last_node >= t.nodes() || at.first_node > at.last_node) {
          return Error(fmt::format("node range {}-{} is outside the cluster's nodes 0-{}", at.first_node, at.last_node, t.nodes() - 1), field);
        }
        for (int n = at.first_node; n <= at.last_node; ++n) {
          if (attached[static_cast<std::size_t>(n)]) return Error(fmt::format("node {} is attached twice", n), field);
          attached[static_cast<std::size_t>(n)] = 1;
          for (int k = 0; k < t.nodes_[static_cast<std::size_t>(n)].nics_used; ++k) fb.attach(n, k, *sw);
        }
      }
      for (int n = 0; n < t.nodes(); ++n) {
        if (!attached[static_cast<std::size_t>(n)]) return Error(fmt::format("node {} is not attached to any switch", n), "fabric.attach");
      }
      detail = fmt::format("{} switches, {} switch links", f.switches.size(), f.links.size());
      break;
    }
  }

  // The fabric graph: NICs and switches, with the links between them.
  auto add_fabric_vertex = [&](std::uint32_t v) {
    const auto [it, inserted] = t.fabric_index_.emplace(v, static_cast<int>(t.fabric_global_.size()));
    if (inserted) {
      t.fabric_global_.push_back(v);
      boost::add_vertex(t.fabric_);
    }
    return it->second;
  };
  for (auto [n, k] : nics) add_fabric_vertex(t.vertex(n, t.node_template(n).nic_vertex(k)));
  for (std::uint32_t v = 0; v < t.vertices_.size(); ++v) {
    if (t.vertices_[v].kind == VertexKind::fabric_switch) add_fabric_vertex(v);
  }
  const auto first_fabric_link = t.nodes_.back().first_link + static_cast<std::uint32_t>(t.node_template(t.nodes() - 1).links().size());
  for (std::uint32_t i = first_fabric_link; i < t.links_.size(); ++i) {
    const TopoLink& l = t.links_[i];
    boost::add_edge(static_cast<std::size_t>(t.fabric_index_.at(l.src)), static_cast<std::size_t>(t.fabric_index_.at(l.dst)),
                    EdgeLink{i, routing_cost(l.capacity(), l.latency)}, t.fabric_);
  }

  // Tree positions for destination-based routing: NICs numbered leaf by leaf (the switch each
  // NIC hangs from, in the order the switches were made), each leaf's NICs in attachment order.
  {
    std::map<std::size_t, std::vector<std::size_t>> by_leaf;
    for (std::size_t i = 0; i < nics.size(); ++i) {
      auto [e, end] = boost::out_edges(i, t.fabric_);
      DTSIM_ASSERT(e != end, "a fabric NIC without an uplink");
      by_leaf[boost::target(*e, t.fabric_)].push_back(i);
    }
    // The stride is the leaf's downlink ports where the builder knows them (a leaf of 20 ports
    // numbers its NICs 0-19 even when it holds 16), as the subnet manager numbers a fat-tree's
    // hosts by leaf and port: then the flows a leaf sends to two other leaves' NICs at distinct
    // ports leave over distinct uplinks. Else (custom fabrics) the fullest leaf's NIC count.
    std::size_t widest = static_cast<std::size_t>(std::max(1, leaf_stride));
    for (const auto& [leaf, members] : by_leaf) widest = std::max(widest, members.size());
    t.tree_position_.assign(t.fabric_global_.size(), -1);
    std::size_t leaf_no = 0;
    for (const auto& [leaf, members] : by_leaf) {
      for (std::size_t p = 0; p < members.size(); ++p) t.tree_position_[members[p]] = static_cast<int>(leaf_no * widest + p);
      ++leaf_no;
    }
  }

  // Every NIC must reach every other: breadth-first search from the first NIC.
  std::vector<char> seen(t.fabric_global_.size(), 0);
  std::vector<std::size_t> queue{0};
  seen[0] = 1;
  for (std::size_t qi = 0; qi < queue.size(); ++qi) {
    const std::size_t v = queue[qi];
    const bool is_nic = t.vertices_[t.fabric_global_[v]].kind == VertexKind::nic;
    if (is_nic && qi > 0) continue;  // NICs are endpoints, not transit
    for (auto [e, end] = boost::out_edges(v, t.fabric_); e != end; ++e) {
      const std::size_t w = boost::target(*e, t.fabric_);
      if (!seen[w]) {
        seen[w] = 1;
        queue.push_back(w);
      }
    }
  }
  for (std::size_t i = 0; i < nics.size(); ++i) {
    if (!seen[i]) {
      const auto [n, k] = nics[i];
      const auto [n0, k0] = nics[0];
      std::string where;
      for (auto [e, end] = boost::out_edges(i, t.fabric_); e != end; ++e) {
        where = fmt::format(" (attached to switch '{}')", t.vertex_name(t.fabric_global_[boost::target(*e, t.fabric_)]));
      }
      return Error(fmt::format("the fabric is disconnected: NIC {} of node {}{} has no route to NIC {} of node {}, so GPU {} cannot reach GPU {}",
                               k, n, where, k0, n0, t.first_rank(n), t.first_rank(n0)),
                   "fabric");
    }
  }
  if (spines || (f.kind == FabricKind::custom && routing == FabricRouting::ecmp)) {
    detail += routing == FabricRouting::adaptive ? ", adaptive routing"
              : routing == FabricRouting::ecmp   ? ", ECMP (a hashed path per connection)"
                                                 : ", static routing (D-mod-k)";
  }
  t.fabric_summary_ = fmt::format("{} fabric, {} x {} per node: {}", to_string(f.kind), t.nodes_[0].nics_used, nic_type->name, detail);
  return t;
}

std::string Topology::vertex_name(std::uint32_t v) const {
  const Vertex& x = vertices_[v];
  if (x.kind == VertexKind::fabric_switch) return switch_names_[static_cast<std::size_t>(x.index)];
  if (x.kind == VertexKind::nvswitch) return fmt::format("n{}.nvswitch", x.node);
  return fmt::format("n{}.{}{}", x.node, kind_name(x.kind), x.index);
}

std::string Topology::link_name(LinkId id) const {
  const TopoLink& l = links_[id.value];
  return fmt::format("{}->{}", vertex_name(l.src), vertex_name(l.dst));
}

void Topology::install(FlowNetwork& net) const {
  DTSIM_ASSERT(net.link_count() == 0, "install() needs an empty network");
  for (const TopoLink& l : links_) net.add_link(l.capacity(), l.latency);
}

std::string Topology::summary() const {
  std::string nodes;
  for (const NodeGroup& g : spec_.groups) {
    if (!nodes.empty()) nodes += " + ";
    const int used = g.gpus_per_node > 0 ? g.gpus_per_node : g.node.gpus;
    nodes += fmt::format("{} x {}", g.count, g.node.name);
    if (used != g.node.gpus) nodes += fmt::format(" ({} of {} GPUs each)", used, g.node.gpus);
  }
  return fmt::format("{} = {} GPUs; {}", nodes, gpus(), fabric_summary_);
}

}  // namespace dtsim::hw
