#include "workloads/memory_eager.hpp"

#include <algorithm>

namespace dtsim::workloads {

namespace {

struct Dims {
  double h = 0, qd = 0, kvd = 0, f = 0, heads = 0, a = 2;
  double routed = 1;  // MoE: routed copies of each token through the MLP
  bool amp = true;    // autocast: GEMM inputs are bf16 copies of fp32 tensors
};

Dims dims(const TransformerSpec& m, const EagerShape& s) {
  Dims d;
  const double hd = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
  const double t = std::max(1, s.tp);
  d.h = static_cast<double>(m.hidden);
  d.heads = static_cast<double>(m.heads) / t;
  d.qd = static_cast<double>(m.heads) * hd / t;
  d.kvd = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads) * hd / t;
  d.f = static_cast<double>(m.ffn) / t;
  d.a = s.act_bytes;
  d.amp = s.act_bytes < 4;
  d.routed = m.experts > 0 ? static_cast<double>(m.top_k) : 1.0;
  return d;
}

// Copies autocast makes of one fp32 tensor for `n` GEMMs that each cast it (casts of non-leaf
// tensors are not cached): n bf16 copies; without autocast the one fp32 tensor itself.
double casts(const Dims& d, double n, double elems) { return d.amp ? n * d.a * elems : d.a * elems; }

// The attention kernel's saved tensors besides Q, K, V: its output and the per-row log-sum-exp
// (flash / cuDNN attention), or with standard attention the softmax output (fp32 under autocast),
// its cast, dropout mask and dropped-out probabilities.
void attention_core(const Dims& d, const EagerShape& s, std::vector<EagerBuffer>& b) {
  b.push_back({"attention output", d.a * d.qd});
  if (fused(s.attention)) {
    b.push_back({"attention log-sum-exp (fp32)", 4.0 * d.heads});
  } else {
    const double row = d.heads * static_cast<double>(s.seq);
    b.push_back({"softmax output (fp32)", 4.0 * row});
    if (d.amp) b.push_back({"softmax output cast", d.a * row});
    if (s.dropout) {
      b.push_back({"attention dropout mask", row});
      b.push_back({"attention probabilities after dropout", d.a * row});
    }
  }
}

void gpt2_block(const Dims& d, const EagerShape& s, std::vector<EagerBuffer>& b) {
  b.push_back({"ln_1 input (fp32 residual)", 4.0 * d.h});
  b.push_back({"ln_1 mean and rstd", 8.0});
  b.push_back({"c_attn input", d.a * d.h});
  if (s.compiled) {
    b.push_back({"Q, K, V", d.a * (d.qd + 2.0 * d.kvd)});
  } else {
    b.push_back({"Q, K, V (c_attn output)", d.a * (d.qd + 2.0 * d.kvd)});
    b.push_back({"K, V copies (DynamicCache.update cat)", d.a * 2.0 * d.kvd});
  }
  attention_core(d, s, b);
  if (s.dropout) b.push_back({"attention residual dropout mask", d.h});
  b.push_back({"ln_2 input (fp32 residual)", 4.0 * d.h});
  b.push_back({"ln_2 mean and rstd", 8.0});
  b.push_back({"c_fc input", d.a * d.h});
  const double f = d.f * d.routed;
  if (s.compiled) {
    b.push_back({"c_fc output (GELU recomputed in backward)", d.a * f});
  } else {
    // NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 pow(x, 3)))); autocast runs pow
    // in fp32, so the result of every op after it is fp32.
    b.push_back({"GELU: x in fp32 (pow input)", 4.0 * f});
    b.push_back({"GELU: 0.5 x", d.a * f});
    b.push_back({"GELU: tanh output (fp32)", 4.0 * f});
    b.push_back({"GELU: 1 + tanh (fp32)", 4.0 * f});
  }
  b.push_back({"c_proj input (GELU output)", d.a * f});
  if (s.dropout) b.push_back({"MLP residual dropout mask", d.h});
}

void llama_block(const Dims& d, const EagerShape& s, std::vector<EagerBuffer>& b) {
  const double f = d.f * d.routed;
  for (int norm = 0; norm < 2; ++norm) {
    const char* which = norm == 0 ? "input_layernorm" : "post_attention_layernorm";
    b.push_back({std::string(which) + " input (fp32 residual)", 4.0 * d.h});
    b.push_back({std::string(which) + " rsqrt", 4.0});
    if (s.compiled) {
      b.push_back({std::string(which) + " output", d.a * d.h});
    } else {
      b.push_back({std::string(which) + " normalized (fp32)", 4.0 * d.h});
      b.push_back({norm == 0 ? "q/k/v_proj inputs (one cast each)" : "gate/up_proj inputs (one cast each)",
                   casts(d, norm == 0 ? 3.0 : 2.0, d.h)});
    }
    if (norm == 1) break;
    if (s.compiled) {
      b.push_back({"Q, K after rotary embedding", d.a * (d.qd + d.kvd)});
      b.push_back({"V", d.a * d.kvd});
    } else {
      // q * cos + rotate_half(q) * sin keeps q and rotate_half(q); the fp32 result is cast again
      // for SDPA. V goes through the (fp32) DynamicCache and is cast for SDPA.
      b.push_back({"q_proj, k_proj outputs (rotary input)", d.a * (d.qd + d.kvd)});
      b.push_back({"rotate_half(q), rotate_half(k)", d.a * (d.qd + d.kvd)});
      b.push_back({"Q, K, V cast for SDPA", d.a * (d.qd + 2.0 * d.kvd)});
    }
    attention_core(d, s, b);
  }
  if (s.compiled) {
    b.push_back({"gate_proj, up_proj outputs (SiLU and product recomputed)", 2.0 * d.a * f});
  } else {
    b.push_back({"gate_proj output (SiLU input)", d.a * f});
    b.push_back({"SiLU output", d.a * f});
    b.push_back({"up_proj output", d.a * f});
    b.push_back({"down_proj input (product)", d.a * f});
  }
}

void bert_block(const Dims& d, const EagerShape& s, std::vector<EagerBuffer>& b) {
  const double f = d.f * d.routed;
  b.push_back({"query/key/value inputs (one cast each)", s.compiled ? d.a * d.h : casts(d, 3.0, d.h)});
  b.push_back({"Q, K, V", d.a * (d.qd + 2.0 * d.kvd)});
  attention_core(d, s, b);
  if (s.dropout) b.push_back({"attention output dropout mask", d.h});
  b.push_back({"attention LayerNorm input (fp32 sum)", 4.0 * d.h});
  b.push_back({"attention LayerNorm mean and rstd", 8.0});
  b.push_back({"intermediate input", d.a * d.h});
  b.push_back({"GELU input", d.a * f});
  if (!s.compiled) b.push_back({"output dense input (GELU output)", d.a * f});
  if (s.dropout) b.push_back({"output dropout mask", d.h});
  b.push_back({"output LayerNorm input (fp32 sum)", 4.0 * d.h});
  b.push_back({"output LayerNorm mean and rstd", 8.0});
}

}  // namespace

