#include "workloads/memory.hpp"

#include <algorithm>

namespace dtsim::workloads {

double layer_activation_bytes(const TransformerSpec& m, const ActivationShape& s) {
  const double b = static_cast<double>(s.micro_batch);
  const double sl = static_cast<double>(s.seq) / s.cp;  // local sequence
  const double sk = static_cast<double>(s.seq);          // keys attended to
  const double h = static_cast<double>(m.hidden);
  const double heads = static_cast<double>(m.heads);
  const double d = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
  const double kv = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads);
  const double qdim = heads * d, kvdim = kv * d;
  const double f = static_cast<double>(m.ffn);
  const double e = s.act_bytes;
  const double t = s.tp;
  const double mask = s.dropout ? 1.0 : 0.0;  // one byte per element
  const double rep = s.sequence_parallel ? t : 1.0;  // divisor of the parts outside TP regions
  const double tokens = b * sl;

  if (s.recompute == Recompute::full) return e * tokens * h / rep;  // only the layer input

  // A GEMM input kept for the weight gradient: 16-bit, or under fp8 the FP8 copy Transformer
  // Engine cast (its Linear and LayerNormLinear keep the quantized input, not the 16-bit one).
  const double g = s.gemm_input_bytes > 0 ? s.gemm_input_bytes : e;
  // Outside the tensor-parallel regions: the two layer-norm inputs, the attention and MLP inputs
  // (GEMM inputs), and the two dropout masks after them (Korthikanti: 10 sbh with 2-byte
  // activations).
  const double replicated = tokens * h * (2.0 * e + 2.0 * g + 2.0 * mask);
  // Inside: Q, K, V, the attention output, and the MLP's intermediate tensors (24 sbh / t). The
  // attention output is the projection's input; a fused attention kernel keeps it in 16 bits for
  // its own backward as well, so under fp8 both copies stay. The MLP keeps the up projection's
  // output for the activation's backward and the activation's output as the down projection's
  // input.
  const double gate = m.gated_mlp ? 2.0 : 1.0;
  const double experts = m.experts > 0 ? static_cast<double>(m.top_k) : 1.0;  // routed copies of each token
  const double out = fused(s.attention) ? e + (g < e ? g : 0.0) : g;
  const double split = tokens * (e * (qdim + 2.0 * kvdim) + out * qdim + experts * f * (e * gate + g)) / t;
  // Attention scores: softmax output, its dropout mask and output (5 a s^2 b / t); none with
  // flash attention or selective recomputation, which recompute them.
  double scores = 0;
  if (s.attention == Attention::standard && s.recompute == Recompute::none) {
    scores = (heads / t) * b * sl * sk * ((s.dropout_present ? 2.0 : 1.0) * e + mask);
  } else if (fused(s.attention)) {
    scores = (heads / t) * b * sl * 4.0;  // log-sum-exp per query row (fp32)
  }
  return replicated / rep + split + scores;
}

MemoryBreakdown stage_memory(const StageMemoryInput& in, const TrainingSpec& t, int zero, const MemoryParams& mp, Bytes capacity) {
  MemoryBreakdown m;
  m.stage = in.stage;
  const bool mixed = t.precision == hw::DType::bf16 || t.precision == hw::DType::fp16 || t.precision == hw::DType::fp8;
  const double param_bytes = mixed ? 2.0 : static_cast<double>(hw::dtype_bytes(t.precision));
  const double grad_bytes = hw::dtype_bytes(t.grad_dtype);
  // Optimizer states per parameter: Adam keeps two moments; SGD one; mixed precision adds an fp32
  // master copy of the weights.
  double opt_bytes = t.optimizer == Optimizer::adam ? 8.0 : 4.0;
  if (mixed) opt_bytes += 4.0;
  const double dp = std::max(1, in.dp), edp = std::max(1, in.expert_dp);
  auto shard = [&](double dense, double expert, int stage_needed) {
    return zero >= stage_needed ? dense / dp + expert / edp : dense + expert;
  };
  m.params = shard(in.dense_params, in.expert_params, 3) * param_bytes + (zero >= 3 ? in.gathered_params * param_bytes : 0.0);
  m.grads = shard(in.dense_params, in.expert_params, 2) * grad_bytes;
  m.optimizer = shard(in.dense_params, in.expert_params, 1) * opt_bytes;
  m.activations = in.activations;
  m.reserved = mp.reserved.as_double();
  m.fragmentation = mp.fragmentation * (m.params + m.grads + m.optimizer + m.activations);
  m.total = m.params + m.grads + m.optimizer + m.activations + m.reserved + m.fragmentation;
  m.capacity = capacity.as_double();
  m.fits = m.total <= m.capacity;
  return m;
}

}  // namespace dtsim::workloads
