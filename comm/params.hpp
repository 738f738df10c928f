// Named, documented parameters of the collective-communication model. Defaults come from NCCL's
// own tuning model and from published measurements (see the table in params.cpp and
// docs/model.md); a calibrated hardware profile replaces them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/expected.hpp"
#include "sim/units.hpp"

namespace dtsim::comm {

enum class Algo { ring, tree, nvls, hierarchical, direct };
enum class Protocol { ll, ll128, simple };
enum class Transport { nvlink, pcie, net };

inline constexpr Algo kAllAlgos[] = {Algo::ring, Algo::tree, Algo::nvls, Algo::hierarchical, Algo::direct};
inline constexpr Protocol kAllProtocols[] = {Protocol::ll, Protocol::ll128, Protocol::simple};

std::string_view to_string(Algo a);
std::string_view to_string(Protocol p);
std::string_view to_string(Transport t);
std::optional<Algo> parse_algo(std::string_view s);
std::optional<Protocol> parse_protocol(std::string_view s);
// NCCL_ALGO's and NCCL_PROTO's syntax (v2.18.5 tuning.cc parseList): names separated by commas,
// in any case; a leading '^' leaves the named ones out of NCCL's own set (ring, tree, nvls and
// direct; protocols LL, LL128, Simple). "NVLSTree" names nvls, which runs NCCL's NVLS tree across
// nodes. Returns the allowed ones in kAllAlgos / kAllProtocols order; an error names the unknown
// name, or says that the list leaves nothing.
Expected<std::vector<Algo>> parse_algo_list(std::string_view s);
Expected<std::vector<Protocol>> parse_protocol_list(std::string_view s);

// Which algorithm and protocol a collective may run, as `--algo` and `--proto` say it: one by
// name (`algo`, `protocol`), or the tuner's choice among a list (`algos`, `protocols`; empty:
// among all of NCCL's).
struct Selection {
  std::optional<Algo> algo;
  std::optional<Protocol> protocol;
  std::vector<Algo> algos;
  std::vector<Protocol> protocols;
};
// "auto", one name, a list or a '^' list for each (one name after '^' is still the tuner's
// choice among what is left). Errors name the flag: field "algo" or "proto".
Expected<Selection> parse_selection(std::string_view algo, std::string_view proto);

// Latency of one algorithm/protocol pair: a fixed cost per call plus a cost per pipeline step,
// by the transport of the step (NCCL's baseLat and hwLat tables).
struct StepLatency {
  Time base;
  std::array<Time, 3> step;  // by Transport
};

// Steps in a ring's Simple chunk (ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS, NCCL_STEPS / 2).
inline constexpr std::int64_t kRingChunkSteps = 4;

struct CommParams {
  // [ring, tree][ll, ll128, simple]
  std::array<std::array<StepLatency, 3>, 2> latency;
  // Fraction of the bus bandwidth each protocol achieves (NCCL's model refinements).
  // NCCL v2.18.5 src/graph/tuning.cc, "model refinements".
  double ring_ll_allreduce = 0.25;
  double ring_ll_other = 1.0 / 3.0;
  double ring_ll128 = 0.92;
  // A ring of one GPU per node sends and receives through the same GPU's NIC (NCCL: ppn < 2).
  double ring_ll128_one_per_node = 0.7;
  // What a ring LL128 all-reduce reaches on one node of A100s (compute capability 8.0) over
  // NVLink, as a fraction of NCCL's model (ring_ll128): 0.63 / 0.92, measured (data/registry.yaml).
  // NCCL's tuner still assumes ring_ll128 there, so it picks LL128 where it did.
  double ring_ll128_achieved_ratio_sm80_nvlink = 0.685;
  double tree_simple = 0.92;
  double tree_ll = 0.92 / 3.8;
  double tree_ll128 = 0.92 * 7.0 / 9.0;           // one node (NCCL: 7/9)
  double tree_ll128_multinode = 0.92 * 120.0 / 128.0;  // several nodes (NCCL: 120/128)
  // LL's bus bandwidth ceiling on one node of Ampere or Hopper GPUs (NCCL llMaxBws, GB/s).
  double ll_max_busbw_GBps = 87.7;
  // Host cost of posting one network operation (NCCL getNetOverhead: 1 us on Intel CPUs and
  // others, 2 us on AMD); a multi-node ring's intra-node step is never faster, and Simple pays it
  // three times.
  Time net_overhead = Time::us(1);
  Time net_overhead_amd = Time::us(2);
  // LL's bus bandwidth ceiling across nodes (NCCL v2.18.5 llMaxBws, by the host CPU: Intel and
  // others {2 nodes, more}, AMD {2 nodes, more}; GB/s).
  double ll_max_busbw_intel_2nodes = 39.0;
  double ll_max_busbw_intel_more = 20.4;
  double ll_max_busbw_amd_2nodes = 22.5;
  double ll_max_busbw_amd_more = 19.0;
  // NVLink SHARP (in-switch reduction): NCCL baseLat for NVLS (and the NVLS tree), and hwLat NET
  // for the NVLS tree, paid 2 ceil(log2 m) times over m nodes, up and down the depth of the tree
  // dtsim builds (v2.19.3 tuning.cc adds 2 log2i(m), rounding down; 2.18.5 charged 2 (m - 1),
  // which kept the tree from ever winning at scale).
  Time nvls_latency = Time::us(23);
  Time nvls_net_latency = Time::us(19);
  // The NVLS tree across nodes moves its data at this fraction of one node's NVLS rate on NVLink
  // and of the NICs' rate on the network: v2.18.5 tuning.cc's bus-to-algorithm ratio for the NVLS
  // tree on 2 nodes, .70, over NVLS's 5/6.
  double nvls_tree_factor = 0.84;
  // Of the link's effective (ring) bandwidth, for the data once the per-loop synchronisation below
  // and the pipeline's fill and drain are set apart: 480 GB/s busbw at 8 GiB on 8 H100 (NCCL
  // maintainer) with 512 loops of 3.4 us and 14/9 of a loop's data time to fill and drain.
  double nvls_efficiency = 0.887;
  // NCCL runs NVLS on its own channels (v2.18.5 src/transport/nvls.cc, NCCL_NVLS_NCHANNELS 16),
  // every channel on every message size (enqueue.cc getAlgoInfo: nc = comm->nvlsChannels).
  int nvls_channels = 16;
  // Synchronisation of one NVLS loop (scatter to the heads, multimem reduce and multicast, gather):
  // one Simple-protocol step handoff over NVLink, NCCL v2.18.5 hwLat NVLink ring Simple.
  Time nvls_loop_latency = Time::from_seconds(3.4e-6);
  // Channels NCCL opens for rings and trees on a one-node communicator (comm->nChannels; 24 on an
  // 8-GPU NVSwitch A100 node, nccl-tests#100's log); across nodes the planner uses NCCL's own
  // count instead (comm/channels.hpp). Below nc x threads x threshold bytes NCCL runs on
  // fewer of them (enqueue.cc getAlgoInfo), and a ring on c of nc channels moves at c/nc of its
  // bandwidth (ncclTopoGetAlgoTime: bw / comm->nChannels x nChannels).
  int max_channels = 24;
  // NCCL_BUFFSIZE: the Simple protocol's buffer per channel and peer (v2.18.5-v2.28 init.cc
  // DEFAULT_BUFFSIZE 4 MiB). One step is an eighth of it (NCCL_STEPS 8): the chunk of a tree
  // all-reduce and of a chain (broadcast, reduce), and a quarter of a ring's (chunkSteps 4;
  // enqueue.cc computeColl). LL's and LL128's buffers have their own variables and stay fixed.
  Bytes buffsize = Bytes::MiB(4);
  // The smallest chunk a Simple tree all-reduce halves its step to for a short message. NCCL
  // v2.18.5-v2.19 halve it while a channel holds fewer chunks than 8, 4 and 1 x the tree's depth,
  // down to 128, 64 and 32 KiB (enqueue.cc computeColl); from v2.20 the rule is gone and every
  // chunk is one step, which the default (none) follows. 32 KiB gives the older rule.
  std::optional<Bytes> tree_chunk_floor;
  // Send/recv and all-to-all (NCCL's peer-to-peer operations) run LL when a peer's message is at
  // most this, else Simple, never LL128 (v2.18.5 enqueue.cc addP2pToPlan, NCCL_P2P_LL_THRESHOLD).
  Bytes p2p_ll_threshold = Bytes::KiB(16);
  // On one node, NCCL v2.18.5-v2.19.4 spread one send or receive over at most the channels c with
  // c x ranks <= this x its peer-to-peer channels (enqueue.cc scheduleP2pTasksToPlan: 16 of 32 on
  // 8 GPUs); v2.20 dropped the limit (64 lifts it for up to 64 ranks a node). comm/p2p.hpp.
  int p2p_channel_load = 4;
  // How the automatic choice compares the candidates. `nccl`: as NCCL's tuner does (its
  // src/graph/tuning.cc): a tree all-reduce's bandwidth times its per-size treeCorrectionFactor
  // (nccl_tree_correction below), and the NVLS tree across m nodes charged
  // tuner_nvls_tree_latency + 2 log2i(m) x tuner_nvls_tree_net_latency in place of the latency
  // dtsim simulates. `fastest`: the smallest closed-form time, which is what a profile fitted to
  // measurements wants (`dtsim fit` writes it): its lines are the measured times of whatever NCCL
  // ran. `fastest_on_one_node`: fastest within a node, NCCL's way across nodes (a profile fitted
  // on one node only).
  enum class Choice { nccl, fastest, fastest_on_one_node };
  Choice choice = Choice::nccl;
  Time tuner_nvls_tree_latency = Time::us(25);
  Time tuner_nvls_tree_net_latency = Time::us(14);
  // Host-side cost per collective call (launch, enqueue), added to every collective.
  Time call_overhead = Time::zero();
  // Host time to enqueue and launch one collective on one GPU (NCCL enqueue + cudaLaunchKernel).
  // It overlaps the GPU work of earlier calls, so it only shows when one host thread drives
  // several GPUs (nccl-tests -g N: N launches per iteration) or the kernels are shorter than it.
  Time launch_overhead = Time::from_seconds(4.2e-6);

