// The PyTorch frameworks' CNN programs (torchvision models): see workloads/framework_program.hpp
// and docs/model.md, "Eager PyTorch and torch.compile".
#include "workloads/framework_program.hpp"

#include "workloads/framework_builder.hpp"

namespace dtsim::workloads {

using namespace framework_detail;

std::vector<LayerProgram> framework_cnn(const CnnSpec& m, const ProgramShape& sh, Framework fw) {
  const bool compile = fw == Framework::torch_compile;
  const bool amp = amp_of(sh);
  const double eb = amp ? 2 : 4;
  const I b = sh.micro_batch;
  std::vector<LayerProgram> out;
  Builder bl;
  bl.compile = compile;
  bl.amp = amp;
  bl.math = math_of(sh);
  bool first_weighted = true;
  const char* name = "";
  I params = 0;
  std::vector<I> tensors;  // weight (and bias), batch norm scale and shift
  auto flush = [&] {
    if (bl.fwd.empty()) return;
    LayerProgram p = bl.finish(name);
    p.params = params;
    p.tensors = std::move(tensors);
    out.push_back(std::move(p));
    bl = Builder{};
    bl.compile = compile;
    bl.amp = amp;
    bl.math = math_of(sh);
    params = 0;
    tensors.clear();
  };
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const CnnLayer& l = m.layers[i];
    const double in_el = d(b * l.in_channels * l.in_h * l.in_w);
    const double out_el = d(b * l.out_channels * l.out_h * l.out_w);
    const bool weighted = l.kind == CnnLayer::Kind::conv || l.kind == CnnLayer::Kind::fc;
    if (weighted) {
      flush();
      name = m.layers[i].name.c_str();
    }
    params += l.params();
    if (l.kind == CnnLayer::Kind::batchnorm) {
      tensors.push_back(l.params() / 2);
      tensors.push_back(l.params() - l.params() / 2);
    } else if (weighted && l.bias) {
      tensors.push_back(l.out_channels);
      tensors.push_back(l.params() - l.out_channels);
    } else if (l.params() > 0) {
      tensors.push_back(l.params());
    }
    // torch.compile fuses batch norm's normalisation with the ReLU that follows it.
    const bool relu_next = i + 1 < m.layers.size() && m.layers[i + 1].kind == CnnLayer::Kind::relu;
    const CnnLayer& prev = m.layers[i > 0 ? i - 1 : 0];
    const bool fusable_before = i > 0 && (prev.kind == CnnLayer::Kind::batchnorm || prev.kind == CnnLayer::Kind::add ||
                                          (prev.kind == CnnLayer::Kind::conv && prev.bias));
    switch (l.kind) {
      case CnnLayer::Kind::conv: {
        // cuDNN implicit GEMM, channels-last; the first convolution's input needs no gradient.
        Kernel k = gemm("conv", b * l.out_h * l.out_w, l.out_channels / l.groups, l.in_channels / l.groups * l.kernel * l.kernel, l.groups,
                        bl.math, amp ? 2 : 4, amp ? 2 : 4);
        k.bytes = (in_el + out_el) * eb + d(l.params()) * eb;
        k.weighted = true;
        if (amp) bl.f(ew("cast_weight", d(l.params()), 6));
        if (amp && first_weighted) bl.f(ew("cast_input", in_el, 6));  // the fp32 images
        bl.f(k);
        std::vector<Kernel> g;
        if (!first_weighted) {
          Kernel dx = k;
          dx.name = "dgrad";
          dx.role = GemmRole::input_grad;
          dx.n = k.k;
          dx.k = k.n;
          g.push_back(dx);
        }
        Kernel dw = k;
        dw.name = "wgrad";
        dw.role = GemmRole::weight_grad;
        dw.m = k.k;
        dw.n = k.n;
        dw.k = k.m;
        g.push_back(dw);
        if (amp) g.push_back(ew("cast_weight_grad", d(l.params()), 6));
        if (l.bias) {
          // ATen's _convolution runs cuDNN without the bias and adds it over the whole output
          // (output.add_(bias)); convolution_backward sums grad_output over batch and pixels for
          // its gradient. Inductor peels the bias off as well ("cudnn is slower with it",
          // torch/_inductor/kernel/conv.py) and fuses its add into the ReLU that follows.
          if (!compile) {
            if (amp) bl.f(tiny("cast_bias"));
            bl.f(ew("bias_add", out_el, 2 * eb));
          } else {
            bl.f(ew(relu_next ? "bias_relu" : "bias_add", out_el, 2 * eb));
          }
          g.push_back(ew("bias_grad", out_el, eb, MemoryKind::norm_bwd));
          if (amp && !compile) g.push_back(tiny("cast_bias_grad"));
        }
        bl.b(std::move(g));
        first_weighted = false;
        break;
      }
      case CnnLayer::Kind::fc:
        bl.linear("fc", b, l.out_channels, l.in_channels, l.bias, false, !first_weighted);
        first_weighted = false;
        break;
      case CnnLayer::Kind::batchnorm:
        // Channels-last batch norm in training: per-channel statistics (a reduction over the
        // input), then the normalisation; backward: a reduction over gradient and input, then the
        // input gradient.
        // Eager also counts the batches (num_batches_tracked += 1), zeroes a scratch pair and
        // updates the running statistics: three small kernels (ResNet-50 trace: five kernels per
        // batch norm forward, three backward).
        if (!compile) {
          bl.f(tiny("batchnorm_count"));
          bl.f(tiny("batchnorm_fill"));
        }
        bl.f(ew("batchnorm_stats", in_el, eb, MemoryKind::norm));
        if (!compile) bl.f(tiny("batchnorm_running_stats"));
        bl.f(ew(compile && relu_next ? "batchnorm_relu" : "batchnorm", in_el, 2 * eb));
        if (compile) {
          bl.b({ew("batchnorm_grad_reduce", in_el, 2 * eb, MemoryKind::norm_bwd), ew("batchnorm_grad_input", in_el, 3 * eb)});
        } else {
          bl.b({ew("batchnorm_grad_reduce", in_el, 2 * eb, MemoryKind::norm_bwd), tiny("batchnorm_grad_weight"), ew("batchnorm_grad_input", in_el, 3 * eb)});
        }
        break;
      case CnnLayer::Kind::relu:
        // Inductor fuses a ReLU into the element-wise kernel before it (batch norm, the residual
        // add, a peeled convolution bias) and its backward into that op's; after a product
        // without one (cuBLAS's addmm, a bias-free convolution) it is a kernel of its own.
        if (compile && fusable_before) {
          if (prev.kind == CnnLayer::Kind::conv) bl.b({ew("relu_grad", in_el, 3 * eb)});  // then the bias gradient
          break;
        }
        bl.f(ew("relu", in_el, 2 * eb));
        bl.b({ew("relu_grad", in_el, 3 * eb)});
        break;
      case CnnLayer::Kind::add:
        // The block's output joins the shortcut; backward: the gradients of the two paths summed
        // where the block's input forked.
        bl.f(ew("add", out_el, 3 * eb));
        bl.b({ew("grad_accumulate", out_el, 3 * eb)});
        break;
      case CnnLayer::Kind::pool:
        bl.f(ew("pool", in_el + out_el, eb));
        // Max pooling's backward zeroes the input gradient and scatters into it.
        bl.b({ew("pool_grad", in_el + out_el, 2 * eb)});
        break;
      case CnnLayer::Kind::softmax:
        bl.f(ew("cross_entropy", in_el, 2 * eb, MemoryKind::softmax));
        bl.b({ew("cross_entropy_grad", in_el, 3 * eb, MemoryKind::softmax_bwd)});
        break;
      case CnnLayer::Kind::dropout:
        bl.f(dropout_kernel(in_el, eb));
        bl.b({ew("dropout_grad", in_el, 2 * eb + 1)});
        break;
    }
  }
  // The loss (nn.CrossEntropyLoss over [batch, classes]), with the last layer: the ResNet-50
  // trace's softmax_warp_forward (log-softmax in bf16), the autocast copy to fp32,
  // nll_loss_forward; backward a fill, nll_loss_backward, the copy back and softmax_warp_backward.
  // Inductor fuses each direction into one kernel.
  const double logits = d(b) * d(m.classes);
  if (compile) {
    bl.f(ew("cross_entropy", logits, eb + 4, MemoryKind::softmax));
    bl.b({ew("cross_entropy_grad", logits, 4 + eb, MemoryKind::softmax_bwd)});
  } else {
    bl.f(ew("log_softmax", logits, 2 * eb, MemoryKind::softmax));
    bl.f(ew("cast_log_probs", logits, eb + 4));
    bl.f(tiny("nll_loss"));
    bl.b({ew("zero_grad", logits, 4), tiny("nll_loss_grad"), ew("cast_grad", logits, 4 + eb),
          ew("log_softmax_grad", logits, 3 * eb, MemoryKind::softmax_bwd)});
  }
  flush();
  return out;
}

}  // namespace dtsim::workloads
