// Matrix products through cuBLASLt, in row-major terms (as a training framework thinks of them):
// C[M, N] = alpha op(A)[M, K] op(B)[K, N] + beta C, optionally batched with strides. The call is
// mapped onto cuBLASLt's column-major interface (C^T = op(B)^T op(A)^T); plans (descriptors and
// the heuristic's first algorithm, as PyTorch takes it) are cached per shape.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>

#include "calibrate/harness/kernels.hpp"
#include "sim/expected.hpp"

namespace dtsim::harness {

// Math of a GEMM: fp32 (no tensor cores), tf32 (fp32 data, tf32 tensor cores), bf16 and fp16
// (fp32 accumulation), fp8 (e4m3 inputs, bf16 output, fp32 accumulation; needs compute
// capability 8.9 and op(A) = A, op(B) = B^T, i.e. cuBLASLt's "TN").
enum class GemmKind { fp32, tf32, bf16, fp16, fp8 };
const char* to_string(GemmKind k);
bool parse_gemm_kind(const std::string& s, GemmKind& out);
gpu::Elt input_elt(GemmKind k);
gpu::Elt output_elt(GemmKind k);  // without out_f32

struct GemmCall {
  GemmKind kind = GemmKind::bf16;
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t lda = 0, ldb = 0, ldc = 0;  // row-major leading dimensions; 0: packed
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch items
  bool out_f32 = false;  // fp32 C (weight gradients of mixed-precision training)
  float alpha = 1.0f, beta = 0.0f;

  // Row-major layout letters: "NT" is Y = X W^T (a linear layer's forward).
  std::string layout() const { return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N"); }
  std::size_t a_elems() const;
  std::size_t b_elems() const;
  std::size_t c_elems() const;
};

class GemmRunner {
 public:
  GemmRunner() = default;
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;
  ~GemmRunner();

  Status init(std::size_t workspace_bytes = std::size_t{32} << 20);
  Status run(const GemmCall& c, const void* a, const void* b, void* out, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Expected<Plan*> plan(const GemmCall& c);
  static void destroy(Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<std::string, Plan> plans_;
};

}  // namespace dtsim::harness