  static CommParams nccl_defaults();
  // Whether the automatic choice for a communicator over `nodes` nodes uses NCCL's tuner model.
  bool choice_as_nccl(int nodes) const { return choice == Choice::nccl || (choice == Choice::fastest_on_one_node && nodes > 1); }
  // Channels NCCL runs a ring or tree collective of `bytes` on (v2.18.5 enqueue.cc getAlgoInfo).
  int channels_used(Algo a, Protocol p, Bytes bytes, int nranks) const;
  // NVLS chunk size for an all-reduce of `bytes` over `nranks` heads (v2.18.5 enqueue.cc computeColl)
  // and the number of loops the kernel runs (all_reduce.h: loopSize = channels x heads x chunk).
  Bytes nvls_chunk(Bytes bytes, int nranks) const;
  std::int64_t nvls_loops(Bytes bytes, int nranks) const;
  // One step of the Simple protocol's buffer: buffsize / NCCL_STEPS (512 KiB by default).
  Bytes simple_step() const { return Bytes(buffsize.count() / 8); }
  // Slices each rank of a Simple-protocol ring hands over one after another: loops of channels x
  // ranks x chunks of 4 steps (2 MiB by default: 4 MiB buffer / NCCL_STEPS 8 x chunkSteps 4),
  // `steps` ring steps per loop and 2 slices per chunk (chunkSteps 4 / sliceSteps 2); v2.18.5
  // collectives.h, enqueue.cc, all_reduce.h.
  std::int64_t ring_slices(Bytes bytes, int nranks, int channels, int steps) const;
  const StepLatency& lat(Algo a, Protocol p) const;
  StepLatency& lat(Algo a, Protocol p);
};

// NCCL's treeCorrectionFactor (src/graph/tuning.cc; this table from v2.10.3 to v2.28.9): its tuner
// multiplies a tree all-reduce's bandwidth by it, per protocol, at log2i(bytes / 64) from 0 (64 B)
// to 22 (256 MiB); 1 outside (v2.22 on skips messages under 64 B).
double nccl_tree_correction(Protocol p, Bytes bytes);

// One declared parameter: its dotted name, unit, help, source and accessors. The table drives
// --list-params, overrides (--set comm.X=V), the echo of resolved settings and the docs.
struct ParamInfo {
  std::string name;
  std::string unit;  // "time", "fraction", "bytes"
  std::string help;
  std::string source;
  std::function<std::string(const CommParams&)> get;
  std::function<Status(CommParams&, std::string_view)> set;
};

const std::vector<ParamInfo>& comm_param_table();
// Sets `name` (as in the table) from text such as "3.5 us" or "0.9".
Status set_comm_param(CommParams& p, std::string_view name, std::string_view value);

}  // namespace dtsim::comm
