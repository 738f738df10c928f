#include "calibrate/workload/gpt.hpp"

#include <chrono>
#include <cmath>

#include "calibrate/harness/check.hpp"

#define DTSIM_NCCL(call)                                                                                 \
  do {                                                                                                   \
    const ncclResult_t dtsim_r_ = (call);                                                                \
    if (dtsim_r_ != ncclSuccess) {                                                                       \
      return ::dtsim::harness::call_error(__FILE__, __LINE__, #call, ncclGetErrorString(dtsim_r_));      \
    }                                                                                                    \
  } while (0)

namespace dtsim::workload {

namespace {

using gpu::Elt;
using harness::GemmCall;
using harness::GemmKind;
constexpr Elt kAct = Elt::bf16;
constexpr std::size_t kA = 2;  // bytes of an activation element

std::size_t align(std::size_t n) { return (n + 63) / 64 * 64; }

// Row-major linear layers with weights W[out, in] (PyTorch's layout).
GemmCall linear_fwd(std::int64_t tokens, std::int64_t out, std::int64_t in) {  // Y = X W^T
  GemmCall c;
  c.kind = GemmKind::bf16;
  c.trans_b = true;
  c.m = tokens;
  c.n = out;
  c.k = in;
  return c;
}
GemmCall linear_dgrad(std::int64_t tokens, std::int64_t out, std::int64_t in) {  // dX = dY W
  GemmCall c;
  c.kind = GemmKind::bf16;
  c.m = tokens;
  c.n = in;
  c.k = out;
  return c;
}
GemmCall linear_wgrad(std::int64_t tokens, std::int64_t out, std::int64_t in) {  // dW = dY^T X (fp32)
  GemmCall c;
  c.kind = GemmKind::bf16;
  c.trans_a = true;
  c.m = out;
  c.n = in;
  c.k = tokens;
  c.out_f32 = true;
  return c;
}
// Batched attention products over batch x heads matrices.
GemmCall batched(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, int batch, std::int64_t sa, std::int64_t sb,
                 std::int64_t sc, float alpha) {
  GemmCall c;
  c.kind = GemmKind::bf16;
  c.trans_a = ta;
  c.trans_b = tb;
  c.m = m;
  c.n = n;
  c.k = k;
  c.batch = batch;
  c.stride_a = sa;
  c.stride_b = sb;
  c.stride_c = sc;
  c.alpha = alpha;
  return c;
}

}  // namespace

std::int64_t GptShape::parameters() const {
  const std::int64_t h = hidden, f = ffn;
  return static_cast<std::int64_t>(layers) * (4 * h + 4 * h * h + 2 * h * f) + 2 * h + static_cast<std::int64_t>(vocab) * h +
         static_cast<std::int64_t>(seq) * h;
}

std::size_t Replica::bytes_needed(const GptShape& g, const StepOptions& o) {
  const std::size_t T = static_cast<std::size_t>(o.micro_batch) * g.seq, h = g.hidden, f = g.ffn, s = g.seq;
  const std::size_t bh = static_cast<std::size_t>(o.micro_batch) * g.heads;
  const std::size_t P = static_cast<std::size_t>(g.parameters()) + 16 * 64 * (g.layers + 2);
  const std::size_t params = P * (4 * 4 + 2);
  const std::size_t per_layer = (T * (8 * h + 2 * f) + 2 * bh * s * s) * kA + 4 * T * 4;
  const std::size_t saved = per_layer * g.layers + 2 * T * h * kA + 2 * T * 4;
  const std::size_t head = T * g.vocab * (kA + 4);
  const std::size_t scratch = (2 * bh * s * s + T * 3 * h + 8 * T * h + 2 * T * f) * kA;
  return params + saved + head + scratch + (std::size_t{64} << 20) /* cuBLASLt workspace and slack */;
}

Replica::~Replica() {
  cudaSetDevice(device_);
  for (auto& b : buckets_) {
    if (b.ready) cudaEventDestroy(b.ready);
  }
  for (cudaEvent_t e : {start_, stop_, comm_done_}) {
    if (e) cudaEventDestroy(e);
  }
  for (cudaStream_t s : {compute_, comm_stream_}) {
    if (s) cudaStreamDestroy(s);
  }
  for (void* p : allocations_) cudaFree(p);
}

std::uint64_t Replica::seed(int index, int layer, int site) const {
  return (static_cast<std::uint64_t>(index) << 40) ^ (static_cast<std::uint64_t>(layer) << 16) ^ (static_cast<std::uint64_t>(site) << 8) ^
         static_cast<std::uint64_t>(rank_) ^ 0xD7E5ull;
}

Status Replica::gemm(const GemmCall& c, const void* a, const void* b, void* out) { return gemm_.run(c, a, b, out, compute_); }

Status Replica::init(const GptShape& g, const StepOptions& o, int device, int rank, int world, ncclComm_t comm) {
  g_ = g;
  o_ = o;
  device_ = device;
  rank_ = rank;
  world_ = world;
  comm_ = comm;
  if (g.hidden % g.heads != 0) return Error("hidden must be a multiple of heads");
  DTSIM_CUDA(cudaSetDevice(device));
  DTSIM_CUDA(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
  DTSIM_CUDA(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
  DTSIM_CUDA(cudaEventCreate(&start_));
  DTSIM_CUDA(cudaEventCreate(&stop_));
  DTSIM_CUDA(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming));
  DTSIM_CHECK(gemm_.init());
  auto alloc = [&](std::size_t bytes) -> Expected<void*> {
    void* p = nullptr;
    DTSIM_CUDA(cudaMalloc(&p, bytes));
    allocations_.push_back(p);
    return p;
  };
  const std::size_t h = g.hidden, f = g.ffn, V = g.vocab, S = g.seq;
  // Flat parameters in the order their gradients become final: head, blocks from the last, embedding.
  std::size_t off = 0;
  auto take = [&](std::size_t n) {
    const std::size_t at = off;
    off += align(n);
    return at;
  };
  std::vector<std::size_t> slot_begin, slot_params;
  slot_begin.push_back(off);
  lnf_g_ = take(h);
  lnf_b_ = take(h);
  slot_params.push_back(2 * h);
  blocks_.resize(static_cast<std::size_t>(g.layers));
  for (int l = g.layers - 1; l >= 0; --l) {
    slot_begin.push_back(off);
    Block& b = blocks_[static_cast<std::size_t>(l)];
    b.ln1g = take(h);
    b.ln1b = take(h);
    b.wqkv = take(3 * h * h);
    b.wo = take(h * h);
    b.ln2g = take(h);
    b.ln2b = take(h);
    b.wup = take(f * h);
    b.wdown = take(h * f);
    slot_params.push_back(4 * h + 4 * h * h + 2 * h * f);
  }
  slot_begin.push_back(off);
  wte_ = take(V * h);
  wpe_ = take(S * h);
  slot_params.push_back(V * h + S * h);
  slot_begin.push_back(off);
  nparams_ = off;
  // Buckets as PyTorch DDP and dtsim fill them: slots in gradient order, a new bucket when the
  // next slot would overflow a non-empty one.
  {
    const std::size_t slots = slot_params.size();
    double filled = 0;
    for (std::size_t sl = 0; sl < slots; ++sl) {
      const double bytes = static_cast<double>(slot_params[sl]) * 4.0;
      if (buckets_.empty() || (filled > 0 && filled + bytes > static_cast<double>(o.bucket_bytes))) {
        Bucket b;
        b.offset = slot_begin[sl];
        buckets_.push_back(b);
        filled = 0;
      }
      filled += bytes;
      buckets_.back().count = slot_begin[sl + 1] - buckets_.back().offset;
      buckets_.back().last_slot = static_cast<int>(sl);
      slot_bucket_.push_back(static_cast<int>(buckets_.size() - 1));
    }
    for (auto& b : buckets_) DTSIM_CUDA(cudaEventCreateWithFlags(&b.ready, cudaEventDisableTiming));
  }
  auto get = [&](void*& p, std::size_t bytes) -> Status {
    auto r = alloc(bytes);
    if (!r) return r.error();
    p = *r;
    return {};
  };
  auto getf = [&](float*& p, std::size_t count) -> Status {
    void* v = nullptr;
    DTSIM_CHECK(get(v, count * 4));
    p = static_cast<float*>(v);
    return {};
  };
  DTSIM_CHECK(getf(w32_, nparams_));
  DTSIM_CHECK(getf(m32_, nparams_));
  DTSIM_CHECK(getf(v32_, nparams_));
  DTSIM_CHECK(getf(g32_, nparams_));
  DTSIM_CHECK(get(w16_, nparams_ * kA));
  // Weights: the same random values on every rank (as DDP broadcasts them); norms at 1 and 0.
  DTSIM_CUDA(gpu::fill_random(w32_, nparams_, Elt::f32, 1234, 0.02f, compute_));
  for (std::size_t at : {lnf_g_}) DTSIM_CUDA(gpu::fill_value(w32_ + at, h, Elt::f32, 1.0f, compute_));
  DTSIM_CUDA(gpu::fill_value(w32_ + lnf_b_, h, Elt::f32, 0.0f, compute_));
  for (const Block& b : blocks_) {
    DTSIM_CUDA(gpu::fill_value(w32_ + b.ln1g, h, Elt::f32, 1.0f, compute_));
    DTSIM_CUDA(gpu::fill_value(w32_ + b.ln1b, h, Elt::f32, 0.0f, compute_));
    DTSIM_CUDA(gpu::fill_value(w32_ + b.ln2g, h, Elt::f32, 1.0f, compute_));
    DTSIM_CUDA(gpu::fill_value(w32_ + b.ln2b, h, Elt::f32, 0.0f, compute_));
  }
  DTSIM_CUDA(cudaMemsetAsync(m32_, 0, nparams_ * 4, compute_));
  DTSIM_CUDA(cudaMemsetAsync(v32_, 0, nparams_ * 4, compute_));
  DTSIM_CUDA(gpu::cast_from_f32(w32_, w16_, nparams_, kAct, compute_));

  const std::size_t T = static_cast<std::size_t>(o.micro_batch) * S;
  const std::size_t bh = static_cast<std::size_t>(o.micro_batch) * g.heads;
  const std::size_t th = T * h * kA, tf = T * f * kA, ss = bh * S * S * kA;
  saved_.resize(static_cast<std::size_t>(g.layers));
  for (Saved& sv : saved_) {
    for (void** p : {&sv.x, &sv.ln1, &sv.q, &sv.k, &sv.v, &sv.ctxm, &sv.h1, &sv.ln2}) DTSIM_CHECK(get(*p, th));
    DTSIM_CHECK(get(sv.p, ss));
    DTSIM_CHECK(get(sv.pd, ss));
    DTSIM_CHECK(get(sv.up, tf));
    DTSIM_CHECK(get(sv.gelu, tf));
    for (float** p : {&sv.m1, &sv.r1, &sv.m2, &sv.r2}) DTSIM_CHECK(getf(*p, T));
  }
  void* tok = nullptr;
  void* tgt = nullptr;
  DTSIM_CHECK(get(tok, T * 4));
  DTSIM_CHECK(get(tgt, T * 4));
  tokens_ = static_cast<std::int32_t*>(tok);
  targets_ = static_cast<std::int32_t*>(tgt);
  DTSIM_CUDA(gpu::fill_tokens(tokens_, T, g.vocab, 77 + static_cast<std::uint64_t>(rank), compute_));
  DTSIM_CUDA(gpu::fill_tokens(targets_, T, g.vocab, 99 + static_cast<std::uint64_t>(rank), compute_));
  DTSIM_CHECK(get(x_last_, th));
  DTSIM_CHECK(get(lnf_, th));
  DTSIM_CHECK(getf(lnf_m_, T));
  DTSIM_CHECK(getf(lnf_r_, T));
  DTSIM_CHECK(get(logits_, T * V * kA));
  DTSIM_CHECK(getf(logprobs_, T * V));
  DTSIM_CHECK(getf(loss_, 1));
  // Scratch (forward and backward buffers that are never live together share memory).
  DTSIM_CHECK(get(scores_, ss));
  d_s1_ = scores_;
  DTSIM_CHECK(get(d_s2_, ss));
  DTSIM_CHECK(get(qkv_, 3 * th));
  d_qkv_ = qkv_;
  DTSIM_CHECK(get(ctx_, th));
  d_ctx_ = ctx_;
  DTSIM_CHECK(get(proj_, th));
  for (void** p : {&d_a_, &d_b_, &d_h_, &d_q_, &d_k_, &d_v_}) DTSIM_CHECK(get(*p, th));
  DTSIM_CHECK(get(d_ff_, tf));
  DTSIM_CHECK(get(d_ff2_, tf));
  DTSIM_CUDA(cudaStreamSynchronize(compute_));
  return {};
}

Status Replica::forward(int index) {
  const int b = o_.micro_batch, s = g_.seq, H = g_.heads, h = g_.hidden, f = g_.ffn, d = h / H, V = g_.vocab;
  const std::int64_t T = static_cast<std::int64_t>(b) * s;
  const int bh = b * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float p = o_.dropout;
  cudaStream_t st = compute_;
  DTSIM_CUDA(gpu::embedding_fwd(tokens_, param(wte_), param(wpe_), saved_[0].x, static_cast<int>(T), s, h, kAct, st));
  for (int l = 0; l < g_.layers; ++l) {
    const Block& w = blocks_[static_cast<std::size_t>(l)];
    Saved& sv = saved_[static_cast<std::size_t>(l)];
    void* out = l + 1 < g_.layers ? saved_[static_cast<std::size_t>(l + 1)].x : x_last_;
    DTSIM_CUDA(gpu::layernorm_fwd(sv.x, master(w.ln1g), master(w.ln1b), sv.ln1, sv.m1, sv.r1, static_cast<int>(T), h, kAct, st));
    DTSIM_CHECK(gemm(linear_fwd(T, 3 * h, h), sv.ln1, param(w.wqkv), qkv_));
    DTSIM_CUDA(gpu::split_qkv(qkv_, sv.q, sv.k, sv.v, b, s, H, d, kAct, st));
    DTSIM_CHECK(gemm(batched(false, true, s, s, d, bh, std::int64_t{s} * d, std::int64_t{s} * d, std::int64_t{s} * s, scale), sv.q, sv.k, scores_));
    DTSIM_CUDA(gpu::softmax_fwd(scores_, sv.p, 1.0f, true, static_cast<std::int64_t>(bh) * s, s, kAct, st));
    DTSIM_CUDA(gpu::dropout_fwd(sv.p, sv.pd, static_cast<std::size_t>(bh) * s * s, p, seed(index, l, 0), kAct, st));
    DTSIM_CHECK(gemm(batched(false, false, s, d, s, bh, std::int64_t{s} * s, std::int64_t{s} * d, std::int64_t{s} * d, 1.0f), sv.pd, sv.v, ctx_));
    DTSIM_CUDA(gpu::merge_heads(ctx_, sv.ctxm, b, s, H, d, kAct, st));
    DTSIM_CHECK(gemm(linear_fwd(T, h, h), sv.ctxm, param(w.wo), proj_));
    DTSIM_CUDA(gpu::dropout_residual_fwd(proj_, sv.x, sv.h1, static_cast<std::size_t>(T) * h, p, seed(index, l, 1), kAct, st));
    DTSIM_CUDA(gpu::layernorm_fwd(sv.h1, master(w.ln2g), master(w.ln2b), sv.ln2, sv.m2, sv.r2, static_cast<int>(T), h, kAct, st));
    DTSIM_CHECK(gemm(linear_fwd(T, f, h), sv.ln2, param(w.wup), sv.up));
    DTSIM_CUDA(gpu::gelu_fwd(sv.up, sv.gelu, static_cast<std::size_t>(T) * f, kAct, st));
    DTSIM_CHECK(gemm(linear_fwd(T, h, f), sv.gelu, param(w.wdown), proj_));
    DTSIM_CUDA(gpu::dropout_residual_fwd(proj_, sv.h1, out, static_cast<std::size_t>(T) * h, p, seed(index, l, 2), kAct, st));
  }
  DTSIM_CUDA(gpu::layernorm_fwd(x_last_, master(lnf_g_), master(lnf_b_), lnf_, lnf_m_, lnf_r_, static_cast<int>(T), h, kAct, st));
  DTSIM_CHECK(gemm(linear_fwd(T, V, h), lnf_, param(wte_), logits_));  // tied: W = wte [V, h]
  DTSIM_CUDA(gpu::cross_entropy_fwd(logits_, targets_, logprobs_, loss_, static_cast<int>(T), V, kAct, st));
  return {};
}

Status Replica::slot_done(int slot) {
  const Bucket& b = buckets_[static_cast<std::size_t>(slot_bucket_[static_cast<std::size_t>(slot)])];
  if (b.last_slot != slot || world_ < 2) return {};
  // The bucket's gradients are final: all-reduce them on the communication stream, overlapping
  // the rest of the backward pass.
  DTSIM_CUDA(cudaEventRecord(b.ready, compute_));
  DTSIM_CUDA(cudaStreamWaitEvent(comm_stream_, b.ready, 0));
  DTSIM_NCCL(ncclAllReduce(grad(b.offset), grad(b.offset), b.count, ncclFloat, ncclSum, comm_, comm_stream_));
  return {};
}

Status Replica::backward(int index) {
  const int b = o_.micro_batch, s = g_.seq, H = g_.heads, h = g_.hidden, f = g_.ffn, d = h / H, V = g_.vocab;
  const std::int64_t T = static_cast<std::int64_t>(b) * s;
  const int bh = b * H;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float p = o_.dropout;
  cudaStream_t st = compute_;
  const std::size_t th = static_cast<std::size_t>(T) * h, tf = static_cast<std::size_t>(T) * f, ss = static_cast<std::size_t>(bh) * s * s;
  // Head: cross-entropy, tied LM head, final norm.
  DTSIM_CUDA(gpu::cross_entropy_bwd(logprobs_, targets_, logits_, static_cast<int>(T), V, kAct, st));
  DTSIM_CHECK(gemm(linear_dgrad(T, V, h), logits_, param(wte_), d_h_));
  DTSIM_CHECK(gemm(linear_wgrad(T, V, h), logits_, lnf_, grad(wte_)));  // first writer of the embedding's gradient
  DTSIM_CUDA(gpu::layernorm_bwd(d_h_, x_last_, master(lnf_g_), lnf_m_, lnf_r_, nullptr, d_a_, grad(lnf_g_), grad(lnf_b_), static_cast<int>(T), h,
                                kAct, st));
  DTSIM_CHECK(slot_done(0));
  void* dout = d_a_;  // gradient of the residual stream above the current block
  void* dh1 = d_b_;
  for (int l = g_.layers - 1; l >= 0; --l) {
    const Block& w = blocks_[static_cast<std::size_t>(l)];
    const Saved& sv = saved_[static_cast<std::size_t>(l)];
    // MLP.
    DTSIM_CUDA(gpu::dropout_bwd(dout, d_h_, th, p, seed(index, l, 2), kAct, st));
    DTSIM_CHECK(gemm(linear_dgrad(T, h, f), d_h_, param(w.wdown), d_ff_));
    DTSIM_CHECK(gemm(linear_wgrad(T, h, f), d_h_, sv.gelu, grad(w.wdown)));
    DTSIM_CUDA(gpu::gelu_bwd(sv.up, d_ff_, d_ff2_, tf, kAct, st));
    DTSIM_CHECK(gemm(linear_dgrad(T, f, h), d_ff2_, param(w.wup), d_h_));
    DTSIM_CHECK(gemm(linear_wgrad(T, f, h), d_ff2_, sv.ln2, grad(w.wup)));
    DTSIM_CUDA(gpu::layernorm_bwd(d_h_, sv.h1, master(w.ln2g), sv.m2, sv.r2, dout, dh1, grad(w.ln2g), grad(w.ln2b), static_cast<int>(T), h,
                                  kAct, st));
    // Attention.
    DTSIM_CUDA(gpu::dropout_bwd(dh1, d_h_, th, p, seed(index, l, 1), kAct, st));
    DTSIM_CHECK(gemm(linear_dgrad(T, h, h), d_h_, param(w.wo), proj_));
    DTSIM_CHECK(gemm(linear_wgrad(T, h, h), d_h_, sv.ctxm, grad(w.wo)));
    DTSIM_CUDA(gpu::split_heads(proj_, d_ctx_, b, s, H, d, kAct, st));
    DTSIM_CHECK(gemm(batched(false, true, s, s, d, bh, std::int64_t{s} * d, std::int64_t{s} * d, std::int64_t{s} * s, 1.0f), d_ctx_, sv.v, d_s1_));
    DTSIM_CHECK(gemm(batched(true, false, s, d, s, bh, std::int64_t{s} * s, std::int64_t{s} * d, std::int64_t{s} * d, 1.0f), sv.pd, d_ctx_, d_v_));
    DTSIM_CUDA(gpu::dropout_bwd(d_s1_, d_s2_, ss, p, seed(index, l, 0), kAct, st));
    DTSIM_CUDA(gpu::softmax_bwd(sv.p, d_s2_, d_s1_, 1.0f, static_cast<std::int64_t>(bh) * s, s, kAct, st));
    DTSIM_CHECK(gemm(batched(false, false, s, d, s, bh, std::int64_t{s} * s, std::int64_t{s} * d, std::int64_t{s} * d, scale), d_s1_, sv.k, d_q_));
    DTSIM_CHECK(gemm(batched(true, false, s, d, s, bh, std::int64_t{s} * s, std::int64_t{s} * d, std::int64_t{s} * d, scale), d_s1_, sv.q, d_k_));
    DTSIM_CUDA(gpu::merge_qkv(d_q_, d_k_, d_v_, d_qkv_, b, s, H, d, kAct, st));
    DTSIM_CHECK(gemm(linear_dgrad(T, 3 * h, h), d_qkv_, param(w.wqkv), d_h_));
    DTSIM_CHECK(gemm(linear_wgrad(T, 3 * h, h), d_qkv_, sv.ln1, grad(w.wqkv)));
    DTSIM_CUDA(gpu::layernorm_bwd(d_h_, sv.x, master(w.ln1g), sv.m1, sv.r1, dh1, dout, grad(w.ln1g), grad(w.ln1b), static_cast<int>(T), h, kAct,
                                  st));
    DTSIM_CHECK(slot_done(g_.layers - l));
  }
  DTSIM_CUDA(gpu::embedding_bwd(tokens_, dout, grad(wte_), grad(wpe_), static_cast<int>(T), s, h, kAct, st));
  DTSIM_CHECK(slot_done(g_.layers + 1));
  (void)index;
  return {};
}

Expected<StepTimes> Replica::step(int index) {
  const auto t0 = std::chrono::steady_clock::now();
  DTSIM_CUDA(cudaSetDevice(device_));
  DTSIM_CUDA(cudaEventRecord(start_, compute_));
  // zero_grad (LayerNorm and position-embedding gradients accumulate), and the loss.
  DTSIM_CUDA(cudaMemsetAsync(g32_, 0, nparams_ * 4, compute_));
  DTSIM_CUDA(cudaMemsetAsync(loss_, 0, 4, compute_));
  DTSIM_CHECK(forward(index));
  DTSIM_CHECK(backward(index));
  if (world_ > 1) {
    DTSIM_CUDA(cudaEventRecord(comm_done_, comm_stream_));
    DTSIM_CUDA(cudaStreamWaitEvent(compute_, comm_done_, 0));
  }
  gpu::AdamConfig adam;
  adam.step = ++adam_step_;
  adam.grad_scale = 1.0f / static_cast<float>(world_);
  DTSIM_CUDA(gpu::adam(w32_, m32_, v32_, g32_, w16_, nparams_, adam, kAct, compute_));
  DTSIM_CUDA(cudaEventRecord(stop_, compute_));
  StepTimes t;
  DTSIM_CUDA(cudaMemcpyAsync(&t.loss, loss_, 4, cudaMemcpyDeviceToHost, compute_));
  DTSIM_CUDA(cudaEventSynchronize(stop_));
  DTSIM_CUDA(cudaStreamSynchronize(compute_));
  float ms = 0;
  DTSIM_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  t.gpu_s = static_cast<double>(ms) * 1e-3;
  t.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

}  // namespace dtsim::workload
