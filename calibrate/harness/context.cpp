#include "calibrate/harness/context.hpp"

#include <cstdio>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/kernels.hpp"

namespace dtsim::harness {

void Context::record(const std::string& suite, const std::string& point, const nlohmann::json& params,
                     const Expected<nlohmann::json>& result) {
  if (!result) ++failures;
  if (!log) return;
  nlohmann::json r{{"schema", calibrate::kCalibrateSchema}, {"suite", suite}, {"point", point}, {"status", result ? "ok" : "error"},
                   {"params", params}, {"device", device}, {"run", run}};
  if (result) r["result"] = *result;
  else r["error"] = result.error().message;
  if (auto st = log->append(r); !st) std::fprintf(stderr, "dtsim-calibrate: %s\n", st.error().message.c_str());
}

void Context::skipped(const std::string& suite, const std::string& point, const nlohmann::json& params, const std::string& why) {
  if (!log) return;
  nlohmann::json r{{"schema", calibrate::kCalibrateSchema}, {"suite", suite}, {"point", point}, {"status", "skipped"}, {"error", why},
                   {"params", params}, {"device", device}, {"run", run}};
  if (auto st = log->append(r); !st) std::fprintf(stderr, "dtsim-calibrate: %s\n", st.error().message.c_str());
}

Arena::~Arena() { release(); }

void Arena::release() {
  for (auto& b : bufs_) {
    if (b.p) cudaFree(b.p);
    b = Buf{};
  }
}

Expected<void*> Arena::get(int slot, std::size_t bytes, int fill_elt, cudaStream_t stream) {
  if (static_cast<std::size_t>(slot) >= bufs_.size()) bufs_.resize(static_cast<std::size_t>(slot) + 1);
  Buf& b = bufs_[static_cast<std::size_t>(slot)];
  if (b.bytes < bytes) {
    if (b.p) cudaFree(b.p);
    b = Buf{};
    DTSIM_CUDA(cudaMalloc(&b.p, bytes));
    b.bytes = bytes;
    const auto elt = static_cast<gpu::Elt>(fill_elt);
    const std::size_t n = bytes / gpu::elt_bytes(elt);
    DTSIM_CUDA(gpu::fill_random(b.p, n, elt, 0x5eed0000u + static_cast<unsigned>(slot), 1.0f, stream));
    DTSIM_CUDA(cudaStreamSynchronize(stream));
  }
  return b.p;
}

std::string bytes_label(std::int64_t b) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  std::int64_t v = b;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + units[u];
}

}  // namespace dtsim::harness
