#include "calibrate/harness/facts.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "calibrate/harness/bootstrap.hpp"
#include "calibrate/harness/check.hpp"

#ifdef DTSIM_HAVE_NCCL
#include <nccl.h>
#endif

namespace dtsim::harness {

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

Expected<nlohmann::json> device_facts(int device) {
  cudaDeviceProp p{};
  DTSIM_CUDA(cudaGetDeviceProperties(&p, device));
  int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
  DTSIM_CUDA(cudaDriverGetVersion(&driver));
  DTSIM_CUDA(cudaRuntimeGetVersion(&runtime));
  DTSIM_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  DTSIM_CUDA(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, device));
  DTSIM_CUDA(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  char bus[32] = {};
  DTSIM_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  int nccl = 0;
#ifdef DTSIM_HAVE_NCCL
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = -1;
#endif
  return nlohmann::json{{"name", p.name},
                        {"device", device},
                        {"pci_bus", bus},
                        {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
                        {"sms", p.multiProcessorCount},
                        {"sm_clock_khz", clock_khz},
                        {"memory_bytes", p.totalGlobalMem},
                        {"memory_clock_khz", mem_clock_khz},
                        {"memory_bus_bits", bus_bits},
                        {"l2_bytes", p.l2CacheSize},
                        {"driver_version", driver},
                        {"cuda_runtime_version", runtime},
                        {"cublaslt_version", cublasLtGetVersion()},
                        {"nccl_version", nccl}};
}

nlohmann::json run_facts(int argc, char** argv, int rank, int ranks, int nodes) {
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  char date[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  nlohmann::json env = nlohmann::json::object();
  for (const char* v : {"NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "CUDA_VISIBLE_DEVICES",
                        "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE"}) {
    if (const char* val = std::getenv(v)) env[v] = val;
  }
  return {{"host", hostname()}, {"date", date}, {"command", cmd}, {"rank", rank}, {"ranks", ranks}, {"nodes", nodes}, {"env", env}};
}

}  // namespace dtsim::harness