HfFamily hf_family(const TransformerSpec& m) {
  if (m.encoder) return HfFamily::bert;
  if (m.norm == Norm::rmsnorm || m.positions == Positions::rotary) return HfFamily::llama;
  return HfFamily::gpt2;
}

double block_gemm_weights(const TransformerSpec& m) {
  const double h = static_cast<double>(m.hidden);
  const double hd = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
  const double q = static_cast<double>(m.heads) * hd, kv = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads) * hd;
  const double experts = m.experts > 0 ? static_cast<double>(m.experts) : 1.0;
  const double router = m.experts > 0 ? h * static_cast<double>(m.experts) : 0.0;
  return h * (q + 2.0 * kv) + q * h + experts * (m.gated_mlp ? 3.0 : 2.0) * h * static_cast<double>(m.ffn) + router;
}

double sum_bytes(const std::vector<EagerBuffer>& b) {
  double s = 0;
  for (const EagerBuffer& x : b) s += x.bytes;
  return s;
}

std::vector<EagerBuffer> eager_block_buffers(const TransformerSpec& m, const EagerShape& s) {
  const Dims d = dims(m, s);
  std::vector<EagerBuffer> b;
  switch (hf_family(m)) {
    case HfFamily::gpt2: gpt2_block(d, s, b); break;
    case HfFamily::llama: llama_block(d, s, b); break;
    case HfFamily::bert: bert_block(d, s, b); break;
  }
  return b;
}

