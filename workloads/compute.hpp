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

// What a memory-bound kernel does. Kernels of one kind share an achieved fraction of HBM bandwidth
// and a fixed cost (ComputeParams::kinds): a row-wise reduction (layer norm, softmax) reaches much
// less of the bandwidth than a streaming copy, and the measured fractions differ by up to 2.5x
// (docs/model.md, "Memory-bound kernels").
enum class MemoryKind : unsigned char {
  stream,          // copies, residual adds, casts, embeddings, PyTorch's strided copies, CNN element-wise ops
  norm,            // layer norm / RMS norm forward
  norm_bwd,        // their backward (input gradient and the scale/shift gradients)
  activation,      // GELU, SiLU, gated activations forward
  activation_bwd,
  softmax,         // row-wise softmax (attention scores, the loss's log-softmax over the vocabulary)
  softmax_bwd,
  dropout,         // dropout (random mask): bound by generating the random numbers, see dropout_ops
  optimizer,       // the optimizer's update over the parameters
  layout,          // permuting copies of one tensor (attention heads to [b, heads, s, d] and back): index arithmetic
  layout_split,    // a fused projection split into Q, K and V laid out by head (and merged back)
};
inline constexpr int kMemoryKinds = 11;
std::string_view to_string(MemoryKind k);

// The report's kernel families (dtsim validate --kernels): what a measured kernel name and a
// modelled kernel are compared as.
std::string_view kernel_family(const struct Kernel& k);

// Which product a GEMM computes: the forward pass's, or in the backward the gradient of an input
// (activation) or of the weights. Set where the backward is derived (append_backward), read by the
// rewrites that place collectives and casts around the backward's GEMMs.
enum class GemmRole : std::uint8_t { forward, input_grad, weight_grad };

struct Kernel {
  const char* name = "";        // static label: "qkv", "attention", "layernorm", ...
  KernelClass cls = KernelClass::memory;
  MemoryKind kind = MemoryKind::stream;  // memory-bound kernels: which bandwidth and fixed cost
  double elements = 0;               // dropout: elements masked (random numbers drawn)
  bool regenerate = false;           // dropout: the backward draws the mask's random numbers again
  bool hash_rng = false;             // dropout: random numbers from a 64-bit hash (else Philox)
  double backward_bytes = -1;        // memory-bound: bytes of the gradient kernel (< 0: 1.5 x bytes)
  std::int64_t m = 0, n = 0, k = 0;  // GEMM: one problem of a batch
  std::int64_t batch = 1;            // GEMM: independent problems (batched GEMM)
  double flops = 0;                  // total (GEMMs: 2 m n k batch)
  double bytes = 0;                  // HBM traffic, read + written
  hw::DType dtype = hw::DType::bf16; // math type (peak used)
  bool weighted = false;             // GEMM with a weight matrix (its backward has a weight gradient)
  GemmRole role = GemmRole::forward; // GEMM: what it computes (the backward's kernels: a gradient)
  // Eager PyTorch (training.framework pytorch-eager / torch-compile; never set by the megatron program):
  bool unaligned = false;  // GEMM: a dimension is not a multiple of 8 elements, cuBLAS falls back to align1 kernels
  bool sdpa = false;       // attention: PyTorch's scaled_dot_product_attention (cuDNN flash on Hopper); `elements`:
                           // attention-dropout random numbers drawn inside the kernel
  bool sdpa_masked = false;  // attention: SDPA given an explicit mask (memory-efficient kernel, full score matrix)
  bool flash1 = false;       // attention: a first-generation fused kernel (training.attention flash1)
};

// A GEMM kernel with its flops and bytes filled in (inputs in `in`, output in `out` precision).
Kernel gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType math,
            int in_bytes, int out_bytes);
// A memory-bound kernel moving `bytes`.
Kernel memory_op(const char* name, double bytes, hw::DType math = hw::DType::bf16, MemoryKind kind = MemoryKind::stream);
// The backward kind of a forward memory-bound kind (norm -> norm_bwd, ...; others unchanged).
MemoryKind backward_kind(MemoryKind k);

struct GemmTile {
  int m = 128, n = 128;
  double efficiency = 1.0;  // of the large-GEMM efficiency, for this tile size
};

