// The planner's algorithms: how ring, chain, tree, NVLS, hierarchical, NVLS tree and direct
// collectives become phases of flow groups with their bytes, latencies and channel caps.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "comm/collective.hpp"
#include "comm/channels.hpp"
#include "comm/p2p.hpp"
#include "comm/plan_helpers.hpp"
#include "comm/split.hpp"

namespace dtsim::comm {

using detail::label_of;
using detail::scaled;
using detail::ceil_log2;
using detail::append;
using detail::to_uses;
using detail::double_binary_tree;

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
  const TunerFactor tuned = ring_tuner_factor(lay, proto, n, m, factor, per_edge * nch, [&](std::map<std::uint32_t, double>& load) {
    for (const auto& ch : paths) {
      for (const auto& p : ch) {
        for (LinkId l : p) load[l.value] += per_edge;
      }
    }
  });
  factor = tuned.factor;
  // On one node of A100s over NVLink a ring LL128 all-reduce moves its data at the measured
  // fraction of NCCL's model (data/registry.yaml); NCCL's tuner still sees its model's rate.
  if (proto == Protocol::ll128 && all_reduce && a100_nvlink_node(lay)) {
    const double ratio = params_.ring_ll128_achieved_ratio_sm80_nvlink;
    factor *= ratio;
    plan.tuner_speedup = 1.0 / ratio;
  }

  // NCCL runs a small message on fewer channels (v2.18.5 enqueue.cc getAlgoInfo), and its kernel
  // cuts the message in pieces that leave some channels more than others (comm/split.hpp): the
  // ring moves at (even share over all channels) / (busiest channel's edge) of its rate.
  // NCCL's channel count on this communicator (channel_params) sets both.
  const CommParams chp = channel_params(lay);
  // Across nodes LL's ceiling bounds every channel together, not each one's share of it.
  const double pieces = ring_split_fraction(chp, op, proto, size, n);
  const double used = channel_relief(lay, proto, pieces, tuned.busbw_GBps).split;
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
  double factor = bandwidth_factor(Algo::ring, proto, op, multinode);
  const double share = size.as_double() / nch;
  // NCCL runs a small message on fewer channels (enqueue.cc getAlgoInfo); each of those carries
  // size / used bytes.
  const CommParams chp = channel_params(lay);
  plan.nccl_channels = chp.channels_used(Algo::ring, proto, size, n);
  const double used = static_cast<double>(plan.nccl_channels);

