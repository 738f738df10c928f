// Error checking for CUDA, cuBLASLt and NCCL calls in the harness: a failed call becomes an
// Error value naming the file, line and call (nccl-tests' CUDACHECK/NCCLCHECK, but returned to
// the caller so that one failed point is recorded and the run goes on, never exit()).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "sim/expected.hpp"

namespace dtsim::harness {

inline Error call_error(const char* file, int line, const char* call, const std::string& what) {
  std::string f = file;
  const auto slash = f.rfind('/');
  if (slash != std::string::npos) f = f.substr(slash + 1);
  return Error(f + ":" + std::to_string(line) + ": " + call + ": " + what);
}

const char* cublas_status_name(cublasStatus_t s);

}  // namespace dtsim::harness

// In a function returning Status or Expected<T>.
#define DTSIM_CUDA(call)                                                                                    \
  do {                                                                                                      \
    const cudaError_t dtsim_e_ = (call);                                                                    \
    if (dtsim_e_ != cudaSuccess) {                                                                          \
      return ::dtsim::harness::call_error(__FILE__, __LINE__, #call, cudaGetErrorString(dtsim_e_));         \
    }                                                                                                       \
  } while (0)

#define DTSIM_CUBLAS(call)                                                                                  \
  do {                                                                                                      \
    const cublasStatus_t dtsim_s_ = (call);                                                                 \
    if (dtsim_s_ != CUBLAS_STATUS_SUCCESS) {                                                                \
      return ::dtsim::harness::call_error(__FILE__, __LINE__, #call, ::dtsim::harness::cublas_status_name(dtsim_s_)); \
    }                                                                                                       \
  } while (0)

// Propagates an error Status/Expected from a call.
#define DTSIM_CHECK(expr)                     \
  do {                                        \
    auto dtsim_st_ = (expr);                  \
    if (!dtsim_st_) return dtsim_st_.error(); \
  } while (0)
