// The CUDA kernels of the calibration harness and of the validation workload, behind plain C++
// launchers (no CUDA types but cudaStream_t), so that everything else builds with the host
// compiler. Every launcher enqueues its kernel on `stream` and returns the launch's error code;
// element types are chosen at run time (Elt).
//
// Element-wise and row kernels follow what a PyTorch training step runs (mixed precision: bf16 or
// fp16 activations, fp32 statistics, gradients and optimizer state), so that their memory traffic
// is what dtsim's compute model counts for them (workloads/program.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dtsim::gpu {

enum class Elt : int { f32 = 0, f16 = 1, bf16 = 2, f8e4m3 = 3 };
inline std::size_t elt_bytes(Elt e) { return e == Elt::f32 ? 4 : e == Elt::f8e4m3 ? 1 : 2; }
const char* elt_name(Elt e);

// Uniform random values in [-scale, scale] from a hash of (seed, index): never zeros, the same
// on every run.
cudaError_t fill_random(void* p, std::size_t n, Elt t, std::uint64_t seed, float scale, cudaStream_t stream);
cudaError_t fill_value(void* p, std::size_t n, Elt t, float value, cudaStream_t stream);
// Integer token ids in [0, vocab).
cudaError_t fill_tokens(std::int32_t* p, std::size_t n, int vocab, std::uint64_t seed, cudaStream_t stream);

// An empty kernel (launch overhead).
cudaError_t empty_kernel(cudaStream_t stream);

// Streaming: out = in (16-byte accesses), and a = b + s c (fp32, 16-byte accesses). Sizes in
// bytes must be multiples of 16.
cudaError_t copy(const void* in, void* out, std::size_t bytes, cudaStream_t stream);
cudaError_t triad(float* a, const float* b, const float* c, float s, std::size_t n, cudaStream_t stream);

// LayerNorm over the last dimension of x[rows, cols] (t = f16/bf16; gamma, beta fp32); saves
// mean and 1/std per row (fp32) for the backward pass.
cudaError_t layernorm_fwd(const void* x, const float* gamma, const float* beta, void* y, float* mean, float* rstd, int rows, int cols,
                          Elt t, cudaStream_t stream);
// dx = LayerNorm'(dy) (+ dresid when not null: the residual stream's gradient, fused);
// dgamma and dbeta are accumulated (+=, fp32).
cudaError_t layernorm_bwd(const void* dy, const void* x, const float* gamma, const float* mean, const float* rstd, const void* dresid,
                          void* dx, float* dgamma, float* dbeta, int rows, int cols, Elt t, cudaStream_t stream);

// Softmax of x[rows, cols] * scale along rows; with `causal`, row r (query r % cols of its matrix)
// sees columns 0..r % cols only (the rest become 0).
cudaError_t softmax_fwd(const void* x, void* y, float scale, bool causal, std::int64_t rows, int cols, Elt t, cudaStream_t stream);
// dx = y * (dy - sum(dy * y)) * scale.
cudaError_t softmax_bwd(const void* y, const void* dy, void* dx, float scale, std::int64_t rows, int cols, Elt t, cudaStream_t stream);

// GELU (tanh approximation, as GPT-2).
cudaError_t gelu_fwd(const void* x, void* y, std::size_t n, Elt t, cudaStream_t stream);
cudaError_t gelu_bwd(const void* x, const void* dy, void* dx, std::size_t n, Elt t, cudaStream_t stream);

// Dropout with probability p; the mask is a hash of (seed, index), regenerated in the backward.
cudaError_t dropout_fwd(const void* x, void* y, std::size_t n, float p, std::uint64_t seed, Elt t, cudaStream_t stream);
cudaError_t dropout_bwd(const void* dy, void* dx, std::size_t n, float p, std::uint64_t seed, Elt t, cudaStream_t stream);
// out = resid + dropout(x) (the residual connection after attention and MLP).
cudaError_t dropout_residual_fwd(const void* x, const void* resid, void* out, std::size_t n, float p, std::uint64_t seed, Elt t,
                                 cudaStream_t stream);

// Adam (Kingma and Ba) with decoupled weight decay, fp32 master weights and moments, writing the
// low-precision copy the GEMMs read (half_copy may be null).
struct AdamConfig {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float grad_scale = 1.0f;  // e.g. 1 / data-parallel ranks (the all-reduce sums)
  int step = 1;
};
cudaError_t adam(float* master, float* m, float* v, const float* grad, void* half_copy, std::size_t n, AdamConfig c, Elt t,
                 cudaStream_t stream);

// Token plus learned position embeddings: out[b*s + i] = wte[tok] + wpe[i] (tables in t).
cudaError_t embedding_fwd(const std::int32_t* tokens, const void* wte, const void* wpe, void* out, int tokens_n, int seq, int hidden,
                          Elt t, cudaStream_t stream);
// dwte[tok] += dout (atomic, fp32), dwpe[i] += dout (atomic, fp32).
cudaError_t embedding_bwd(const std::int32_t* tokens, const void* dout, float* dwte, float* dwpe, int tokens_n, int seq, int hidden,
                          Elt t, cudaStream_t stream);

// Cross-entropy in fp32 over logits[rows, vocab] (t): forward writes log-probabilities (fp32) and
// adds the mean loss into *loss; backward writes dlogits = (softmax - onehot) / rows (t).
cudaError_t cross_entropy_fwd(const void* logits, const std::int32_t* targets, float* logprobs, float* loss, int rows, int vocab, Elt t,
                              cudaStream_t stream);
cudaError_t cross_entropy_bwd(const float* logprobs, const std::int32_t* targets, void* dlogits, int rows, int vocab, Elt t,
                              cudaStream_t stream);

// Attention layouts: qkv[b*s, 3h] <-> q, k, v [b, heads, s, d] (contiguous per head), and
// ctx[b, heads, s, d] <-> out[b*s, h]. `merge_qkv` is the backward of split_qkv.
cudaError_t split_qkv(const void* qkv, void* q, void* k, void* v, int b, int s, int heads, int d, Elt t, cudaStream_t stream);
cudaError_t merge_qkv(const void* dq, const void* dk, const void* dv, void* dqkv, int b, int s, int heads, int d, Elt t,
                      cudaStream_t stream);
cudaError_t merge_heads(const void* ctx, void* out, int b, int s, int heads, int d, Elt t, cudaStream_t stream);
cudaError_t split_heads(const void* out, void* ctx, int b, int s, int heads, int d, Elt t, cudaStream_t stream);

// fp32 -> t (the gradient of a tied embedding read by the LM head, and similar casts).
cudaError_t cast_from_f32(const float* in, void* out, std::size_t n, Elt t, cudaStream_t stream);

// NCCL data checks (as nccl-tests): every rank's buffer holds small integers that depend on the
// rank and the index, so sums are exact in every type; `check` counts the elements that differ
// from what the collective should have produced on `rank` (into *wrong, atomically).
enum class CheckOp : int { allreduce, allgather, reducescatter, alltoall, broadcast, sendrecv };
cudaError_t fill_pattern(void* p, std::size_t count, Elt t, int rank, std::size_t offset, cudaStream_t stream);
cudaError_t check_result(const void* p, std::size_t count, Elt t, CheckOp op, int rank, int nranks, int root, std::size_t chunk,
                         unsigned long long* wrong, cudaStream_t stream);

}  // namespace dtsim::gpu
