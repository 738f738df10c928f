// Building blocks of the PyTorch frameworks' programs (workloads/framework_program.cpp for
// transformers, workloads/framework_cnn.cpp for CNNs): element-wise kernels by bytes per element,
// and a layer's forward kernels with the backward group of each forward op.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "workloads/compute.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads::framework_detail {

using I = std::int64_t;

inline double d(I v) { return static_cast<double>(v); }

// A memory-bound kernel over `el` elements moving `bpe` bytes per element (read + written).
inline Kernel ew(const char* name, double el, double bpe, MemoryKind kind = MemoryKind::stream) {
  return memory_op(name, el * bpe, hw::DType::fp32, kind);
}
// A kernel of negligible size (memsets of GEMM workspaces, scalar ops, index arithmetic): its
// fixed cost and its launch only.
inline Kernel tiny(const char* name) { return memory_op(name, 0, hw::DType::fp32, MemoryKind::stream); }

// Dropout (PyTorch's fused_dropout_kernel_vec, Philox): reads the input, writes the output and a
// one-byte mask.
inline Kernel dropout_kernel(double el, double elem_bytes) {
  Kernel k = memory_op("dropout", el * (2.0 * elem_bytes + 1.0), hw::DType::fp32, MemoryKind::dropout);
  k.elements = el;
  return k;
}

// One layer's kernels: the forward in order, the backward as one group per forward op (the
// autograd engine runs them in reverse order of the forward).
struct Builder {
  bool compile = false;
  bool amp = true;  // fp32 parameters, bf16 autocast (casts before every matrix product)
  // The matrix products' math type: the autocast type (bf16 or fp16) with AMP; without it, tf32
  // when the run allows TF32 (torch.backends.cudnn/cuda.matmul.allow_tf32), else fp32.
  hw::DType math = hw::DType::bf16;
  std::vector<Kernel> fwd;
  std::vector<std::vector<Kernel>> bwd;

  void f(Kernel k) { fwd.push_back(std::move(k)); }
  void b(std::vector<Kernel> g) { bwd.push_back(std::move(g)); }

  Kernel mm(const char* name, I m, I n, I k) const {
    Kernel g = gemm(name, m, n, k, 1, math, amp ? 2 : 4, amp ? 2 : 4);
    g.weighted = true;
    // Inductor pads GEMM shapes to aligned sizes (torch._inductor.config.shape_padding); eager
    // cuBLAS falls back to unvectorised kernels (docs/model.md).
    g.unaligned = !compile && amp && (m % 8 != 0 || n % 8 != 0 || k % 8 != 0);
    return g;
  }

  // nn.Linear / HF Conv1D: y[T, n] = x[T, k] W (+ bias). x32: the input is fp32 (a norm's or an
  // fp32 chain's output), which autocast casts for this product; needs_dgrad: the input needs a
  // gradient.
  void linear(const char* name, I T, I n, I k, bool bias, bool x32, bool needs_dgrad = true) {
    if (compile) {
      // Inductor: the weight cast is a kernel of its own, the input cast is fused into its producer,
      // the bias into the GEMM's epilogue; backward: the bias gradient is one reduction, the weight
      // gradient's cast to fp32 one kernel.
      if (amp) f(ew("cast_weight", d(n) * d(k), 6));
      f(mm(name, T, n, k));
      std::vector<Kernel> g;
      if (needs_dgrad) g.push_back(mm("dgrad", T, k, n));
      g.push_back(mm("wgrad", k, n, T));
      if (bias) g.push_back(ew("bias_grad", d(T) * d(n), 2));
      if (amp) g.push_back(ew("cast_weight_grad", d(n) * d(k), 6));
      b(std::move(g));
      return;
    }
    if (amp) f(ew("cast_weight", d(n) * d(k), 6));
    if (amp && x32) f(ew("cast_input", d(T) * d(k), 6));
    if (amp && bias) f(ew("cast_bias", d(n), 6));
    f(tiny("memset"));
    f(mm(name, T, n, k));
    std::vector<Kernel> g{tiny("memset")};
    if (needs_dgrad) g.push_back(mm("dgrad", T, k, n));
    g.push_back(mm("wgrad", k, n, T));
    if (bias) {
      g.push_back(tiny("memset"));
      g.push_back(ew("bias_grad", d(T) * d(n), amp ? 2 : 4));
      if (amp) g.push_back(ew("cast_bias_grad", d(n), 6));
    }
    if (amp && x32 && needs_dgrad) g.push_back(ew("cast_input_grad", d(T) * d(k), 6));
    if (amp) g.push_back(ew("cast_weight_grad", d(n) * d(k), 6));
    b(std::move(g));
  }

