#include "calibrate/harness/gemm.hpp"

#include <string>

#include "calibrate/harness/check.hpp"

namespace dtsim::harness {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_(unknown)";
  }
}

const char* to_string(GemmKind k) {
  switch (k) {
    case GemmKind::fp32: return "fp32";
    case GemmKind::tf32: return "tf32";
    case GemmKind::bf16: return "bf16";
    case GemmKind::fp16: return "fp16";
    case GemmKind::fp8: return "fp8";
  }
  return "?";
}

bool parse_gemm_kind(const std::string& s, GemmKind& out) {
  for (GemmKind k : {GemmKind::fp32, GemmKind::tf32, GemmKind::bf16, GemmKind::fp16, GemmKind::fp8}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

gpu::Elt input_elt(GemmKind k) {
  switch (k) {
    case GemmKind::fp32:
    case GemmKind::tf32: return gpu::Elt::f32;
    case GemmKind::bf16: return gpu::Elt::bf16;
    case GemmKind::fp16: return gpu::Elt::f16;
    case GemmKind::fp8: return gpu::Elt::f8e4m3;
  }
  return gpu::Elt::f32;
}

gpu::Elt output_elt(GemmKind k) { return k == GemmKind::fp8 ? gpu::Elt::bf16 : input_elt(k); }

namespace {

cudaDataType_t cuda_type(gpu::Elt e) {
  switch (e) {
    case gpu::Elt::f32: return CUDA_R_32F;
    case gpu::Elt::f16: return CUDA_R_16F;
    case gpu::Elt::bf16: return CUDA_R_16BF;
    case gpu::Elt::f8e4m3: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

std::int64_t ld_or(std::int64_t ld, std::int64_t packed) { return ld > 0 ? ld : packed; }

}  // namespace

// Stored row-major shapes: A is M x K (K x M when transposed), B is K x N (N x K when transposed).
std::size_t GemmCall::a_elems() const {
  const std::int64_t rows = trans_a ? k : m, cols = trans_a ? m : k;
  const std::int64_t one = (rows - 1) * ld_or(lda, cols) + cols;
  return static_cast<std::size_t>(batch > 1 ? (batch - 1) * (stride_a > 0 ? stride_a : one) + one : one);
}

std::size_t GemmCall::b_elems() const {
  const std::int64_t rows = trans_b ? n : k, cols = trans_b ? k : n;
  const std::int64_t one = (rows - 1) * ld_or(ldb, cols) + cols;
  return static_cast<std::size_t>(batch > 1 ? (batch - 1) * (stride_b > 0 ? stride_b : one) + one : one);
}

std::size_t GemmCall::c_elems() const {
  const std::int64_t one = (m - 1) * ld_or(ldc, n) + n;
  return static_cast<std::size_t>(batch > 1 ? (batch - 1) * (stride_c > 0 ? stride_c : one) + one : one);
}

GemmRunner::~GemmRunner() {
  for (auto& [key, p] : plans_) destroy(p);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void GemmRunner::destroy(Plan& p) {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  if (p.op) cublasLtMatmulDescDestroy(p.op);
  p = Plan{};
}

Status GemmRunner::init(std::size_t workspace_bytes) {
  DTSIM_CUBLAS(cublasLtCreate(&handle_));
  workspace_bytes_ = workspace_bytes;
  DTSIM_CUDA(cudaMalloc(&workspace_, workspace_bytes_));
  return {};
}

Expected<GemmRunner::Plan*> GemmRunner::plan(const GemmCall& c) {
  const std::string key = std::to_string(static_cast<int>(c.kind)) + c.layout() + "/" + std::to_string(c.m) + "x" + std::to_string(c.n) +
                          "x" + std::to_string(c.k) + "/" + std::to_string(c.lda) + "," + std::to_string(c.ldb) + "," +
                          std::to_string(c.ldc) + "/" + std::to_string(c.batch) + ":" + std::to_string(c.stride_a) + "," +
                          std::to_string(c.stride_b) + "," + std::to_string(c.stride_c) + (c.out_f32 ? "/f32" : "");
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;
  if (c.kind == GemmKind::fp8 && (c.trans_a || !c.trans_b)) {
    return Error("fp8 GEMMs run in cuBLASLt's TN layout only (row-major NT: Y = X W^T)");
  }
  Plan p;
  const cudaDataType_t in = cuda_type(input_elt(c.kind));
  const cudaDataType_t out = c.out_f32 ? CUDA_R_32F : cuda_type(output_elt(c.kind));
  const cublasComputeType_t compute = c.kind == GemmKind::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  auto fail = [&](Error e) {
    destroy(p);
    return e;
  };
  auto make = [&]() -> Status {
    DTSIM_CUBLAS(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
    // cuBLASLt's A is our B, its B our A (C^T = op(B)^T op(A)^T in column-major terms).
    const cublasOperation_t op_a = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    DTSIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    DTSIM_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const std::uint64_t a_rows = static_cast<std::uint64_t>(c.trans_b ? c.k : c.n), a_cols = static_cast<std::uint64_t>(c.trans_b ? c.n : c.k);
    const std::uint64_t b_rows = static_cast<std::uint64_t>(c.trans_a ? c.m : c.k), b_cols = static_cast<std::uint64_t>(c.trans_a ? c.k : c.m);
    DTSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, in, a_rows, a_cols, ld_or(c.ldb, static_cast<std::int64_t>(a_rows))));
    DTSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, in, b_rows, b_cols, ld_or(c.lda, static_cast<std::int64_t>(b_rows))));
    DTSIM_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, out, static_cast<std::uint64_t>(c.n), static_cast<std::uint64_t>(c.m), ld_or(c.ldc, c.n)));
    if (c.batch > 1) {
      const std::int32_t batch = c.batch;
      for (auto [layout, stride] : {std::pair{p.a, c.stride_b}, std::pair{p.b, c.stride_a}, std::pair{p.c, c.stride_c}}) {
        DTSIM_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
        DTSIM_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    DTSIM_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = workspace_bytes_;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    DTSIM_CUBLAS(st);
    if (found == 0) return Error("cuBLASLt has no algorithm for this GEMM");
    p.algo = result.algo;
    return {};
  };
  if (auto st = make(); !st) {
    return fail(Error(std::string(to_string(c.kind)) + " " + c.layout() + " " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                      std::to_string(c.k) + (c.batch > 1 ? " batch " + std::to_string(c.batch) : "") + ": " + st.error().message));
  }
  return &plans_.emplace(key, p).first->second;
}

Status GemmRunner::run(const GemmCall& c, const void* a, const void* b, void* out, cudaStream_t stream) {
  auto p = plan(c);
  if (!p) return p.error();
  DTSIM_CUBLAS(cublasLtMatmul(handle_, (*p)->op, &c.alpha, b, (*p)->a, a, (*p)->b, &c.beta, out, (*p)->c, out, (*p)->c, &(*p)->algo,
                              workspace_, workspace_bytes_, stream));
  return {};
}

}  // namespace dtsim::harness
