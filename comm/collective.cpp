#include "comm/collective.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include <fmt/format.h>

#include "comm/channels.hpp"
#include "comm/split.hpp"

namespace dtsim::comm {

std::string_view to_string(Fidelity f) {
  switch (f) {
    case Fidelity::coupled: return "coupled";
    case Fidelity::per_edge: return "per-edge";
    case Fidelity::per_step: return "per-step";
  }
  return "?";
}

std::optional<Fidelity> parse_fidelity(std::string_view s) {
  for (Fidelity f : {Fidelity::coupled, Fidelity::per_edge, Fidelity::per_step}) {
    if (to_string(f) == s) return f;
  }
  return std::nullopt;
}

namespace {

std::uint64_t label_of(std::uint64_t a, std::uint64_t b, std::uint64_t c) { return (a * 0x9E3779B1u) ^ (b << 21) ^ (c << 42) ^ c; }

Bytes scaled(double bytes, double factor) { return Bytes(static_cast<std::int64_t>(std::ceil(bytes / factor))); }

int ceil_log2(int m) {
  int d = 0;
  while ((1 << d) < m) ++d;
  return d;
}

// log2 rounded down (NCCL's log2i); 0 for 1 and below.
int floor_log2(std::int64_t m) { return m > 1 ? std::bit_width(static_cast<std::uint64_t>(m)) - 1 : 0; }

void append(hw::Path& dst, const hw::Path& src) { dst.insert(dst.end(), src.begin(), src.end()); }


std::vector<LinkUse> to_uses(const hw::Path& p) {
  std::vector<LinkUse> u;
  u.reserve(p.size());
  for (LinkId l : p) u.push_back(LinkUse{l, 1});
  return merge_uses(std::move(u));
}

// Binary tree over 0..m-1 built from the bits of the index: rank r > 0 with lowest set bit b
// hangs below (r ^ b) | (b << 1), or r ^ b when that is out of range; 0 is the root. Odd ranks
// are leaves, so shifting every rank by one (below) turns them into the inner nodes.
std::vector<int> binary_tree(int m) {
  std::vector<int> parent(static_cast<std::size_t>(m), -1);
  for (int r = 1; r < m; ++r) {
    const int bit = r & -r;
    int up = (r ^ bit) | (bit << 1);
    if (up >= m) up = r ^ bit;
    parent[static_cast<std::size_t>(r)] = up;
  }
  return parent;
}

// NCCL's double binary tree: the second tree is the first shifted by one (even m) or mirrored
// (odd m), so that most leaves of one tree are inner nodes of the other.
std::array<std::vector<int>, 2> double_binary_tree(int m) {
  std::vector<int> t0 = binary_tree(m);
  std::vector<int> t1(static_cast<std::size_t>(m), -1);
  auto sigma = [m](int x) { return m % 2 == 0 ? (x + 1) % m : m - 1 - x; };
  for (int x = 0; x < m; ++x) {
    const int p = t0[static_cast<std::size_t>(x)];
    t1[static_cast<std::size_t>(sigma(x))] = p < 0 ? -1 : sigma(p);
  }
  return {t0, t1};
}

}  // namespace

Planner::Planner(const hw::Topology& topo, hw::Router& router, CommParams params)
    : topo_(topo), router_(router), params_(std::move(params)) {}

Planner::Layout Planner::layout(const std::vector<int>& ranks) const {
  Layout lay;
  lay.ranks = ranks;
  std::map<int, std::size_t> index;
  for (int r : ranks) {
    const int node = topo_.node_of(r);
    auto it = index.find(node);
    if (it == index.end()) {
      it = index.emplace(node, lay.nodes.size()).first;
      lay.nodes.push_back(NodePart{node, {}});
    }
    lay.nodes[it->second].locals.push_back(topo_.local_of(r));
  }
  lay.min_per_node = lay.nodes.empty() ? 0 : INT32_MAX;
  for (const auto& p : lay.nodes) {
    lay.max_per_node = std::max(lay.max_per_node, static_cast<int>(p.locals.size()));
    lay.min_per_node = std::min(lay.min_per_node, static_cast<int>(p.locals.size()));
  }
  lay.searches = channel_searches(lay);
  return lay;
}

Transport Planner::intra_transport(const Layout& lay) const {
  for (const auto& p : lay.nodes) {
    if (topo_.node_template(p.node).spec().nvlink_topology == hw::NvlinkTopology::none) return Transport::pcie;
  }
  return Transport::nvlink;
}

hw::CpuVendor Planner::host_vendor(const Layout& lay) const {
  // NCCL asks its own host (every rank's is alike in the clusters dtsim builds per node kind).
  return lay.nodes.empty() ? hw::CpuVendor::other : topo_.node_template(lay.nodes.front().node).spec().cpu_vendor;
}

Time Planner::step_latency(Algo a, Protocol p, Transport t, const Layout& lay) const {
  Time s = params_.lat(a, p).step[static_cast<std::size_t>(t)];
  // NCCL v2.18.5 tuning.cc: "inter-node rings still have to launch nsteps * net overhead", a host
  // cost NCCL sets by the CPU's maker (getNetOverhead).
  if (a != Algo::tree && lay.nodes.size() > 1 && t != Transport::net) {
    const Time post = host_vendor(lay) == hw::CpuVendor::amd ? params_.net_overhead_amd : params_.net_overhead;
    s = std::max(s, post * (p == Protocol::simple ? 3 : 1));
  }
  return s;
}

double Planner::ll_max_busbw_GBps(const Layout& lay) const {
  // NCCL v2.18.5 tuning.cc llMaxBws: on one node by the GPU (Ampere and Hopper alike), across
  // nodes by the host CPU and whether there are 2 nodes or more.
  if (lay.nodes.size() <= 1) return params_.ll_max_busbw_GBps;
  const bool two = lay.nodes.size() == 2;
  if (host_vendor(lay) == hw::CpuVendor::amd) return two ? params_.ll_max_busbw_amd_2nodes : params_.ll_max_busbw_amd_more;
  return two ? params_.ll_max_busbw_intel_2nodes : params_.ll_max_busbw_intel_more;
}

bool Planner::ll128_by_default(const Layout& lay) const {
  // v2.18.5 tuning.cc: "Enable LL128 by default only on Volta/Ampere/Hopper+NVLink. Other cases
  // are not tested and may cause silent data corruption." Every GPU of compute capability 7.0,
  // 8.0 or 9.0, all alike; every node's GPUs joined by NVLink (typeIntra up to NVB); across nodes
  // GPUDirect RDMA (typeInter up to PXB, not through host memory). Blackwell, which 2.18.5
  // predates, as NCCL 2.25 enables it: 10.0. A GPU preset without a compute capability is not
  // held to it.
  int lo = std::numeric_limits<int>::max(), hi = 0;
  for (const auto& part : lay.nodes) {
    const hw::NodeSpec& spec = topo_.node_template(part.node).spec();
    const int cc = hw::compute_capability_code(spec.gpu);
    if (cc > 0) {
      lo = std::min(lo, cc);
      hi = std::max(hi, cc);
    }
    if (part.locals.size() > 1 && spec.nvlink_topology == hw::NvlinkTopology::none) return false;
    if (lay.nodes.size() > 1 && !spec.gpudirect_rdma) return false;
  }
  if (hi == 0) return true;
  return lo == hi && (lo == 70 || lo == 80 || lo == 90 || lo == 100);
}

std::vector<ChannelSearch> Planner::channel_searches(const Layout& lay) const {
  std::vector<ChannelSearch> nodes;
  if (lay.nodes.size() <= 1) return nodes;
  const auto& fabric_nic = topo_.spec().fabric.nic;
  for (const auto& part : lay.nodes) {
    const hw::NodeSpec& spec = topo_.node_template(part.node).spec();
    const auto& nic = fabric_nic ? fabric_nic : spec.nic;
    if (!nic) return {};
    ChannelSearch c;
    c.nics = std::max<int>(1, static_cast<int>(own_nics(part).size()));
    c.gpus = static_cast<int>(part.locals.size());
    c.nic_GBps = nic->bandwidth.bytes_per_s() / 1e9;
    c.nvlinks = spec.nvlink_topology == hw::NvlinkTopology::none ? 0 : std::max(spec.gpu.nvlink_links, spec.nvlink_links_per_gpu);
    c.pcie_generation = spec.gpu.pcie_generation;
    c.compute_capability = hw::compute_capability_code(spec.gpu);
    nodes.push_back(c);
  }
  return nodes;
}

CommParams Planner::channel_params(const Layout& lay) const {
  CommParams p = params_;
  if (!lay.searches.empty()) p.max_channels = nccl_multinode_channels(lay.searches);
  return p;
}

double Planner::tuner_cap_GBps(const Layout& lay, Algo a, Protocol p) const {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  // A ring with LL: LL's ceiling (llMaxBws; across nodes by the host CPU), on any node count.
  if (a == Algo::ring && p == Protocol::ll) return ll_max_busbw_GBps(lay) > 0 ? ll_max_busbw_GBps(lay) : kNone;
  if (a != Algo::tree && !(a == Algo::ring && p == Protocol::ll128)) return kNone;
  // The caps multiply the graph's channels (the search's, before ncclTopoPostset runs each twice),
  // which dtsim knows across nodes (comm/channels.hpp). On one node it does not run NCCL's NVLink
  // search: no cap there (nor LL's ceiling on a tree, which `dtsim fit`'s one-node tree LL lines
  // are not held to either).
  const std::vector<ChannelSearch>& nodes = lay.searches;
  if (nodes.empty()) return kNone;
  // NCCL indexes the tables by the lowest compute capability (a GPU of unknown capability
  // aside); Blackwell, which 2.18.5 predates, takes none of them (later NCCL versions' tables
  // differ).
  int cc = std::numeric_limits<int>::max();
  for (const ChannelSearch& n : nodes) {
    if (n.compute_capability > 0) cc = std::min(cc, n.compute_capability);
  }
  if (cc == std::numeric_limits<int>::max() || cc >= 100) return kNone;
  const PerChannelCaps caps = nccl_per_channel_caps(cc, static_cast<int>(nodes.size()));
  const double ch = nccl_multinode_graph(nodes).channels;
  if (a == Algo::ring) return ch * caps.ring_ll128;
  // v2.18.5 tuning.cc: every tree protocol is capped at channels x perChMaxTreeBw (after its .92);
  // LL128 then takes its 120/128 and its own cap, LL its 1/3.8 and LL's ceiling.
  switch (p) {
    case Protocol::simple: return ch * caps.tree;
    case Protocol::ll128: return std::min(ch * caps.tree * 120.0 / 128.0, ch * caps.tree_ll128);
    case Protocol::ll: return std::min(ch * caps.tree / 3.8, ll_max_busbw_GBps(lay));
  }
  return kNone;
}

double Planner::most_loaded_seconds(const std::map<std::uint32_t, double>& load) const {
  double worst = 0;
  for (const auto& [l, bytes] : load) worst = std::max(worst, bytes / topo_.link(LinkId{l}).capacity().bytes_per_s());
  return worst;
}

double Planner::bandwidth_factor(Algo a, Protocol p, CollOp op, bool multinode) const {
  if (a == Algo::nvls) return 1.0;
  if (a == Algo::tree) {
    switch (p) {
      case Protocol::ll: return params_.tree_ll;
      case Protocol::ll128: return multinode ? params_.tree_ll128_multinode : params_.tree_ll128;
      case Protocol::simple: return params_.tree_simple;
    }
  }
  switch (p) {
    case Protocol::ll:
      return (multinode || op == CollOp::allreduce || op == CollOp::reduce) ? params_.ring_ll_allreduce : params_.ring_ll_other;
    case Protocol::ll128: return params_.ring_ll128;
    case Protocol::simple: return 1.0;
  }
  return 1.0;
}

std::vector<std::pair<Algo, Protocol>> Planner::candidates(const CollectiveRequest& req) const {
  std::vector<std::pair<Algo, Protocol>> out;
  const Layout lay = layout(req.ranks);
  const bool multinode = lay.nodes.size() > 1;
  bool nvls = true;
  for (const auto& p : lay.nodes) {
    const auto& spec = topo_.node_template(p.node).spec();
    nvls = nvls && spec.nvls && spec.nvlink_topology == hw::NvlinkTopology::nvswitch;
  }
  // LL128 only where NCCL enables it by default, unless the request names it (NCCL_PROTO).
  const bool ll128 = req.protocol == Protocol::ll128 || ll128_by_default(lay);
  auto all = [&](Algo a) {
    for (Protocol p : kAllProtocols) {
      if (p != Protocol::ll128 || ll128) out.emplace_back(a, p);
    }
  };
  switch (req.op) {
    case CollOp::allreduce:
      all(Algo::ring);
      all(Algo::tree);
      // NCCL v2.18.5 (transport/nvls.cc ncclNvlsInit) turns NVLS off for a communicator with 2 GPUs
      // or fewer on a node; across nodes it runs the NVLS tree.
      if (nvls && lay.min_per_node > 2) out.emplace_back(Algo::nvls, Protocol::simple);
      if (multinode && lay.max_per_node > 1) {
        all(Algo::hierarchical);
      }
      break;
    case CollOp::allgather:
    case CollOp::reducescatter:
    case CollOp::broadcast:
    case CollOp::reduce: all(Algo::ring); break;
    case CollOp::alltoall:
    case CollOp::sendrecv: all(Algo::direct); break;
  }
  return out;
}

Expected<Plan> Planner::plan(const CollectiveRequest& req) {
  if (req.ranks.empty()) return Error("a collective needs at least one rank", "ranks");
  for (int r : req.ranks) {
    if (r < 0 || r >= topo_.gpus()) return Error(fmt::format("rank {} does not exist (the cluster has {} GPUs)", r, topo_.gpus()), "ranks");
  }
  {
    std::vector<int> sorted = req.ranks;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return Error("a GPU appears twice in the communicator", "ranks");
  }
  if (req.root < 0 || req.root >= static_cast<int>(req.ranks.size())) return Error(fmt::format("root {} is not a rank of the communicator", req.root), "root");
  if (req.size < Bytes(0)) return Error("the size must not be negative", "size");
  if (req.size > Bytes(std::int64_t{1} << 50)) return Error(fmt::format("{} is beyond what dtsim simulates (1 PiB)", to_string(req.size)), "size");
  const Layout lay = layout(req.ranks);
  const auto cands = candidates(req);
  std::vector<std::pair<Algo, Protocol>> chosen;
  for (const auto& [a, p] : cands) {
    // The automatic choice is NCCL's: the two-level hierarchical all-reduce (Horovod's) runs only
    // when asked for by name.
    if (!req.algo && a == Algo::hierarchical) continue;
    if ((!req.algo || *req.algo == a) && (!req.protocol || *req.protocol == p)) chosen.emplace_back(a, p);
  }
  if (chosen.empty() && req.algo == Algo::nvls && req.op == CollOp::allreduce && lay.min_per_node <= 2) {
    return Error(fmt::format("nvls needs more than 2 GPUs on every node (NCCL turns NVLS off below that); these {} GPUs have {} on "
                             "a node",
                             req.ranks.size(), lay.min_per_node),
                 "algo");
  }
  if (chosen.empty()) {
    std::string valid;
    for (const auto& [a, p] : cands) valid += fmt::format("{}{}/{}", valid.empty() ? "" : ", ", to_string(a), to_string(p));
    return Error(fmt::format("{}{}{} cannot run {} on these {} GPUs (possible: {})", req.algo ? to_string(*req.algo) : "any algorithm",
                             req.protocol ? " with " : "", req.protocol ? to_string(*req.protocol) : "", to_string(req.op),
                             req.ranks.size(), valid),
                 "algo");
  }
  std::optional<Plan> best;
  Time best_key = Time::zero();
  for (const auto& [a, p] : chosen) {
    // Candidates are compared on the closed form; only the winner keeps its fidelity.
    CollectiveRequest r = req;
    if (chosen.size() > 1) r.fidelity = Fidelity::coupled;
    auto pl = plan_fixed(r, lay, a, p);
    if (!pl) return pl.error();
    const Time key = chosen.size() > 1 ? tuner_time(*pl) : pl->estimate;
    if (!best || key < best_key) {
      best = std::move(*pl);
      best_key = key;
    }
  }
  if (chosen.size() > 1 && req.fidelity != Fidelity::coupled) {
    return plan_fixed(req, lay, best->algo, best->protocol);
  }
  return std::move(*best);
}

Expected<Plan> Planner::plan_fixed(const CollectiveRequest& req, const Layout& lay, Algo algo, Protocol proto) {
  Plan plan;
  plan.op = req.op;
  plan.algo = algo;
  plan.protocol = proto;
  plan.ranks = static_cast<int>(req.ranks.size());
  plan.nodes = static_cast<int>(lay.nodes.size());
  plan.size = req.size;
  plan.channels = 1;
  if (plan.ranks == 1) {
    // One rank: nothing crosses a link; only the call itself costs time.
    plan.phases.push_back(Phase{"local", {FlowGroup{{}, Bytes(0), params_.call_overhead}}});
    plan.estimate = estimate(plan);
    return plan;
  }
  if (req.fidelity == Fidelity::per_step && algo != Algo::ring) {
    return Error("per-step fidelity exists for ring algorithms only", "fidelity");
  }
  if (req.fidelity == Fidelity::per_step && plan.ranks > 512) {
    return Error(fmt::format("per-step fidelity costs O(n^2) flows; {} ranks is too many (use coupled)", plan.ranks), "fidelity");
  }
  switch (algo) {
    case Algo::ring:
      if (req.op == CollOp::broadcast || req.op == CollOp::reduce) add_chain(lay, req.op, req.root, proto, req.size, plan);
      else add_ring(lay, req.op, proto, req.size, req.fidelity, plan);
      break;
    case Algo::tree: add_tree(lay, proto, req.size, plan); break;
    case Algo::nvls:
      if (lay.nodes.size() == 1) add_nvls(lay, req.size, plan);
      else add_nvls_tree(lay, req.size, plan);
      break;
    case Algo::hierarchical: add_hierarchical(lay, proto, req.size, plan); break;
    case Algo::direct: add_direct(lay, req.op, proto, req.size, plan); break;
  }
  plan.estimate = estimate(plan);
  return plan;
}

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

// ----------------------------------------------------------------------------------------------
// Algorithms

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

void Planner::add_ring(const Layout& lay, CollOp op, Protocol proto, Bytes size, Fidelity fid, Plan& plan) {
  const int n = plan.ranks, m = plan.nodes;
  const bool multinode = m > 1;
  const std::vector<RingChannel> channels = ring_channels(lay);
  plan.channels = static_cast<int>(channels.size());
  const double nch = static_cast<double>(channels.size());
  std::map<int, std::size_t> node_index;
  for (std::size_t i = 0; i < lay.nodes.size(); ++i) node_index[lay.nodes[i].node] = i;

  const bool all_reduce = op == CollOp::allreduce;
  const int nsteps = all_reduce ? 2 * (n - 1) : n - 1;
  // Steps over the network, as NCCL's tuner counts them (v2.18.5 tuning.cc nInterSteps): an
  // all-reduce's 2(n - 1) steps cross the ring's m node boundaries about twice, 2m of them; an
  // all-gather's or reduce-scatter's n - 1 steps, m - 1.
  const int ninter = !multinode ? 0 : all_reduce ? 2 * m : m - 1;
  const Transport intra = intra_transport(lay);
  Time intra_lat = step_latency(Algo::ring, proto, intra, lay);
  Time inter_lat = step_latency(Algo::ring, proto, Transport::net, lay);
  const Time base = params_.lat(Algo::ring, proto).base + params_.call_overhead;
  double factor = bandwidth_factor(Algo::ring, proto, op, multinode);
  const double per_edge = (all_reduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n) * size.as_double() / nch;

  // Paths of every edge of every channel. A step cannot take less than its path's latency: NCCL's
  // per-step figures cover ordinary links, a slow path (a long cable, a TCP stack) raises them.
  std::vector<std::vector<hw::Path>> paths(channels.size());
  for (std::size_t c = 0; c < channels.size(); ++c) {
    const auto& ch = channels[c];
    for (int i = 0; i < n; ++i) {
      const int a = ch.order[static_cast<std::size_t>(i)], b = ch.order[static_cast<std::size_t>((i + 1) % n)];
      const int nic = ch.nic[node_index[topo_.node_of(a)]];
      const int to_nic = ch.nic[node_index[topo_.node_of(b)]];
      paths[c].push_back(edge_path(a, b, nic, to_nic, label_of(c, static_cast<std::uint64_t>(i), 1)));
      const Time path_lat = router_.latency(paths[c].back());
      if (topo_.node_of(a) != topo_.node_of(b)) inter_lat = std::max(inter_lat, path_lat);
      else intra_lat = std::max(intra_lat, path_lat);
    }
  }
  // NCCL's tuner: a ring of fewer than 2 GPUs per node runs LL128 at .7 (each GPU sends and
  // receives through its NIC), and caps the bus bandwidth of LL (llMaxBws; across nodes by the
  // host CPU) and of LL128 (graph channels x perChMaxRingLL128Bws): lower the protocol factor
  // until the ring's bus bandwidth on idle links stays under the cap.
  if (proto == Protocol::ll128 && n < 2 * m) factor = std::min(factor, params_.ring_ll128_one_per_node);
  if (const double cap = tuner_cap_GBps(lay, Algo::ring, proto); std::isfinite(cap)) {
    std::map<std::uint32_t, double> load;
    for (const auto& ch : paths) {
      for (const auto& p : ch) {
        for (LinkId l : p) load[l.value] += per_edge;
      }
    }
    if (const double worst = most_loaded_seconds(load); worst > 0) {
      const double busbw = per_edge * nch / worst;  // bytes/s at factor 1
      factor = std::min(factor, cap * 1e9 / busbw);
    }
  }

  // NCCL runs a small message on fewer channels (v2.18.5 enqueue.cc getAlgoInfo), and its kernel
  // cuts the message in pieces that leave some channels more than others (comm/split.hpp): the
  // ring moves at (even share over all channels) / (busiest channel's edge) of its rate.
  // NCCL's channel count on this communicator (channel_params) sets both.
  const CommParams chp = channel_params(lay);
  const double used = ring_split_fraction(chp, op, proto, size, n);
  plan.nccl_channels = chp.channels_used(Algo::ring, proto, size, n);

  // With Simple every rank hands over 2 slices per step and loop, one after another (below).
  const std::int64_t slices = proto == Protocol::simple ? chp.ring_slices(size, n, plan.nccl_channels, nsteps) : 0;
  if (fid == Fidelity::per_step) {
    const Time slice_lat = intra_lat * (slices / nsteps);
    const double chunk = size.as_double() / n / nch;
    for (int s = 0; s < nsteps; ++s) {
      Phase ph;
      ph.what = fmt::format("step {}", s + 1);
      for (std::size_t c = 0; c < channels.size(); ++c) {
        for (int i = 0; i < n; ++i) {
          const bool cross = topo_.node_of(channels[c].order[static_cast<std::size_t>(i)]) !=
                             topo_.node_of(channels[c].order[static_cast<std::size_t>((i + 1) % n)]);
          ph.groups.push_back(FlowGroup{to_uses(paths[c][static_cast<std::size_t>(i)]), scaled(chunk, factor),
                                        std::max(cross ? inter_lat : intra_lat, slice_lat) + (s == 0 ? base : Time::zero())});
        }
      }
      cap_channels(ph, used);
      plan.phases.push_back(std::move(ph));
    }
    return;
  }
  // NCCL's latency is the chain of the ring's steps. With Simple, every rank also hands over its
  // slices one after another, each ending with a fence and a flag its peer must see before the
  // channel's threads go on (prims_simple.h); each costs a Simple step over the node's links, and
  // a rank's slices cannot take less than their handoffs (issue 12). NCCL's tuner does not see it.
  Time latency = base + intra_lat * (nsteps - ninter) + inter_lat * ninter;
  if (base + intra_lat * slices > latency) {
    plan.unseen_by_tuner = base + intra_lat * slices - latency;
    latency = base + intra_lat * slices;
  }
  Phase ph;
  ph.what = fmt::format("ring {}", to_string(op));
  for (std::size_t c = 0; c < channels.size(); ++c) {
    if (fid == Fidelity::per_edge) {
      for (const auto& p : paths[c]) ph.groups.push_back(FlowGroup{to_uses(p), scaled(per_edge, factor), latency});
    } else {
      hw::Path all;
      for (const auto& p : paths[c]) append(all, p);
      ph.groups.push_back(FlowGroup{to_uses(all), scaled(per_edge, factor), latency});
    }
  }
  cap_channels(ph, used);
  plan.phases.push_back(std::move(ph));
}

void Planner::add_chain(const Layout& lay, CollOp op, int root, Protocol proto, Bytes size, Plan& plan) {
  // Pipelined chain along each ring channel, cut open at the root: broadcast flows away from it,
  // reduce towards it.
  const int n = plan.ranks, m = plan.nodes;
  const bool multinode = m > 1;
  const int root_rank = lay.ranks[static_cast<std::size_t>(root)];
  const std::vector<RingChannel> channels = ring_channels(lay);
  std::map<int, std::size_t> node_index;
  for (std::size_t i = 0; i < lay.nodes.size(); ++i) node_index[lay.nodes[i].node] = i;
  plan.channels = static_cast<int>(channels.size());
  const double nch = static_cast<double>(channels.size());
  const Transport intra = intra_transport(lay);
  Time intra_lat = step_latency(Algo::ring, proto, intra, lay);
  Time inter_lat = step_latency(Algo::ring, proto, Transport::net, lay);
  const double factor = bandwidth_factor(Algo::ring, proto, op, multinode);
  const double share = size.as_double() / nch;
  const double fill = static_cast<double>(n - 2) * std::min(share, params_.pipeline_chunk.as_double());
  std::vector<hw::Path> chains;
  for (std::size_t c = 0; c < channels.size(); ++c) {
    std::vector<int> o = channels[c].order;
    std::rotate(o.begin(), std::find(o.begin(), o.end(), root_rank), o.end());
    hw::Path all;
    for (int i = 0; i + 1 < n; ++i) {
      int a = o[static_cast<std::size_t>(i)], b = o[static_cast<std::size_t>(i + 1)];
      if (op == CollOp::reduce) std::swap(a, b);  // data flows towards the root
      const hw::Path p = edge_path(a, b, channels[c].nic[node_index[topo_.node_of(a)]], channels[c].nic[node_index[topo_.node_of(b)]],
                                   label_of(c, static_cast<std::uint64_t>(i), 2));
      Time& lat = topo_.node_of(a) != topo_.node_of(b) ? inter_lat : intra_lat;
      lat = std::max(lat, router_.latency(p));
      append(all, p);
    }
    chains.push_back(std::move(all));
  }
  const Time latency = params_.lat(Algo::ring, proto).base + params_.call_overhead + intra_lat * ((n - 1) - (m - 1)) + inter_lat * (m - 1);
  Phase ph;
  ph.what = fmt::format("chain {}", to_string(op));
  for (const auto& all : chains) ph.groups.push_back(FlowGroup{to_uses(all), scaled(share + fill, factor), latency});
  const CommParams chp = channel_params(lay);
  plan.nccl_channels = chp.channels_used(Algo::ring, proto, size, n);
  cap_channels(ph, static_cast<double>(plan.nccl_channels) / std::max(1, chp.max_channels));
  plan.phases.push_back(std::move(ph));
}

void Planner::add_tree(const Layout& lay, Protocol proto, Bytes size, Plan& plan) {
  const int m = plan.nodes;
  const bool multinode = m > 1;
  const Transport intra = intra_transport(lay);
  Time intra_lat = step_latency(Algo::tree, proto, intra, lay);
  Time inter_lat = step_latency(Algo::tree, proto, Transport::net, lay);
  const int per_node = lay.max_per_node;
  double factor = bandwidth_factor(Algo::tree, proto, CollOp::allreduce, multinode);

  // Channels as for rings: the channel's segment on each node is a chain whose first GPU (the one
  // owning the channel's NIC) is the node's vertex in the two binary trees over nodes.
  const std::vector<RingChannel> channels = ring_channels(lay);
  const int nch = static_cast<int>(channels.size());
  plan.channels = nch;
  const auto trees = double_binary_tree(m);
  const double share = size.as_double() / 2.0 / nch;
  std::vector<hw::Path> groups;
  auto add = [&](hw::Path& all, const hw::Path& p, bool cross) {
    Time& lat = cross ? inter_lat : intra_lat;
    lat = std::max(lat, router_.latency(p));
    append(all, p);
  };
  for (int c = 0; c < nch; ++c) {
    const RingChannel& ch = channels[static_cast<std::size_t>(c)];
    std::vector<std::vector<int>> chains;  // per node: head first
    for (int r : ch.order) {
      if (chains.empty() || topo_.node_of(chains.back().front()) != topo_.node_of(r)) chains.emplace_back();
      chains.back().push_back(r);
    }
    const std::vector<int>& nic = ch.nic;
    for (int tr = 0; tr < 2; ++tr) {
      hw::Path all;
      for (std::size_t k = 0; k < chains.size(); ++k) {
        // The chain inside the node, up (reduce) and down (broadcast). With one node the second
        // tree runs the chain in the opposite order.
        std::vector<int> chain = chains[k];
        if (!multinode && tr == 1) std::reverse(chain.begin(), chain.end());
        for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
          add(all, router_.route(chain[i + 1], chain[i], label_of(c, i, 3)), false);
          add(all, router_.route(chain[i], chain[i + 1], label_of(c, i, 4)), false);
        }
        const int parent = trees[static_cast<std::size_t>(tr)][k];
        if (multinode && parent >= 0) {
          const int head = chains[k][0], phead = chains[static_cast<std::size_t>(parent)][0];
          const int pnic = nic[static_cast<std::size_t>(parent)];
          add(all, edge_path(head, phead, nic[k], pnic, label_of(c, k, 5 + static_cast<std::uint64_t>(tr))), true);
          add(all, edge_path(phead, head, pnic, nic[k], label_of(c, k, 7 + static_cast<std::uint64_t>(tr))), true);
        }
      }
      groups.push_back(std::move(all));
    }
  }
  const Time latency = params_.lat(Algo::tree, proto).base + params_.call_overhead +
                       (intra_lat * (per_node - 1) + inter_lat * ceil_log2(m)) * 2;
  // NCCL's tuner caps a tree's bus bandwidth at graph channels x a rate per channel (and LL's at
  // its ceiling); a tree's algorithm bandwidth is half its bus bandwidth there (tuning.cc ratio
  // .5). Lower the protocol factor until the tree's algorithm bandwidth on idle links stays under.
  if (const double cap = tuner_cap_GBps(lay, Algo::tree, proto); std::isfinite(cap)) {
    std::map<std::uint32_t, double> load;
    for (const auto& all : groups) {
      for (LinkId l : all) load[l.value] += share;
    }
    if (const double worst = most_loaded_seconds(load); worst > 0) {
      const double algbw = size.as_double() / worst;  // bytes/s at factor 1
      factor = std::min(factor, 0.5 * cap * 1e9 / algbw);
    }
  }
  Phase ph;
  ph.what = "double binary tree all-reduce";
  for (const auto& all : groups) ph.groups.push_back(FlowGroup{to_uses(all), scaled(share, factor), latency});
  // Fewer channels for small messages, and pieces that leave the first channels the most.
  const CommParams chp = channel_params(lay);
  plan.nccl_channels = chp.channels_used(Algo::tree, proto, size, plan.ranks);
  cap_channels(ph, tree_split_fraction(chp, proto, size, plan.ranks, m));
  plan.phases.push_back(std::move(ph));
}