  // Gradients of a tensor used by `uses` ops are summed by autograd (fp32 residual stream).
  void grad_sum(double el, int uses) {
    std::vector<Kernel> g;
    for (int i = 1; i < uses; ++i) g.push_back(ew("grad_accumulate", el, 12));
    if (!g.empty()) b(std::move(g));
  }

  // LayerNorm (native, fp32 under autocast) or Hugging Face's RMSNorm (eager: x.pow(2).mean(),
  // + eps, rsqrt, x * rstd, weight * x, each a kernel in fp32) over `el` = tokens x hidden.
  void norm(Norm kind, double el, double rows, bool cast_out) {
    if (compile) {
      // One fused reduction + normalisation kernel (reads fp32, writes the bf16 copy the next
      // product reads); backward: one fused kernel for the input gradient, one reduction for the
      // scale (and shift) gradients.
      f(ew("norm", el, 4 + (cast_out ? 2 : 4), MemoryKind::norm));
      b({ew("norm_grad_input", el, 12, MemoryKind::norm_bwd), ew("norm_grad_weight", el, 8, MemoryKind::norm_bwd)});
      return;
    }
    if (kind == Norm::layernorm) {
      f(ew("layernorm", el, 8, MemoryKind::norm));
      b({ew("layernorm_grad_input", el, 12, MemoryKind::norm_bwd), ew("layernorm_grad_weight", el, 8, MemoryKind::norm_bwd)});
      return;
    }
    f(ew("rms_pow", el, 8));
    f(ew("rms_mean", el, 4, MemoryKind::norm));
    f(ew("rms_eps", rows, 8));
    f(ew("rms_rsqrt", rows, 8));
    f(ew("rms_scale", el, 8));
    f(ew("rms_weight", el, 8));
    // Backward of weight * y: grad * weight, grad * y summed over tokens; of x * rstd: grad * rstd,
    // grad * x summed over hidden; rsqrt, mean and pow backward; the two paths into x summed.
    b({ew("rms_weight_grad_input", el, 12), ew("rms_weight_grad_mul", el, 12), ew("rms_weight_grad_sum", el, 4, MemoryKind::norm),
       ew("rms_scale_grad_input", el, 12), ew("rms_scale_grad_mul", el, 12), ew("rms_scale_grad_sum", el, 4, MemoryKind::norm),
       ew("rms_rsqrt_grad", rows, 12), ew("rms_rsqrt_grad_scale", rows, 8), ew("rms_mean_grad", el, 8), ew("rms_pow_grad", el, 8),
       ew("rms_pow_grad_mul", el, 12), ew("rms_grad_sum", el, 12)});
  }

  // Dropout on a [tokens, hidden] tensor in the activation type, then the residual add into the
  // fp32 residual stream.
  void dropout_residual(double el, double p_drop) {
    if (compile) {
      f(ew("dropout_residual", el, 2 + 4 + 4 + (p_drop > 0 ? 1 : 0)));
      if (p_drop > 0) b({ew("dropout_grad", el, 4 + 1 + 2)});
      return;
    }
    // Under autocast the branch is bf16/fp16 and its gradient is cast back from the fp32 stream;
    // without it (fp32 training) everything is fp32 and there is no cast.
    const double eb = amp ? 2 : 4;
    if (p_drop > 0) {
      f(dropout_kernel(el, eb));
      if (amp) b({ew("cast_grad", el, 6), ew("dropout_grad", el, 5)});
      else b({ew("dropout_grad", el, 4 + 1 + 4)});
    }
    f(ew("residual_add", el, eb + 4 + 4));
  }

  LayerProgram finish(const char* name) {
    LayerProgram p;
    p.name = name;
    p.forward.segments.push_back(Segment{std::move(fwd), std::nullopt, false});
    Segment s;
    for (auto it = bwd.rbegin(); it != bwd.rend(); ++it) s.kernels.insert(s.kernels.end(), it->begin(), it->end());
    p.backward.segments.push_back(std::move(s));
    return p;
  }
};

inline bool amp_of(const ProgramShape& s) { return s.precision == hw::DType::bf16 || s.precision == hw::DType::fp16; }
// The math type of the framework's matrix products and convolutions for a run's precision.
inline hw::DType math_of(const ProgramShape& s) { return amp_of(s) || s.precision == hw::DType::tf32 ? s.precision : hw::DType::fp32; }

}  // namespace dtsim::workloads::framework_detail
