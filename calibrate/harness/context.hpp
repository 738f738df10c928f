// What every suite of dtsim-calibrate shares: the options, the timing settings, the device and run
// facts, the result file, and the resume state. Suites register Google Benchmark benchmarks whose
// bodies measure, then append one record per finished point (flushed at once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/harness/bootstrap.hpp"
#include "calibrate/harness/timing.hpp"
#include "calibrate/records.hpp"

namespace dtsim::harness {

struct Options {
  std::string out = "calibration.jsonl";
  bool resume = false;
  bool retry_errors = false;
  bool fresh = false;
  bool quick = false;
  int reps = 0;          // 0: 7 (quick: 3)
  double rep_ms = 0;     // 0: 20 ms (quick: 5 ms)
  std::int64_t gemm_max = 16384;
  std::vector<std::string> gemm_dtypes;  // empty: every dtype the GPU has
  std::int64_t nccl_min = 8;
  std::int64_t nccl_max = 0;             // 0: 8 GiB (quick: 1 GiB), capped by memory
  std::string nccl_type = "float";
  double nccl_timeout_s = 120;
  int nccl_iters = 0;                    // 0: 20 (quick: 10)
  int gpus = 0;                          // single process: GPUs driven (0: all)
  int device = 0;                        // single-GPU suites: this device
};

class Context {
 public:
  Options opt;
  TimingOptions timing;
  Bootstrap* boot = nullptr;
  calibrate::ResultLog* log = nullptr;   // on rank 0 only
  nlohmann::json device;                 // facts of `device_index`
  nlohmann::json run;
  int device_index = 0;                  // the GPU of this process's single-GPU suites
  int cc_major = 0, cc_minor = 0;
  std::size_t l2_bytes = 0, memory_bytes = 0;
  int local_gpus = 1;                    // GPUs this process can see
  std::set<std::string> done;            // points already recorded (resume), same on every rank
  cudaStream_t stream = nullptr;         // on device_index
  int failures = 0;
  // What the suites hold across points (cuBLASLt, buffers, NCCL communicators), freed by main
  // before the CUDA runtime shuts down.
  std::vector<std::function<void()>> release;

  bool is_done(const std::string& point) const { return done.count(point) > 0; }
  // Appends a record (rank 0): status ok with `result`, or error with its message.
  void record(const std::string& suite, const std::string& point, const nlohmann::json& params, const Expected<nlohmann::json>& result);
  void skipped(const std::string& suite, const std::string& point, const nlohmann::json& params, const std::string& why);
};

// Suites: each registers its benchmarks (names "<suite>/...", so --benchmark_filter picks suites).
void register_gemm(Context& ctx);
void register_memory(Context& ctx);
void register_overhead(Context& ctx);
void register_hostlink(Context& ctx);
void register_nccl(Context& ctx);
void register_power(Context& ctx);

// Growable device buffers reused across points; contents are random (never zeros).
class Arena {
 public:
  ~Arena();
  // A buffer of at least `bytes` in slot `slot` (filled with random values of type `fill`).
  Expected<void*> get(int slot, std::size_t bytes, int fill_elt, cudaStream_t stream);
  void release();

 private:
  struct Buf {
    void* p = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Buf> bufs_;
};

std::string bytes_label(std::int64_t b);  // 1024 -> "1KiB", 3000 -> "3000B"

}  // namespace dtsim::harness