hw::Path Planner::switch_round(int node, int local) const {
  const hw::NodeTemplate& t = topo_.node_template(node);
  hw::Path round;
  router_.append_local(node, local, t.nvswitch_vertex(), round);
  router_.append_local(node, t.nvswitch_vertex(), local, round);
  return round;
}

Time Planner::nvls_pipeline_cost(Bytes size, int heads, int gpus, double rate) const {
  // NCCL's kernel moves the message in loops of channels x heads x chunk bytes (v2.18.5
  // all_reduce.h, chunk by size in enqueue.cc); each loop passes a scatter, a switch reduce and
  // multicast, and a gather, and waits on every GPU: one synchronisation per loop, two more to
  // fill the three stages. The stages run as a pipeline on each channel, the switch round the
  // slowest: the first loop's scatters (fill) and the last loop's gathers (drain) are not hidden
  // behind it, each (g - 1) / g of a loop over the GPU's link to the switch at `rate` bytes/s.
  const std::int64_t loops = params_.nvls_loops(size, heads);
  const double loop = static_cast<double>(params_.nvls_channels) * heads * static_cast<double>(params_.nvls_chunk(size, heads).count());
  const Time fill_drain =
      rate > 0 ? Time::from_seconds(2.0 * (gpus - 1) / gpus * std::min(size.as_double(), loop) / rate) : Time::zero();
  return params_.nvls_loop_latency * (loops + 2) + fill_drain;
}

