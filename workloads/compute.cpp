#include "workloads/compute.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace dtsim::workloads {

Kernel gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType math,
            int in_bytes, int out_bytes) {
  Kernel g;
  g.name = name;
  g.cls = KernelClass::gemm;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = batch;
  g.dtype = math;
  const double b = static_cast<double>(batch);
  g.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * b;
  g.bytes = b * (static_cast<double>(in_bytes) * (static_cast<double>(m) * k + static_cast<double>(k) * n) +
                 static_cast<double>(out_bytes) * static_cast<double>(m) * n);
  return g;
}

Kernel memory_op(const char* name, double bytes, hw::DType math, MemoryKind kind) {
  Kernel k;
  k.name = name;
  k.cls = KernelClass::memory;
  k.kind = kind;
  k.bytes = bytes;
  k.dtype = math;
  return k;
}

MemoryKind backward_kind(MemoryKind k) {
  switch (k) {
    case MemoryKind::norm: return MemoryKind::norm_bwd;
    case MemoryKind::activation: return MemoryKind::activation_bwd;
    case MemoryKind::softmax: return MemoryKind::softmax_bwd;
    default: return k;
  }
}

std::string_view to_string(MemoryKind k) {
  switch (k) {
    case MemoryKind::stream: return "stream";
    case MemoryKind::norm: return "norm";
    case MemoryKind::norm_bwd: return "norm_bwd";
    case MemoryKind::activation: return "activation";
    case MemoryKind::activation_bwd: return "activation_bwd";
    case MemoryKind::softmax: return "softmax";
    case MemoryKind::softmax_bwd: return "softmax_bwd";
    case MemoryKind::dropout: return "dropout";
    case MemoryKind::optimizer: return "optimizer";
    case MemoryKind::layout: return "layout";
    case MemoryKind::layout_split: return "layout_split";
  }
  return "?";
}

std::string_view kernel_family(const Kernel& k) {
  switch (k.cls) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::attention:
    case KernelClass::attention_bwd: return "attention";
    case KernelClass::memory: break;
  }
  const std::string_view n = k.name;
  if (n.find("cross_entropy") != std::string_view::npos) return "cross_entropy";
  if (n.find("embedding") != std::string_view::npos) return "embedding";
  switch (k.kind) {
    case MemoryKind::norm:
    case MemoryKind::norm_bwd: return "norm";
    case MemoryKind::activation:
    case MemoryKind::activation_bwd: return "activation";
    case MemoryKind::softmax:
    case MemoryKind::softmax_bwd: return "softmax";
    case MemoryKind::dropout: return "dropout";
    case MemoryKind::optimizer: return "optimizer";
    case MemoryKind::layout:
    case MemoryKind::layout_split:
    case MemoryKind::stream: break;
  }
  return "copy";
}

ComputeModel::ComputeModel(const hw::GpuSpec& gpu, ComputeParams params) : gpu_(gpu), params_(std::move(params)) {}

double ComputeModel::peak(hw::DType d) const {
  const auto it = gpu_.peak.find(d);
  if (it != gpu_.peak.end()) return it->second.flops_per_s();
  // Without the dtype (e.g. bf16 on V100) fall back to the widest supported type's rate.
  for (hw::DType f : {hw::DType::fp16, hw::DType::fp32}) {
    const auto jt = gpu_.peak.find(f);
    if (jt != gpu_.peak.end()) return jt->second.flops_per_s();
  }
  return gpu_.peak.begin()->second.flops_per_s();
}

double ComputeModel::fp32_rate() const {
  // The non-tensor fp32 rate; a GPU preset without one (none today) gets a sixteenth of its
  // widest peak rather than a tensor-core rate.
  const auto it = gpu_.peak.find(hw::DType::fp32);
  return it != gpu_.peak.end() ? it->second.flops_per_s() : peak(hw::DType::fp32) / 16.0;
}

