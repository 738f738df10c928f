// Kernel time on one GPU: a roofline (the larger of compute time and memory time) plus a launch
// overhead, with GEMM efficiency a function of shape (tile and wave quantization over the SMs, and
// the K depth) and dtype. Every knob is a named parameter (compute_param_table) that a calibrated
// hardware profile replaces.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hw/specs.hpp"
#include "sim/expected.hpp"
#include "sim/units.hpp"

namespace dtsim::workloads {

enum class KernelClass : unsigned char { gemm, attention, attention_bwd, memory };

struct Kernel {
  const char* name = "";        // static label: "qkv", "attention", "layernorm", ...
  KernelClass cls = KernelClass::memory;
  std::int64_t m = 0, n = 0, k = 0;  // GEMM: one problem of a batch
  std::int64_t batch = 1;            // GEMM: independent problems (batched GEMM)
  double flops = 0;                  // total (GEMMs: 2 m n k batch)
  double bytes = 0;                  // HBM traffic, read + written
  hw::DType dtype = hw::DType::bf16; // math type (peak used)
  bool weighted = false;             // GEMM with a weight matrix (its backward has a weight gradient)
};

// A GEMM kernel with its flops and bytes filled in (inputs in `in`, output in `out` precision).
Kernel gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType math,
            int in_bytes, int out_bytes);
// A memory-bound kernel moving `bytes`.
Kernel memory_op(const char* name, double bytes, hw::DType math = hw::DType::bf16);

struct GemmTile {
  int m = 128, n = 128;
  double efficiency = 1.0;  // of the large-GEMM efficiency, for this tile size
};

struct ComputeParams {
  // Fraction of the dtype's peak that a large, well-shaped GEMM reaches.
  std::array<double, 6> gemm_efficiency{0.9, 0.85, 0.8, 0.8, 0.8, 0.7};  // fp64 fp32 tf32 bf16 fp16 fp8
  // Tile shapes the GEMM library chooses from (the one giving the highest throughput wins).
  std::vector<GemmTile> tiles{{128, 256, 1.0}, {128, 128, 0.95}, {64, 128, 0.85}};
  double k_half = 128;            // efficiency falls as K / (K + k_half) for shallow GEMMs
  double split_k_min = 256;       // split-K keeps at least this much of K per slice
  double attention_fwd_efficiency = 0.6;   // fused (flash) attention, of the dtype's peak
  double attention_bwd_efficiency = 0.45;
  double memory_efficiency = 0.85;         // fraction of HBM bandwidth streaming kernels reach
  Time kernel_overhead = Time::us(4);      // launch and fixed cost per kernel
  double comm_slowdown = 0.10;             // compute runs this much slower while NCCL kernels overlap it

  double efficiency(hw::DType d) const { return gemm_efficiency[static_cast<std::size_t>(d)]; }
};

struct ComputeParamInfo {
  std::string name, unit, help, source;
  std::function<std::string(const ComputeParams&)> get;
  std::function<Status(ComputeParams&, std::string_view)> set;
};
const std::vector<ComputeParamInfo>& compute_param_table();
Status set_compute_param(ComputeParams& p, std::string_view name, std::string_view value);

class ComputeModel {
 public:
  ComputeModel(const hw::GpuSpec& gpu, ComputeParams params);

  Time kernel_time(const Kernel& k) const;
  // Fraction of peak a GEMM of this shape reaches (before the roofline's memory bound).
  double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType d) const;
  bool supports(hw::DType d) const { return gpu_.peak.count(d) > 0; }
  const hw::GpuSpec& gpu() const { return gpu_; }
  const ComputeParams& params() const { return params_; }

 private:
  double peak(hw::DType d) const;
  hw::GpuSpec gpu_;
  ComputeParams params_;
};

// The one precision capability check, for every model family and every command: training in
// `precision` needs a peak rate for it on every GPU of the cluster (the GPU preset lists the types
// its tensor or CUDA cores run: no bf16 before Ampere, no fp8 before Hopper/Ada, no fast fp16 on
// Maxwell). The error names the GPU, the precision and the types it has.
Status check_precision(const hw::GpuSpec& gpu, hw::DType precision);

}  // namespace dtsim::workloads