void Planner::add_nvls(const Layout& lay, Bytes size, Plan& plan) {
  // NVLink SHARP all-reduce: the switch reads every GPU's buffer and returns the reduced slices
  // (multimem.ld_reduce), then multicasts them (multimem.st): each GPU's link to the switch moves
  // S(1 + 1/n) each way.
  const auto& part = lay.nodes[0];
  const int n = plan.ranks;
  hw::Path all;
  Time path_lat = Time::zero();  // the longest GPU -> switch -> GPU round
  for (int l : part.locals) {
    const hw::Path round = switch_round(part.node, l);
    path_lat = std::max(path_lat, router_.latency(round));
    append(all, round);
  }
  const double bytes = size.as_double() * (1.0 + 1.0 / n);
  // The reduce (ld_reduce) and the multicast (st) are two sequential rounds through the switch;
  // the switch round moves (n + 1) / n of a block each way where the scatter and the gather move
  // (n - 1) / n one way, so it sets the pipeline's pace.
  double link = 0;  // the GPU's link to the switch, bytes/s
  for (LinkId l : all) {
    const double c = topo_.link(l).capacity().bytes_per_s();
    link = link == 0 ? c : std::min(link, c);
  }
  plan.channels = params_.nvls_channels;
  plan.nccl_channels = params_.nvls_channels;
  plan.unseen_by_tuner = nvls_pipeline_cost(size, n, n, link * params_.nvls_efficiency);
  const Time latency = std::max(params_.nvls_latency, path_lat * 2) + plan.unseen_by_tuner + params_.call_overhead;
  Phase ph{"NVLS all-reduce", {FlowGroup{to_uses(all), scaled(bytes, params_.nvls_efficiency), latency}}};
  // Channel b scatters the block at b x heads x chunk of each loop (comm/split.hpp): below one
  // loop only the first channels carry data, each at its share (1 / nvls.channels) of the rate.
  cap_channels(ph, nvls_split_fraction(params_, size, n));
  plan.phases.push_back(std::move(ph));
}

