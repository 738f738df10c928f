#include "trace/classify.hpp"
#include "sim/text.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace dtsim::trace {

std::string_view to_string(KernelClass c) {
  switch (c) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::attention: return "attention";
    case KernelClass::convolution: return "convolution";
    case KernelClass::elementwise: return "elementwise";
    case KernelClass::normalization: return "reduction/norm";
    case KernelClass::softmax: return "softmax";
    case KernelClass::dropout: return "dropout";
    case KernelClass::cross_entropy: return "cross-entropy";
    case KernelClass::optimizer: return "optimizer";
    case KernelClass::copy: return "copy/memset";
    case KernelClass::communication: return "communication";
    case KernelClass::other: return "other";
    case KernelClass::count: break;
  }
  return "?";
}

Bound bound_of(KernelClass c) {
  switch (c) {
    case KernelClass::gemm:
    case KernelClass::attention:
    case KernelClass::convolution: return Bound::compute;
    case KernelClass::communication: return Bound::communication;
    default: return Bound::memory;
  }
}

namespace {

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

bool has_any(std::string_view s, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](std::string_view n) { return has(s, n); });
}

}  // namespace

KernelClass classify_name(std::string_view kernel_name) {
  const std::string s = ascii_lower(kernel_name);
  // Order matters: cuDNN's SDPA kernels say "fprop"/"bprop" like its convolutions, split-K
  // reductions of GEMMs say "reduce", cast kernels are "elementwise" templates.
  if (has(s, "nccl")) return KernelClass::communication;
  if (has_any(s, {"flash", "fmha", "sdpa", "attention", "attn", "cudnn::fusion::", "philox::unpack_cudnn"})) return KernelClass::attention;
  if (has_any(s, {"fprop", "dgrad", "wgrad", "conv", "winograd", "implicit_gemm", "_cudnn", "cudnn::"})) return KernelClass::convolution;
  if (has_any(s, {"gemm", "nvjet", "cublas", "cutlass", "splitkreduce", "gemv"})) return KernelClass::gemm;
  if (has_any(s, {"adam", "sgd", "multi_tensor_apply", "foreach"})) return KernelClass::optimizer;
  if (has_any(s, {"nll_loss", "cross_entropy", "crossentropy"})) return KernelClass::cross_entropy;
  if (has(s, "softmax")) return KernelClass::softmax;
  if (has_any(s, {"dropout", "philox"})) return KernelClass::dropout;
  if (has_any(s, {"norm", "welford", "reduce_kernel", "reduceop", "reduction", "radix_sort", "radixsort", "scan::", "unique_by_key",
                  "sum_functor", "meanops",
                  "gammabeta", "grad_weight", "pool", "partial_segment", "partials_per_segment"})) {
    return KernelClass::normalization;
  }
  if (has_any(s, {"copy", "memcpy", "memset"})) return KernelClass::copy;
  if (has_any(s, {"elementwise", "vectorized", "unrolled", "gather", "scatter", "index", "fill", "embedding", "cat", "functor",
                  "activation", "gelu", "relu", "silu", "tanh", "pointwise"})) {
    return KernelClass::elementwise;
  }
  return KernelClass::other;
}

KernelClass classify(const GpuOp& op) {
  if (op.kind != GpuOpKind::kernel) return KernelClass::copy;
  return classify_name(op.name);
}

std::optional<hw::DType> dtype_of(const CpuOp& op) {
  for (const auto& t : op.input_types) {
    if (t == "c10::BFloat16") return hw::DType::bf16;
    if (t == "c10::Half") return hw::DType::fp16;
    if (t == "float") return hw::DType::fp32;
    if (t == "double") return hw::DType::fp64;
    if (t.find("Float8") != std::string::npos) return hw::DType::fp8;
  }
  return std::nullopt;
}

std::optional<GemmShape> gemm_shape(const CpuOp& op) {
  const auto& d = op.input_dims;
  auto two = [&](std::size_t a, std::size_t b) -> std::optional<GemmShape> {
    if (d.size() <= std::max(a, b) || d[a].size() != 2 || d[b].size() != 2 || d[a][1] != d[b][0]) return std::nullopt;
    return GemmShape{d[a][0], d[b][1], d[a][1], 1};
  };
  auto three = [&](std::size_t a, std::size_t b) -> std::optional<GemmShape> {
    if (d.size() <= std::max(a, b) || d[a].size() != 3 || d[b].size() != 3 || d[a][2] != d[b][1] || d[a][0] != d[b][0]) return std::nullopt;
    return GemmShape{d[a][1], d[b][2], d[a][2], d[a][0]};
  };
  if (op.name == "aten::mm" || op.name == "aten::matmul") return two(0, 1);
  if (op.name == "aten::addmm") return two(1, 2);
  if (op.name == "aten::bmm") return three(0, 1);
  if (op.name == "aten::baddbmm") return three(1, 2);
  return std::nullopt;
}

}  // namespace dtsim::trace
