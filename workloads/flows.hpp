// The executor's communication, as network flows: the groups of ranks a graph's collective,
// pipeline, data-parallel and host ops map onto (from the layout), planned once per distinct op and
// cached. With symmetry, one simulated replica's ops also carry every other replica's copy that
// crosses a node or shares one with it (see step.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm/collective.hpp"
#include "hw/topology.hpp"
#include "workloads/graph.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

// The flow plans of one op (one per group of ranks).
struct Collective {
  std::vector<std::shared_ptr<const comm::Plan>> plans;
};

class CommFlows {
 public:
  CommFlows(const hw::Topology& topo, const StepInputs& in, const Layout& lay, bool symmetric)
      : topo_(topo), in_(in), lay_(lay), symmetric_(symmetric), router_(topo), planner_(topo, router_, in.comm) {}

  // A tensor/context/expert-parallel collective of (stage, replica).
  const Collective& group_collective(const CommStep& c, int stage, int replica);
  // Data-parallel gradient (or parameter) collectives of a stage, over dense or expert groups.
  const Collective& dp_collective(int stage, bool experts, CollOp op, Bytes bytes);
  // The tied-embedding all-reduce between the first and last stage.
  const Collective& tie_collective(int replica, Bytes bytes);
  // A pipeline message from one stage to another.
  const Collective& p2p(int from_stage, int to_stage, int replica, Bytes bytes);
  // nn.DataParallel's transfers.
  const Collective& transfer(const Transfer& t);
  // Parameter servers: gradients pushed to and weights pulled from the shards.
  const Collective& ps_push(double grad_bytes);
  const Collective& ps_pull(double param_bytes);
  // training.data: every first-stage rank's samples copied from its socket.
  const Collective& input_copies(double bytes_per_rank);

 private:
  std::vector<std::vector<int>> groups(CommGroup g, int stage, int replica) const;
  std::vector<std::vector<int>> dp_groups(int stage, bool experts) const;
  const Collective& ps_flows(const char* what, double bytes, bool to_host);
  bool keep_copy(const std::vector<int>& group, const std::vector<int>& representative_ranks) const;
  const Collective& collective(const std::string& key, CollOp op, Bytes bytes, const std::vector<std::vector<int>>& gs);
  // Flows between GPU pairs (one group each), all at once.
  // One send per path, `bytes` each, all at once (a sendrecv plan of one phase).
  std::unique_ptr<Collective> paths_collective(const std::vector<hw::Path>& paths, double bytes) const;
  std::unique_ptr<Collective> pairwise(const std::vector<std::pair<int, int>>& pairs, double bytes);
  // Host (a node's CPU) to and from GPU ranks.
  hw::Path host_path(int rank, int node, int cpu, bool to_host, std::uint64_t label);
  // One flow per (rank, node, cpu, to_host) end, `bytes` each.
  const Collective& host_flows(const std::string& key, const std::vector<std::tuple<int, int, int, bool>>& ends, double bytes);

  const hw::Topology& topo_;
  const StepInputs& in_;
  const Layout& lay_;
  bool symmetric_ = true;
  hw::Router router_;
  comm::Planner planner_;
  std::map<std::string, std::unique_ptr<Collective>> cache_;
};

// The rate ceiling NCCL's peer-to-peer channels set on one pipeline send of `bytes` from rank
// `from` to rank `to` (zero: none). Megatron sends batched over the pipeline group
// (batch_isend_irecv: one NCCL communicator of its pp ranks) or, with `overlap_p2p` (which turns
// batching off), as single isend/irecv, which PyTorch's ProcessGroupNCCL runs on a communicator of
// the two ranks (pointToPoint outside a batch: a key of the pair). Only a communicator within one
// node is held to it (comm/p2p.hpp); a send at most NCCL's LL threshold is not.
Bandwidth pipeline_send_cap(const hw::Topology& topo, const Layout& lay, const comm::CommParams& comm, bool overlap_p2p, int from, int to,
                            Bytes bytes);

}  // namespace dtsim::workloads
