// NCCL collectives as nccl-tests measures them: all-reduce, all-gather, reduce-scatter, all-to-all,
// broadcast and send/recv over sizes from 8 B to 8 GiB, out-of-place and in-place, with a data
// check (#wrong) and nccl-tests' algbw/busbw (comm/metrics.hpp, the definitions dtsim's own output
// uses). One process drives every local GPU, or (dtsim-calibrate-mpi) one process per GPU across
// nodes with NCCL's unique id broadcast over MPI. A watchdog thread polls ncclCommGetAsyncError and
// aborts the communicators (ncclCommAbort) when a collective errs or outlives --nccl-timeout; that
// point is recorded with the error and the communicators are created again for the next one.
#include <benchmark/benchmark.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <thread>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/kernels.hpp"
#include "comm/metrics.hpp"

#define DTSIM_NCCL(call)                                                                                 \
  do {                                                                                                   \
    const ncclResult_t dtsim_r_ = (call);                                                                \
    if (dtsim_r_ != ncclSuccess && dtsim_r_ != ncclInProgress) {                                         \
      return ::dtsim::harness::call_error(__FILE__, __LINE__, #call, ncclGetErrorString(dtsim_r_));      \
    }                                                                                                    \
  } while (0)

namespace dtsim::harness {

namespace {

using Clock = std::chrono::steady_clock;

// Aborts the communicators when an operation errs asynchronously or runs past its deadline.
class Watchdog {
 public:
  Watchdog() : thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(const std::vector<ncclComm_t>& comms, double seconds, const std::string& what) {
    std::lock_guard<std::mutex> l(m_);
    comms_ = comms;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    what_ = what;
    seconds_ = seconds;
    armed_ = true;
    fired_ = false;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> l(m_);
    armed_ = false;
  }
  bool fired() const { return fired_.load(); }
  std::string message() {
    std::lock_guard<std::mutex> l(m_);
    return message_;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(m_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(l);
        continue;
      }
      std::string why;
      for (ncclComm_t c : comms_) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
          why = std::string("NCCL reported an asynchronous error (") + ncclGetErrorString(async) + ") during " + what_;
          break;
        }
      }
      if (why.empty() && Clock::now() > deadline_) {
        why = "NCCL watchdog: " + what_ + " did not finish within " + std::to_string(static_cast<int>(seconds_)) +
              " s (--nccl-timeout); the communicators were aborted (ncclCommAbort). A hang like this usually means a rank is "
              "missing, a network is misconfigured (NCCL_SOCKET_IFNAME, NCCL_IB_HCA) or a GPU fell off the bus";
      }
      if (!why.empty()) {
        for (ncclComm_t c : comms_) ncclCommAbort(c);
        message_ = why;
        armed_ = false;
        fired_ = true;
        continue;
      }
      cv_.wait_for(l, std::chrono::milliseconds(5));
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::vector<ncclComm_t> comms_;
  Clock::time_point deadline_;
  std::string what_, message_;
  double seconds_ = 0;
  bool armed_ = false, stop_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

struct Op {
  CollOp op;
  const char* test;  // nccl-tests binary
  gpu::CheckOp check;
  bool has_in_place;
};

const Op kOps[] = {
    {CollOp::allreduce, "all_reduce_perf", gpu::CheckOp::allreduce, true},
    {CollOp::allgather, "all_gather_perf", gpu::CheckOp::allgather, true},
    {CollOp::reducescatter, "reduce_scatter_perf", gpu::CheckOp::reducescatter, true},
    {CollOp::alltoall, "alltoall_perf", gpu::CheckOp::alltoall, false},
    {CollOp::broadcast, "broadcast_perf", gpu::CheckOp::broadcast, true},
    {CollOp::sendrecv, "sendrecv_perf", gpu::CheckOp::sendrecv, false},
};

struct Local {
  int device = 0;
  int rank = 0;  // in the communicator
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  unsigned long long* wrong = nullptr;
  ncclComm_t comm = nullptr;
};

class NcclSuite {
 public:
  explicit NcclSuite(Context& ctx) : ctx_(ctx) {}
  ~NcclSuite() {
    destroy_comms();
    for (Local& l : locals_) {
      cudaSetDevice(l.device);
      if (l.stream) cudaStreamDestroy(l.stream);
      if (l.start) cudaEventDestroy(l.start);
      if (l.stop) cudaEventDestroy(l.stop);
      if (l.send) cudaFree(l.send);
      if (l.recv) cudaFree(l.recv);
      if (l.wrong) cudaFree(l.wrong);
    }
    cudaSetDevice(ctx_.device_index);
  }

  int nranks() const { return nranks_; }
  std::int64_t max_bytes() const { return max_bytes_; }
  gpu::Elt type() const { return type_; }

  // Devices, buffers, streams and the communicators (collective over the ranks).
  Status init() {
    type_ = ctx_.opt.nccl_type == "half" ? gpu::Elt::f16 : ctx_.opt.nccl_type == "bfloat16" ? gpu::Elt::bf16 : gpu::Elt::f32;
    std::vector<int> devices;
    if (ctx_.boot->mpi()) {
      devices.push_back(ctx_.device_index);
      nranks_ = ctx_.boot->size();
    } else {
      const int n = ctx_.opt.gpus > 0 ? std::min(ctx_.opt.gpus, ctx_.local_gpus) : ctx_.local_gpus;
      for (int d = 0; d < n; ++d) devices.push_back(d);
      nranks_ = n;
    }
    // Buffers: twice the largest size per GPU, within a third of its free memory.
    std::int64_t want = ctx_.opt.nccl_max > 0 ? ctx_.opt.nccl_max : (ctx_.opt.quick ? std::int64_t{1} << 30 : std::int64_t{8} << 30);
    for (int d : devices) {
      DTSIM_CUDA(cudaSetDevice(d));
      std::size_t free_b = 0, total_b = 0;
      DTSIM_CUDA(cudaMemGetInfo(&free_b, &total_b));
      while (want > 1024 && static_cast<std::size_t>(2 * want) > free_b / 3 * 2) want /= 2;
    }
    max_bytes_ = want;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      Local l;
      l.device = devices[i];
      l.rank = ctx_.boot->mpi() ? ctx_.boot->rank() : static_cast<int>(i);
      DTSIM_CUDA(cudaSetDevice(l.device));
      DTSIM_CUDA(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
      DTSIM_CUDA(cudaEventCreate(&l.start));
      DTSIM_CUDA(cudaEventCreate(&l.stop));
      DTSIM_CUDA(cudaMalloc(&l.send, static_cast<std::size_t>(max_bytes_)));
      DTSIM_CUDA(cudaMalloc(&l.recv, static_cast<std::size_t>(max_bytes_)));
      DTSIM_CUDA(cudaMalloc(&l.wrong, sizeof(unsigned long long)));
      locals_.push_back(l);
    }
    DTSIM_CHECK(create_comms());
    // "#  Rank" lines, as nccl-tests prints them (dtsim fit --nccl-tests reads them back).
    for (const Local& l : locals_) {
      cudaDeviceProp p{};
      cudaGetDeviceProperties(&p, l.device);
      char bus[32] = {};
      cudaDeviceGetPCIBusId(bus, sizeof bus, l.device);
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", l.rank, static_cast<int>(getpid()), hostname().c_str(),
                  l.device, bus, p.name);
    }
    std::fflush(stdout);
    DTSIM_CUDA(cudaSetDevice(ctx_.device_index));
    return {};
  }

  // One (op, size): out-of-place then in-place; each becomes a record; one nccl-tests row.
  void run(const Op& op, std::int64_t bytes, benchmark::State& st) {
    const int n = nranks_;
    const std::size_t esz = gpu::elt_bytes(type_);
    const bool split = op.op == CollOp::allgather || op.op == CollOp::reducescatter || op.op == CollOp::alltoall;
    const std::int64_t per = split ? bytes / (n * static_cast<std::int64_t>(esz)) : bytes / static_cast<std::int64_t>(esz);
    const std::int64_t count = split ? per * n : per;  // nccl-tests' "count" column
    const std::int64_t size = count * static_cast<std::int64_t>(esz);
    if (!header_printed_[static_cast<std::size_t>(&op - kOps)] && ctx_.boot->rank() == 0) {
      std::printf("# Collective test starting: %s\n", op.test);
      std::printf("#  dtsim-calibrate: %d ranks on %d node(s), type %s, %d warm-up and %d timed iterations\n", n, ctx_.boot->nodes(),
                  gpu::elt_name(type_), warmup(), iters());
      std::printf("#                                                              out-of-place                       in-place          \n");
      std::printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
      std::printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
      header_printed_[static_cast<std::size_t>(&op - kOps)] = true;
    }
    // Four fields per half, as nccl-tests prints them (N/A where nothing was measured here; errors
    // go to stderr and the result file), so that `dtsim fit --nccl-tests` can read this output.
    const std::string none = "     N/A     N/A     N/A    N/A";
    std::string cols[2];
    double busbw[2] = {0, 0};
    for (int ip = 0; ip < 2; ++ip) {
      const bool in_place = ip == 1;
      const std::string point = point_name(op, bytes, in_place);
      nlohmann::json params{{"op", std::string(to_string(op.op))}, {"bytes", size},          {"count", count},
                            {"type", gpu::elt_name(type_)},        {"ranks", n},              {"nodes", ctx_.boot->nodes()},
                            {"in_place", in_place},               {"test", op.test}};
      if (const char* algo = std::getenv("NCCL_ALGO")) params["algo"] = algo;
      if (in_place && !op.has_in_place) {
        cols[ip] = none;
        continue;
      }
      if (ctx_.is_done(point)) {
        cols[ip] = none;  // measured by an earlier run (--resume)
        continue;
      }
      auto r = measure(op, per, size, in_place);
      if (!r) {
        ctx_.record("nccl", point, params, r.error());
        cols[ip] = none;
        if (ctx_.boot->rank() == 0) std::fprintf(stderr, "dtsim-calibrate: %s %s: %s\n", op.test, bytes_label(size).c_str(), r.error().message.c_str());
        continue;
      }
      ctx_.record("nccl", point, params, *r);
      char buf[96];
      std::snprintf(buf, sizeof buf, "%8.2f %7.2f %7.2f %6lld", (*r)["time_us"].get<double>(), (*r)["algbw_GBps"].get<double>(),
                    (*r)["busbw_GBps"].get<double>(), static_cast<long long>((*r)["wrong"].get<std::int64_t>()));
      cols[ip] = buf;
      busbw[ip] = (*r)["busbw_GBps"].get<double>();
      if (ip == 0) st.SetIterationTime((*r)["time_s"].get<double>());
    }
    if (ctx_.boot->rank() == 0) {
      const bool rooted = op.op == CollOp::broadcast;
      const bool reduces = op.op == CollOp::allreduce || op.op == CollOp::reducescatter;
      std::printf("%12lld  %12lld  %8s  %6s  %6d  %s  %s\n", static_cast<long long>(size), static_cast<long long>(count), gpu::elt_name(type_),
                  reduces ? "sum" : "none", rooted ? 0 : -1, cols[0].c_str(), cols[1].c_str());
      std::fflush(stdout);
    }
    st.counters["busbw_GB/s"] = busbw[0];
    st.counters["busbw_inplace_GB/s"] = busbw[1];
  }

  static std::string point_name(const Op& op, std::int64_t bytes, bool in_place) {
    return "nccl/" + std::string(to_string(op.op)) + "/" + bytes_label(bytes) + (in_place ? "/in-place" : "/out-of-place");
  }

 private:
  int warmup() const { return ctx_.opt.quick ? 2 : 5; }
  int iters() const { return ctx_.opt.nccl_iters > 0 ? ctx_.opt.nccl_iters : (ctx_.opt.quick ? 10 : 20); }
  ncclDataType_t nccl_type() const { return type_ == gpu::Elt::f16 ? ncclHalf : type_ == gpu::Elt::bf16 ? ncclBfloat16 : ncclFloat; }

  Status create_comms() {
    comms_ok_ = false;
    std::vector<ncclComm_t> comms(locals_.size(), nullptr);
    watchdog_.disarm();
    if (ctx_.boot->mpi()) {
      ncclUniqueId id{};
      if (ctx_.boot->rank() == 0) DTSIM_NCCL(ncclGetUniqueId(&id));
      DTSIM_CHECK(ctx_.boot->broadcast(&id, sizeof id, 0));
      DTSIM_CUDA(cudaSetDevice(locals_[0].device));
      DTSIM_NCCL(ncclCommInitRank(&comms[0], nranks_, id, ctx_.boot->rank()));
    } else {
      std::vector<int> devs;
      for (const Local& l : locals_) devs.push_back(l.device);
      DTSIM_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(devs.size()), devs.data()));
    }
    for (std::size_t i = 0; i < locals_.size(); ++i) locals_[i].comm = comms[i];
    comms_ok_ = true;
    return {};
  }

  void destroy_comms() {
    for (Local& l : locals_) {
      if (l.comm) ncclCommDestroy(l.comm);
      l.comm = nullptr;
    }
    comms_ok_ = false;
  }

  std::vector<ncclComm_t> comms() const {
    std::vector<ncclComm_t> c;
    for (const Local& l : locals_) c.push_back(l.comm);
    return c;
  }

  // Enqueues one collective on every local rank (a group when this process drives several GPUs).
  Status enqueue(const Op& op, std::int64_t per, bool in_place) {
    const int n = nranks_;
    const std::size_t esz = gpu::elt_bytes(type_);
    const auto cnt = static_cast<std::size_t>(per);
    const ncclDataType_t t = nccl_type();
    DTSIM_NCCL(ncclGroupStart());
    for (const Local& l : locals_) {
      char* send = l.send;
      char* recv = l.recv;
      switch (op.op) {
        case CollOp::allreduce:
          DTSIM_NCCL(ncclAllReduce(in_place ? recv : send, recv, cnt, t, ncclSum, l.comm, l.stream));
          break;
        case CollOp::allgather:
          DTSIM_NCCL(ncclAllGather(in_place ? recv + static_cast<std::size_t>(l.rank) * cnt * esz : send, recv, cnt, t, l.comm, l.stream));
          break;
        case CollOp::reducescatter:
          DTSIM_NCCL(ncclReduceScatter(in_place ? recv : send, in_place ? recv + static_cast<std::size_t>(l.rank) * cnt * esz : recv, cnt, t,
                                       ncclSum, l.comm, l.stream));
          break;
        case CollOp::alltoall:
          DTSIM_NCCL(ncclGroupStart());
          for (int p = 0; p < n; ++p) {
            DTSIM_NCCL(ncclSend(send + static_cast<std::size_t>(p) * cnt * esz, cnt, t, p, l.comm, l.stream));
            DTSIM_NCCL(ncclRecv(recv + static_cast<std::size_t>(p) * cnt * esz, cnt, t, p, l.comm, l.stream));
          }
          DTSIM_NCCL(ncclGroupEnd());
          break;
        case CollOp::broadcast:
          DTSIM_NCCL(ncclBroadcast(in_place ? recv : send, recv, cnt, t, 0, l.comm, l.stream));
          break;
        case CollOp::sendrecv:
          DTSIM_NCCL(ncclGroupStart());
          DTSIM_NCCL(ncclSend(send, cnt, t, (l.rank + 1) % n, l.comm, l.stream));
          DTSIM_NCCL(ncclRecv(recv, cnt, t, (l.rank - 1 + n) % n, l.comm, l.stream));
          DTSIM_NCCL(ncclGroupEnd());
          break;
        case CollOp::reduce: break;
      }
    }
    DTSIM_NCCL(ncclGroupEnd());
    return {};
  }

  // Waits for every local stream to pass its `stop` event, watching for the watchdog.
  Status wait(const std::string& what) {
    watchdog_.arm(comms(), ctx_.opt.nccl_timeout_s, what);
    for (const Local& l : locals_) {
      DTSIM_CUDA(cudaSetDevice(l.device));
      for (;;) {
        const cudaError_t q = cudaEventQuery(l.stop);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
          watchdog_.disarm();
          return call_error(__FILE__, __LINE__, "cudaEventQuery", cudaGetErrorString(q));
        }
        if (watchdog_.fired()) return Error(watchdog_.message());
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    watchdog_.disarm();
    if (watchdog_.fired()) return Error(watchdog_.message());
    return {};
  }

  Status run_iters(const Op& op, std::int64_t per, bool in_place, int n, const std::string& what) {
    for (const Local& l : locals_) {
      DTSIM_CUDA(cudaSetDevice(l.device));
      DTSIM_CUDA(cudaEventRecord(l.start, l.stream));
    }
    watchdog_.arm(comms(), ctx_.opt.nccl_timeout_s, what);  // covers enqueueing too
    for (int i = 0; i < n; ++i) {
      if (auto st = enqueue(op, per, in_place); !st) {
        watchdog_.disarm();
        return st;
      }
    }
    for (const Local& l : locals_) {
      DTSIM_CUDA(cudaSetDevice(l.device));
      DTSIM_CUDA(cudaEventRecord(l.stop, l.stream));
    }
    return wait(what);
  }

  // After a failure: abort what is left, make new communicators (or say why not).
  Status recover() {
    for (Local& l : locals_) {
      if (l.comm && !watchdog_.fired()) ncclCommAbort(l.comm);
      l.comm = nullptr;
    }
    for (const Local& l : locals_) {
      cudaSetDevice(l.device);
      cudaStreamSynchronize(l.stream);
      cudaGetLastError();
    }
    return create_comms();
  }

  Expected<nlohmann::json> measure(const Op& op, std::int64_t per, std::int64_t size, bool in_place) {
    if (!comms_ok_) {
      if (auto st = recover(); !st) return Error("no NCCL communicators after an earlier failure: " + st.error().message);
    }
    const std::string what = std::string(op.test) + " of " + bytes_label(size) + (in_place ? " in place" : " out of place");
    auto body = [&]() -> Expected<nlohmann::json> {
      const int n = nranks_;
      if (per <= 0) return Error("size too small for " + std::to_string(n) + " ranks");
      const std::size_t esz = gpu::elt_bytes(type_);
      const auto cnt = static_cast<std::size_t>(per);
      DTSIM_CHECK(run_iters(op, per, in_place, warmup(), what));
      DTSIM_CHECK(run_iters(op, per, in_place, iters(), what));
      double local = 0;
      for (const Local& l : locals_) {
        float ms = 0;
        DTSIM_CUDA(cudaEventElapsedTime(&ms, l.start, l.stop));
        local = std::max(local, static_cast<double>(ms) * 1e-3 / iters());
      }
      const double t = ctx_.boot->mean(local);  // nccl-tests averages the ranks' times
      // Data check: fresh patterns, one collective, count what differs.
      for (const Local& l : locals_) {
        DTSIM_CUDA(cudaSetDevice(l.device));
        DTSIM_CUDA(cudaMemsetAsync(l.wrong, 0, sizeof(unsigned long long), l.stream));
        DTSIM_CUDA(cudaMemsetAsync(l.recv, 0, static_cast<std::size_t>(size), l.stream));
        const bool split = op.op == CollOp::allgather || op.op == CollOp::reducescatter || op.op == CollOp::alltoall;
        const std::size_t send_count = op.op == CollOp::allgather ? cnt : split ? cnt * static_cast<std::size_t>(n) : cnt;
        char* send = l.send;
        if (in_place) {
          send = op.op == CollOp::allgather ? l.recv + static_cast<std::size_t>(l.rank) * cnt * esz : l.recv;
        }
        DTSIM_CUDA(gpu::fill_pattern(send, send_count, type_, l.rank, 0, l.stream));
      }
      DTSIM_CHECK(run_iters(op, per, in_place, 1, what + " (data check)"));
      unsigned long long wrong = 0;
      for (const Local& l : locals_) {
        DTSIM_CUDA(cudaSetDevice(l.device));
        const bool gathered = op.op == CollOp::allgather || op.op == CollOp::alltoall;
        const std::size_t recv_count = gathered ? cnt * static_cast<std::size_t>(n) : cnt;
        const char* recv = l.recv;
        if (in_place && op.op == CollOp::reducescatter) recv = l.recv + static_cast<std::size_t>(l.rank) * cnt * esz;
        DTSIM_CUDA(gpu::check_result(recv, recv_count, type_, op.check, l.rank, n, 0, cnt, l.wrong, l.stream));
        unsigned long long w = 0;
        DTSIM_CUDA(cudaMemcpyAsync(&w, l.wrong, sizeof w, cudaMemcpyDeviceToHost, l.stream));
        DTSIM_CUDA(cudaStreamSynchronize(l.stream));
        wrong += w;
      }
      const double total_wrong = ctx_.boot->mean(static_cast<double>(wrong)) * ctx_.boot->size();
      DTSIM_CUDA(cudaSetDevice(ctx_.device_index));
      const double s = static_cast<double>(size);
      return nlohmann::json{{"time_s", t},
                            {"time_us", t * 1e6},
                            {"time_max_s", ctx_.boot->max(local)},
                            {"iters", iters()},
                            {"warmup_iters", warmup()},
                            {"algbw_GBps", algbw_GBps(s, t)},
                            {"busbw_GBps", busbw_GBps(op.op, n, s, t)},
                            {"wrong", static_cast<std::int64_t>(total_wrong + 0.5)}};
    };
    auto r = body();
    if (!r) {
      // The communicators may be aborted or in an unknown state: make new ones for the next point
      // (if that fails, every later point records why).
      comms_ok_ = false;
      (void)recover();
      cudaSetDevice(ctx_.device_index);
    }
    return r;
  }

  Context& ctx_;
  gpu::Elt type_ = gpu::Elt::f32;
  int nranks_ = 1;
  std::int64_t max_bytes_ = 0;
  std::vector<Local> locals_;
  bool comms_ok_ = false;
  bool header_printed_[6] = {};
  Watchdog watchdog_;
};

}  // namespace

