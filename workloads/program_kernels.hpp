// Kernel builders shared by the workloads' programs (program.cpp: transformers; cnn_program.cpp:
// CNNs): element types of a run, GEMMs, memory-bound kernels, dropout, and the backward pass
// derived from a forward one. Internal to workloads/, not part of its interface.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/program.hpp"

namespace dtsim::workloads::detail {

using I = std::int64_t;

// Element sizes and math types of one run.
struct Types {
  hw::DType math;      // GEMM math
  int gemm_in = 2;     // bytes of a GEMM input element
  int act = 2;         // bytes of an activation element (outputs, norms, ...)
  hw::DType act_math;  // math of non-GEMM kernels (attention)
};

Types types_of(hw::DType precision);

Kernel lin(const Types& ty, const char* name, I m, I n, I k);

// Megatron's own linear layers (the output layer, BERT's transform, the MoE router) are not
// Transformer Engine's, so they stay in 16 bits under precision fp8 (Megatron-Core gpt_model.py:
// tensor_parallel.ColumnParallelLinear, TE's only with MXFP8 output projections).
Types non_te(const Types& ty);

Kernel bmm(const Types& ty, const char* name, I batch, I m, I n, I k);

// The longest row a row-wise kernel's block keeps on chip between its passes. Read from the
// measurements (data/calibration/h100-sxm-2026-11-26, cross_entropy_fwd), so in-sample: rows of
// 12.6 and 25 KB run at the one-read rate, 50 KB partly re-read from HBM, 100 and 256 KB at the
// three-read rate; an H100 SM's 256 KB of L1 and shared memory over the kernel's 4 resident
// blocks of 512 threads bounds it from above.
constexpr double kRowOnChipBytes = 64.0 * 1024;

Kernel mem(const Types& ty, const char* name, double elements, MemoryKind kind = MemoryKind::stream);

// Dropout over `n` elements: read the input, write the output (and a one-byte mask unless the
// backward regenerates it), one random number per element.
Kernel dropout_op(const Types& ty, const ProgramShape& sh, const char* name, double n);

// Dropout on the residual branch fused with the residual add (Megatron's bias-dropout-add):
// read the branch and the residual, write the sum.
Kernel residual_op(const Types& ty, const ProgramShape& sh, const char* name, double n);

CollOp dual(CollOp op);

// The gradient kernels of one forward kernel.
void append_backward(const Kernel& k, std::vector<Kernel>& out);

Pass backward_of(const Pass& fwd);

}  // namespace dtsim::workloads::detail