void Planner::add_hierarchical(const Layout& lay, Protocol proto, Bytes size, Plan& plan) {
  // Reduce-scatter inside each node, all-reduce of each GPU's shard across nodes (GPUs of the same
  // local index form a ring over their NICs), all-gather inside each node, one after another (a
  // two-level all-reduce as Horovod's hierarchical mode runs it; NCCL has no such algorithm).
  const int g = lay.max_per_node;
  const double s = size.as_double();
  auto intra_phase = [&](bool scatter) {
    Phase ph;
    ph.what = scatter ? "intra-node reduce-scatter" : "intra-node all-gather";
    for (const auto& part : lay.nodes) {
      const int k = static_cast<int>(part.locals.size());
      if (k < 2) continue;
      const auto order = intra_orders(part)[0];
      hw::Path all;
      Time step = step_latency(Algo::ring, proto, intra_transport(lay), lay);
      for (std::size_t i = 0; i < order.size(); ++i) {
        const int a = topo_.first_rank(part.node) + order[i];
        const int b = topo_.first_rank(part.node) + order[(i + 1) % order.size()];
        const hw::Path p = router_.route(a, b, label_of(i, 0, 9));
        step = std::max(step, router_.latency(p));
        append(all, p);
      }
      const Time lat = params_.lat(Algo::ring, proto).base + params_.call_overhead + step * (k - 1);
      const double factor = bandwidth_factor(Algo::ring, proto, scatter ? CollOp::reducescatter : CollOp::allgather, true);
      ph.groups.push_back(FlowGroup{to_uses(all), scaled(static_cast<double>(k - 1) / k * s, factor), lat});
    }
    return ph;
  };
  plan.phases.push_back(intra_phase(true));
  Phase inter;
  inter.what = "inter-node all-reduce per local GPU";
  const Time net_step = step_latency(Algo::ring, proto, Transport::net, lay);
  const double factor = bandwidth_factor(Algo::ring, proto, CollOp::allreduce, true);
  for (int j = 0; j < g; ++j) {
    std::vector<int> ring;
    for (const auto& part : lay.nodes) {
      if (j < static_cast<int>(part.locals.size())) ring.push_back(topo_.first_rank(part.node) + part.locals[static_cast<std::size_t>(j)]);
    }
    const int r = static_cast<int>(ring.size());
    if (r < 2) continue;
    hw::Path all;
    Time step = net_step;
    for (int i = 0; i < r; ++i) {
      const hw::Path p = router_.route(ring[static_cast<std::size_t>(i)], ring[static_cast<std::size_t>((i + 1) % r)], label_of(j, i, 10));
      step = std::max(step, router_.latency(p));
      append(all, p);
    }
    const Time lat = params_.lat(Algo::ring, proto).base + params_.call_overhead + step * (2 * (r - 1));
    const double shard = s / std::max(1, g);
    inter.groups.push_back(FlowGroup{to_uses(all), scaled(2.0 * (r - 1) / r * shard, factor), lat});
  }
  plan.phases.push_back(std::move(inter));
  plan.phases.push_back(intra_phase(false));
  plan.channels = g;
}

