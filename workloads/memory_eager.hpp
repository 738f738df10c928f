// Memory of one GPU as eager PyTorch allocates it (`training.framework: pytorch-eager` or
// `torch-compile`): Hugging Face and torchvision models under torch.autocast with fp32 parameters,
// as the H100 traces of data/traces/h100-2026-11-23 run them. Each tensor autograd keeps for the
// backward pass is named with its size (bytes per token for transformers, per sample for CNNs), so
// that tests and docs/model.md can check each one by hand; the allocator's peak is the largest of
// three moments of the step (end of forward, start of backward, optimizer step).
#pragma once

#include <string>
#include <vector>

#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace dtsim::workloads {

// One tensor kept for backward (or a loss buffer), with its size.
struct EagerBuffer {
  std::string name;
  double bytes = 0;  // per token (transformers) or per sample (CNNs)
};

struct EagerShape {
  std::int64_t seq = 0;        // tokens per sequence (attention scores of standard attention)
  int tp = 1;                  // tensor parallelism divides the per-layer tensors (an approximation)
  int act_bytes = 2;           // autocast dtype: 2 (bf16/fp16) or 4 (fp32: no autocast, no casts)
  bool dropout = true;         // dropout runs and its masks are kept (one byte per element)
  Attention attention = Attention::flash;
  bool compiled = false;       // torch.compile: elementwise chains fused, their inputs recomputed
};

// The Hugging Face code a transformer runs as: GPT-2 (pre-LayerNorm, fused c_attn, GELU-tanh
// written as 8 elementwise ops), BERT (post-LayerNorm encoder, exact GELU) or Llama (RMSNorm,
// rotary embeddings, SiLU-gated MLP; also Mistral, Qwen2, Mixtral).
enum class HfFamily { gpt2, bert, llama };
HfFamily hf_family(const TransformerSpec& m);

// GEMM weights of one transformer block (what autocast casts to bf16 and keeps): Q, K, V and the
// attention output projection, the MLP's two or three matrices per expert and the router; not
// biases or norm weights.
double block_gemm_weights(const TransformerSpec& m);

// Saved tensors of one transformer block, per token, in forward order.
std::vector<EagerBuffer> eager_block_buffers(const TransformerSpec& m, const EagerShape& s);
// Saved tensors of the embedding (first stage) and of the final norm and output projection (last
// stage), per token.
std::vector<EagerBuffer> eager_embedding_buffers(const TransformerSpec& m, const EagerShape& s);
std::vector<EagerBuffer> eager_head_buffers(const TransformerSpec& m, const EagerShape& s);

// Loss buffers over the vocabulary, per token: at the end of the forward pass (logits, their fp32
// copy, the log-softmax output) and at the start of the backward pass (log-softmax output, its
// gradient, the logits' gradient).
struct LossBuffers {
  double forward = 0, backward = 0;
};
LossBuffers eager_loss_bytes(const TransformerSpec& m, const EagerShape& s);

double sum_bytes(const std::vector<EagerBuffer>& b);

// Saved tensors of a torchvision CNN per sample (channels-last, autocast): convolution and linear
// inputs, batch-norm inputs, in-place ReLU outputs (the same storage), max-pool indices (int64),
// dropout masks, and the input image (fp32) with its cast.
std::vector<EagerBuffer> eager_cnn_buffers(const CnnSpec& m, const EagerShape& s);

// What one GPU holds, for the allocator's peak.
struct EagerStageInput {
  int stage = 0;
  double params = 0;          // parameters this rank holds (fp32)
  double matmul_params = 0;   // of which GEMM/convolution weights (cast to bf16 by autocast, kept for backward)
  int dp = 1;                 // data-parallel ranks (ZeRO shards over them)
  bool ddp_buckets = false;   // DDP keeps a flat copy of the gradients in its buckets (gradient_as_bucket_view=False)
  double activations = 0;     // bytes kept for backward at the peak of the schedule
  LossBuffers loss;           // bytes, for the micro-batch whose loss is computed (last stage), else zero
};

// The allocator's peak (MemoryBreakdown::allocated, with the moment in peak_phase) and the device
// memory a monitor shows (total = allocated x (1 + fragmentation) + CUDA context).
MemoryBreakdown eager_stage_memory(const EagerStageInput& in, const TrainingSpec& t, int zero, const MemoryParams& mp, Bytes capacity);

}  // namespace dtsim::workloads
