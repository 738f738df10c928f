// dtsim-gpu-info: prints the facts dtsim records with every GPU measurement (device, SM count,
// clocks, memory, driver, CUDA runtime, cuBLAS and NCCL versions) as one JSON object per device.
// Exit code 77 when there is no GPU, so that CTest can mark GPU tests as skipped.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>

#ifdef DTSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace {

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "dtsim-gpu-info: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "dtsim-gpu-info: no CUDA device (%s)\n", e == cudaSuccess ? "none found" : cudaGetErrorString(e));
    return 77;
  }
  int driver = 0, runtime = 0;
  if (!check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion")) return 1;
  if (!check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion")) return 1;
  const size_t cublaslt = cublasLtGetVersion();
  int nccl = 0;
#ifdef DTSIM_HAVE_NCCL
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = -1;
#endif
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (!check(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties")) return 1;
    int clock_khz = 0, mem_clock_khz = 0, bus_width = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, d);
    cudaDeviceGetAttribute(&bus_width, cudaDevAttrGlobalMemoryBusWidth, d);
    std::printf(
        "{\"device\": %d, \"name\": \"%s\", \"compute_capability\": \"%d.%d\", \"sms\": %d, \"sm_clock_khz\": %d, "
        "\"memory_bytes\": %zu, \"memory_clock_khz\": %d, \"memory_bus_bits\": %d, \"l2_bytes\": %d, "
        "\"driver_version\": %d, \"cuda_runtime_version\": %d, \"cublaslt_version\": %zu, \"nccl_version\": %d}\n",
        d, p.name, p.major, p.minor, p.multiProcessorCount, clock_khz, p.totalGlobalMem, mem_clock_khz, bus_width, p.l2CacheSize,
        driver, runtime, cublaslt, nccl);
  }
  return 0;
}
