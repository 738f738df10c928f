#include "comm/params.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "comm/split.hpp"

namespace dtsim::comm {

std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::ring: return "ring";
    case Algo::tree: return "tree";
    case Algo::nvls: return "nvls";
    case Algo::hierarchical: return "hierarchical";
    case Algo::direct: return "direct";
  }
  return "?";
}

std::string_view to_string(Protocol p) {
  switch (p) {
    case Protocol::ll: return "LL";
    case Protocol::ll128: return "LL128";
    case Protocol::simple: return "Simple";
  }
  return "?";
}

std::string_view to_string(Transport t) {
  switch (t) {
    case Transport::nvlink: return "nvlink";
    case Transport::pcie: return "pcie";
    case Transport::net: return "net";
  }
  return "?";
}

std::optional<Algo> parse_algo(std::string_view s) {
  for (Algo a : kAllAlgos) {
    if (to_string(a) == s) return a;
  }
  return std::nullopt;
}

std::optional<Protocol> parse_protocol(std::string_view s) {
  if (s == "LL" || s == "ll") return Protocol::ll;
  if (s == "LL128" || s == "ll128") return Protocol::ll128;
  if (s == "Simple" || s == "simple") return Protocol::simple;
  return std::nullopt;
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The names of a list, '^' taken off; an empty name (",," or a trailing comma) is an error.
Expected<std::pair<bool, std::vector<std::string>>> split_list(std::string_view s, std::string_view what) {
  bool exclude = false;
  if (!s.empty() && s.front() == '^') {
    exclude = true;
    s.remove_prefix(1);
  }
  if (s.empty()) return Error(fmt::format("no {} named (an empty value)", what), std::string(what));
  std::vector<std::string> names;
  while (true) {
    const auto comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    if (name.empty()) return Error(fmt::format("an empty {} name in the list", what), std::string(what));
    names.push_back(lower(name));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return std::make_pair(exclude, std::move(names));
}

template <typename T, std::size_t N>
Expected<std::vector<T>> pick(const T (&all)[N], std::string_view s, std::string_view what, std::string_view valid,
                              const std::function<std::optional<T>(std::string_view)>& parse, const std::vector<T>& ncclset) {
  auto split = split_list(s, what);
  if (!split) return split.error();
  const auto& list = *split;
  std::vector<T> named;
  for (const auto& name : list.second) {
    const auto v = parse(name);
    if (!v) return Error(fmt::format("unknown {} '{}' in '{}' ({})", what, name, s, valid), std::string(what));
    named.push_back(*v);
  }
  std::vector<T> out;
  for (T v : all) {
    const bool in = std::find(named.begin(), named.end(), v) != named.end();
    const bool nccl = std::find(ncclset.begin(), ncclset.end(), v) != ncclset.end();
    if (list.first ? (nccl && !in) : in) out.push_back(v);
  }
  if (out.empty()) return Error(fmt::format("'{}' leaves no {}", s, what), std::string(what));
  return out;
}

}  // namespace

Expected<std::vector<Algo>> parse_algo_list(std::string_view s) {
  auto one = [](std::string_view name) -> std::optional<Algo> {
    if (name == "nvlstree") return Algo::nvls;
    return parse_algo(name);
  };
  return pick<Algo>(kAllAlgos, s, "algorithm", "ring, tree, nvls, nvlstree, hierarchical, direct, or auto; a list; '^' leaves out", one,
                    {Algo::ring, Algo::tree, Algo::nvls, Algo::direct});
}

Expected<std::vector<Protocol>> parse_protocol_list(std::string_view s) {
  return pick<Protocol>(kAllProtocols, s, "protocol", "LL, LL128, Simple, or auto; a list; '^' leaves out", parse_protocol,
                        {Protocol::ll, Protocol::ll128, Protocol::simple});
}

Expected<Selection> parse_selection(std::string_view algo, std::string_view proto) {
  Selection sel;
  if (lower(algo) != "auto") {
    auto list = parse_algo_list(algo);
    if (!list) return Error(list.error().message, "algo");
    if (list->size() == 1 && algo.front() != '^') sel.algo = list->front();
    else sel.algos = std::move(*list);
  }
  if (lower(proto) != "auto") {
    auto list = parse_protocol_list(proto);
    if (!list) return Error(list.error().message, "proto");
    if (list->size() == 1 && proto.front() != '^') sel.protocol = list->front();
    else sel.protocols = std::move(*list);
  }
  return sel;
}

namespace {
std::size_t algo_index(Algo a) { return a == Algo::tree ? 1 : 0; }  // everything else uses ring's table
Time us(double v) { return Time::from_seconds(v * 1e-6); }
}  // namespace

const StepLatency& CommParams::lat(Algo a, Protocol p) const { return latency[algo_index(a)][static_cast<std::size_t>(p)]; }
StepLatency& CommParams::lat(Algo a, Protocol p) { return latency[algo_index(a)][static_cast<std::size_t>(p)]; }

double nccl_tree_correction(Protocol p, Bytes bytes) {
  static constexpr double kFactor[3][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  const std::int64_t units = bytes.count() >> 6;
  if (units <= 0) return 1.0;
  const int log = std::bit_width(static_cast<std::uint64_t>(units)) - 1;  // NCCL's log2i
  if (log >= 23) return 1.0;
  const int row = p == Protocol::ll ? 0 : p == Protocol::ll128 ? 1 : 2;
  return kFactor[row][log];
}

CommParams CommParams::nccl_defaults() {
  // NCCL v2.18.5 src/graph/tuning.cc: baseLat and hwLat (us), per {LL, LL128, Simple}.
  //   baseLat Tree {6.8, 14.0, 0}, Ring {6.6, 14.0, 8.4}
  //   hwLat NVLink: Tree {.6, 1.25, 4},  Ring {.6, 1.9, 3.4}
  //         PCI:    Tree {1.0, 1.9, 6},  Ring {1.0, 2.5, 5.7}
  //         NET:    Tree {5.0, 8.5, 14}, Ring {2.7, 4.0, 14.0}
  CommParams p;
  auto set = [&](Algo a, Protocol pr, double base, double nvl, double pci, double net) {
    p.lat(a, pr) = StepLatency{us(base), {us(nvl), us(pci), us(net)}};
  };
  set(Algo::ring, Protocol::ll, 6.6, 0.6, 1.0, 2.7);
  set(Algo::ring, Protocol::ll128, 14.0, 1.9, 2.5, 4.0);
  set(Algo::ring, Protocol::simple, 8.4, 3.4, 5.7, 14.0);
  set(Algo::tree, Protocol::ll, 6.8, 0.6, 1.0, 5.0);
  set(Algo::tree, Protocol::ll128, 14.0, 1.25, 1.9, 8.5);
  set(Algo::tree, Protocol::simple, 0.0, 4.0, 6.0, 14.0);
  return p;
}

// NCCL v2.18.5 enqueue.cc getAlgoInfo (comm/split.cpp has the thresholds and threads).
int CommParams::channels_used(Algo a, Protocol p, Bytes bytes, int nranks) const { return nccl_launch(*this, a, p, bytes, nranks).channels; }

Bytes CommParams::nvls_chunk(Bytes bytes, int nranks) const {
  // Simple's step (NCCL_BUFFSIZE / NCCL_STEPS 8, 512 KiB by default), capped at 128 KiB for NVLS,
  // then halved for smaller messages so that every channel and head gets work.
  std::int64_t chunk = std::min<std::int64_t>(131072, simple_step().count());
  const std::int64_t ops = static_cast<std::int64_t>(std::max(1, nvls_channels)) * std::max(1, nranks);
  const std::int64_t s = bytes.count();
  if (s < 64 * ops * chunk && chunk > 65536) chunk = 65536;
  if (s < 8 * ops * chunk && chunk > 32768) chunk = 32768;
  if (s < 2 * ops * chunk && chunk > 16384) chunk = 16384;
  return Bytes(chunk);
}

std::int64_t CommParams::nvls_loops(Bytes bytes, int nranks) const {
  const std::int64_t loop = static_cast<std::int64_t>(std::max(1, nvls_channels)) * std::max(1, nranks) * nvls_chunk(bytes, nranks).count();
  return std::max<std::int64_t>(1, (bytes.count() + loop - 1) / loop);
}

std::int64_t CommParams::ring_slices(Bytes bytes, int nranks, int channels, int steps) const {
  const std::int64_t chunk = simple_step().count() * kRingChunkSteps;
  const std::int64_t loop = chunk * std::max(1, nranks) * std::max(1, channels);
  const std::int64_t loops = std::max<std::int64_t>(1, (bytes.count() + loop - 1) / loop);
  return loops * std::max(1, steps) * 2;
}

namespace {

Status set_time(Time& t, std::string_view v) {
  auto r = parse_time(v);
  if (!r) return r.error();
  t = *r;
  return {};
}

// A whole-string number in (0, max]; `what` names it in the error.
Status set_number(double& d, std::string_view v, double max, std::string_view what) {
  double x = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size() || !(x > 0) || x > max) return Error(fmt::format("'{}' is not {}", v, what));
  d = x;
  return {};
}

Status set_fraction(double& d, std::string_view v) { return set_number(d, v, 1, "a fraction in (0, 1]"); }

std::vector<ParamInfo> build_table() {
  std::vector<ParamInfo> t;
  const std::string nccl = "NCCL v2.18.5 src/graph/tuning.cc (baseLat/hwLat)";
  for (Algo a : {Algo::ring, Algo::tree}) {
    for (Protocol p : kAllProtocols) {
      const std::string prefix = fmt::format("{}.{}", to_string(a), to_string(p));
      t.push_back(ParamInfo{prefix + ".base_latency", "time",
                            fmt::format("fixed latency of one {} collective with the {} protocol", to_string(a), to_string(p)),
                            nccl,
                            [a, p](const CommParams& c) { return to_string(c.lat(a, p).base); },
                            [a, p](CommParams& c, std::string_view v) { return set_time(c.lat(a, p).base, v); }});
      for (Transport tr : {Transport::nvlink, Transport::pcie, Transport::net}) {
        const auto i = static_cast<std::size_t>(tr);
        t.push_back(ParamInfo{fmt::format("{}.step_latency.{}", prefix, to_string(tr)), "time",
                              fmt::format("latency of one {} step over {} with {}", to_string(a), to_string(tr), to_string(p)),
                              nccl,
                              [a, p, i](const CommParams& c) { return to_string(c.lat(a, p).step[i]); },
                              [a, p, i](CommParams& c, std::string_view v) { return set_time(c.lat(a, p).step[i], v); }});
      }
    }
  }
  auto fraction = [&](std::string name, double CommParams::*m, std::string help, std::string source) {
    t.push_back(ParamInfo{std::move(name), "fraction", std::move(help), std::move(source),
                          [m](const CommParams& c) { return fmt::format("{:.4g}", c.*m); },
                          [m](CommParams& c, std::string_view v) { return set_fraction(c.*m, v); }});
  };
  const std::string refine = "NCCL v2.18.5 src/graph/tuning.cc (model refinements)";
  fraction("ring.LL.bandwidth_factor.allreduce", &CommParams::ring_ll_allreduce, "bus bandwidth fraction of ring LL for all-reduce (and multi-node)", refine);
  fraction("ring.LL.bandwidth_factor.other", &CommParams::ring_ll_other, "bus bandwidth fraction of ring LL for other collectives in one node", refine);
  fraction("ring.LL128.bandwidth_factor", &CommParams::ring_ll128, "bus bandwidth fraction of ring LL128 (120 of 128 bytes are data)", refine);
  fraction("ring.LL128.bandwidth_factor.one_per_node", &CommParams::ring_ll128_one_per_node,
           "bus bandwidth fraction of ring LL128 with fewer than 2 GPUs per node (sending and receiving through one GPU's NIC)", refine);
  fraction("ring.LL128.achieved_ratio.sm80_nvlink", &CommParams::ring_ll128_achieved_ratio_sm80_nvlink,
           "what a ring LL128 all-reduce reaches on one node of A100s (compute capability 8.0) over NVLink, as a fraction of "
           "ring.LL128.bandwidth_factor (NCCL's model, which the automatic choice with choice nccl still assumes)",
           "fitted: azure-nd-a100-v4-allreduce, 2-16 MiB (NCCL 2.18.5 runs ring LL128 there), least squares in log, 0.63 of the "
           "links' effective rate = 0.685 x 0.92; NVIDIA/nccl PR 2343 finds NCCL's LL128 model 1/0.60 too fast on 2 B200");
  fraction("tree.Simple.bandwidth_factor", &CommParams::tree_simple, "bus bandwidth fraction of tree Simple", refine);
  fraction("tree.LL.bandwidth_factor", &CommParams::tree_ll, "bus bandwidth fraction of tree LL", refine);
  fraction("tree.LL128.bandwidth_factor", &CommParams::tree_ll128, "bus bandwidth fraction of tree LL128 on one node (0.92 x 7/9)", refine);
  fraction("tree.LL128.bandwidth_factor.multinode", &CommParams::tree_ll128_multinode,
           "bus bandwidth fraction of tree LL128 across nodes (0.92 x 120/128)", refine);
  auto gbps = [&](std::string name, double CommParams::*m, std::string help, std::string source) {
    t.push_back(ParamInfo{std::move(name), "GB/s", std::move(help), std::move(source),
                          [m](const CommParams& c) { return fmt::format("{:.4g}", c.*m); },
                          [m](CommParams& c, std::string_view v) { return set_number(c.*m, v, 1e6, "a bandwidth in GB/s above 0"); }});
  };
  auto time_param = [&](std::string name, Time CommParams::*m, std::string help, std::string source) {
    t.push_back(ParamInfo{std::move(name), "time", std::move(help), std::move(source), [m](const CommParams& c) { return to_string(c.*m); },
                          [m](CommParams& c, std::string_view v) { return set_time(c.*m, v); }});
  };
  const std::string llmax = "NCCL v2.18.5 src/graph/tuning.cc (llMaxBws)";
  gbps("LL.max_busbw", &CommParams::ll_max_busbw_GBps, "ceiling of the LL protocol's bus bandwidth on one node (Ampere, Hopper)", llmax);
  gbps("LL.max_busbw.intel.2nodes", &CommParams::ll_max_busbw_intel_2nodes, "LL's bus bandwidth ceiling on 2 nodes with Intel (or other) host CPUs", llmax);
  gbps("LL.max_busbw.intel.more", &CommParams::ll_max_busbw_intel_more, "LL's bus bandwidth ceiling on 3 nodes or more with Intel (or other) host CPUs", llmax);
  gbps("LL.max_busbw.amd.2nodes", &CommParams::ll_max_busbw_amd_2nodes, "LL's bus bandwidth ceiling on 2 nodes with AMD host CPUs", llmax);
  gbps("LL.max_busbw.amd.more", &CommParams::ll_max_busbw_amd_more, "LL's bus bandwidth ceiling on 3 nodes or more with AMD host CPUs", llmax);
  time_param("net_overhead", &CommParams::net_overhead, "host cost of posting one network operation (Intel and other host CPUs); floor of a multi-node ring's intra-node step (x3 with Simple)",
             "NCCL v2.18.5 src/graph/tuning.cc (getNetOverhead: 1 us Intel, 2 us AMD)");
  time_param("net_overhead.amd", &CommParams::net_overhead_amd, "host cost of posting one network operation on AMD host CPUs",
             "NCCL v2.18.5 src/graph/tuning.cc (getNetOverhead: 1 us Intel, 2 us AMD)");
  time_param("nvls.latency", &CommParams::nvls_latency, "fixed latency of one NVLink SHARP all-reduce",
             "NCCL v2.18.5 src/graph/tuning.cc (baseLat NVLS 23 us)");
  time_param("nvls.net_latency", &CommParams::nvls_net_latency, "added latency of the NVLS tree across nodes, paid 2 ceil(log2 m) times over m nodes (up and down the tree's depth)",
             "NCCL v2.18.5 src/graph/tuning.cc (hwLat NET NVLSTree 19 us), paid as v2.19.3's tuner pays its own (14 us) NET latency: 2 log2i(nNodes) "
             "times, log2i rounding down");
  fraction("nvls.efficiency", &CommParams::nvls_efficiency,
           "NVLS multimem traffic rate as a fraction of the link's effective (ring) bandwidth, per-loop synchronisation set apart",
           "NCCL maintainer in nccl-tests#212 and nccl#1455: ~480 GB/s busbw on 8 H100 = 0.685 of line rate; 0.685 / 0.82, "
           "x 61.2 / 57.8 us per 16 MiB loop once nvls.loop_latency is paid");
  fraction("nvls.tree_factor", &CommParams::nvls_tree_factor,
           "NVLS tree across nodes: data rate as a fraction of one node's NVLS rate (NVLink) and of the NICs' rate (network)",
           "NCCL v2.18.5 src/graph/tuning.cc (bus-to-algorithm bandwidth ratio of the NVLS tree on 2 nodes .70, over NVLS's 5/6)");
  time_param("nvls.loop_latency", &CommParams::nvls_loop_latency, "synchronisation of one NVLS loop (channels x GPUs x chunk bytes), paid once per loop plus twice to fill the 3-stage pipeline",
             "NCCL v2.18.5 src/graph/tuning.cc (hwLat NVLink ring Simple: one Simple step handoff)");
  t.push_back(ParamInfo{"choice", "choice",
                        "how the automatic choice compares algorithms and protocols: nccl (NCCL's tuner: its tree correction factors and "
                        "NVLS-tree latency), fastest (the smallest simulated time; what dtsim fit writes) or fastest-on-one-node "
                        "(fastest within a node, nccl across nodes; dtsim fit's choice for data from one node)",
                        "NCCL v2.10.3-v2.28.9 src/graph/tuning.cc (treeCorrectionFactor in ncclTopoGetAlgoTime); v2.21-v2.27 (NVLS tree latency)",
                        [](const CommParams& c) {
                          return std::string(c.choice == CommParams::Choice::nccl      ? "nccl"
                                             : c.choice == CommParams::Choice::fastest ? "fastest"
                                                                                       : "fastest-on-one-node");
                        },
                        [](CommParams& c, std::string_view v) {
                          if (v == "nccl") c.choice = CommParams::Choice::nccl;
                          else if (v == "fastest") c.choice = CommParams::Choice::fastest;
                          else if (v == "fastest-on-one-node") c.choice = CommParams::Choice::fastest_on_one_node;
                          else return Status(Error(fmt::format("'{}' is not a choice: nccl, fastest or fastest-on-one-node", v)));
                          return Status();
                        }});
  time_param("tuner.nvls_tree.latency", &CommParams::tuner_nvls_tree_latency,
             "with choice nccl: the NVLS tree's fixed latency as NCCL's tuner charges it when it picks (not what dtsim simulates)",
             "NCCL v2.21.5-v2.28.9 src/graph/tuning.cc (baseLat NVLSTree 0 + hwLat NVLink NVLSTree 25 us; 23 us in v2.19-v2.20)");
  time_param("tuner.nvls_tree.net_latency", &CommParams::tuner_nvls_tree_net_latency,
             "with choice nccl: the NVLS tree's network latency as NCCL's tuner charges it, 2 log2i(m) times over m nodes",
             "NCCL v2.19.3-v2.27.7 src/graph/tuning.cc (hwLat NET NVLSTree 14 us, 20.9 from v2.28; latencies += intraLat + 2 log2i(nNodes) interLat)");
  auto count = [&](std::string name, int CommParams::*m, std::string help, std::string source) {
    t.push_back(ParamInfo{std::move(name), "count", std::move(help), std::move(source),
                          [m](const CommParams& c) { return fmt::format("{}", c.*m); },
                          [m](CommParams& c, std::string_view v) {
                            int x = 0;
                            auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                            if (ec != std::errc() || ptr != v.data() + v.size() || x < 1 || x > 64) {
                              return Status(Error(fmt::format("'{}' is not a channel count from 1 to 64", v)));
                            }
                            c.*m = x;
                            return Status();
                          }});
  };
  count("nvls.channels", &CommParams::nvls_channels, "channels (thread blocks) of an NVLS collective, at every size",
        "NCCL v2.18.5 src/transport/nvls.cc (NCCL_NVLS_NCHANNELS default 16)");
  count("max_channels", &CommParams::max_channels,
        "channels NCCL opens for rings and trees on one node (across nodes NCCL's own count, comm/channels.hpp); smaller messages run on fewer (bytes / (threads x threshold))",
        "nccl-tests#100 (NCCL log of an 8-GPU HGX A100: 24 channels); NCCL v2.18.5 enqueue.cc getAlgoInfo");
  auto bytes_param = [&](std::string name, Bytes CommParams::*m, std::string help, std::string source) {
    t.push_back(ParamInfo{std::move(name), "bytes", std::move(help), std::move(source), [m](const CommParams& c) { return to_string(c.*m); },
                          [m](CommParams& c, std::string_view v) {
                            auto b = parse_bytes(v);
                            if (!b) return Status(b.error());
                            c.*m = *b;
                            return Status();
                          }});
  };
  t.push_back(ParamInfo{"buffsize", "bytes",
                        "NCCL_BUFFSIZE: the Simple protocol's buffer per channel and peer; one step (an eighth) is the chunk of a tree all-reduce "
                        "and of a broadcast or reduce chain, four steps a ring's",
                        "NCCL v2.18.5-v2.28.9 init.cc DEFAULT_BUFFSIZE 4 MiB, NCCL_STEPS 8; enqueue.cc computeColl (chunkSteps 4 for rings, 1 otherwise)",
                        [](const CommParams& c) { return to_string(c.buffsize); },
                        [](CommParams& c, std::string_view v) {
                          auto b = parse_bytes(v);
                          if (!b) return Status(b.error());
                          // dtsim's own bounds (NCCL takes any size): steps of 8 KiB to 128 MiB, whole bytes.
                          if (b->count() < (std::int64_t{64} << 10) || b->count() > (std::int64_t{1} << 30) || b->count() % 8 != 0) {
                            return Status(Error(fmt::format("'{}' is not a buffer size from 64 KiB to 1 GiB in whole multiples of 8 bytes", v)));
                          }
                          c.buffsize = *b;
                          return Status();
                        }});
  t.push_back(ParamInfo{"tree_chunk_floor", "bytes",
                        "smallest chunk a Simple tree all-reduce halves its step to for short messages (none: never halved)",
                        "NCCL v2.18.5-v2.19 enqueue.cc computeColl halve it down to 32 KiB by the tree's depth; v2.20.3 to v2.28.9 do not (one step)",
                        [](const CommParams& c) { return c.tree_chunk_floor ? to_string(*c.tree_chunk_floor) : std::string("none"); },
                        [](CommParams& c, std::string_view v) {
                          if (v == "none") {
                            c.tree_chunk_floor.reset();
                            return Status();
                          }
                          auto b = parse_bytes(v);
                          if (!b) return Status(b.error());
                          c.tree_chunk_floor = *b;
                          return Status();
                        }});
  bytes_param("p2p_ll_threshold", &CommParams::p2p_ll_threshold, "send/recv and all-to-all run LL when a peer's message is at most this, else Simple (never LL128)",
              "NCCL v2.18.5 enqueue.cc addP2pToPlan (NCCL_P2P_LL_THRESHOLD default 16384)");
  count("p2p.channel_load", &CommParams::p2p_channel_load,
        "on one node, a send or receive spreads over at most c channels with c x ranks <= this x the peer-to-peer channels "
        "(16 of 32 on 8 GPUs); 64 lifts it for up to 64 ranks a node, as NCCL v2.20 and later have no such limit",
        "NCCL v2.18.5-v2.19.4 enqueue.cc scheduleP2pTasksToPlan (nChannelsMax*nRanks > p2pnChannels*4); gone from v2.20.3");
  t.push_back(ParamInfo{"call_overhead", "time", "host-side cost added to every collective call (launch, enqueue)",
                        "default 0; calibration fits it", [](const CommParams& c) { return to_string(c.call_overhead); },
                        [](CommParams& c, std::string_view v) { return set_time(c.call_overhead, v); }});
  time_param("launch_overhead", &CommParams::launch_overhead, "host time to enqueue and launch one collective on one GPU; bounds nccl-tests iterations with -g N from below (N x this)",
             "nccl-tests#123: DGX A100, 8 bytes, one channel, -g 4 and -g 8 take 16.9 and 33.7 us = 4.2 us per GPU");
  return t;
}

}  // namespace

const std::vector<ParamInfo>& comm_param_table() {
  static const std::vector<ParamInfo> table = build_table();
  return table;
}

Status set_comm_param(CommParams& p, std::string_view name, std::string_view value) {
  for (const ParamInfo& info : comm_param_table()) {
    if (info.name == name) {
      Status st = info.set(p, value);
      if (!st) return Error(st.error().message, std::string(name));
      return {};
    }
  }
  if (name == "pipeline_chunk") {
    // Until 2026-12-07 the chains' chunk had its own parameter; it is one Simple step.
    return Error("comm.pipeline_chunk is now one step of NCCL's Simple buffer: set comm.buffsize (NCCL_BUFFSIZE) to 8 x the chunk", std::string(name));
  }
  return Error(fmt::format("unknown communication parameter '{}' (dtsim collective --list-params lists them)", name),
               std::string(name));
}

}  // namespace dtsim::comm