double ComputeModel::gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType d) const {
  const double sms = std::max(1, gpu_.sms);
  double best = 0;
  for (const GemmTile& t : params_.tiles) {
    const double tm = std::ceil(static_cast<double>(m) / t.m), tn = std::ceil(static_cast<double>(n) / t.n);
    const double tiles = tm * tn * static_cast<double>(batch);
    // Padding of partial tiles, and the idle SMs of the last wave.
    const double tile_fill = static_cast<double>(m) * static_cast<double>(n) / (tm * t.m * tn * t.n);
    // Split-K: when the output has fewer tiles than the GPU has SMs (a convolution's weight
    // gradient: small M x N, K = batch x pixels), the library splits K into s slices that run as
    // separate tiles and are summed after (cuBLAS and cuDNN split-K kernels). Slices keep at
    // least params_.split_k_min of K; the partial sums' reduction is not counted.
    for (double s = 1; s <= 64; s *= 2) {
      if (s > 1 && (tiles >= sms || static_cast<double>(k) / s < params_.split_k_min)) break;
      const double waves = std::ceil(tiles * s / sms);
      const double wave_fill = tiles * s / (waves * sms);
      const double kk = static_cast<double>(k) / s;
      const double depth = kk / (kk + params_.k_half);
      best = std::max(best, t.efficiency * tile_fill * wave_fill * depth);
    }
  }
  return params_.efficiency(d) * best;
}

double sm_cycles_per_s(const hw::GpuSpec& g) { return g.sms > 0 && g.sm_clock_hz > 0 ? g.sms * g.sm_clock_hz : 0; }

double ComputeModel::memory_rate(MemoryKind k) const {
  const double hbm = gpu_.memory_bandwidth.bytes_per_s() * params_.kind_efficiency(k);
  const double per_cycle = k == MemoryKind::stream ? 0 : params_.kinds[static_cast<std::size_t>(k)].sm_bytes_per_cycle;
  const double cycles = sm_cycles_per_s(gpu_);
  if (per_cycle <= 0 || cycles <= 0) return hbm;
  return std::min(hbm, per_cycle * cycles);
}

Time ComputeModel::kernel_time(const Kernel& k) const {
  const bool memory_bound = k.cls == KernelClass::memory;
  const double mem_rate = memory_bound ? memory_rate(k.kind) : gpu_.memory_bandwidth.bytes_per_s() * params_.memory_efficiency;
  const double mem_s = k.bytes / mem_rate;
  double compute_s = 0;
  switch (k.cls) {
    case KernelClass::gemm: {
      const double eff = k.unaligned ? params_.gemm_unaligned_efficiency : gemm_efficiency(k.m, k.n, k.k, k.batch, k.dtype);
      compute_s = eff > 0 ? k.flops / (peak(k.dtype) * eff) : 0;
      break;
    }
    case KernelClass::attention:
      compute_s = k.flops / (peak(k.dtype) * (k.sdpa_masked ? params_.sdpa_masked_fwd_efficiency
                                              : k.sdpa        ? params_.sdpa_fwd_efficiency
                                              : k.flash1      ? params_.attention_v1_fwd_efficiency
                                                              : params_.attention_fwd_efficiency));
      if (k.sdpa) compute_s += k.elements * params_.sdpa_dropout_ops / fp32_rate();
      break;
    case KernelClass::attention_bwd:
      compute_s = k.flops / (peak(k.dtype) * (k.sdpa_masked ? params_.sdpa_masked_bwd_efficiency
                                              : k.sdpa        ? params_.sdpa_bwd_efficiency
                                              : k.flash1      ? params_.attention_v1_bwd_efficiency
                                                              : params_.attention_bwd_efficiency));
      if (k.sdpa) compute_s += k.elements * params_.sdpa_dropout_ops / fp32_rate();
      break;
    case KernelClass::memory:
      // Random numbers for a dropout mask are computed on the fp32 pipes, one per element.
      compute_s = k.elements > 0 ? k.elements * (k.hash_rng ? params_.dropout_ops : params_.dropout_philox_ops) / fp32_rate() : 0;
      break;
  }
  return Time::from_seconds(std::max(compute_s, mem_s)) + (memory_bound ? params_.kind_overhead(k.kind) : params_.kernel_overhead);
}

namespace {

// Which interval a parameter's value must lie in: (0, max] or [0, max].
enum class Lowest { above_zero, zero };

Status set_in(double& d, std::string_view v, double max, Lowest lowest) {
  const bool zero_ok = lowest == Lowest::zero;
  double x = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || ptr != v.data() + v.size() || !(x > 0 || (zero_ok && x == 0)) || x > max) {
    return Error(fmt::format("'{}' is not a number in {}0, {}]", v, zero_ok ? "[" : "(", max));
  }
  d = x;
  return {};
}

Status set_fraction(double& d, std::string_view v, double max = 1.0) { return set_in(d, v, max, Lowest::above_zero); }
Status set_at_least_zero(double& d, std::string_view v, double max) { return set_in(d, v, max, Lowest::zero); }

