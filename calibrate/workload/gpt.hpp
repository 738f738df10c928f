// The validation workload: one training step of a GPT-style decoder written here in CUDA C++,
// on one GPU, as one rank of data parallelism (DDP: gradient buckets all-reduced with NCCL on a
// second stream while the backward pass goes on).
//
// The architecture is what dtsim's transformer program models with `attention: standard`
// (workloads/program.cpp), so that `dtsim validate` compares like with like:
//   token + learned position embeddings; per block: pre-LayerNorm, QKV projection, scores
//   (batched GEMM, scaled by 1/sqrt(d)), causal softmax, attention dropout, context (batched
//   GEMM), output projection, dropout + residual, pre-LayerNorm, MLP up (4h), GELU, MLP down,
//   dropout + residual; final LayerNorm, LM head tied to the token embedding, cross-entropy in
//   fp32. No biases (the simulator's `bias: false`). bf16 activations and GEMMs (fp32
//   accumulation), fp32 weight gradients (cuBLASLt writes them directly), fp32 all-reduce, Adam on
//   fp32 master weights writing the bf16 copy.
// Kernels the simulator does not list: splitting QKV into heads and merging the context back
// (two layout copies per block and their backward), zeroing the gradients once per step, and the
// LayerNorm weight-gradient reduction; docs/calibration.md says so.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/harness/gemm.hpp"
#include "calibrate/harness/kernels.hpp"
#include "sim/expected.hpp"

namespace dtsim::workload {

struct GptShape {
  std::string name;
  int hidden = 768, layers = 12, heads = 12, ffn = 3072, vocab = 50304, seq = 1024;
  std::int64_t parameters() const;  // every weight (no biases; tied LM head)
};

struct StepOptions {
  int micro_batch = 1;
  float dropout = 0.1f;
  std::int64_t bucket_bytes = 25'000'000;  // PyTorch DDP's default
};

struct StepTimes {
  double gpu_s = 0;   // events around the step on the compute stream
  double host_s = 0;  // host wall time of the step, synchronized at its end
  float loss = 0;
};

// One GPU's replica: weights, optimizer state, activations, streams.
class Replica {
 public:
  Replica() = default;
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;
  ~Replica();

  // Device memory the replica will take (to skip points that cannot fit).
  static std::size_t bytes_needed(const GptShape& g, const StepOptions& o);

  // comm may be null (one GPU: no all-reduce).
  Status init(const GptShape& g, const StepOptions& o, int device, int rank, int world, ncclComm_t comm);
  Expected<StepTimes> step(int index);
  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Block {
    std::size_t ln1g, ln1b, wqkv, wo, ln2g, ln2b, wup, wdown;  // offsets into the flat parameters
  };
  struct Saved {  // activations kept for the backward pass
    void *x, *ln1, *q, *k, *v, *p, *pd, *ctxm, *h1, *ln2, *up, *gelu;
    float *m1, *r1, *m2, *r2;
  };
  struct Bucket {
    std::size_t offset = 0, count = 0;  // in the flat gradient
    int last_slot = 0;                  // the slot whose backward completes it
    cudaEvent_t ready = nullptr;
  };

  Status forward(int index);
  Status backward(int index);
  Status slot_done(int slot);
  Status gemm(const harness::GemmCall& c, const void* a, const void* b, void* out);
  void* param(std::size_t off) const { return static_cast<char*>(w16_) + off * 2; }
  float* master(std::size_t off) const { return w32_ + off; }
  float* grad(std::size_t off) const { return g32_ + off; }
  std::uint64_t seed(int index, int layer, int site) const;

  GptShape g_;
  StepOptions o_;
  int device_ = 0, rank_ = 0, world_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr, comm_done_ = nullptr;
  harness::GemmRunner gemm_;
  std::vector<void*> allocations_;

  std::size_t nparams_ = 0;
  float *w32_ = nullptr, *m32_ = nullptr, *v32_ = nullptr, *g32_ = nullptr;
  void* w16_ = nullptr;
  std::size_t lnf_g_ = 0, lnf_b_ = 0, wte_ = 0, wpe_ = 0;
  std::vector<Block> blocks_;
  std::vector<Saved> saved_;
  std::vector<Bucket> buckets_;
  std::vector<int> slot_bucket_;

  std::int32_t* tokens_ = nullptr;
  std::int32_t* targets_ = nullptr;
  void *x_last_ = nullptr, *lnf_ = nullptr, *logits_ = nullptr;
  float *lnf_m_ = nullptr, *lnf_r_ = nullptr, *logprobs_ = nullptr, *loss_ = nullptr;
  // Scratch: forward (scores, context, projections) and backward gradients.
  void *scores_ = nullptr, *ctx_ = nullptr, *proj_ = nullptr, *qkv_ = nullptr;
  void *d_a_ = nullptr, *d_b_ = nullptr, *d_h_ = nullptr, *d_ff_ = nullptr, *d_ff2_ = nullptr, *d_qkv_ = nullptr;
  void *d_q_ = nullptr, *d_k_ = nullptr, *d_v_ = nullptr, *d_ctx_ = nullptr, *d_s1_ = nullptr, *d_s2_ = nullptr;
  int adam_step_ = 0;
};

}  // namespace dtsim::workload
