// The program of a convolutional network (cnn_program in program.hpp): its layers' forward and
// backward kernels.
#include "workloads/program.hpp"
#include "workloads/program_kernels.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

using detail::Types;
using detail::types_of;
using detail::lin;
using detail::mem;
using detail::backward_of;
using detail::I;

std::vector<LayerProgram> cnn_program(const CnnSpec& m, const ProgramShape& sh) {
  const Types ty = types_of(sh.precision);
  const I b = sh.micro_batch;
  std::vector<LayerProgram> out;
  for (const CnnLayer& l : m.layers) {
    const double in_el = static_cast<double>(b * l.in_channels * l.in_h * l.in_w);
    const double out_el = static_cast<double>(b * l.out_channels * l.out_h * l.out_w);
    Kernel k;
    switch (l.kind) {
      case CnnLayer::Kind::conv: {
        // Implicit GEMM: one row per output pixel, one column per output channel (per group).
        k = gemm("conv", b * l.out_h * l.out_w, l.out_channels / l.groups, l.in_channels / l.groups * l.kernel * l.kernel,
                 l.groups, ty.math, ty.gemm_in, ty.act);
        k.bytes = (in_el + out_el) * ty.act + static_cast<double>(l.params()) * ty.gemm_in;
        k.weighted = true;
        break;
      }
      case CnnLayer::Kind::fc:
        k = lin(ty, "fc", b, l.out_channels, l.in_channels);
        break;
      case CnnLayer::Kind::batchnorm: k = mem(ty, "batchnorm", 3.0 * in_el); break;
      case CnnLayer::Kind::relu: k = mem(ty, "relu", 2.0 * in_el); break;
      case CnnLayer::Kind::add: k = mem(ty, "add", 3.0 * out_el); break;
      case CnnLayer::Kind::pool: k = mem(ty, "pool", in_el + out_el); break;
      case CnnLayer::Kind::softmax: k = mem(ty, "softmax", 2.0 * in_el); break;
      case CnnLayer::Kind::dropout: k = mem(ty, "dropout", 2.5 * in_el); break;
    }
    const bool weighted = l.kind == CnnLayer::Kind::conv || l.kind == CnnLayer::Kind::fc;
    // Layers without GEMM weights (batch norm's scale and shift are parameters all the same) join
    // the previous layer's program (fewer, larger tasks).
    if (!weighted && !out.empty()) {
      out.back().forward.segments.front().kernels.push_back(k);
      out.back().params += l.params();
      continue;
    }
    LayerProgram p;
    p.name = l.name;
    p.forward.segments.push_back(Segment{{k}, std::nullopt, false});
    p.params = l.params();
    out.push_back(std::move(p));
  }
  for (LayerProgram& p : out) {
    p.backward = backward_of(p.forward);
    if (sh.recompute == Recompute::full) p.recompute = p.forward;
  }
  return out;
}

}  // namespace dtsim::workloads
