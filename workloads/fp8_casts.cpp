#include "workloads/fp8_casts.hpp"

namespace dtsim::workloads {

namespace {

// One FP8 GEMM of the forward pass, as its neighbours place it.
struct Site {
  bool gathered = false;        // its input is all-gathered over tp first (column-parallel, sequence parallel)
  bool norm_fed = false;        // a norm wrote its input
  bool out_scattered = false;   // its output is reduce-scattered (row-parallel, sequence parallel), so the
                                // backward pass all-gathers its output gradient
};

bool fp8_gemm(const Kernel& k) { return k.cls == KernelClass::gemm && k.weighted && k.dtype == hw::DType::fp8; }
Kernel cast_kernel(const char* name, double bytes) { return memory_op(name, bytes, hw::DType::bf16, MemoryKind::stream); }
Bytes fp8_bytes(double elements) { return Bytes(static_cast<std::int64_t>(elements)); }

}  // namespace

void add_fp8_casts(Pass& fwd, Pass& bwd, const ProgramShape& sh) {
  using B = Fp8CastBytes;
  const bool current = sh.fp8_recipe == Fp8Recipe::current;
  const double tp = static_cast<double>(sh.tp);
  std::vector<Site> sites;

  // Forward: each GEMM's input. A norm finds the maximum as it writes (current scaling) or writes
  // FP8 itself (delayed scaling; the transposed copy is then a pass of its own); anything else is
  // cast by Transformer Engine's Linear, after a maximum pass with current scaling.
  Pass out;
  const Kernel* last = nullptr;  // the kernel before, in forward order
  for (std::size_t i = 0; i < fwd.segments.size(); ++i) {
    Segment s = fwd.segments[i];
    std::vector<Kernel> kernels;
    for (std::size_t j = 0; j < s.kernels.size(); ++j) {
      const Kernel& k = s.kernels[j];
      if (fp8_gemm(k)) {
        Site site;
        site.norm_fed = last != nullptr && last->cls == KernelClass::memory && last->kind == MemoryKind::norm;
        site.gathered = j == 0 && !out.segments.empty() && out.segments.back().blocking_tp_op(CollOp::allgather);
        site.out_scattered = j + 1 == s.kernels.size() && s.blocking_tp_op(CollOp::reducescatter);
        const double in_el = static_cast<double>(k.batch) * static_cast<double>(k.m) * static_cast<double>(k.k);  // a batch: MoE experts
        const bool norm_casts = !current && site.norm_fed;
        const double amax = current && !site.norm_fed ? B::amax : 0.0;
        const double row = norm_casts ? 0.0 : B::rowwise;
        if (site.gathered) {
          // The shard is cast row-wise and gathered in FP8; the column-wise copy is made from the
          // gathered tensor in the backward pass.
          Segment& prev = out.segments.back();
          if (amax + row > 0) prev.kernels.push_back(cast_kernel("fp8_cast", in_el / tp * (amax + row)));
          prev.comm->bytes = fp8_bytes(in_el);
        } else {
          const double col = norm_casts ? B::transpose : B::columnwise;
          kernels.push_back(cast_kernel("fp8_cast", in_el * (amax + row + col)));
        }
        sites.push_back(site);
      }
      kernels.push_back(k);
      last = &fwd.segments[i].kernels[j];
    }
    s.kernels = std::move(kernels);
    out.segments.push_back(std::move(s));
  }
  fwd = std::move(out);

  // Backward: each GEMM's output gradient, cast before its input-gradient GEMM (after a maximum
  // pass with current scaling: the residual stream's and Megatron's activations' gradients do not
  // find it), and the transposed copies the weight-gradient GEMM reads.
  Pass bout;
  std::size_t next = sites.size();  // sites are met in reverse
  double pending_transpose = 0;     // bytes of the transposes the next weight-gradient GEMM waits for
  for (const Segment& seg : bwd.segments) {
    Segment s = seg;
    std::vector<Kernel> kernels;
    for (std::size_t j = 0; j < s.kernels.size(); ++j) {
      const Kernel& k = s.kernels[j];
      if (k.cls == KernelClass::gemm && k.role == GemmRole::weight_grad && pending_transpose > 0) {
        kernels.push_back(cast_kernel("fp8_transpose", pending_transpose));
        pending_transpose = 0;
      }
      if (fp8_gemm(k) && k.role == GemmRole::input_grad && next > 0) {
        const Site site = sites[--next];
        const double dy_el = static_cast<double>(k.batch) * static_cast<double>(k.m) * static_cast<double>(k.k);  // [tokens, forward n]
        const double x_el = static_cast<double>(k.batch) * static_cast<double>(k.m) * static_cast<double>(k.n);  // the forward's input
        const double amax = current ? B::amax : 0.0;
        const bool dy_gathered = site.out_scattered && j == 0 && kernels.empty() && !bout.segments.empty() &&
                                 bout.segments.back().blocking_tp_op(CollOp::allgather);
        if (dy_gathered) {
          Segment& prev = bout.segments.back();
          prev.kernels.push_back(cast_kernel("fp8_cast", dy_el / tp * (amax + B::rowwise)));
          prev.comm->bytes = fp8_bytes(dy_el);
          pending_transpose += dy_el * B::transpose;
        } else {
          kernels.push_back(cast_kernel("fp8_cast", dy_el * (amax + B::rowwise + B::columnwise)));
        }
        if (site.gathered) {
          // The saved input shard, gathered again in FP8 (beside this GEMM, or before it without
          // overlap), then transposed.
          if (s.tp_op(CollOp::allgather)) {
            s.comm->bytes = fp8_bytes(x_el);
          } else if (!bout.segments.empty() && bout.segments.back().blocking_tp_op(CollOp::allgather)) {
            bout.segments.back().comm->bytes = fp8_bytes(x_el);
          }
          pending_transpose += x_el * B::transpose;
        }
      }
      kernels.push_back(k);
    }
    s.kernels = std::move(kernels);
    bout.segments.push_back(std::move(s));
  }
  bwd = std::move(bout);
}

}  // namespace dtsim::workloads
