// Kernel builders shared by the workloads' programs (program_kernels.hpp).
#include "workloads/program_kernels.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dtsim::workloads::detail {

Types types_of(hw::DType precision) {
  switch (precision) {
    case hw::DType::fp8: return {hw::DType::fp8, 1, 2, hw::DType::bf16};  // Transformer Engine style
    case hw::DType::fp32: return {hw::DType::fp32, 4, 4, hw::DType::fp32};
    case hw::DType::tf32: return {hw::DType::tf32, 4, 4, hw::DType::tf32};
    case hw::DType::fp64: return {hw::DType::fp64, 8, 8, hw::DType::fp64};
    default: return {precision, 2, 2, precision};
  }
}

Kernel lin(const Types& ty, const char* name, I m, I n, I k) {
  Kernel g = gemm(name, m, n, k, 1, ty.math, ty.gemm_in, ty.act);
  g.weighted = true;
  return g;
}

Types non_te(const Types& ty) { return ty.math == hw::DType::fp8 ? types_of(hw::DType::bf16) : ty; }

Kernel bmm(const Types& ty, const char* name, I batch, I m, I n, I k) {
  return gemm(name, m, n, k, batch, ty.math == hw::DType::fp8 ? hw::DType::bf16 : ty.math, ty.act, ty.act);
}

Kernel mem(const Types& ty, const char* name, double elements, MemoryKind kind) {
  return memory_op(name, elements * ty.act, ty.act_math, kind);
}

Kernel dropout_op(const Types& ty, const ProgramShape& sh, const char* name, double n) {
  const double mask = sh.dropout_regenerated ? 0.0 : 1.0;
  Kernel k = memory_op(name, n * (2.0 * ty.act + mask), ty.act_math, MemoryKind::dropout);
  k.elements = n;
  k.regenerate = sh.dropout_regenerated;
  k.hash_rng = sh.dropout_hash_rng;
  k.backward_bytes = n * (2.0 * ty.act + mask);  // read the output gradient (and the mask), write the input's
  return k;
}

Kernel residual_op(const Types& ty, const ProgramShape& sh, const char* name, double n) {
  if (sh.dropout <= 0) return memory_op(name, 3.0 * n * ty.act, ty.act_math, MemoryKind::stream);
  const double mask = sh.dropout_regenerated ? 0.0 : 1.0;
  Kernel k = memory_op(name, n * (3.0 * ty.act + mask), ty.act_math, MemoryKind::dropout);
  k.elements = n;
  k.regenerate = sh.dropout_regenerated;
  k.hash_rng = sh.dropout_hash_rng;
  k.backward_bytes = n * (2.0 * ty.act + mask);  // the residual's gradient passes through; the branch's goes through the mask
  return k;
}

CollOp dual(CollOp op) {
  switch (op) {
    case CollOp::allgather: return CollOp::reducescatter;
    case CollOp::reducescatter: return CollOp::allgather;
    default: return op;
  }
}

void append_backward(const Kernel& k, std::vector<Kernel>& out) {
  switch (k.cls) {
    case KernelClass::gemm: {
      // Y = X W: dX = dY W^T (m x k via n), dW = X^T dY (k x n via m). Batched products of two
      // activations need both input gradients. Each moves about what the forward moved.
      Kernel dx = k;
      dx.name = "dgrad";
      dx.role = GemmRole::input_grad;
      dx.n = k.k;
      dx.k = k.n;
      Kernel dw = k;
      dw.name = k.weighted ? "wgrad" : "dgrad";
      dw.role = k.weighted ? GemmRole::weight_grad : GemmRole::input_grad;
      dw.m = k.k;
      dw.n = k.n;
      dw.k = k.m;
      out.push_back(dx);
      out.push_back(dw);
      break;
    }
    case KernelClass::attention: {
      // Fused attention backward: five matrix products to the forward's two (FlashAttention-2).
      Kernel b = k;
      b.name = "attention_bwd";
      b.cls = KernelClass::attention_bwd;
      b.flops = 2.5 * k.flops;
      b.bytes = 2.0 * k.bytes;
      out.push_back(b);
      break;
    }
    case KernelClass::attention_bwd:
      break;
    case KernelClass::memory: {
      Kernel b = k;
      b.kind = backward_kind(k.kind);
      if (k.kind == MemoryKind::dropout) {
        // The input gradient is the output gradient through the mask: the mask is read back (one
        // byte per element), or regenerated from the seed (random numbers again). A fused
        // residual passes its gradient straight through (no kernel of its own).
        b.bytes = k.backward_bytes >= 0 ? k.backward_bytes : k.bytes;
        if (!k.regenerate) {
          b.kind = MemoryKind::stream;
          b.elements = 0;
        }
      } else if (k.backward_bytes >= 0) {
        b.bytes = k.backward_bytes;
      } else {
        // Reads the output gradient and the saved input, writes the input gradient.
        b.bytes = 1.5 * k.bytes;
      }
      out.push_back(b);
      break;
    }
  }
}

Pass backward_of(const Pass& fwd) {
  Pass b;
  const int n = static_cast<int>(fwd.segments.size());
  for (int i = n - 1; i >= 0; --i) {
    const Segment& f = fwd.segments[static_cast<std::size_t>(i)];
    Segment s;
    for (auto it = f.kernels.rbegin(); it != f.kernels.rend(); ++it) append_backward(*it, s.kernels);
    if (f.comm && f.comm_overlaps) {
      // Ring attention's backward passes K/V around again and their gradients back.
      CommStep c = *f.comm;
      c.bytes = c.bytes * 2;
      s.comm = c;
      s.comm_overlaps = true;
    } else if (i > 0) {
      const Segment& before = fwd.segments[static_cast<std::size_t>(i - 1)];
      if (before.backward_comm) {
        s.comm = before.backward_comm;
      } else if (before.comm && !before.comm_overlaps && before.comm->op != CollOp::allreduce) {
        CommStep c = *before.comm;
        c.op = dual(c.op);
        s.comm = c;
      }
    }
    b.segments.push_back(std::move(s));
  }
  return b;
}

}  // namespace dtsim::workloads::detail
