// The collective planner's core: a communicator's layout, NCCL's channel and latency rules for
// it, the candidates and the automatic choice among them, and the closed-form estimate. The
// routes are in paths.cpp, the algorithms' plans in algorithms.cpp, running a plan in execute.cpp.
#include "comm/collective.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "comm/channels.hpp"
#include "comm/plan_helpers.hpp"
#include "comm/split.hpp"

namespace dtsim::comm {

using detail::ceil_log2;
using detail::floor_log2;

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

Planner::ChannelRelief Planner::channel_relief(const Layout& lay, Protocol proto, double pieces, double busbw_GBps) const {
  if (proto != Protocol::ll || lay.nodes.size() <= 1 || !(busbw_GBps > 0)) return ChannelRelief{pieces, 1.0};
  const double per_block = params_.ll_max_busbw_GBps / std::max(1, params_.max_channels);
  const double channels = std::max(1, channel_params(lay).max_channels);
  const double relieved = pieces * channels * per_block / busbw_GBps;
  return ChannelRelief{std::clamp(relieved, pieces, 1.0), relieved > 1.0 ? 1.0 / relieved : 1.0};
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

bool Planner::a100_nvlink_node(const Layout& lay) const {
  if (lay.nodes.size() != 1) return false;
  const hw::NodeSpec& spec = topo_.node_template(lay.nodes[0].node).spec();
  return hw::compute_capability_code(spec.gpu) == 80 && spec.nvlink_topology != hw::NvlinkTopology::none;
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

Planner::TunerFactor Planner::ring_tuner_factor(const Layout& lay, Protocol proto, int n, int m, double factor, double bus_bytes,
                                                const std::function<void(std::map<std::uint32_t, double>&)>& add_load) const {
  // NCCL's tuner: a ring of fewer than 2 GPUs per node runs LL128 at .7 (each GPU sends and
  // receives through its NIC), and caps the bus bandwidth of LL (llMaxBws; across nodes by the
  // host CPU) and of LL128 (graph channels x perChMaxRingLL128Bws): lower the protocol factor
  // until the bus bandwidth on idle links stays under the cap.
  if (proto == Protocol::ll128 && n < 2 * m) factor = std::min(factor, params_.ring_ll128_one_per_node);
  if (const double cap = tuner_cap_GBps(lay, Algo::ring, proto); std::isfinite(cap)) {
    std::map<std::uint32_t, double> load;
    add_load(load);
    if (const double worst = most_loaded_seconds(load); worst > 0) {
      factor = std::min(factor, cap * 1e9 / (bus_bytes / worst));
      return TunerFactor{factor, factor * bus_bytes / worst / 1e9};
    }
  }
  return TunerFactor{factor, 0};
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
  // NCCL's peer-to-peer operations have LL and Simple only (v2.18.5 enqueue.cc addP2pToPlan).
  auto p2p = [&] {
    out.emplace_back(Algo::direct, Protocol::ll);
    out.emplace_back(Algo::direct, Protocol::simple);
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
    case CollOp::sendrecv: p2p(); break;
  }
  return out;
}

bool selection_allows(const CollectiveRequest& req, Algo a, Protocol p) {
  auto listed = [](const auto& list, auto v) { return std::find(list.begin(), list.end(), v) != list.end(); };
  // The automatic choice is NCCL's: the two-level hierarchical all-reduce (Horovod's) runs only
  // when asked for by name.
  const bool algo_ok = req.algo ? *req.algo == a : req.algos.empty() ? a != Algo::hierarchical : listed(req.algos, a);
  // A peer-to-peer operation's protocol is NCCL's size rule (Planner::plan), whatever NCCL_PROTO
  // lists; only one protocol named outright overrides it.
  const bool p2p = req.op == CollOp::alltoall || req.op == CollOp::sendrecv;
  const bool proto_ok = req.protocol ? *req.protocol == p : p2p || req.protocols.empty() || listed(req.protocols, p);
  return algo_ok && proto_ok;
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
    if (selection_allows(req, a, p)) chosen.emplace_back(a, p);
  }
  // NCCL picks a peer-to-peer operation's protocol by each peer's bytes, not by its tuner: LL up
  // to NCCL_P2P_LL_THRESHOLD, else Simple (v2.18.5 enqueue.cc addP2pToPlan).
  if (!req.protocol && (req.op == CollOp::alltoall || req.op == CollOp::sendrecv)) {
    const Bytes per_peer = req.op == CollOp::alltoall ? Bytes(req.size.count() / static_cast<std::int64_t>(req.ranks.size())) : req.size;
    const Protocol rule = per_peer <= params_.p2p_ll_threshold ? Protocol::ll : Protocol::simple;
    std::erase_if(chosen, [&](const auto& c) { return c.second != rule; });
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
    auto names = [](const auto& list) {
      std::string out;
      for (auto v : list) out += fmt::format("{}{}", out.empty() ? "" : ",", to_string(v));
      return out;
    };
    const std::string algo = req.algo ? std::string(to_string(*req.algo)) : req.algos.empty() ? "any algorithm" : names(req.algos);
    const std::string proto = req.protocol ? std::string(to_string(*req.protocol)) : names(req.protocols);
    return Error(fmt::format("{}{}{} cannot run {} on these {} GPUs (possible: {})", algo, proto.empty() ? "" : " with ", proto,
                             to_string(req.op), req.ranks.size(), valid),
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

Time Planner::tuner_time(const Plan& plan) const {
  const bool nccl = params_.choice_as_nccl(plan.nodes);
  double rate = nccl && plan.algo == Algo::tree && plan.op == CollOp::allreduce ? nccl_tree_correction(plan.protocol, plan.size) : 1.0;
  if (nccl) rate *= plan.tuner_speedup;
  const Time total = estimate(plan, false, rate / plan.tuner_bytes_fraction);
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

}  // namespace dtsim::comm