// A memory-bound kind's achieved bandwidth and fixed cost: t = overhead + bytes / rate, with
// rate = min(HBM x efficiency, SMs x SM clock x sm_bytes_per_cycle). The second term is what the
// SMs can move per cycle, whatever the memory: kernels bound by their SMs' work (reductions, index
// arithmetic) run no faster on a GPU with more bandwidth and the same SMs (docs/model.md). 0: no
// such limit (streams), or a GPU whose preset gives no SM clock.
struct MemoryKindParams {
  double efficiency = 0.85;
  Time overhead = Time::us(4);
  double sm_bytes_per_cycle = 0;
};

// SM cycles per second of a GPU (SMs x SM clock); 0 where its preset gives no clock.
double sm_cycles_per_s(const hw::GpuSpec& g);

// A kind bound by its SMs whose rate on the H100 SXM is `efficiency` x its 3.35 TB/s: that rate
// per SM and cycle (132 SMs at the 1,980 MHz its memory suite ran at) is its SM limit.
inline MemoryKindParams h100_sm_bound(double efficiency, Time overhead) {
  return {efficiency, overhead, efficiency * 3.35e12 / (132 * 1.98e9)};
}

struct ComputeParams {
  // Fraction of the dtype's peak that a large, well-shaped GEMM reaches.
  std::array<double, 6> gemm_efficiency{0.9, 0.85, 0.8, 0.8, 0.8, 0.7};  // fp64 fp32 tf32 bf16 fp16 fp8
  // Tile shapes the GEMM library chooses from (the one giving the highest throughput wins).
  std::vector<GemmTile> tiles{{128, 256, 1.0}, {128, 128, 0.95}, {64, 128, 0.85}};
  double k_half = 128;            // efficiency falls as K / (K + k_half) for shallow GEMMs
  double split_k_min = 256;       // split-K keeps at least this much of K per slice
  double attention_fwd_efficiency = 0.6;   // fused (flash) attention, of the dtype's peak
  double attention_bwd_efficiency = 0.45;
  double attention_v1_fwd_efficiency = 0.30;  // first-generation fused attention (FlashAttention 1.x, its Triton port)
  double attention_v1_bwd_efficiency = 0.225;
  double memory_efficiency = 0.85;         // fraction of HBM bandwidth streaming kernels reach
  Time kernel_overhead = Time::us(4);      // launch and fixed cost per kernel
  // Per memory-bound kind (index: MemoryKind): efficiency and fixed cost. `stream` uses
  // memory_efficiency and kernel_overhead above (kept as the names profiles already use).
  // Defaults: dtsim's harness kernels measured on an H100 SXM (data/calibration/h100-sxm-2026-11-23;
  // layout and layout_split: h100-sxm-2026-11-26),
  // as fractions of the datasheet bandwidth, fitted on the points `dtsim fit` trains on (its
  // held-out points stay held out); docs/model.md.
  // SM limits (h100_sm_bound): the kinds whose rate the H200 (same SMs and clock, 1.43x the
  // bandwidth) exceeded by 11% at most (data/calibration/h200-sxm-2026-11-27). Streams (+39%) and
  // the optimizer (+27%) gained with the bandwidth, and dropout is bound by its random numbers
  // (dropout_ops, the same fp32 peak on both): none of them has an SM limit.
  std::array<MemoryKindParams, kMemoryKinds> kinds{{
      {0.85, Time::us(4)},                         // stream (unused: memory_efficiency, kernel_overhead)
      h100_sm_bound(0.4067, Time::ns(5190)),       // norm
      h100_sm_bound(0.3325, Time::ns(8830)),       // norm_bwd
      h100_sm_bound(0.4275, Time::ns(5830)),       // activation
      h100_sm_bound(0.5632, Time::ns(5790)),       // activation_bwd
      h100_sm_bound(0.4962, Time::ns(11820)),      // softmax
      h100_sm_bound(0.6064, Time::ns(5960)),       // softmax_bwd
      {0.85, Time::ns(3070)},                      // dropout (bytes at stream rate; see dropout_ops)
      {0.8215, Time::us(4)},                       // optimizer (two points: the fixed cost is the launch's, assumed)
      h100_sm_bound(0.2199, Time::ns(3200)),       // layout (head permutes; data/calibration/h100-sxm-2026-11-26)
      h100_sm_bound(0.1642, Time::ns(4985)),       // layout_split (QKV split; same run)
  }};
  // Dropout draws one random number per element: fp32-pipe operations per element for the random
  // number, the compare and the scale. dropout_ops: a 64-bit hash per element (dtsim's harness and
  // validation workload), measured: H100 dropout+residual ~245 G elements/s = 67 TFLOP/s / 275.
  // dropout_philox_ops: Philox4x32-10 (PyTorch, Megatron-LM), 10 rounds of two 32-bit multiplies
  // and four other operations per 4 numbers (Salmon et al. 2011) plus compare and scale: ~25, so
  // such dropout is bound by its bytes (PyTorch's fused_dropout_kernel_vec moves 2.5 TB/s on the
  // H100 in data/traces/h100-2026-11-23, GPT-2).
  double dropout_ops = 275;
  double dropout_philox_ops = 25;
  double comm_slowdown = 0.10;             // compute runs this much slower while NCCL kernels overlap it
  // PyTorch frameworks (training.framework; docs/model.md, "Eager PyTorch and torch.compile"), read
  // from the H100 traces in data/traces/h100-2026-11-23:
  // GEMMs with a dimension not a multiple of 8 (GPT-2's vocabulary of 50257): cuBLAS's align1 kernels.
  double gemm_unaligned_efficiency = 0.123;
  // torch.nn.functional.scaled_dot_product_attention (cuDNN flash, head dim 64), of the dtype's peak.
  double sdpa_fwd_efficiency = 0.343;
  double sdpa_bwd_efficiency = 0.334;
  // SDPA with an explicit attention mask (Hugging Face decoders under torch.compile): neither flash
  // nor cuDNN takes a mask, PyTorch runs the memory-efficient (CUTLASS, sm80) kernel. Assumed.
  double sdpa_masked_fwd_efficiency = 0.25;
  double sdpa_masked_bwd_efficiency = 0.18;
  // Attention dropout inside SDPA: fp32 operations per attention-score element (forward; the backward
  // regenerates the same mask).
  double sdpa_dropout_ops = 80;
  // Host time per launched kernel (Python, dispatcher, autograd, CUDA launch): the GPU cannot start a
  // kernel before the host has issued it.
  Time eager_host_per_kernel = Time::us(40);
  Time compile_host_per_kernel = Time::us(10);