void Planner::add_nvls_tree(const Layout& lay, Bytes size, Plan& plan) {
  // NCCL's NVLS tree (v2.18.5 all_reduce.h, NCCL_ALGO_NVLS_TREE): in every node the switch reduces
  // the GPUs' data into one shard per head (a GPU with its own NIC: NCCL logs "NVLS Head i"), each
  // head all-reduces its shard with the same head of the other nodes over a double binary tree
  // through its NIC, and the switch multicasts the result back. The kernel runs its scatter,
  // reduce, tree and broadcast warps side by side on loops of channels x heads x chunk, so the
  // stages are one pipeline: one phase with every stage's flows at once, not three phases.
  const int m = plan.nodes;
  const double s = size.as_double();
  std::vector<std::vector<OwnNic>> heads;
  std::size_t nheads = SIZE_MAX;
  for (const auto& part : lay.nodes) {
    heads.push_back(own_nics(part));
    nheads = std::min(nheads, heads.back().size());
  }
  // NVLink data at nvls.tree_factor of one node's NVLS rate, network data at that of the NICs'.
  const double intra_factor = params_.nvls_efficiency * params_.nvls_tree_factor;
  const double net_factor = params_.nvls_tree_factor;
  Phase ph;
  ph.what = "NVLS tree all-reduce";
  Time path_lat = Time::zero();
  double link = 0;  // the slowest GPU-to-switch link, bytes/s
  int gmax = 1;
  for (std::size_t k = 0; k < lay.nodes.size(); ++k) {
    // Every GPU's link to the switch moves its S up (scatter) and the S of the result down
    // (multicast); a head also takes its reduced shard down and multicasts it up, S / heads each
    // way: S(1 + 1/g) for every GPU when every GPU is a head, as on one node.
    const auto& part = lay.nodes[k];
    gmax = std::max(gmax, static_cast<int>(part.locals.size()));
    hw::Path head_rounds, other_rounds;
    for (int l : part.locals) {
      const hw::Path round = switch_round(part.node, l);
      path_lat = std::max(path_lat, router_.latency(round));
      for (LinkId id : round) {
        const double c = topo_.link(id).capacity().bytes_per_s();
        link = link == 0 ? c : std::min(link, c);
      }
      const auto& own = heads[k];
      const bool head = std::any_of(own.begin(), own.begin() + static_cast<std::ptrdiff_t>(nheads), [l](const OwnNic& o) { return o.local == l; });
      append(head ? head_rounds : other_rounds, round);
    }
    ph.groups.push_back(FlowGroup{to_uses(head_rounds), scaled(s * (1.0 + 1.0 / static_cast<double>(nheads)), intra_factor), Time::zero()});
    if (!other_rounds.empty()) ph.groups.push_back(FlowGroup{to_uses(other_rounds), scaled(s, intra_factor), Time::zero()});
  }
  // Head h of every node: a double binary tree over the nodes, half the shard on each tree, up
  // (reduce) and down (broadcast) every edge, through the head's own NIC.
  const auto trees = double_binary_tree(m);
  const double shard = s / static_cast<double>(nheads);
  Time net_lat = Time::zero();
  for (std::size_t h = 0; h < nheads; ++h) {
    for (int tr = 0; tr < 2; ++tr) {
      hw::Path all;
      for (int k = 0; k < m; ++k) {
        const int parent = trees[static_cast<std::size_t>(tr)][static_cast<std::size_t>(k)];
        if (parent < 0) continue;
        const OwnNic& me = heads[static_cast<std::size_t>(k)][h];
        const OwnNic& up = heads[static_cast<std::size_t>(parent)][h];
        const int a = topo_.first_rank(lay.nodes[static_cast<std::size_t>(k)].node) + me.local;
        const int b = topo_.first_rank(lay.nodes[static_cast<std::size_t>(parent)].node) + up.local;
        const hw::Path p_up = edge_path(a, b, me.nic, up.nic, label_of(h, static_cast<std::uint64_t>(k), 11 + static_cast<std::uint64_t>(tr)));
        const hw::Path p_down = edge_path(b, a, up.nic, me.nic, label_of(h, static_cast<std::uint64_t>(k), 13 + static_cast<std::uint64_t>(tr)));
        net_lat = std::max({net_lat, router_.latency(p_up), router_.latency(p_down)});
        append(all, p_up);
        append(all, p_down);
      }
      if (!all.empty()) ph.groups.push_back(FlowGroup{to_uses(all), scaled(shard / 2, net_factor), Time::zero()});
    }
  }
  // Latency: NCCL's (baseLat 23 us + 2 ceil(log2 m) x hwLat NET 19 us: up and down the tree's
  // depth), never under the paths' own, and as on one node the loops' synchronisation and the
  // first scatter and last gather, which the pipeline cannot hide and NCCL's tuner does not see.
  plan.channels = params_.nvls_channels;
  plan.nccl_channels = params_.nvls_channels;
  plan.unseen_by_tuner = nvls_pipeline_cost(size, static_cast<int>(nheads), gmax, link * intra_factor);
  const int depth = ceil_log2(m);
  const Time latency = std::max(params_.nvls_latency + params_.nvls_net_latency * (2 * depth), path_lat * 2 + net_lat * (2 * depth)) +
                       plan.unseen_by_tuner + params_.call_overhead;
  for (FlowGroup& gr : ph.groups) gr.latency = latency;
  cap_channels(ph, nvls_split_fraction(params_, size, static_cast<int>(nheads)));
  plan.phases.push_back(std::move(ph));
}

