// NCCL-style collective algorithms, decomposed into flows on the topology.
//
// A collective becomes a Plan: a sequence of phases; each phase is a set of FlowGroups that run
// concurrently; a FlowGroup is a multiset of links that moves `bytes` over each use at one common
// rate (a ring channel, for instance, is one FlowGroup over all of its edges' routes: its edges
// progress in lockstep, so the ring moves at the rate of its most contended edge). This keeps a
// ring over n GPUs at O(n) route entries and O(1) events, while contention with other traffic is
// still resolved per link by the sharing model.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/channels.hpp"
#include "comm/metrics.hpp"
#include "comm/params.hpp"
#include "hw/topology.hpp"
#include "sim/flow_network.hpp"

namespace dtsim::comm {

// How finely a ring is simulated: one coupled group per channel (default), one flow per ring edge
// (edges progress independently), or every one of the 2(n-1) steps as its own phase (O(n^2)
// flows; for validating the coarser forms on small rings).
enum class Fidelity { coupled, per_edge, per_step };
std::string_view to_string(Fidelity f);
std::optional<Fidelity> parse_fidelity(std::string_view s);

struct CollectiveRequest {
  CollOp op = CollOp::allreduce;
  Bytes size;                        // as nccl-tests prints it (see metrics.hpp)
  std::vector<int> ranks;            // GPU ranks of the communicator, in rank order
  int root = 0;                      // index into `ranks` (broadcast, reduce)
  std::optional<Algo> algo;          // nullopt: the fastest by the closed form, as NCCL's tuner
  std::optional<Protocol> protocol;  // nullopt: likewise
  // Without `algo` (`protocol`), the tuner chooses among these only, as NCCL_ALGO and NCCL_PROTO
  // lists make NCCL's choose; empty: among all of NCCL's (not `hierarchical`, which is Horovod's).
  std::vector<Algo> algos;
  std::vector<Protocol> protocols;

  void select(const Selection& s) {
    algo = s.algo;
    protocol = s.protocol;
    algos = s.algos;
    protocols = s.protocols;
  }
  Fidelity fidelity = Fidelity::coupled;
};

// Whether the request lets the automatic choice consider this pair: its algorithm (or list; an
// empty list is NCCL's own set, never `hierarchical`) and protocol (or list; a peer-to-peer
// operation keeps NCCL's size rule whatever NCCL_PROTO lists, so only a protocol named outright
// binds it). What Planner::plan chooses among; `dtsim fit` restricts its candidates the same way.
bool selection_allows(const CollectiveRequest& req, Algo a, Protocol p);

struct FlowGroup {
  std::vector<LinkUse> uses;  // merged
  Bytes bytes;                // per use of each link (protocol overhead included)
  Time latency;               // paid before the data moves
  // Rate ceiling of the group (zero: the links alone): a ring on fewer of NCCL's channels than the
  // communicator opened moves at that share of its idle-link rate.
  Bandwidth cap{};
};

struct Phase {
  std::string what;
  std::vector<FlowGroup> groups;
};

struct Plan {
  CollOp op = CollOp::allreduce;
  Algo algo = Algo::ring;
  Protocol protocol = Protocol::simple;
  int ranks = 0;
  int nodes = 0;
  // The model's flow groups per phase: distinct ring paths (one per NIC a ring leaves a node
  // through; per GPU order on NVLink meshes; 1 on an NVSwitch node), NVLS its channels.
  int channels = 0;
  // The channels (thread blocks) NCCL runs this collective on at this size, as dtsim models NCCL:
  // NCCL's launch rule for rings and trees over the channels the communicator opens (on one node
  // comm.max_channels, across nodes from the nodes' NICs), nvls.channels for NVLS. 0 where the
  // algorithm is not NCCL's (hierarchical), NCCL's peer-to-peer channels are not modelled (direct,
  // but a send/recv with Simple on one node: comm/p2p.hpp), or a single rank copies locally.
  int nccl_channels = 0;
  Bytes size;
  std::vector<Phase> phases;
  // Closed form: for each phase, its largest latency plus the time the most loaded link needs for
  // all of the phase's bytes; the flow simulation equals it when nothing else shares the links.
  Time estimate;
  // Part of the latency NCCL's tuner does not model (NVLS per-loop synchronisation); left out, with
  // the channel caps, when the planner picks the algorithm as NCCL's tuner would.
  Time unseen_by_tuner;
  // The share of the flow groups' bytes NCCL's tuner sees (the message without a chain's or a
  // tree's pipeline fill, which its latency + size / bandwidth leaves out); 1 for the others.
  double tuner_bytes_fraction = 1.0;
  // How much faster NCCL's tuner believes the data moves than dtsim simulates it (ring LL128 on
  // one A100 node: 1 / ring.LL128.achieved_ratio.sm80_nvlink); only the choice as NCCL makes it
  // (comm.choice nccl) uses it, `fastest` compares the simulated times.
  double tuner_speedup = 1.0;
};

class Planner {
 public:
  Planner(const hw::Topology& topo, hw::Router& router, CommParams params);

