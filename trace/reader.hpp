// Reading a PyTorch profiler (Kineto) Chrome-trace JSON file, plain or gzipped, as a stream: the
// file is parsed event by event (nlohmann-json's SAX interface over a zlib stream), and only the
// events a step needs are kept as small records, so a 500 MB trace never becomes a document tree.
//
// Kept: GPU kernels (name, stream, start, duration, correlation, grid, block), memcpy and memset,
// CPU operators (name, thread, input shapes and types), CUDA runtime and driver calls, user
// annotations (ProfilerStep#N, Optimizer.step#...), the profiler's own overhead spans, and the
// autograd flow arrows ("fwdbwd": from a forward operator to the backward node autograd made of
// it). Every other event (launch flow arrows, Python frames, metadata, unknown categories) is
// counted and skipped.
//
// Category names changed across PyTorch versions; both spellings are read:
//   1.8-1.9: Kernel, Memcpy, Memset, Operator, Runtime, user_annotation
//   1.10-2.x: kernel, gpu_memcpy, gpu_memset, cpu_op, cuda_runtime, cuda_driver, user_annotation,
//             gpu_user_annotation, overhead
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/expected.hpp"

namespace dtsim::trace {

// Timestamps are integer nanoseconds (Kineto writes microseconds with three decimals).
struct Interval {
  std::int64_t ts_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t end_ns() const { return ts_ns + dur_ns; }
};

enum class GpuOpKind : unsigned char { kernel, memcpy, memset };

struct GpuOp {
  std::string name;
  GpuOpKind kind = GpuOpKind::kernel;
  Interval time;
  std::int64_t stream = 0;
  std::int64_t correlation = -1;   // links to the runtime call that launched it
  std::int64_t external_id = -1;   // links to the CPU operator that launched it (when written)
  std::array<std::int64_t, 3> grid{0, 0, 0}, block{0, 0, 0};
  std::int64_t bytes = 0;          // memcpy / memset
};

struct CpuOp {
  std::string name;
  Interval time;
  std::int64_t tid = 0;
  std::int64_t external_id = -1;
  std::vector<std::vector<std::int64_t>> input_dims;  // "Input Dims" (record_shapes=True)
  std::vector<std::string> input_types;               // "Input type"
};

struct RuntimeCall {  // cudaLaunchKernel, cuLaunchKernelEx, cudaMemsetAsync, cudaDeviceSynchronize, ...
  std::string name;
  Interval time;
  std::int64_t tid = 0;
  std::int64_t correlation = -1;
};

struct Annotation {  // ProfilerStep#N, Optimizer.step#AdamW.step, user record_function ranges
  std::string name;
  Interval time;
  bool gpu = false;  // gpu_user_annotation: the range's projection on the GPU
  std::size_t event_index = 0;
};

// One end of an autograd flow arrow (cat "fwdbwd"): ph "s" at the forward operator's start, ph
// "f" at the start of its backward node, both ends sharing `id`.
struct FlowPoint {
  std::int64_t id = 0;
  std::int64_t ts_ns = 0;
  bool start = false;
};

struct Trace {
  std::string file;
  std::string device;       // deviceProperties[0].name, when written
  std::int64_t schema_version = -1;
  std::vector<GpuOp> gpu;    // in file order
  std::vector<CpuOp> cpu;
  std::vector<RuntimeCall> runtime;
  std::vector<Annotation> annotations;
  std::vector<Interval> profiler_overhead;  // "overhead" spans (activity buffer requests)
  std::vector<FlowPoint> autograd_flows;    // "fwdbwd" arrow ends, in file order
  std::size_t events = 0;                   // entries of traceEvents
  std::map<std::string, std::size_t> skipped;  // by category (or phase when it has none)
  std::size_t skipped_total() const;
  // The ProfilerStep#N annotation the file holds (at most one after a successful read).
  const Annotation* profiler_step() const;
};

// Reads `path` (.json or .json.gz; gzip is detected from the content). Errors name the file and
// the byte offset (malformed or truncated JSON) or the event index (content problems): a file that
// is empty, not JSON, not a profiler trace, truncated, CPU-only, or holding several steps.
Expected<Trace> read_trace(const std::string& path);

}  // namespace dtsim::trace
