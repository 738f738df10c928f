#include "comm/split.hpp"

#include <algorithm>
#include <cstdint>

#include "comm/plan_helpers.hpp"

namespace dtsim::comm {

namespace {

// NCCL v2.18.5 constants (src/include/devcomm.h, src/init.cc, src/collectives/device/primitives.h).
// The Simple protocol's step is NCCL_BUFFSIZE / NCCL_STEPS (CommParams::simple_step, 512 KiB by
// default); a ring's chunk is 4 steps (ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS).
constexpr std::int64_t kSteps = 8;  // NCCL_STEPS
// LL: 8 lines of 16 bytes per thread x 512 threads x NCCL_STEPS, half of each line is data.
constexpr std::int64_t kLlStepData = 8 * 512 * kSteps * 16 / kSteps / 2;  // 32 KiB
// LL128: 120 words per thread x 640 threads x NCCL_STEPS x 8 bytes; 15 of every 16 words are data.
constexpr std::int64_t kLl128StepWire = 120 * 640 * kSteps * 8 / kSteps;  // 614,400
constexpr std::int64_t kLl128StepData = kLl128StepWire * 15 / 16;          // 576,000
// Data bytes per thread per LL128 grain: 8 shared-memory words x 15/16 x 8 bytes.
constexpr std::int64_t kLl128Grain = 8 * 15 * 8 / 16;  // 60
constexpr int kWarp = 32;

using detail::div_up;
std::int64_t round_up(std::int64_t a, std::int64_t b) { return div_up(a, b) * b; }
int log2i(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

int max_threads(Protocol proto) { return proto == Protocol::ll128 ? 640 : 512; }

// Threads of the kernel: getAlgoInfo's nt plus the sync warps of Simple (one for rings, four for
// trees), at least three warps.
int kernel_threads(Algo a, Protocol proto, int nt) {
  if (proto == Protocol::simple) nt += a == Algo::tree ? 4 * kWarp : kWarp;
  return std::max(nt, 3 * kWarp);
}

}  // namespace

std::int64_t step_data_bytes(const CommParams& p, Protocol proto) {
  switch (proto) {
    case Protocol::ll: return kLlStepData;
    case Protocol::ll128: return kLl128StepData;
    case Protocol::simple: return p.simple_step().count();
  }
  return p.simple_step().count();
}

Launch nccl_launch(const CommParams& p, Algo a, Protocol proto, Bytes bytes, int nranks) {
  // Thresholds (comm.h, tuning.cc): NCCL_SIMPLE_THREAD_THRESHOLD 64, NCCL_LL128_THREAD_THRESHOLD 8,
  // NCCL_LL_THREAD_THRESHOLD 8, times nRanks for ring LL.
  std::int64_t threshold = proto == Protocol::simple ? 64 : 8;
  if (a == Algo::ring && proto == Protocol::ll) threshold *= std::max(1, nranks);
  Launch l{std::max(1, p.max_channels), max_threads(proto)};
  const std::int64_t s = bytes.count();
  // nc = floor(bytes / (nt x threshold)) in one step (the loop removes one channel at a time).
  l.channels = static_cast<int>(std::clamp<std::int64_t>(s / (l.threads * threshold), 1, l.channels));
  while (l.channels == 1 && s < l.threads * threshold && l.threads % 128 == 0) l.threads /= 2;
  return l;
}

std::int64_t ring_busiest_edge_bytes(const CommParams& p, CollOp op, Protocol proto, Bytes bytes, int nranks) {
  const std::int64_t n = std::max(1, nranks);
  if (n < 2 || bytes.count() <= 0) return 0;
  const Launch l = nccl_launch(p, Algo::ring, proto, bytes, nranks);
  const std::int64_t nc = l.channels;
  const std::int64_t nthreads = kernel_threads(Algo::ring, proto, l.threads);
  const std::int64_t chunk = proto == Protocol::simple ? p.simple_step().count() * kRingChunkSteps : proto == Protocol::ll ? kLlStepData : kLl128StepData;
  const std::int64_t simple_grain = (nthreads - kWarp) * 8;  // roundUp to (nthreads - WARP_SIZE) x 8 bytes
  // Chunk of the last (partial) loop when `rem` bytes are left of a loop of `pieces` pieces.
  auto real_chunk = [&](std::int64_t rem, std::int64_t pieces, std::int64_t ll128_min) {
    switch (proto) {
      case Protocol::simple: return round_up(std::min(chunk, div_up(rem, pieces)), simple_grain);
      case Protocol::ll: return std::min(chunk, round_up(div_up(rem, pieces), nthreads * 8));
      case Protocol::ll128: return std::min(chunk, div_up(rem, pieces * ll128_min) * ll128_min);
    }
    return chunk;
  };
  if (op == CollOp::allreduce) {
    // all_reduce.h runRing: loops of nc x n x chunk; each rank's 2(n-1) steps move one piece of
    // every chunk index but its own (reduce-scatter half) and all but the next's (all-gather
    // half), so the edge out of rank r carries 2 sum(s) - s_r - s_{r+1}. LL and LL128 round the
    // last loop's pieces up to minChunkSize (nthreads x 8 bytes; LL128 nthreads x 60 / 2) and lay
    // them out chunk-major ((chunk x nc + channel) x size), Simple rounds up to its grain and
    // lays them out channel-major ((channel x n + chunk) x size); channel 0 gets the most.
    const std::int64_t loop = nc * n * chunk;
    const std::int64_t full = bytes.count() / loop, rem = bytes.count() % loop;
    std::int64_t busiest = full * 2 * (n - 1) * chunk;
    if (rem > 0) {
      const std::int64_t min_chunk = proto == Protocol::ll128 ? nthreads * kLl128Grain / 2 : nthreads * 8;
      const std::int64_t r = proto == Protocol::simple ? real_chunk(rem, nc * n, 0)
                                                       : std::min(chunk, div_up(rem, nc * n * min_chunk) * min_chunk);
      const std::int64_t stride = proto == Protocol::simple ? r : nc * r;  // offset of channel 0's next piece
      auto piece = [&](std::int64_t c) { return std::clamp<std::int64_t>(rem - (c % n) * stride, 0, r); };
      std::int64_t sum = 0, least = INT64_MAX;
      for (std::int64_t c = 0; c < n; ++c) {
        sum += piece(c);
        least = std::min(least, piece(c) + piece(c + 1));
      }
      busiest += 2 * sum - least;
    }
    return busiest;
  }
  if (op == CollOp::allgather || op == CollOp::reducescatter) {
    // all_gather.h / reduce_scatter.h runRing: each rank's part (bytes / n) in loops of nc x
    // chunk, channel-major; n - 1 steps each move one piece.
    const std::int64_t part = bytes.count() / n;
    const std::int64_t loop = nc * chunk;
    const std::int64_t full = part / loop, rem = part % loop;
    std::int64_t per_step = full * chunk;
    if (rem > 0) per_step += std::min(rem, real_chunk(rem, nc, nthreads * kLl128Grain / 2));
    return (n - 1) * per_step;
  }
  return 0;
}

TreeChunk tree_chunk(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes) {
  const std::int64_t s = bytes.count();
  const int m = std::max(1, nnodes);
  const Launch l = nccl_launch(p, Algo::tree, proto, bytes, nranks);
  const std::int64_t nc = l.channels;
  const std::int64_t nthreads = kernel_threads(Algo::tree, proto, l.threads);
  TreeChunk t{nc, 0, 0};
  switch (proto) {
    case Protocol::simple: {
      // enqueue.cc computeColl: one Simple step, halved for messages short of the tree's depth.
      const std::int64_t depth = nranks / m - 1 + log2i(m);
      // From v2.20 the step is never halved (comm.tree_chunk_floor none, the default).
      t.chunk = p.simple_step().count();
      if (p.tree_chunk_floor) {
        const std::int64_t floor = p.tree_chunk_floor->count();
        while (s / (nc * t.chunk) < depth * 8 && t.chunk > std::max<std::int64_t>(131072, floor)) t.chunk /= 2;
        while (s / (nc * t.chunk) < depth * 4 && t.chunk > std::max<std::int64_t>(65536, floor)) t.chunk /= 2;
        while (s / (nc * t.chunk) < depth && t.chunk > std::max<std::int64_t>(32768, floor)) t.chunk /= 2;
      }
      t.min_chunk = (nthreads - 2 * kWarp) * 64;
      break;
    }
    case Protocol::ll:
      t.chunk = kLlStepData;
      t.min_chunk = nthreads * 8;
      break;
    case Protocol::ll128: {
      // computeColl halves the step for short messages (nstepsLL128 = 1 + log2(nodes) + 0.1 ppn).
      const double ppn = static_cast<double>(nranks) / m;
      const double steps = 1 + log2i(m) + 0.1 * ppn;
      std::int64_t wire = kLl128StepWire;
      while (static_cast<double>(s / (nc * wire)) < steps * 64 / ppn && wire > 131072) wire /= 2;
      while (static_cast<double>(s / (nc * wire)) < steps * 16 / ppn && wire > 32768) wire /= 2;
      t.chunk = wire * 15 / 16;
      t.min_chunk = nthreads * kLl128Grain / 8;
      break;
    }
  }
  return t;
}

std::int64_t tree_busiest_channel_bytes(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes) {
  const std::int64_t s = bytes.count();
  if (s <= 0) return 0;
  const TreeChunk t = tree_chunk(p, proto, bytes, nranks, nnodes);
  const std::int64_t nc = t.channels, chunk = t.chunk, min_chunk = t.min_chunk;
  // all_reduce.h runTreeSplit: loops of nc x chunk, channel-major; a message shorter than one
  // loop is cut in pieces of whole minChunkSize units instead.
  const std::int64_t loop = nc * chunk;
  if (loop > s) return std::min(s, div_up(s, nc * min_chunk) * min_chunk);
  return s / loop * chunk + std::min(chunk, s % loop);
}

std::int64_t nvls_busiest_channel_bytes(const CommParams& p, Bytes bytes, int nranks) {
  // all_reduce.h (NVLS): loops of channels x heads x chunk; channel b scatters the block at
  // b x heads x chunk of each loop, so a short message fills the first channels only.
  const std::int64_t block = std::int64_t{std::max(1, nranks)} * p.nvls_chunk(bytes, nranks).count();
  const std::int64_t loop = std::int64_t{std::max(1, p.nvls_channels)} * block;
  return bytes.count() / loop * block + std::min(block, bytes.count() % loop);
}

namespace {
double fraction(double even, std::int64_t busiest) {
  if (busiest <= 0 || !(even > 0)) return 1.0;
  return std::min(1.0, even / static_cast<double>(busiest));
}
}  // namespace

double ring_split_fraction(const CommParams& p, CollOp op, Protocol proto, Bytes bytes, int nranks) {
  const double n = std::max(1, nranks), c = std::max(1, p.max_channels);
  const double even = op == CollOp::allreduce ? 2 * (n - 1) * bytes.as_double() / (n * c) : (n - 1) * bytes.as_double() / (n * c);
  return fraction(even, ring_busiest_edge_bytes(p, op, proto, bytes, nranks));
}

double tree_split_fraction(const CommParams& p, Protocol proto, Bytes bytes, int nranks, int nnodes) {
  return fraction(bytes.as_double() / std::max(1, p.max_channels), tree_busiest_channel_bytes(p, proto, bytes, nranks, nnodes));
}

double nvls_split_fraction(const CommParams& p, Bytes bytes, int nranks) {
  return fraction(bytes.as_double() / std::max(1, p.nvls_channels), nvls_busiest_channel_bytes(p, bytes, nranks));
}

}  // namespace dtsim::comm
