// Timing on the GPU with CUDA events: warm up, size the repetitions (many back-to-back launches
// between two events, so that the events' resolution and the launch gaps do not matter), then the
// median and spread over repetitions.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::harness {

struct TimingOptions {
  int reps = 7;               // repetitions (samples)
  double rep_seconds = 0.02;  // target length of one repetition
  int max_iters = 20000;      // launches per repetition at most
  int warmup_reps = 1;        // untimed repetitions first
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0, mean_s = 0;
  int reps = 0, iters = 0;  // samples, and launches per sample
  std::vector<double> samples;
  // {time_s, time_min_s, time_max_s, time_mean_s, spread (max-min)/median, reps, iters}
  nlohmann::json to_json() const;
};

Timing summarize(std::vector<double> samples, int iters);

// `op(i)` enqueues the i-th operation on `stream` (i counts every launch, for rotating buffers).
Expected<Timing> time_on_stream(cudaStream_t stream, const std::function<Status(std::size_t)>& op, const TimingOptions& o);

}  // namespace dtsim::harness