  double efficiency(hw::DType d) const { return gemm_efficiency[static_cast<std::size_t>(d)]; }
  double kind_efficiency(MemoryKind k) const {
    return k == MemoryKind::stream ? memory_efficiency : kinds[static_cast<std::size_t>(k)].efficiency;
  }
  Time kind_overhead(MemoryKind k) const {
    return k == MemoryKind::stream ? kernel_overhead : kinds[static_cast<std::size_t>(k)].overhead;
  }
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
  // Bytes per second a memory-bound kernel of kind `k` moves (MemoryKindParams).
  double memory_rate(MemoryKind k) const;
  // Fraction of peak a GEMM of this shape reaches (before the roofline's memory bound).
  double gemm_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, hw::DType d) const;
  bool supports(hw::DType d) const { return gpu_.peak.count(d) > 0; }
  const hw::GpuSpec& gpu() const { return gpu_; }
  const ComputeParams& params() const { return params_; }

 private:
  double peak(hw::DType d) const;
  double fp32_rate() const;  // non-tensor fp32 peak (dropout's random numbers)
  hw::GpuSpec gpu_;
  ComputeParams params_;
};

// The one precision capability check, for every model family and every command: training in
// `precision` needs a peak rate for it on every GPU of the cluster (the GPU preset lists the types
// its tensor or CUDA cores run: no bf16 before Ampere, no fp8 before Hopper/Ada, no fast fp16 on
// Maxwell). The error names the GPU, the precision and the types it has.
Status check_precision(const hw::GpuSpec& gpu, hw::DType precision);

}  // namespace dtsim::workloads