  // Plans a collective; picks algorithm and protocol when the request leaves them open.
  Expected<Plan> plan(const CollectiveRequest& req);
  // The (algorithm, protocol) pairs that can run this request.
  std::vector<std::pair<Algo, Protocol>> candidates(const CollectiveRequest& req) const;
  const CommParams& params() const { return params_; }

 private:
  struct NodePart {
    int node = 0;
    std::vector<int> locals;  // local GPU indices, in communicator order
  };
  struct Layout {
    std::vector<int> ranks;
    std::vector<NodePart> nodes;
    int max_per_node = 0;
    int min_per_node = 0;
    // What NCCL's topology search sees on each node of a multi-node communicator (empty on one
    // node or without a NIC): channel_searches, once per layout.
    std::vector<ChannelSearch> searches;
  };
  Layout layout(const std::vector<int>& ranks) const;
  Expected<Plan> plan_fixed(const CollectiveRequest& req, const Layout& lay, Algo algo, Protocol proto);

  Transport intra_transport(const Layout& lay) const;
  Time step_latency(Algo a, Protocol p, Transport t, const Layout& lay) const;
  hw::CpuVendor host_vendor(const Layout& lay) const;
  double ll_max_busbw_GBps(const Layout& lay) const;
  // The fraction of its rate a collective on fewer channels runs at (`split`), and what its
  // pipeline's fill (chunks crossing network hops one after another) is multiplied by, from
  // `pieces` (its channel pieces' fraction) and `busbw_GBps` (its bus bandwidth on idle links on
  // every channel, under LL's ceiling). Only LL across nodes differs from {pieces, 1}: the ceiling
  // bounds all channels together, and each channel alone runs at most at one thread block's LL
  // rate (the one-node ceiling over its channels), so with relieved = pieces x channels x that
  // rate / busbw the split is relieved between pieces and 1; where the ceiling binds all channels
  // together (relieved above 1) each channel's first chunks still cross a hop at one block's rate,
  // so the fill is 1 / relieved of what the shared ceiling gives it.
  struct ChannelRelief {
    double split = 1.0;
    double fill_scale = 1.0;
  };
  ChannelRelief channel_relief(const Layout& lay, Protocol proto, double pieces, double busbw_GBps) const;
  double bandwidth_factor(Algo a, Protocol p, CollOp op, bool multinode) const;
  // The model's parameters with max_channels set to the channels NCCL opens for rings and trees
  // on this communicator (comm->nChannels): comm.max_channels on one node; across nodes NCCL
  // v2.18.5's rules (comm/channels.hpp) from each node's NICs, GPUs and links.
  CommParams channel_params(const Layout& lay) const;
  // Whether NCCL's tuner may pick LL128 on this communicator by itself (v2.18.5 tuning.cc: only
  // Volta, Ampere and Hopper, all GPUs alike, NVLink inside the nodes, and across nodes a NIC the
  // GPUs reach without host memory). A request that names LL128 runs it anyway (NCCL_PROTO).
  bool ll128_by_default(const Layout& lay) const;
  // One node of A100s (compute capability 8.0) joined by NVLink: where a ring LL128 all-reduce
  // reaches ring_ll128_achieved_ratio_sm80_nvlink of NCCL's model's rate.
  bool a100_nvlink_node(const Layout& lay) const;
  // What NCCL's topology search sees on each node of a multi-node communicator (empty on one node
  // or without a NIC). Layout::searches holds it.
  std::vector<ChannelSearch> channel_searches(const Layout& lay) const;
  // The bus bandwidth NCCL's tuner allows algorithm `a` with protocol `p` on this communicator:
  // a ring with LL its ceiling; across nodes, graph channels x the per-channel rate
  // (comm/channels.hpp PerChannelCaps) for trees and LL128 rings, LL128's and LL's factors applied
  // to the tree's, and LL's ceiling; infinite where NCCL sets none. GB/s.
  double tuner_cap_GBps(const Layout& lay, Algo a, Protocol p) const;
  // A ring protocol's bandwidth factor after NCCL's tuner refinements for a ring or chain of n
  // ranks on m nodes: LL128 at .7 with fewer than 2 GPUs per node, and the bus bandwidth held under
  // tuner_cap_GBps. `add_load` adds the ring's bytes per link at factor 1 (called only where a cap
  // applies); `bus_bytes` is what one busbw second moves (bytes / the busbw ratio). Also the bus
  // bandwidth on idle links at that factor, where a cap applies (else 0), for channel_relief.
  struct TunerFactor {
    double factor = 1.0;
    double busbw_GBps = 0;
  };
  TunerFactor ring_tuner_factor(const Layout& lay, Protocol proto, int n, int m, double factor, double bus_bytes,
                                const std::function<void(std::map<std::uint32_t, double>&)>& add_load) const;
  // Seconds the most loaded link needs for `load` (bytes by link) on otherwise idle links.
  double most_loaded_seconds(const std::map<std::uint32_t, double>& load) const;

