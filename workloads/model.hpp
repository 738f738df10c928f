// Model descriptions: transformers (from presets or a Hugging Face config.json) and CNNs from the
// data-parallel literature, with exact parameter counts.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace dtsim::workloads {

enum class Norm { layernorm, rmsnorm };
enum class Positions { learned, rotary };

// A decoder-only (GPT, Llama, Mixtral) or encoder-only (BERT) transformer.
struct TransformerSpec {
  std::string name;
  std::string source;             // where the figures come from (paper, model card, config.json)
  std::int64_t hidden = 0;        // d_model
  std::int64_t layers = 0;
  std::int64_t heads = 0;         // attention (query) heads
  std::int64_t kv_heads = 0;      // key/value heads (== heads without grouped-query attention)
  std::int64_t head_dim = 0;      // per head; hidden / heads unless the model says otherwise
  std::int64_t ffn = 0;           // MLP inner size (per expert for MoE)
  std::int64_t vocab = 0;
  std::int64_t max_seq = 0;       // context length the model was trained with
  bool gated_mlp = false;         // SwiGLU / GeGLU: gate, up and down matrices (else up and down)
  bool bias = true;               // biases on the linear layers (GPT-2/3, BERT) or not (Llama)
  bool qkv_bias = false;          // biases on Q, K and V only (Qwen2); meaningful when bias is false
  bool tied_embeddings = true;    // output projection shares the input embedding
  Positions positions = Positions::learned;
  Norm norm = Norm::layernorm;
  bool encoder = false;           // BERT-style: bidirectional, MLM head instead of an LM head
  std::int64_t experts = 0;       // MoE: experts per layer (0: dense)
  std::int64_t top_k = 0;         // MoE: experts per token
  std::int64_t published_params = 0;  // as published (0 when not given), for checks
};

// One layer of a CNN, as the compute model needs it. Convolutions are GEMMs (im2col shapes).
struct CnnLayer {
  enum class Kind { conv, fc, pool, batchnorm, relu, add, softmax, dropout };
  Kind kind = Kind::conv;
  std::string name;
  std::int64_t in_channels = 0, out_channels = 0;
  std::int64_t kernel = 1, stride = 1, padding = 0, groups = 1;
  std::int64_t in_h = 0, in_w = 0;    // input feature map
  std::int64_t out_h = 0, out_w = 0;  // output feature map
  bool bias = false;
  bool average = false;   // pool: average (else max, which keeps int64 indices for backward)
  bool shortcut = false;  // on a residual block's projection shortcut (reads the block's input)
  std::int64_t params() const;
  // Multiply-accumulates per sample (forward). Zero for layers without weights.
  std::int64_t macs() const;
};

struct CnnSpec {
  std::string name;
  std::string source;
  std::int64_t image = 224;           // input height = width
  std::int64_t classes = 1000;
  std::vector<CnnLayer> layers;
  std::int64_t published_params = 0;
};

using ModelSpec = std::variant<TransformerSpec, CnnSpec>;

const std::string& model_name(const ModelSpec& m);

// Exact parameter counts, summing every weight and bias the architecture has.
std::int64_t parameter_count(const TransformerSpec& m);
std::int64_t parameter_count(const CnnSpec& m);
std::int64_t parameter_count(const ModelSpec& m);
// Parameters one token uses (MoE: shared weights plus top_k of the experts); == total for dense.
std::int64_t active_parameter_count(const TransformerSpec& m);

// Parameters of one transformer block (attention + MLP + norms), and of the embedding and output
// layers, so that pipeline stages can be sized.
std::int64_t block_parameters(const TransformerSpec& m);
// Token (+ learned position) embeddings; BERT adds token-type embeddings and the embedding norm.
std::int64_t embedding_parameters(const TransformerSpec& m);
// Decoders: final norm, plus the LM head when untied. BERT: pooler and MLM head (transform,
// norm, output bias), plus the decoder weight when untied.
std::int64_t head_parameters(const TransformerSpec& m);

// CNN builders (torchvision's definitions), for the presets `alexnet`, `vgg16`, `resnet50`.
// `image` is the input height = width; the adaptive average pools keep the parameter count
// independent of it. Needs image >= 64 (smaller inputs collapse AlexNet's feature maps).
CnnSpec make_alexnet(std::int64_t image = 224);
CnnSpec make_vgg16(std::int64_t image = 224);
CnnSpec make_resnet50(std::int64_t image = 224);

}  // namespace dtsim::workloads