void register_nccl(Context& ctx) {
  // The communicators and buffers, made by the first collective that runs.
  struct Shared {
    std::unique_ptr<NcclSuite> suite;
    bool tried = false;
    std::string init_error;
  };
  auto shared = std::make_shared<Shared>();
  ctx.release.push_back([shared] { shared->suite.reset(); });
  const std::int64_t max = ctx.opt.nccl_max > 0 ? ctx.opt.nccl_max : (ctx.opt.quick ? std::int64_t{1} << 30 : std::int64_t{8} << 30);
  for (const Op& op : kOps) {
    for (std::int64_t bytes = std::max<std::int64_t>(ctx.opt.nccl_min, 1); bytes <= max; bytes *= 2) {
      const std::string name = "nccl/" + std::string(to_string(op.op)) + "/" + bytes_label(bytes);
      if (ctx.is_done(NcclSuite::point_name(op, bytes, false)) && (!op.has_in_place || ctx.is_done(NcclSuite::point_name(op, bytes, true)))) {
        continue;
      }
      benchmark::RegisterBenchmark(name.c_str(), [&ctx, &op, bytes, shared](benchmark::State& st) {
        auto& suite = shared->suite;
        const std::string& init_error = shared->init_error;
        for (auto _ : st) {
          if (!shared->tried) {
            shared->tried = true;
            suite = std::make_unique<NcclSuite>(ctx);
            if (auto s = suite->init(); !s) {
              shared->init_error = s.error().message;
              suite.reset();
            }
          }
          if (!suite) {
            const nlohmann::json params{{"op", std::string(to_string(op.op))}, {"bytes", bytes}};
            ctx.record("nccl", NcclSuite::point_name(op, bytes, false), params, Error("NCCL could not start: " + init_error));
            st.SkipWithError(init_error.c_str());
            break;
          }
          if (bytes > suite->max_bytes()) {
            st.SkipWithError("larger than the buffers this GPU's memory allows");
            break;
          }
          suite->run(op, bytes, st);
        }
      })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace dtsim::harness
