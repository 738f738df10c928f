// How many of NCCL's channels one send (or one receive) spreads over inside a node, and what that
// allows it to move (issue 12). NCCL v2.18.5:
//
//  - src/graph/paths.cc ncclTopoComputeP2pChannels: the communicator opens p2pnChannels =
//    nextPow2(min(nChannels, MAXCHANNELS)) channels for peer-to-peer work; each peer gets
//    p2pnChannelsPerPeer = nextPow2(min(p2pnChannels before rounding, the smallest
//    ncclTopoGetNchannels over the communicator's GPU pairs on the node)), where a pair joined by
//    NVLink counts 2 x (its NVLink bandwidth / one link's), i.e. 2 x its links, and any other pair 2.
//  - src/enqueue.cc scheduleP2pTasksToPlan, one node: an operation uses at least nChannelsMin (the
//    per-peer count halved while x ranks it exceeds p2pnChannels) and at most nChannelsMax (halved
//    while x ranks it exceeds 4 x p2pnChannels; NCCL v2.20.3 dropped this second rule, so an operation
//    may then use all its peer's channels). calcP2pChunkSize cuts the message in chunks of at least
//    stepSize / 8 and, on one node, at most 32 x stepSize (stepSize: NCCL_P2P_NVL_CHUNKSIZE 512 KiB
//    when any two of the GPUs are joined by NVLink, ncclTopoPathAllNVLink's smallest path type,
//    else NCCL_P2P_PCI_CHUNKSIZE 128 KiB), doubling the channels from
//    nChannelsMin until the chunks fit or nChannelsMax is reached; chunk k runs on the peer's
//    channel k mod p2pnChannelsPerPeer.
//  - src/collectives/device/sendrecv.h: one channel is one thread block, and a send and a receive
//    on it split its warps between them.
//
// So an 8-GPU NVSwitch node (24 ring channels, so 32 p2p channels, 32 per peer) runs a send/recv of
// 128 MiB on 8 channels and one of 256 MiB or more on 16 (NCCL before v2.20), and one of 192 KiB-64 MiB on 4
// (fewer below).
#pragma once

#include <vector>

#include "comm/params.hpp"
#include "hw/specs.hpp"
#include "sim/units.hpp"

namespace dtsim::comm {

struct P2pChannelRule {
  int comm_channels = 24;  // comm->nChannels of the (one-node) communicator
  int ranks = 2;           // communicator size
  int pair_channels = 2;   // the smallest ncclTopoGetNchannels over the communicator's GPU pairs
  bool nvlink = true;      // some pair joined by NVLink: the 512 KiB NVLink step
  int channel_load = 4;    // nChannelsMax x ranks <= channel_load x p2pnChannels
  // One Simple step (NCCL_BUFFSIZE / 8): NCCL v2.21 on cap the peer-to-peer step at it (init.cc,
  // "Make sure P2P chunksize is not larger than coll chunksize"); no effect at the 4 MiB default.
  std::int64_t simple_step = std::int64_t{512} << 10;
};

// Channels one send (or receive) of `bytes` uses (at least 1).
int nccl_p2p_channels(const P2pChannelRule& rule, Bytes bytes);

struct P2pNodeRate {
  int channels = 1;
  Bandwidth cap;  // zero: none known
};

// One send or receive of `bytes` with the Simple protocol in a communicator of the GPUs `locals`
// (local indices) of one `spec` node: its channels, and its rate ceiling, those channels x what
// one channel's half of the warps moves, half of NCCL's per-channel tree rate on one node (v2.18.5
// tuning.cc perChMaxTreeBws: the rate of one thread block whose warps, like a send/recv's, are
// split between what it receives and what it sends). No ceiling where none is known: a GPU of
// unknown compute capability, or Blackwell (which 2.18.5's tables predate).
P2pNodeRate nccl_p2p_node_rate(const hw::NodeSpec& spec, const CommParams& params, const std::vector<int>& locals, Bytes bytes);

}  // namespace dtsim::comm