void Planner::add_direct(const Layout& lay, CollOp op, Protocol proto, Bytes size, Plan& plan) {
  const int n = plan.ranks;
  const bool multinode = plan.nodes > 1;
  const Transport intra = intra_transport(lay);
  const double factor = bandwidth_factor(Algo::direct, proto, op, multinode);
  const Time base = params_.lat(Algo::ring, proto).base + params_.call_overhead;
  Phase ph;
  if (op == CollOp::sendrecv) {
    // nccl-tests' sendrecv: rank i sends S to rank i+1 and receives S from rank i-1.
    ph.what = "send/recv to the next rank";
    for (int i = 0; i < n; ++i) {
      const int a = lay.ranks[static_cast<std::size_t>(i)], b = lay.ranks[static_cast<std::size_t>((i + 1) % n)];
      const bool cross = topo_.node_of(a) != topo_.node_of(b);
      const hw::Path p = router_.route(a, b, label_of(i, 0, 11));
      ph.groups.push_back(FlowGroup{to_uses(p), scaled(size.as_double(), factor),
                                    base + std::max(step_latency(Algo::ring, proto, cross ? Transport::net : intra, lay), router_.latency(p))});
    }
  } else {
    // All-to-all: every rank sends S/n to every other rank; one coupled group per sender.
    ph.what = "all-to-all";
    for (int i = 0; i < n; ++i) {
      const int a = lay.ranks[static_cast<std::size_t>(i)];
      hw::Path all;
      bool cross = false;
      Time path_lat = Time::zero();
      for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const int b = lay.ranks[static_cast<std::size_t>(j)];
        cross = cross || topo_.node_of(a) != topo_.node_of(b);
        const hw::Path p = router_.route(a, b, label_of(i, j, 12));
        path_lat = std::max(path_lat, router_.latency(p));
        append(all, p);
      }
      ph.groups.push_back(FlowGroup{to_uses(all), scaled(size.as_double() / n, factor),
                                    base + std::max(step_latency(Algo::ring, proto, cross ? Transport::net : intra, lay), path_lat)});
    }
  }
  plan.channels = 1;
  plan.phases.push_back(std::move(ph));
}