  struct Chain {
    hw::Path path;
    int intra_edges = 0;
    int net_edges = 0;
    bool source_edge_crosses = false;  // the hop out of the rank that holds the data
  };
  std::vector<Chain> chains;
  for (std::size_t c = 0; c < channels.size(); ++c) {
    std::vector<int> o = channels[c].order;
    std::rotate(o.begin(), std::find(o.begin(), o.end(), root_rank), o.end());
    Chain ch;
    for (int i = 0; i + 1 < n; ++i) {
      int a = o[static_cast<std::size_t>(i)], b = o[static_cast<std::size_t>(i + 1)];
      if (op == CollOp::reduce) std::swap(a, b);  // data flows towards the root
      const hw::Path p = edge_path(a, b, channels[c].nic[node_index[topo_.node_of(a)]], channels[c].nic[node_index[topo_.node_of(b)]],
                                   label_of(c, static_cast<std::uint64_t>(i), 2));
      const bool cross = topo_.node_of(a) != topo_.node_of(b);
      Time& lat = cross ? inter_lat : intra_lat;
      lat = std::max(lat, router_.latency(p));
      (cross ? ch.net_edges : ch.intra_edges) += 1;
      // A broadcast's data starts at the root (edge 0), a reduce's at the chain's far end.
      if (i == (op == CollOp::reduce ? n - 2 : 0)) ch.source_edge_crosses = cross;
      append(ch.path, p);
    }
    chains.push_back(std::move(ch));
  }
  // NCCL's tuner refinements and caps, as for the ring. Every edge of a chain carries its
  // channel's whole share, so a broadcast's bus bandwidth is its algorithm's.
  const TunerFactor tuned = ring_tuner_factor(lay, proto, n, m, factor, size.as_double(), [&](std::map<std::uint32_t, double>& load) {
    for (const Chain& ch : chains) {
      for (LinkId l : ch.path) load[l.value] += share;
    }
  });
  factor = tuned.factor;
  // The pipeline's fill (v2.18.5 broadcast.h, reduce.h; BROADCAST_ and REDUCE_CHUNKSTEPS = 1):
  // with Simple a rank forwards a chunk (one step, 512 KiB by default, or its channel's share of a smaller
  // message) only once all of it has arrived and its flag is posted (prims_simple.h: one slice
  // per chunk), so the chain fills in n - 2 chunks. LL and LL128 flag every 16-byte line (8 of
  // data) or 128-byte line and forward each line or warp slice as soon as it is read (prims_ll.h,
  // prims_ll128.h recvCopySend): no fill inside a node beyond the hops' latency. The network
  // proxy still sends a whole step once all its lines are written (transport/net.cc
  // sendProxyProgress), so each network hop of a channel's chain holds one step, except the hop
  // out of the rank that holds the data (it writes the step at copy speed). Each of this plan's
  // nch groups carries size / nch at used / max_channels of its rate (below), so a used
  // channel's fill is spread over them as fill x used / nch.
  const double piece = static_cast<double>(step_data_bytes(params_, proto));
  const double chain_pieces = used / std::max(1, chp.max_channels);
  const ChannelRelief relief = channel_relief(lay, proto, chain_pieces, tuned.busbw_GBps);
  const double per_hop = std::min(size.as_double() / used, piece) * used / nch * relief.fill_scale;
  const Time base = params_.lat(Algo::ring, proto).base + params_.call_overhead;
  Phase ph;
  ph.what = fmt::format("chain {}", to_string(op));
  double bytes = 0, fills = 0;
  for (const Chain& ch : chains) {
    const int hops = proto == Protocol::simple ? n - 2 : std::max(0, ch.net_edges - (ch.source_edge_crosses ? 1 : 0));
    const double fill = hops * per_hop;
    bytes += share + fill;
    fills += fill;
    ph.groups.push_back(FlowGroup{to_uses(ch.path), scaled(share + fill, factor), base + intra_lat * ch.intra_edges + inter_lat * ch.net_edges});
  }
  // The choice's key leaves the fill out, as NCCL's tuner does: the bytes without it over the
  // bytes with it (exact where the groups share their bottleneck, as a node's channels do).
  if (bytes > 0) plan.tuner_bytes_fraction = (bytes - fills) / bytes;
  // As for rings: LL's ceiling across nodes is every channel's together.
  cap_channels(ph, relief.split);
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
  struct Hop {
    hw::Path path;
    bool cross = false;
    bool up = false;  // the reduce going up, else the broadcast coming down
  };
  std::vector<std::vector<Hop>> hops;  // per group: its edges, for the pipeline's fill below
  auto add = [&](hw::Path& all, const hw::Path& p, bool cross, bool up) {
    Time& lat = cross ? inter_lat : intra_lat;
    lat = std::max(lat, router_.latency(p));
    append(all, p);
    hops.back().push_back(Hop{p, cross, up});
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
      hops.emplace_back();
      for (std::size_t k = 0; k < chains.size(); ++k) {
        // The chain inside the node, up (reduce) and down (broadcast). With one node the second
        // tree runs the chain in the opposite order.
        std::vector<int> chain = chains[k];
        if (!multinode && tr == 1) std::reverse(chain.begin(), chain.end());
        for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
          add(all, router_.route(chain[i + 1], chain[i], label_of(c, i, 3)), false, true);
          add(all, router_.route(chain[i], chain[i + 1], label_of(c, i, 4)), false, false);
        }
        const int parent = trees[static_cast<std::size_t>(tr)][k];
        if (multinode && parent >= 0) {
          const int head = chains[k][0], phead = chains[static_cast<std::size_t>(parent)][0];
          const int pnic = nic[static_cast<std::size_t>(parent)];
          add(all, edge_path(head, phead, nic[k], pnic, label_of(c, k, 5 + static_cast<std::uint64_t>(tr))), true, true);
          add(all, edge_path(phead, head, pnic, nic[k], label_of(c, k, 7 + static_cast<std::uint64_t>(tr))), true, false);
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
  // Bytes on each link from every group's share, and from its chunks going up (the reduce) and
  // coming down (the broadcast) alone, for the pipeline's fill below.
  std::map<std::uint32_t, double> load, load_up, load_down;
  for (const auto& group : hops) {
    for (const Hop& h : group) {
      for (LinkId l : h.path) {
        load[l.value] += share;
        (h.up ? load_up : load_down)[l.value] += share;
      }
    }
  }
  double busbw_GBps = 0;  // on idle links at the factor: twice the algorithm bandwidth (tuning.cc ratio .5)
  const double link_bound_factor = factor;  // before a cap of the protocol's own rate
  double cap_factor = std::numeric_limits<double>::infinity();  // the factor at which that cap binds
  if (const double worst = most_loaded_seconds(load); worst > 0) {
    const double algbw = size.as_double() / worst;  // bytes/s at factor 1
    if (const double cap = tuner_cap_GBps(lay, Algo::tree, proto); std::isfinite(cap)) cap_factor = 0.5 * cap * 1e9 / algbw;
    factor = std::min(factor, cap_factor);
    busbw_GBps = 2 * factor * algbw / 1e9;
  }
  // Fewer channels for small messages, and pieces that leave the first channels the most.
  const CommParams chp = channel_params(lay);
  plan.nccl_channels = chp.channels_used(Algo::tree, proto, size, plan.ranks);
  // The pipeline's fill (v2.18.5 all_reduce.h runTreeSplit with ProtoSimple<1, 1>, and
  // transport/net.cc sendProxyProgress). Each channel moves its data up the tree and down again
  // in chunks (tree_chunk: one step, smaller for short messages). With Simple every rank
  // forwards a chunk only once all of it has arrived, so a chunk crosses the critical path's
  // hops one after another: the chain in the deepest node, the tree's network edges to the
  // root, and back down. With LL and LL128 ranks forward each line as they read it, but the
  // network proxy still sends a whole chunk at once, so each network hop holds one. Each hop's
  // time for a chunk is the chunk at that hop's share of its links (the phase's load on them),
  // counted here in bytes at the group's own bottleneck; as for chains, a used channel's fill
  // is spread over the plan's groups as fill x (split x channels) / groups, where split is the
  // fraction of the rate the channel pieces leave (cap_channels below): a channel's fill is its
  // chunks crossing the hops, as long however many chunks its piece holds, so the rate the
  // uneven split takes from the data must not take it from the fill again. Not in NCCL's tuner.
  // The phase's load counts every group's share twice, once going up and once coming down
  // (runTreeSplit runs the reduce and the broadcast side by side). While the first chunk climbs,
  // only chunks going up are on the links, and while the last one comes down only chunks coming
  // down: each hop of the fill and the drain runs on its own direction's load alone. Where both
  // directions share a port (a GPU's port to an NVSwitch, a NIC) that is half the steady load,
  // and a hop takes half a chunk's steady time; on a link that carries one direction only (a
  // point-to-point NVLink or PCIe link between neighbours) the whole. With Simple the pipeline
  // then takes (hops crossed - 1) chunks beyond its data (one chunk's time is already in the
  // data). NCCL's per-channel caps for Simple and LL128 (perChMaxTreeBw, perChMaxTreeLL128Bw),
  // which hold a tree's steady rate, do not hold a direction alone: a channel is one thread block
  // on one SM, whose copy rate both directions share in the steady state and one direction has
  // to itself in the fill (the A3 Mega log's fill hops run at 1.8 times its steady rate per
  // channel; docs/model.md, "Tree pipeline fill"). LL's ceiling is each thread's wait on its
  // flags, which a direction pays alone too: only its network hops hold a chunk, each through a
  // NIC both directions share, at min(2 x link-bound rate, cap) against the steady
  // min(link-bound rate, cap).
  const double ll_fill_load = std::min(link_bound_factor, cap_factor) / std::min(2 * link_bound_factor, cap_factor);
  const double pieces = tree_split_fraction(chp, proto, size, plan.ranks, m);
  const ChannelRelief relief = channel_relief(lay, proto, pieces, busbw_GBps);
  const double split = relief.split;
  std::vector<int> depth(2, 0);  // each tree's depth in nodes: the longest way from a node to its root
  for (int tr = 0; tr < 2; ++tr) {
    const auto& parent = trees[static_cast<std::size_t>(tr)];
    for (int k = 0; k < m; ++k) {
      int d = 0;
      for (int x = k; parent[static_cast<std::size_t>(x)] >= 0; x = parent[static_cast<std::size_t>(x)]) ++d;
      depth[static_cast<std::size_t>(tr)] = std::max(depth[static_cast<std::size_t>(tr)], d);
    }
  }
  std::vector<double> fill(groups.size(), 0.0);
  {
    auto seconds = [&](const hw::Path& p, const std::map<std::uint32_t, double>& on) {
      double worst = 0;
      for (LinkId l : p) {
        const auto it = on.find(l.value);
        if (it != on.end()) worst = std::max(worst, it->second / topo_.link(l).capacity().bytes_per_s());
      }
      return worst;
    };
    const TreeChunk tc = tree_chunk(chp, proto, size, plan.ranks, m);
    const double piece = static_cast<double>(std::min(tc.chunk, tree_busiest_channel_bytes(chp, proto, size, plan.ranks, m)));
    // NCCL channels' worth of the pieces' rate; under LL's relieved ceiling each channel runs
    // split / pieces times faster, its fill too.
    const double carrying = pieces * std::max(1, chp.max_channels);
    // Where LL's ceiling binds all channels together, a chunk still crosses a hop at one thread
    // block's LL rate (channel_relief).
    const double fill_scale = relief.fill_scale;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double bottleneck = seconds(groups[g], load);
      if (!(bottleneck > 0)) continue;
      // The slowest hop of each kind, as a fraction of the bottleneck: on its direction's load
      // alone (Simple, LL128), or on the whole (LL, scaled by ll_fill_load).
      double slow_intra = 0, slow_net = 0;
      for (const auto& h : hops[g]) {
        double& slowest = h.cross ? slow_net : slow_intra;
        const double alone = proto == Protocol::ll ? seconds(h.path, load) : seconds(h.path, h.up ? load_up : load_down);
        slowest = std::max(slowest, alone / bottleneck);
      }
      const double up = depth[g % 2];
      const double crossed = proto == Protocol::simple ? 2.0 * (per_node - 1) * slow_intra + 2.0 * up * slow_net
                                                       : 2.0 * up * slow_net * (proto == Protocol::ll ? ll_fill_load : 1.0);
      const double hop_units = proto == Protocol::simple ? std::max(0.0, crossed - 1.0) : crossed;
      fill[g] = hop_units * piece * carrying * fill_scale / static_cast<double>(groups.size());
    }
  }
  Phase ph;
  ph.what = "double binary tree all-reduce";
  double bytes = 0, fills = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    bytes += share + fill[g];
    fills += fill[g];
    ph.groups.push_back(FlowGroup{to_uses(groups[g]), scaled(share + fill[g], factor), latency});
  }
  // The choice's key leaves the fill out, as NCCL's tuner does (as for chains).
  if (bytes > 0) plan.tuner_bytes_fraction = (bytes - fills) / bytes;
  cap_channels(ph, split);
  plan.phases.push_back(std::move(ph));
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
    // Inside one node each send moves on NCCL's channels for it, each at most one thread block's
    // half (comm/p2p.hpp); across nodes NCCL's channels per network peer changed with v2.20, and
    // no cap is set.
    Bandwidth cap;
    if (!multinode && proto == Protocol::simple) {
      const P2pNodeRate r = nccl_p2p_node_rate(topo_.node_template(lay.nodes[0].node).spec(), params_, lay.nodes[0].locals, size);
      cap = r.cap;
      plan.nccl_channels = r.channels;
    }
    for (int i = 0; i < n; ++i) {
      const int a = lay.ranks[static_cast<std::size_t>(i)], b = lay.ranks[static_cast<std::size_t>((i + 1) % n)];
      const bool cross = topo_.node_of(a) != topo_.node_of(b);
      const hw::Path p = router_.route(a, b, label_of(i, 0, 11));
      ph.groups.push_back(FlowGroup{to_uses(p), scaled(size.as_double(), factor),
                                    base + std::max(step_latency(Algo::ring, proto, cross ? Transport::net : intra, lay), router_.latency(p)), cap});
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

}  // namespace dtsim::comm