std::vector<EagerBuffer> eager_embedding_buffers(const TransformerSpec& m, const EagerShape& s) {
  const Dims d = dims(m, s);
  std::vector<EagerBuffer> b;
  // The embedding lookup's output is the first block's input (counted there); its backward needs
  // only the token ids.
  if (hf_family(m) == HfFamily::bert) {
    b.push_back({"embedding LayerNorm input (fp32)", 4.0 * d.h});
    b.push_back({"embedding LayerNorm mean and rstd", 8.0});
  }
  if (s.dropout) b.push_back({"embedding dropout mask", d.h});
  return b;
}

std::vector<EagerBuffer> eager_head_buffers(const TransformerSpec& m, const EagerShape& s) {
  const Dims d = dims(m, s);
  std::vector<EagerBuffer> b;
  switch (hf_family(m)) {
    case HfFamily::gpt2:
      b.push_back({"ln_f input (fp32 residual)", 4.0 * d.h});
      b.push_back({"ln_f mean and rstd", 8.0});
      break;
    case HfFamily::llama:
      b.push_back({"final norm input (fp32 residual)", 4.0 * d.h});
      b.push_back({"final norm rsqrt", 4.0});
      if (!s.compiled) b.push_back({"final norm normalized (fp32)", 4.0 * d.h});
      break;
    case HfFamily::bert:
      // MLM head transform: dense, GELU, LayerNorm (autocast runs it in fp32: a cast copy).
      b.push_back({"MLM transform input", d.a * d.h});
      b.push_back({"MLM GELU input", d.a * d.h});
      b.push_back({"MLM LayerNorm input (fp32)", 4.0 * d.h});
      b.push_back({"MLM LayerNorm mean and rstd", 8.0});
      break;
  }
  b.push_back({"output projection input", d.a * d.h});
  return b;
}

LossBuffers eager_loss_bytes(const TransformerSpec& m, const EagerShape& s) {
  const Dims d = dims(m, s);
  const double v = static_cast<double>(m.vocab) / std::max(1, s.tp);
  LossBuffers l;
  if (s.compiled) {
    // Inductor fuses the fp32 upcast, log-softmax and NLL: the bf16 logits are kept with per-row
    // statistics, and the backward kernel writes the logits' gradient directly in bf16.
    l.forward = d.a * v;
    l.backward = 2.0 * d.a * v;
    return l;
  }
  // Hugging Face's loss: logits.float(), then cross_entropy = log_softmax (keeps its fp32 output)
  // + nll_loss. In the forward pass the bf16 logits, their fp32 copy and the log-softmax output
  // are live at once; log_softmax_backward then holds its output, the incoming gradient and the
  // outgoing gradient, all fp32 (the logits themselves are freed once the model's output is).
  l.forward = (d.amp ? d.a * v : 0.0) + 4.0 * v + 4.0 * v;
  l.backward = 3.0 * 4.0 * v;
  return l;
}

