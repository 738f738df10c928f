// nccl-tests' definitions of collective sizes and bandwidths, shared by the simulator's output and
// the calibration harness (calibrate/), so that predicted and measured numbers are the same
// quantity. Header-only, standard library only (the CUDA harness includes it too).
//
// From nccl-tests (doc/PERFORMANCE.md): algbw = S / t, with S the size nccl-tests prints (the
// per-rank buffer for all-reduce, broadcast, reduce, send/recv and all-to-all; the total gathered
// buffer for all-gather; the total input for reduce-scatter). busbw = algbw x factor, where the
// factor makes busbw comparable to the hardware's link bandwidth:
//   all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, reduce,
//   send/recv 1.
#pragma once

#include <optional>
#include <string_view>

namespace dtsim {

enum class CollOp { allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv };

inline constexpr CollOp kAllCollOps[] = {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter,
                                         CollOp::alltoall,  CollOp::broadcast, CollOp::reduce,
                                         CollOp::sendrecv};

inline constexpr std::string_view to_string(CollOp op) {
  switch (op) {
    case CollOp::allreduce: return "allreduce";
    case CollOp::allgather: return "allgather";
    case CollOp::reducescatter: return "reducescatter";
    case CollOp::alltoall: return "alltoall";
    case CollOp::broadcast: return "broadcast";
    case CollOp::reduce: return "reduce";
    case CollOp::sendrecv: return "sendrecv";
  }
  return "?";
}

inline std::optional<CollOp> parse_coll_op(std::string_view s) {
  for (CollOp op : kAllCollOps) {
    if (to_string(op) == s) return op;
  }
  if (s == "all_reduce" || s == "all-reduce") return CollOp::allreduce;
  if (s == "all_gather" || s == "all-gather") return CollOp::allgather;
  if (s == "reduce_scatter" || s == "reduce-scatter") return CollOp::reducescatter;
  if (s == "alltoall" || s == "all_to_all" || s == "all-to-all") return CollOp::alltoall;
  return std::nullopt;
}

// busbw / algbw for `n` ranks.
inline constexpr double bus_bandwidth_factor(CollOp op, int n) {
  const double dn = n;
  switch (op) {
    case CollOp::allreduce: return n > 1 ? 2.0 * (dn - 1) / dn : 0.0;
    case CollOp::allgather:
    case CollOp::reducescatter:
    case CollOp::alltoall: return n > 1 ? (dn - 1) / dn : 0.0;
    case CollOp::broadcast:
    case CollOp::reduce:
    case CollOp::sendrecv: return 1.0;
  }
  return 1.0;
}

// algbw in GB/s (1 GB = 1e9 bytes, as nccl-tests) for `bytes` moved in `seconds`.
inline constexpr double algbw_GBps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds * 1e-9 : 0.0; }

inline constexpr double busbw_GBps(CollOp op, int n, double bytes, double seconds) {
  return algbw_GBps(bytes, seconds) * bus_bandwidth_factor(op, n);
}

}  // namespace dtsim