Time Planner::tuner_time(const Plan& plan) const {
  const bool nccl = params_.choice_as_nccl(plan.nodes);
  const double rate = nccl && plan.algo == Algo::tree && plan.op == CollOp::allreduce ? nccl_tree_correction(plan.protocol, plan.size) : 1.0;
  const Time total = estimate(plan, false, rate);
  Time key = total - plan.unseen_by_tuner;
  if (nccl && plan.algo == Algo::nvls && plan.nodes > 1) {
    // The NVLS tree's latency as NCCL's tuner charges it, in place of the one simulated.
    const Time simulated = params_.nvls_latency + params_.nvls_net_latency * (2 * ceil_log2(plan.nodes));
    const Time tuner = params_.tuner_nvls_tree_latency + params_.tuner_nvls_tree_net_latency * (2 * floor_log2(plan.nodes));
    key = key - simulated + tuner;
  }
  return key;
}

Time Planner::estimate(const Plan& plan, bool channel_caps, double data_rate) const {
  Time total = Time::zero();
  std::map<std::uint32_t, double> load;
  for (const Phase& ph : plan.phases) {
    Time lat = Time::zero();
    load.clear();
    Time capped = Time::zero();  // a group held below its links' rate by its channel count
    for (const FlowGroup& g : ph.groups) {
      lat = std::max(lat, g.latency);
      for (const LinkUse& u : g.uses) load[u.link.value] += g.bytes.as_double() * u.count;
      if (channel_caps && !g.cap.is_zero()) capped = std::max(capped, g.latency + Time::from_seconds(g.bytes.as_double() / g.cap.bytes_per_s()));
    }
    double worst = 0;
    for (const auto& [l, bytes] : load) worst = std::max(worst, bytes / topo_.link(LinkId{l}).capacity().bytes_per_s());
    total += std::max(lat + Time::from_seconds(worst / data_rate), capped);
  }
  return total;
}

