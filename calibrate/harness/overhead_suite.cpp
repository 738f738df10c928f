// Overheads: what one kernel costs on the GPU in a stream of back-to-back launches (dtsim's
// compute.kernel_overhead), what a launch costs the host, and the round trips of synchronization.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/kernels.hpp"

namespace dtsim::harness {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Median of `reps` host-timed samples of `body` (each sample averages `inner` calls; the stream
// is drained before each sample).
Expected<Timing> host_timed(Context& ctx, int inner, const std::function<Status()>& body) {
  std::vector<double> samples;
  for (int w = 0; w < 3; ++w) DTSIM_CHECK(body());
  const int reps = std::max(5, ctx.timing.reps * 3);
  for (int r = 0; r < reps; ++r) {
    DTSIM_CUDA(cudaStreamSynchronize(ctx.stream));
    const auto t0 = Clock::now();
    for (int i = 0; i < inner; ++i) DTSIM_CHECK(body());
    samples.push_back(seconds_since(t0) / inner);
  }
  return summarize(samples, inner);
}

struct OverheadPoint {
  std::string what, help;
};

Expected<Timing> measure(Context& ctx, const std::string& what) {
  cudaStream_t s = ctx.stream;
  if (what == "kernel_gpu") {
    // GPU time per empty kernel in a long queue of them (events around the queue).
    TimingOptions o = ctx.timing;
    o.max_iters = 20000;
    return time_on_stream(s, [&](std::size_t) -> Status {
      DTSIM_CUDA(gpu::empty_kernel(s));
      return {};
    }, o);
  }
  if (what == "launch_host") {
    // Host time of one launch call: 100 launches per sample, too few to fill the launch queue
    // (which would make the host wait for the GPU).
    auto t = host_timed(ctx, 100, [&]() -> Status {
      DTSIM_CUDA(gpu::empty_kernel(s));
      return {};
    });
    DTSIM_CUDA(cudaStreamSynchronize(s));
    return t;
  }
  if (what == "launch_sync") {
    return host_timed(ctx, 200, [&]() -> Status {
      DTSIM_CUDA(gpu::empty_kernel(s));
      DTSIM_CUDA(cudaStreamSynchronize(s));
      return {};
    });
  }
  if (what == "event_sync") {
    cudaEvent_t e = nullptr;
    DTSIM_CUDA(cudaEventCreate(&e));
    auto t = host_timed(ctx, 200, [&]() -> Status {
      DTSIM_CUDA(cudaEventRecord(e, s));
      DTSIM_CUDA(cudaEventSynchronize(e));
      return {};
    });
    cudaEventDestroy(e);
    return t;
  }
  if (what == "stream_sync") {
    return host_timed(ctx, 200, [&]() -> Status {
      DTSIM_CUDA(cudaStreamSynchronize(s));
      return {};
    });
  }
  return Error("unknown overhead '" + what + "'");
}

}  // namespace

void register_overhead(Context& ctx) {
  const OverheadPoint pts[] = {
      {"kernel_gpu", "GPU time per empty kernel launched back to back (dtsim: compute.kernel_overhead)"},
      {"launch_host", "host time of one kernel launch call"},
      {"launch_sync", "launch of an empty kernel and cudaStreamSynchronize: the round trip"},
      {"event_sync", "cudaEventRecord and cudaEventSynchronize on an idle stream"},
      {"stream_sync", "cudaStreamSynchronize on an idle stream"},
  };
  for (const auto& p : pts) {
    const std::string name = "overhead/" + p.what;
    if (ctx.is_done(name)) continue;
    benchmark::RegisterBenchmark(name.c_str(), [&ctx, p, name](benchmark::State& st) {
      for (auto _ : st) {
        const nlohmann::json params{{"what", p.what}, {"meaning", p.help}};
        auto t = measure(ctx, p.what);
        if (!t) {
          ctx.record("overhead", name, params, t.error());
          st.SkipWithError(t.error().message.c_str());
          break;
        }
        ctx.record("overhead", name, params, t->to_json());
        st.SetIterationTime(t->median_s);
      }
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace dtsim::harness
