// How many channels NCCL opens for rings and trees on a communicator that spans several nodes
// (comm->nChannels), by NCCL v2.18.5's own rules (issue 12). The count sets how a small message's
// channels share the bandwidth (comm/split.hpp) and how many loops a Simple ring runs.
//
//  - The ring search (src/graph/search.cc, ncclTopoCompute) takes the largest speed of its table
//    (speedArrayInter, or sm90SpeedArrayInter on Hopper) that a NIC carries and finds one channel
//    per NIC at it. It stops there when the channels' bandwidth reaches the GPU's NVLink total
//    (system->totalBw); otherwise it tries slower speeds, which on the nodes modelled here only
//    tie (two channels per NIC at half the speed), and a tie keeps the first solution.
//  - The search doubles its channels (halving their speed) unless the speed is under 25 GB/s, or
//    the GPUs are newer than compute capability 8.0, the speed is under 50 GB/s and there are more
//    than 4 channels.
//  - ncclTopoPostset (src/graph/connect.cc) doubles them again, and on Hopper with more than one
//    node and a ring speed above 45 GB/s once more ("4 compute channels per search channel"),
//    at most MAXCHANNELS (32).
#pragma once

namespace dtsim::comm {

struct ChannelSearch {
  int search_channels = 1;    // channels the search finds: one per NIC the node's GPUs own
  double nic_GBps = 0;        // line rate of one NIC
  int compute_capability = 0; // lowest of the communicator's GPUs, as 80 for 8.0 (0: unknown)
};

// The largest speed of NCCL's inter-node search table (GB/s) not above `nic_GBps`.
double nccl_search_speed(double nic_GBps, int compute_capability);
// comm->nChannels for a communicator over several nodes.
int nccl_multinode_channels(const ChannelSearch& s);

}  // namespace dtsim::comm