  // Path of a ring/tree edge between two GPU ranks; across nodes out of the sender's NIC `nic` and
  // into the receiver's NIC `to_nic`, reaching the first over NVLink (NCCL's PXN) when the sender
  // is not the NIC's own GPU.
  hw::Path edge_path(int from_rank, int to_rank, int nic, int to_nic, std::uint64_t label);
  void append_to_nic(int rank, int nic, hw::Path& out);
  // Node-local GPU orders (one per channel) for a ring through `part`.
  std::vector<std::vector<int>> intra_orders(const NodePart& part);
  // One ring channel: the ranks in ring order (node segments in layout order, each starting at
  // the GPU that owns the channel's NIC) and the NIC each node uses for it.
  struct RingChannel {
    std::vector<int> order;
    std::vector<int> nic;  // by node index in the layout
  };
  // One node: one channel per distinct GPU order (several on NVLink meshes). Several nodes: one
  // per NIC that the communicator's GPUs on a node own (their nearest NICs); channel c leaves and
  // enters every node through that node's c-th own NIC (the same NIC index on every node when the
  // nodes hold the same GPUs: rail-aligned).
  std::vector<RingChannel> ring_channels(const Layout& lay);
  // The NICs the communicator's GPUs on a node own (each GPU's nearest), in local order, with the
  // first GPU owning each: a ring channel's NIC, or an NVLS tree head.
  struct OwnNic {
    int nic = 0;
    int local = 0;
  };
  std::vector<OwnNic> own_nics(const NodePart& part) const;
  std::vector<std::vector<int>> mesh_cycles(const hw::NodeTemplate& t);

  void add_ring(const Layout& lay, CollOp op, Protocol proto, Bytes size, Fidelity fid, Plan& plan);
  void add_chain(const Layout& lay, CollOp op, int root, Protocol proto, Bytes size, Plan& plan);
  void add_tree(const Layout& lay, Protocol proto, Bytes size, Plan& plan);
  void add_nvls(const Layout& lay, Bytes size, Plan& plan);
  // A GPU's round to its node's NVSwitch and back.
  hw::Path switch_round(int node, int local) const;
  // What NVLS's pipeline adds that NCCL's tuner does not see: a synchronisation per loop of
  // channels x heads x chunk, two more to fill, and the first scatter and last gather over a
  // GPU's switch link at `rate` bytes/s (g GPUs on the node).
  Time nvls_pipeline_cost(Bytes size, int heads, int gpus, double rate) const;
  void add_hierarchical(const Layout& lay, Protocol proto, Bytes size, Plan& plan);
  void add_nvls_tree(const Layout& lay, Bytes size, Plan& plan);
  void add_direct(const Layout& lay, CollOp op, Protocol proto, Bytes size, Plan& plan);

  // With `channel_caps` false: NCCL's tuner view, which picks the algorithm and protocol before it
  // reduces the channels (v2.18.5 enqueue.cc getAlgoInfo), so the caps do not sway the choice.
  // `data_rate` scales the links' rates for the data (NCCL's tree correction in tuner_time).
  Time estimate(const Plan& plan, bool channel_caps = true, double data_rate = 1.0) const;
  // What the automatic choice compares (CommParams::choice_as_nccl): NCCL's tuner view, or the
  // closed form without the parts NCCL's tuner does not see.
  Time tuner_time(const Plan& plan) const;
  // Caps every group of `ph` at `fraction` of the rate that ends it with the phase when nothing else
  // shares the links (no cap at 1): the phase then takes its data time / fraction.
  void cap_channels(Phase& ph, double fraction) const;

  const hw::Topology& topo_;
  hw::Router& router_;
  CommParams params_;
  std::map<const hw::NodeTemplate*, std::vector<std::vector<int>>> mesh_cache_;
};

// Runs `plan` on `net` (built from the same topology); `done` fires when its last phase ends.
void execute(FlowNetwork& net, std::shared_ptr<const Plan> plan, std::function<void()> done);
inline void execute(FlowNetwork& net, const Plan& plan, std::function<void()> done) {
  execute(net, std::make_shared<const Plan>(plan), std::move(done));
}

// One iteration of an nccl-tests loop whose host thread drives `gpus_per_thread` GPUs (its -g
// option; 1 with one process per GPU): the host launches the collective on each of them in turn,
// and the launches of later iterations overlap the GPU work of earlier ones, so an iteration takes
// the longer of the collective and the host's launches (nccl-tests src/common.cu times `iters`
// back-to-back calls and divides).
Time nccl_tests_iteration(Time collective, int gpus_per_thread, const CommParams& params);

// Simulates `plan` alone on a fresh network of `topo` and returns how long it took.
Time simulate_alone(const hw::Topology& topo, const Plan& plan, std::string_view sharing = "max-min");

}  // namespace dtsim::comm