std::vector<EagerBuffer> eager_cnn_buffers(const CnnSpec& m, const EagerShape& s) {
  const double a = s.act_bytes;
  std::vector<EagerBuffer> b;
  const double image = 3.0 * static_cast<double>(m.image * m.image);
  b.push_back({"input images (fp32)", 4.0 * image});
  if (a < 4) b.push_back({"first convolution input (cast)", a * image});
  // Every new output a layer makes is kept by the layer after it (a convolution or linear layer
  // keeps its input, a batch norm its input, an in-place ReLU its output, which is the same
  // storage), except the classifier's logits and the output of a shortcut's batch norm, which only
  // feeds the in-place residual add. A layer on a shortcut reads the block's input, which the
  // block's first convolution keeps already.
  for (const CnnLayer& l : m.layers) {
    const double out = static_cast<double>(l.out_channels * l.out_h * l.out_w);
    switch (l.kind) {
      case CnnLayer::Kind::conv:
        b.push_back({l.name + " output", a * out});
        break;
      case CnnLayer::Kind::fc:
        if (&l != &m.layers.back()) b.push_back({l.name + " output", a * out});
        break;
      case CnnLayer::Kind::batchnorm:
        if (!l.shortcut) b.push_back({l.name + " output", a * out});
        break;
      case CnnLayer::Kind::pool:
        if (!l.average) b.push_back({l.name + " indices (int64)", 8.0 * out});
        b.push_back({l.name + " output", a * out});
        break;
      case CnnLayer::Kind::dropout:
        if (s.dropout) b.push_back({l.name + " mask", out});
        b.push_back({l.name + " output", a * out});
        break;
      case CnnLayer::Kind::relu:     // in place
      case CnnLayer::Kind::add:      // in place (out += identity)
      case CnnLayer::Kind::softmax:  // part of the loss, per sample and small
        break;
    }
  }
  return b;
}

MemoryBreakdown eager_stage_memory(const EagerStageInput& in, const TrainingSpec& t, int zero, const MemoryParams& mp, Bytes capacity) {
  MemoryBreakdown m;
  m.stage = in.stage;
  m.eager = true;
  const bool amp = t.precision != hw::DType::fp32 && t.precision != hw::DType::tf32;
  const double dp = std::max(1, in.dp);
  auto shard = [&](double x, int stage_needed) { return zero >= stage_needed ? x / dp : x; };
  const double params = shard(4.0 * in.params, 3);                    // fp32 parameters (AMP keeps them in fp32)
  const double casts = amp ? shard(2.0 * in.matmul_params, 3) : 0.0;  // bf16 weight copies, kept for backward
  const double grads = shard(4.0 * in.params, 2);                     // fp32 .grad
  const double buckets = in.ddp_buckets && zero == 0 ? 4.0 * in.params : 0.0;
  // Fused AdamW: exp_avg and exp_avg_sq (fp32), updated in place; SGD: the momentum buffer.
  const double opt = shard((t.optimizer == Optimizer::adam ? 8.0 : 4.0) * in.params, 1);
  const double ws = mp.cublas_workspace.as_double();
  const double resident = params + opt + buckets + ws;
  const double fwd = resident + casts + in.activations + in.loss.forward;
  const double bwd = resident + casts + in.activations + in.loss.backward;
  const double step = resident + grads;
  m.params = params;
  m.optimizer = opt;
  m.workspace = ws;
  if (step > std::max(fwd, bwd)) {
    m.peak_phase = "optimizer step";
    m.grads = grads + buckets;
  } else {
    m.peak_phase = bwd >= fwd ? "start of backward (loss gradient)" : "end of forward (loss)";
    m.grads = buckets;
    m.cast_weights = casts;
    m.params += casts;
    m.loss = bwd >= fwd ? in.loss.backward : in.loss.forward;
    m.activations = in.activations + m.loss;
  }
  m.allocated = std::max({fwd, bwd, step});
  m.fragmentation = mp.fragmentation * m.allocated;
  m.reserved = mp.cuda_context.as_double() + ws;
  m.total = m.allocated + m.fragmentation + mp.cuda_context.as_double();
  m.capacity = capacity.as_double();
  m.fits = m.total <= m.capacity;
  return m;
}

}  // namespace dtsim::workloads