void Planner::cap_channels(Phase& ph, double fraction) const {
  if (!(fraction < 1.0)) return;
  // The phase's data time on otherwise idle links: its most loaded link, counting every group of
  // the phase (the two trees of a tree all-reduce share links, for instance).
  std::map<std::uint32_t, double> load;
  for (const FlowGroup& g : ph.groups) {
    for (const LinkUse& u : g.uses) load[u.link.value] += g.bytes.as_double() * u.count;
  }
  const double seconds = most_loaded_seconds(load);
  if (!(seconds > 0)) return;
  // Each group at `fraction` of the rate that ends it with the phase.
  for (FlowGroup& g : ph.groups) {
    if (g.bytes.count() > 0) g.cap = Bandwidth::bytes_per_s(fraction * g.bytes.as_double() / seconds);
  }
}

// ----------------------------------------------------------------------------------------------
// Execution

namespace {

struct RunState {
  FlowNetwork* net;
  std::shared_ptr<const Plan> plan;
  std::size_t phase = 0;
  std::size_t outstanding = 0;
  std::function<void()> done;
};

void start_phase(const std::shared_ptr<RunState>& st) {
  while (st->phase < st->plan->phases.size() && st->plan->phases[st->phase].groups.empty()) ++st->phase;
  if (st->phase == st->plan->phases.size()) {
    auto done = std::move(st->done);
    if (done) done();
    return;
  }
  const Phase& ph = st->plan->phases[st->phase];
  st->outstanding = ph.groups.size();
  for (const FlowGroup& g : ph.groups) {
    FlowSpec spec;
    spec.uses = g.uses;
    spec.bytes = g.bytes;
    spec.latency = g.latency;
    spec.cap = g.cap;
    spec.on_complete = [st] {
      if (--st->outstanding == 0) {
        ++st->phase;
        start_phase(st);
      }
    };
    st->net->start(std::move(spec));
  }
}

}  // namespace

void execute(FlowNetwork& net, std::shared_ptr<const Plan> plan, std::function<void()> done) {
  auto st = std::make_shared<RunState>();
  st->net = &net;
  st->plan = std::move(plan);
  st->done = std::move(done);
  start_phase(st);
}

Time nccl_tests_iteration(Time collective, int gpus_per_thread, const CommParams& params) {
  return std::max(collective, params.launch_overhead * std::max(1, gpus_per_thread));
}

Time simulate_alone(const hw::Topology& topo, const Plan& plan, std::string_view sharing) {
  Simulator sim;
  FlowNetwork net(sim, make_sharing_model(sharing));
  topo.install(net);
  Time end = Time::zero();
  execute(net, plan, [&] { end = sim.now(); });
  sim.run();
  return end;
}

}  // namespace dtsim::comm