std::vector<ComputeParamInfo> build_table() {
  std::vector<ComputeParamInfo> t;
  const std::string gemm_src =
      "fit to published cuBLASLt large-GEMM throughput (data/published/gemm-hbm-published.csv): A100 fp16 0.82, "
      "H100 fp8 0.70 of the dense peak; other dtypes assumed";
  for (hw::DType d : hw::kAllDTypes) {
    const auto i = static_cast<std::size_t>(d);
    t.push_back(ComputeParamInfo{fmt::format("gemm.efficiency.{}", hw::to_string(d)), "fraction",
                                 fmt::format("fraction of the {} peak a large GEMM reaches", hw::to_string(d)), gemm_src,
                                 [i](const ComputeParams& p) { return fmt::format("{:.4g}", p.gemm_efficiency[i]); },
                                 [i](ComputeParams& p, std::string_view v) { return set_fraction(p.gemm_efficiency[i], v); }});
  }
  auto number = [&](std::string name, double ComputeParams::*m, std::string unit, std::string help, std::string source, double max) {
    t.push_back(ComputeParamInfo{std::move(name), std::move(unit), std::move(help), std::move(source),
                                 [m](const ComputeParams& p) { return fmt::format("{:.4g}", p.*m); },
                                 [m, max](ComputeParams& p, std::string_view v) { return set_fraction(p.*m, v, max); }});
  };
  number("gemm.k_half", &ComputeParams::k_half, "elements", "K at which a GEMM's efficiency is halved by its depth",
         "assumption; fits the published small-GEMM points within the tolerance in docs/validation.md", 1e6);
  number("gemm.split_k_min", &ComputeParams::split_k_min, "elements",
         "least K per slice when a GEMM with fewer output tiles than SMs is split along K (split-K)",
         "assumption; split-K kernels as in cuBLAS and cuDNN (weight gradients of convolutions)", 1e9);
  number("attention.fwd_efficiency", &ComputeParams::attention_fwd_efficiency, "fraction",
         "fused attention forward, fraction of peak",
         "T. Dao, FlashAttention-2 (2023): 50-73% of A100 peak forward", 1.0);
  number("attention.bwd_efficiency", &ComputeParams::attention_bwd_efficiency, "fraction",
         "fused attention backward, fraction of peak", "T. Dao, FlashAttention-2 (2023): backward below forward; assumption", 1.0);
  number("attention.v1_fwd_efficiency", &ComputeParams::attention_v1_fwd_efficiency, "fraction",
         "first-generation fused attention forward (training.attention flash1: FlashAttention 1.x, its Triton port, PyTorch 2.0-2.1 SDPA "
         "flash), fraction of peak",
         "half of attention.fwd_efficiency: T. Dao, FlashAttention-2 (2023), 'around 2x speedup compared to FlashAttention', which "
         "reaches 'only 25-40% of the theoretical maximum FLOPs/s'; the Triton port (flash-attention flash_attn/flash_attn_triton.py): "
         "forward + backward 'slightly slower than' the CUDA version",
         1.0);
  number("attention.v1_bwd_efficiency", &ComputeParams::attention_v1_bwd_efficiency, "fraction",
         "first-generation fused attention backward, fraction of peak", "half of attention.bwd_efficiency (same sources)", 1.0);
  number("memory.efficiency", &ComputeParams::memory_efficiency, "fraction",
         "fraction of HBM bandwidth a streaming kernel reaches",
         "published STREAM-like copy: H100 2.90 of 3.35 TB/s (0.87), A100 1.61 of 2.04 TB/s (0.79)", 1.0);
  number("comm_slowdown", &ComputeParams::comm_slowdown, "fraction",
         "compute slowdown while communication kernels run beside it (they take SMs and memory bandwidth)",
         "assumption: overlapped GEMMs lose 5-20% to NCCL kernels in published overlap studies", 1.0);
  const ComputeParams p0;
  for (int i = 1; i < kMemoryKinds; ++i) {
    const auto kind = static_cast<MemoryKind>(i);
    const auto at = static_cast<std::size_t>(i);
    // The head-layout kinds were measured in a later run of the same memory suite.
    const bool later = kind == MemoryKind::layout || kind == MemoryKind::layout_split;
    const std::string kind_src = fmt::format(
        "dtsim's harness kernels on one H100 SXM (data/calibration/{}, memory suite): "
        "t = overhead + bytes / (3.35 TB/s x efficiency), least squares on relative error",
        later ? "h100-sxm-2026-11-26" : "h100-sxm-2026-11-23");
    t.push_back(ComputeParamInfo{fmt::format("memory.{}.efficiency", to_string(kind)), "fraction",
                                 fmt::format("fraction of HBM bandwidth {} kernels reach", to_string(kind)), kind_src,
                                 [at](const ComputeParams& p) { return fmt::format("{:.4g}", p.kinds[at].efficiency); },
                                 [at](ComputeParams& p, std::string_view v) { return set_fraction(p.kinds[at].efficiency, v); }});
    t.push_back(ComputeParamInfo{fmt::format("memory.{}.overhead", to_string(kind)), "time",
                                 fmt::format("fixed cost of one {} kernel (replaces kernel_overhead for them)", to_string(kind)), kind_src,
                                 [at](const ComputeParams& p) { return to_string(p.kinds[at].overhead); },
                                 [at](ComputeParams& p, std::string_view v) {
                                   auto r = parse_time(v);
                                   if (!r) return Status(r.error());
                                   if (r->picoseconds() < 0) return Status(Error("a fixed cost cannot be negative"));
                                   p.kinds[at].overhead = *r;
                                   return Status();
                                 }});
    t.push_back(ComputeParamInfo{
        fmt::format("memory.{}.sm_bytes_per_cycle", to_string(kind)), "bytes per SM per cycle",
        fmt::format("bytes one SM moves per cycle in {} kernels, whatever the bandwidth (0: no such limit)", to_string(kind)),
        p0.kinds[at].sm_bytes_per_cycle > 0
            ? "the kind's H100 rate (efficiency above) per SM and cycle (132 SMs, 1,980 MHz); its H200 rate "
              "(data/calibration/h200-sxm-2026-11-27: same SMs and clock, 1.43x the bandwidth) exceeds the H100's by 11% at most, "
              "against 43% more bandwidth; used on every GPU whose preset gives sm_clock (on Ampere an untested assumption)"
            : kind == MemoryKind::dropout
                ? "none: dropout is bound by its random numbers (dropout_ops), on the same fp32 peak on H100 and H200"
                : "none: the kind gained with the bandwidth from H100 to H200 (data/calibration/h200-sxm-2026-11-27)",
        [at](const ComputeParams& p) { return fmt::format("{:.4g}", p.kinds[at].sm_bytes_per_cycle); },
        [at](ComputeParams& p, std::string_view v) { return set_at_least_zero(p.kinds[at].sm_bytes_per_cycle, v, 1024.0); }});
  }
  number("dropout_ops", &ComputeParams::dropout_ops, "operations",
         "fp32-pipe operations per element of a dropout mask drawn from a 64-bit hash (training.dropout_rng: hash)",
         "H100 dropout+residual kernel of dtsim's harness: ~245 G elements/s (data/calibration/h100-sxm-2026-11-23) = 67 TFLOP/s fp32 / 275",
         1e9);
  number("dropout_philox_ops", &ComputeParams::dropout_philox_ops, "operations",
         "fp32-pipe operations per element of a dropout mask drawn with Philox (training.dropout_rng: philox, PyTorch and Megatron-LM)",
         "Philox4x32-10's operation count (Salmon et al. 2011, ~20 per number) plus compare and scale; bytes bound it "
         "(PyTorch's dropout at 2.5 TB/s on H100, data/traces/h100-2026-11-23)",
         1e9);
  number("framework.gemm_unaligned_efficiency", &ComputeParams::gemm_unaligned_efficiency, "fraction",
         "PyTorch frameworks: fraction of the bf16 peak a GEMM reaches when a dimension is not a multiple of 8 elements "
         "(cuBLAS align1 kernels; Megatron pads the vocabulary, torch.compile pads shapes)",
         "GPT-2 trace (data/traces/h100-2026-11-23, trace-gpt2-124m-b8-s1024): the three 8192x50257x768 LM-head GEMMs "
         "(cutlass_75 s1688gemm align1) take 15.5 ms for 1.90 TFLOP = 122 TFLOP/s of 989",
         1.0);
  number("framework.sdpa_fwd_efficiency", &ComputeParams::sdpa_fwd_efficiency, "fraction",
         "PyTorch frameworks: scaled_dot_product_attention forward (cuDNN flash), fraction of peak",
         "Llama trace (trace-llama-1b-b2-s2048): cudnn sdpa flash_fprop 101.3 us for 34.4 GFLOP (causal, head dim 64)", 1.0);
  number("framework.sdpa_bwd_efficiency", &ComputeParams::sdpa_bwd_efficiency, "fraction",
         "PyTorch frameworks: scaled_dot_product_attention backward (cuDNN flash), fraction of peak",
         "Llama trace: cudnn sdpa flash_bprop 259.6 us for 2.5 x 34.4 GFLOP", 1.0);
  number("framework.sdpa_masked_fwd_efficiency", &ComputeParams::sdpa_masked_fwd_efficiency, "fraction",
         "PyTorch frameworks: SDPA forward given an explicit mask (memory-efficient kernel over the full score matrix), "
         "fraction of peak",
         "assumption: an sm80 CUTLASS kernel without Hopper's wgmma, about a quarter of the bf16 peak; used where Hugging Face "
         "passes a materialised causal mask (transformers masking_utils._ignore_causal_mask_sdpa is False under torch.compile)",
         1.0);
  number("framework.sdpa_masked_bwd_efficiency", &ComputeParams::sdpa_masked_bwd_efficiency, "fraction",
         "PyTorch frameworks: SDPA backward given an explicit mask, fraction of peak",
         "assumption: below the forward, as every attention backward (FlashAttention-2 paper)", 1.0);
  number("framework.sdpa_dropout_ops", &ComputeParams::sdpa_dropout_ops, "operations",
         "PyTorch frameworks: fp32 operations per attention-score element for dropout inside SDPA (forward, and again in "
         "the backward)",
         "GPT-2 trace (attn_pdrop 0.1): flash_fprop 103 us and flash_bprop 153 us against 38 us and 97 us at the Llama "
         "trace's efficiencies; the difference over 50.3 M score elements at 67 TFLOP/s fp32",
         1e9);
  auto host = [&](std::string name, Time ComputeParams::*m, std::string help, std::string source) {
    t.push_back(ComputeParamInfo{std::move(name), "time", std::move(help), std::move(source),
                                 [m](const ComputeParams& p) { return to_string(p.*m); },
                                 [m](ComputeParams& p, std::string_view v) {
                                   auto r = parse_time(v);
                                   if (!r) return Status(r.error());
                                   if (r->picoseconds() < 0) return Status(Error("a host time cannot be negative"));
                                   p.*m = *r;
                                   return Status();
                                 }});
  };
  host("framework.pytorch_eager.host_per_kernel", &ComputeParams::eager_host_per_kernel,
       "pytorch-eager: host time per launched kernel (Python, dispatcher, autograd, cudaLaunchKernel); the GPU idles when "
       "kernels are shorter",
       "the three H100 traces (data/traces/h100-2026-11-23): replaying each trace's measured kernels in launch order behind "
       "a host that issues one every 40 us gives 67.6, 121.2 and 42.5 ms against the unprofiled 67.7, 120.5 and 40.9 ms");
  host("framework.torch_compile.host_per_kernel", &ComputeParams::compile_host_per_kernel,
       "torch-compile: host time per launched kernel (Inductor's generated wrapper calls the kernels directly)",
       "assumption: no trace of a compiled step; a quarter of the eager figure (no Python module code, no dispatcher per op)");
  t.push_back(ComputeParamInfo{"kernel_overhead", "time", "launch and fixed cost added to every kernel",
                               "fit: the published 1024^3 GEMMs imply about 4 us of fixed cost",
                               [](const ComputeParams& p) { return to_string(p.kernel_overhead); },
                               [](ComputeParams& p, std::string_view v) {
                                 auto r = parse_time(v);
                                 if (!r) return Status(r.error());
                                 p.kernel_overhead = *r;
                                 return Status();
                               }});
  return t;
}

}  // namespace

const std::vector<ComputeParamInfo>& compute_param_table() {
  static const std::vector<ComputeParamInfo> table = build_table();
  return table;
}

Status set_compute_param(ComputeParams& p, std::string_view name, std::string_view value) {
  for (const auto& info : compute_param_table()) {
    if (info.name == name) {
      Status st = info.set(p, value);
      if (!st) return Error(st.error().message, std::string(name));
      return {};
    }
  }
  return Error(fmt::format("unknown compute parameter '{}' (dtsim simulate --list-params lists them)", name), std::string(name));
}

Status check_precision(const hw::GpuSpec& gpu, hw::DType precision) {
  if (gpu.peak.count(precision) > 0) return {};
  std::string has;
  for (const auto& [d, rate] : gpu.peak) has += fmt::format("{}{}", has.empty() ? "" : ", ", hw::to_string(d));
  return Error(fmt::format("{} has no {} support (its peak rates are for {}); choose one of those precisions or another GPU", gpu.name,
                           hw::to_string(precision), has.empty() ? "no type" : has),
               "training.precision");
}

}  // namespace dtsim::workloads
