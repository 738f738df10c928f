// Host links: host-to-device and device-to-host copies from pinned and pageable memory, and
// peer-to-peer copies between every pair of local GPUs (over NVLink or PCIe: the bandwidths show
// the node's topology).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/kernels.hpp"

namespace dtsim::harness {

namespace {

Expected<nlohmann::json> host_copy(Context& ctx, bool h2d, bool pinned, std::size_t bytes) {
  void* dev = nullptr;
  void* host = nullptr;
  DTSIM_CUDA(cudaMalloc(&dev, bytes));
  struct Free {
    void* d;
    void** h;
    bool pinned;
    ~Free() {
      cudaFree(d);
      if (*h) pinned ? (void)cudaFreeHost(*h) : std::free(*h);
    }
  } guard{dev, &host, pinned};
  if (pinned) {
    DTSIM_CUDA(cudaMallocHost(&host, bytes));
  } else {
    host = std::malloc(bytes);
    if (!host) return Error("malloc of " + std::to_string(bytes) + " bytes failed");
  }
  // Random contents on both sides (the host side copied from the device once).
  DTSIM_CUDA(gpu::fill_random(dev, bytes / 2, gpu::Elt::bf16, 0xb0b, 1.0f, ctx.stream));
  DTSIM_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx.stream));
  DTSIM_CUDA(cudaStreamSynchronize(ctx.stream));
  TimingOptions o = ctx.timing;
  o.max_iters = 2000;
  auto t = time_on_stream(
      ctx.stream,
      [&](std::size_t) -> Status {
        if (h2d) DTSIM_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, ctx.stream));
        else DTSIM_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, ctx.stream));
        return {};
      },
      o);
  if (!t) return t.error();
  nlohmann::json r = t->to_json();
  r["GBps"] = static_cast<double>(bytes) / t->median_s * 1e-9;
  return r;
}

Expected<nlohmann::json> peer_copy(Context& ctx, int src, int dst, std::size_t bytes, bool& access) {
  int can = 0;
  DTSIM_CUDA(cudaDeviceCanAccessPeer(&can, dst, src));
  access = can != 0;
  struct Resources {
    void* a = nullptr;
    void* b = nullptr;
    cudaStream_t s = nullptr;
    int src = 0, dst = 0, home = 0;
    ~Resources() {
      cudaSetDevice(dst);
      if (s) cudaStreamDestroy(s);
      if (b) cudaFree(b);
      cudaSetDevice(src);
      if (a) cudaFree(a);
      cudaSetDevice(home);
    }
  } r{nullptr, nullptr, nullptr, src, dst, ctx.device_index};
  DTSIM_CUDA(cudaSetDevice(src));
  DTSIM_CUDA(cudaMalloc(&r.a, bytes));
  DTSIM_CUDA(gpu::fill_random(r.a, bytes / 2, gpu::Elt::bf16, 0xc0c, 1.0f, nullptr));
  DTSIM_CUDA(cudaDeviceSynchronize());
  DTSIM_CUDA(cudaSetDevice(dst));
  DTSIM_CUDA(cudaMalloc(&r.b, bytes));
  if (can) {
    const cudaError_t e = cudaDeviceEnablePeerAccess(src, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
      return call_error(__FILE__, __LINE__, "cudaDeviceEnablePeerAccess", cudaGetErrorString(e));
    }
    cudaGetLastError();  // clears cudaErrorPeerAccessAlreadyEnabled
  }
  DTSIM_CUDA(cudaStreamCreate(&r.s));
  TimingOptions o = ctx.timing;
  o.max_iters = 2000;
  auto t = time_on_stream(
      r.s,
      [&](std::size_t) -> Status {
        DTSIM_CUDA(cudaMemcpyPeerAsync(r.b, dst, r.a, src, bytes, r.s));
        return {};
      },
      o);
  if (!t) return t.error();
  nlohmann::json out = t->to_json();
  out["GBps"] = static_cast<double>(bytes) / t->median_s * 1e-9;
  return out;
}

}  // namespace

void register_hostlink(Context& ctx) {
  std::vector<std::int64_t> sizes;
  if (ctx.opt.quick) {
    sizes = {std::int64_t{64} << 10, std::int64_t{1} << 20, std::int64_t{16} << 20, std::int64_t{256} << 20};
  } else {
    for (std::int64_t s = 4096; s <= (std::int64_t{1} << 30); s *= 4) sizes.push_back(s);
  }
  for (bool h2d : {true, false}) {
    for (bool pinned : {true, false}) {
      for (std::int64_t s : sizes) {
        const std::string dir = h2d ? "h2d" : "d2h";
        const std::string name = "hostlink/" + dir + "/" + (pinned ? "pinned" : "pageable") + "/" + bytes_label(s);
        if (ctx.is_done(name)) continue;
        benchmark::RegisterBenchmark(name.c_str(), [&ctx, h2d, pinned, s, dir, name](benchmark::State& st) {
          for (auto _ : st) {
            const nlohmann::json params{{"what", dir}, {"pinned", pinned}, {"bytes", s}};
            auto r = host_copy(ctx, h2d, pinned, static_cast<std::size_t>(s));
            ctx.record("hostlink", name, params, r);
            if (!r) {
              cudaGetLastError();
              st.SkipWithError(r.error().message.c_str());
              break;
            }
            st.SetIterationTime((*r)["time_s"].get<double>());
            st.counters["GB/s"] = (*r)["GBps"].get<double>();
          }
        })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
      }
    }
  }
  if (ctx.local_gpus < 2 || ctx.boot->mpi()) return;
  const std::vector<std::int64_t> p2p = ctx.opt.quick ? std::vector<std::int64_t>{std::int64_t{1} << 20, std::int64_t{256} << 20}
                                                      : std::vector<std::int64_t>{std::int64_t{64} << 10, std::int64_t{1} << 20,
                                                                                  std::int64_t{16} << 20, std::int64_t{256} << 20,
                                                                                  std::int64_t{1} << 30};
  for (int a = 0; a < ctx.local_gpus; ++a) {
    for (int b = 0; b < ctx.local_gpus; ++b) {
      if (a == b) continue;
      for (std::int64_t s : p2p) {
        const std::string name = "hostlink/p2p/" + std::to_string(a) + "-" + std::to_string(b) + "/" + bytes_label(s);
        if (ctx.is_done(name)) continue;
        benchmark::RegisterBenchmark(name.c_str(), [&ctx, a, b, s, name](benchmark::State& st) {
          for (auto _ : st) {
            bool access = false;
            auto r = peer_copy(ctx, a, b, static_cast<std::size_t>(s), access);
            const nlohmann::json params{{"what", "p2p"}, {"src", a}, {"dst", b}, {"bytes", s}, {"peer_access", access}};
            ctx.record("hostlink", name, params, r);
            if (!r) {
              cudaGetLastError();
              st.SkipWithError(r.error().message.c_str());
              break;
            }
            st.SetIterationTime((*r)["time_s"].get<double>());
            st.counters["GB/s"] = (*r)["GBps"].get<double>();
          }
        })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace dtsim::harness
