#include "calibrate/harness/timing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "calibrate/harness/check.hpp"

namespace dtsim::harness {

Timing summarize(std::vector<double> samples, int iters) {
  Timing t;
  t.samples = samples;
  t.reps = static_cast<int>(samples.size());
  t.iters = iters;
  if (samples.empty()) return t;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  t.median_s = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.min_s = samples.front();
  t.max_s = samples.back();
  t.mean_s = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  return t;
}

nlohmann::json Timing::to_json() const {
  return {{"time_s", median_s},
          {"time_min_s", min_s},
          {"time_max_s", max_s},
          {"time_mean_s", mean_s},
          {"spread", median_s > 0 ? (max_s - min_s) / median_s : 0.0},
          {"reps", reps},
          {"iters", iters}};
}

namespace {

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  ~Events() {
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
  }
};

}  // namespace

Expected<Timing> time_on_stream(cudaStream_t stream, const std::function<Status(std::size_t)>& op, const TimingOptions& o) {
  Events ev;
  DTSIM_CUDA(cudaEventCreate(&ev.a));
  DTSIM_CUDA(cudaEventCreate(&ev.b));
  std::size_t counter = 0;
  auto batch = [&](int iters) -> Expected<double> {
    DTSIM_CUDA(cudaEventRecord(ev.a, stream));
    for (int i = 0; i < iters; ++i) DTSIM_CHECK(op(counter++));
    DTSIM_CUDA(cudaEventRecord(ev.b, stream));
    DTSIM_CUDA(cudaEventSynchronize(ev.b));
    float ms = 0;
    DTSIM_CUDA(cudaEventElapsedTime(&ms, ev.a, ev.b));
    return static_cast<double>(ms) * 1e-3;
  };
  // First call (plans, caches), then a probe that sizes the repetitions.
  DTSIM_CHECK(batch(1));
  double one = 0;
  {
    auto t = batch(1);
    if (!t) return t.error();
    one = *t;
    if (one < 1e-4) {  // short operations: probe with more launches
      auto t10 = batch(10);
      if (!t10) return t10.error();
      one = *t10 / 10;
    }
  }
  const int iters = std::clamp(static_cast<int>(std::ceil(o.rep_seconds / std::max(one, 1e-9))), 1, std::max(1, o.max_iters));
  for (int w = 0; w < o.warmup_reps; ++w) DTSIM_CHECK(batch(iters));
  std::vector<double> samples;
  for (int r = 0; r < std::max(1, o.reps); ++r) {
    auto t = batch(iters);
    if (!t) return t.error();
    samples.push_back(*t / iters);
  }
  return summarize(samples, iters);
}

}  // namespace dtsim::harness
