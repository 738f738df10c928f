// Kernel classes of a profiled step, from the kernel's name (the library's naming conventions:
// cuBLAS/cuBLASLt nvjet and cutlass GEMMs, cuDNN's implicit-GEMM convolutions and fused SDPA,
// PyTorch's ATen elementwise, reduction and normalisation kernels, NCCL) and its context (kernels
// inside the optimizer step's range). The rules and the real names they were checked on are listed
// in docs/traces.md.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "hw/specs.hpp"
#include "trace/reader.hpp"

namespace dtsim::trace {

enum class KernelClass : unsigned char {
  gemm, attention, convolution, elementwise, normalization, softmax, dropout, cross_entropy, optimizer, copy,
  communication, other, count
};
inline constexpr int kKernelClasses = static_cast<int>(KernelClass::count);
std::string_view to_string(KernelClass c);

// Re-timing family: compute-bound (roofline on the tensor-core peak), memory-bound (HBM
// bandwidth), or communication (not re-timed; data parallelism is simulated instead).
enum class Bound : unsigned char { compute, memory, communication };
Bound bound_of(KernelClass c);

// By name alone (memcpy and memset ops are `copy` whatever their name).
KernelClass classify_name(std::string_view kernel_name);
KernelClass classify(const GpuOp& op);

// The math type of an ATen operator from its "Input type" strings ("c10::BFloat16", "float", ...).
std::optional<hw::DType> dtype_of(const CpuOp& op);

// A GEMM's problem from the launching ATen operator's input shapes (mm, addmm, bmm, baddbmm,
// matmul on 2-D operands): m x n x k, batch. nullopt when the operator is not one of them.
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch); }
};
std::optional<GemmShape> gemm_shape(const CpuOp& op);

}  // namespace dtsim::trace
