// Parameter counts of transformers and CNNs. Each count sums the weight and bias tensors that the
// reference implementation (Hugging Face transformers, Megatron-LM, torchvision) allocates;
// buffers (causal masks, batch-norm running statistics) are not parameters and are not counted.
#include "workloads/model.hpp"

#include <variant>

namespace dtsim::workloads {

namespace {

std::int64_t norm_parameters(const TransformerSpec& m) {
  return m.norm == Norm::layernorm ? 2 * m.hidden : m.hidden;  // weight (+ bias for layernorm)
}

// Q, K, V and output projections, with their biases.
std::int64_t attention_parameters(const TransformerSpec& m) {
  const std::int64_t q = m.heads * m.head_dim;
  const std::int64_t kv = m.kv_heads * m.head_dim;
  std::int64_t p = m.hidden * q + 2 * m.hidden * kv + q * m.hidden;
  if (m.bias) p += q + 2 * kv + m.hidden;
  else if (m.qkv_bias) p += q + 2 * kv;
  return p;
}

// One MLP (one expert for MoE): up and down, plus a gate when gated; biases on each matrix.
std::int64_t mlp_parameters(const TransformerSpec& m) {
  const std::int64_t inner_matrices = m.gated_mlp ? 2 : 1;  // gate + up, or up
  std::int64_t p = (inner_matrices + 1) * m.hidden * m.ffn;
  if (m.bias) p += inner_matrices * m.ffn + m.hidden;
  return p;
}

std::int64_t router_parameters(const TransformerSpec& m) { return m.experts > 0 ? m.hidden * m.experts : 0; }

// A block with `mlps` MLP copies: attention, the MLPs, the router and two norms.
std::int64_t block_with(const TransformerSpec& m, std::int64_t mlps) {
  return attention_parameters(m) + mlps * mlp_parameters(m) + router_parameters(m) + 2 * norm_parameters(m);
}

}  // namespace

std::int64_t CnnLayer::params() const {
  switch (kind) {
    case Kind::conv:
      return out_channels * (in_channels / groups) * kernel * kernel + (bias ? out_channels : 0);
    case Kind::fc:
      return in_channels * out_channels + (bias ? out_channels : 0);
    case Kind::batchnorm:
      return 2 * out_channels;  // scale and shift; running mean and variance are buffers
    case Kind::pool:
    case Kind::relu:
    case Kind::add:
    case Kind::softmax:
    case Kind::dropout:
      return 0;
  }
  return 0;
}

std::int64_t CnnLayer::macs() const {
  switch (kind) {
    case Kind::conv:
      return out_h * out_w * out_channels * (in_channels / groups) * kernel * kernel;
    case Kind::fc:
      return in_channels * out_channels;
    case Kind::pool:
    case Kind::batchnorm:
    case Kind::relu:
    case Kind::add:
    case Kind::softmax:
    case Kind::dropout:
      return 0;
  }
  return 0;
}

const std::string& model_name(const ModelSpec& m) {
  return std::visit([](const auto& s) -> const std::string& { return s.name; }, m);
}

std::int64_t block_parameters(const TransformerSpec& m) {
  return block_with(m, m.experts > 0 ? m.experts : 1);
}

std::int64_t embedding_parameters(const TransformerSpec& m) {
  std::int64_t p = m.vocab * m.hidden;
  if (m.positions == Positions::learned) p += m.max_seq * m.hidden;
  // BERT: token-type (segment) embeddings for its two segments, and the embedding layernorm.
  if (m.encoder) p += 2 * m.hidden + norm_parameters(m);
  return p;
}

std::int64_t head_parameters(const TransformerSpec& m) {
  std::int64_t p = 0;
  if (m.encoder) {
    // BERT is post-norm, so there is no final norm. The pooler (dense + bias), and the MLM head:
    // transform (dense + bias, layernorm) and a per-token output bias; its decoder weight is the
    // word embedding when tied.
    const std::int64_t dense = m.hidden * m.hidden + m.hidden;
    p += dense + dense + norm_parameters(m) + m.vocab;
  } else {
    p += norm_parameters(m);  // final norm (pre-norm decoders)
  }
  if (!m.tied_embeddings) p += m.vocab * m.hidden;
  return p;
}

std::int64_t parameter_count(const TransformerSpec& m) {
  return embedding_parameters(m) + m.layers * block_parameters(m) + head_parameters(m);
}

std::int64_t active_parameter_count(const TransformerSpec& m) {
  if (m.experts == 0) return parameter_count(m);
  return embedding_parameters(m) + m.layers * block_with(m, m.top_k) + head_parameters(m);
}

std::int64_t parameter_count(const CnnSpec& m) {
  std::int64_t p = 0;
  for (const CnnLayer& l : m.layers) p += l.params();
  return p;
}

std::int64_t parameter_count(const ModelSpec& m) {
  return std::visit([](const auto& s) { return parameter_count(s); }, m);
}

}  // namespace dtsim::workloads
