// How many channels NCCL opens for rings and trees on a communicator that spans several nodes
// (comm->nChannels), by NCCL v2.18.5's own rules (issue 12). The count sets how a small message's
// channels share the bandwidth (comm/split.hpp) and how many loops a Simple ring runs.
//
//  - Each node's ring search (src/graph/search.cc, ncclTopoCompute) starts at the largest speed of
//    its table (speedArrayInter, or sm90SpeedArrayInter on Hopper) not above the GPU-to-NIC path
//    (the NIC's line rate, and the GPU's PCIe link: 12 GB/s x16 Gen3, doubling per generation,
//    src/graph/topo.cc) and finds as many channels as the links carry at that speed: each NIC
//    floor(rate / speed) of them, each GPU's NVLink total (links x 20 GB/s from sm70, 18 on
//    sm60, 12 on sm86: topo.h) the (g - 1) / g of them that cross it on g GPUs (a channel enters
//    its first GPU from a NIC and leaves its last to one), or without NVLink its PCIe link all of
//    them. It stops once channels x speed reach the GPU's total (NVLink, or PCIe without it);
//    otherwise it tries slower speeds while the next is above .49 of the best found, keeping a
//    solution only if it carries strictly more.
//  - The search then doubles its channels (halving their speed) unless the speed is under 25
//    GB/s, or the GPU is newer than compute capability 8.0 with a speed under 50 GB/s and more than
//    4 channels. Ranks keep the smallest count (src/init.cc).
//  - ncclTopoPostset (src/graph/connect.cc) doubles them, and on Hopper with more than one node and
//    a ring speed above 45 GB/s once more ("4 compute channels per search channel"), at most
//    MAXCHANNELS (32).
#pragma once

#include <vector>

namespace dtsim::comm {

// What one node's ring search sees.
struct ChannelSearch {
  int nics = 1;                // NICs the communicator's GPUs on the node own
  int gpus = 1;                // the communicator's GPUs on the node
  double nic_GBps = 0;         // one NIC's line rate
  int nvlinks = 0;             // NVLink links of one GPU (0: none, PCIe only)
  int pcie_generation = 0;     // of the GPU's x16 link (0: unknown, no cap)
  int compute_capability = 0;  // as 80 for 8.0 (0: unknown)
};

struct SearchResult {
  int channels = 1;
  double speed = 0;  // GB/s per channel, after the search's own doubling
};

// The largest speed of NCCL's inter-node search table (GB/s) not above `GBps`.
double nccl_search_speed(double GBps, int compute_capability);
// One node's ring search, with the search's own doubling.
SearchResult nccl_ring_search(const ChannelSearch& node);
// The communicator's ring graph over these nodes (two or more): the ranks keep the smallest
// channel count and speed of their searches (init.cc). NCCL's tuner scales its bandwidths by it.
SearchResult nccl_multinode_graph(const std::vector<ChannelSearch>& nodes);
// comm->nChannels for a communicator over these nodes (two or more).
int nccl_multinode_channels(const std::vector<ChannelSearch>& nodes);

// NCCL's tuner caps a tree's, and an LL128 ring's, bus bandwidth at (graph channels) x a rate per
// channel by GPU generation and node count (v2.18.5 src/graph/tuning.cc perChMaxTreeBws,
// perChMaxTreeLL128Bws, perChMaxRingLL128Bws: Volta below compute capability 8.0, Ampere, Hopper
// from 9.0; one node, two, more). One channel is one thread block: what its threads reduce and
// copy, not the links, bounds it ("Tree will struggle to get better performance than ring without
// using 32 SMs", NCCL's maintainer in nccl-tests#196). GB/s; infinite where the GPU is unknown.
struct PerChannelCaps {
  double tree;        // any tree protocol (before LL128's and LL's own factors)
  double tree_ll128;  // a tree with LL128
  double ring_ll128;  // a ring with LL128
};
PerChannelCaps nccl_per_channel_caps(int compute_capability, int nodes);

}  // namespace dtsim::comm
