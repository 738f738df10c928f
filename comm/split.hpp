// How NCCL's kernels cut a message between their channels (issue 12).
//
// NCCL v2.18.5 gives every channel (thread block) fixed pieces of the buffer in a fixed order,
// sized by the kernel's own arithmetic (src/collectives/device/all_reduce.h, all_gather.h,
// reduce_scatter.h): a loop of channels x pieces, each piece rounded up to the protocol's grain.
// When a message does not fill a loop evenly, the first channels get whole pieces and the last
// ones less or nothing, and the collective ends when its busiest channel does. The functions
// below return the bytes that channel moves, so that the planner can run a collective at
// (even share over all channels) / (busiest channel's bytes) of its rate. NCCL's tuner does not
// model this (ncclTopoGetAlgoTime assumes an even split over the channels it uses).
#pragma once

#include <cstdint>

#include "comm/metrics.hpp"
#include "comm/params.hpp"

namespace dtsim::comm {

// Channels and threads per channel NCCL launches a ring or tree collective of `bytes` with
// (v2.18.5 enqueue.cc getAlgoInfo: while bytes < nc x nt x threshold, one channel fewer, and
// at one channel half the threads while they stay a multiple of 128); `threads` is before the
// sync warps NCCL adds for Simple.
struct Launch {
  int channels = 1;
  int threads = 0;
};
Launch nccl_launch(const CommParams& p, Algo a, Protocol proto, Bytes bytes, int nranks);

// Data bytes of one step of a protocol's buffer (v2.18.5 NCCL_STEPS 8 of NCCL_BUFFSIZE,
// DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE): Simple comm.buffsize / 8 (512 KiB by default),
// LL 32 KiB, LL128 576,000. The network proxy sends a step once all of it is written
// (transport/net.cc sendProxyProgress).
std::int64_t step_data_bytes(const CommParams& p, Protocol proto);

// Bytes the busiest ring edge of the busiest channel carries in a ring all-reduce, all-gather or
// reduce-scatter of `bytes` (as nccl-tests counts it) over `nranks` ranks.
std::int64_t ring_busiest_edge_bytes(const CommParams& p, CollOp op, Protocol proto, Bytes bytes, int nranks);
// The chunk a tree all-reduce of `bytes` moves at a time on each of its channels (v2.18.5
// enqueue.cc computeColl: Simple one step, halved while a channel holds fewer chunks than the
// tree's depth allows; LL one step; LL128 one step, halved per nstepsLL128), with the channels
// NCCL launches and all_reduce.h's smallest piece (minChunkSize).
struct TreeChunk {
  std::int64_t channels = 1;
  std::int64_t chunk = 0;
  std::int64_t min_chunk = 0;
};
TreeChunk tree_chunk(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes);
// Bytes the busiest channel of a tree all-reduce moves (runTreeSplit: channel-major pieces).
std::int64_t tree_busiest_channel_bytes(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes);
// Bytes the busiest channel of a one-node NVLS all-reduce scatters (channel-major blocks of
// heads x chunk bytes).
std::int64_t nvls_busiest_channel_bytes(const CommParams& p, Bytes bytes, int nranks);

// The even share over all of NCCL's channels (max_channels, or nvls.channels) divided by the
// busiest channel's bytes above, in (0, 1]: the fraction of its rate a collective runs at.
double ring_split_fraction(const CommParams& p, CollOp op, Protocol proto, Bytes bytes, int nranks);
double tree_split_fraction(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes);
double nvls_split_fraction(const CommParams& p, Bytes bytes, int nranks);

}  // namespace dtsim::comm
