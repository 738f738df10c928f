// Prints dtsim's predictions next to the published nccl-tests all-reduce curves of
// data/published/nccl-allreduce-8gpu-published.csv as Markdown (the table in docs/validation.md).
// Usage: dtsim-compare-published [CSV]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "calibrate/published.hpp"
#include "config/hardware.hpp"

namespace {

struct Target {
  const char* system;
  const char* preset;
  std::optional<dtsim::comm::Algo> algo;
  const char* what;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dtsim;
  const std::string csv = argc > 1 ? argv[1] : std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-allreduce-8gpu-published.csv";
  auto rows = calibrate::read_published_busbw(csv);
  if (!rows) {
    std::fprintf(stderr, "error: %s\n", rows.error().message.c_str());
    return 2;
  }
  const Target targets[] = {
      {"azure-nd-h100-v5", "dgx-h100", comm::Algo::nvls, "dgx-h100 preset, `--algo nvls` (the source forced NVLS)"},
      {"azure-nd-a100-v4", "dgx-a100-80g", std::nullopt, "dgx-a100-80g preset, `--algo auto` (the source used NCCL's default)"},
  };
  for (const Target& t : targets) {
    std::vector<calibrate::PublishedBusbw> mine;
    for (const auto& r : *rows) {
      if (r.system == t.system) mine.push_back(r);
    }
    config::LoadContext ctx;
    auto spec = config::load_cluster(config::ClusterRequest{t.preset, 1, std::nullopt}, ctx);
    if (!spec) {
      std::fputs(ctx.diagnostics.to_string().c_str(), stderr);
      return 1;
    }
    auto topo = hw::Topology::build(*spec);
    const int per_thread = mine.empty() ? 1 : calibrate::published_gpus_per_thread(mine[0]);
    const auto cmp = calibrate::predict_allreduce(*topo, comm::CommParams::nccl_defaults(), mine, t.algo, per_thread);
    std::printf("### %s (%s) vs dtsim %s\n\n", t.system, mine.empty() ? "" : mine[0].gpu.c_str(), t.what);
    std::printf("| size | measured busbw (GB/s) | dtsim busbw (GB/s) | dtsim algo | error |\n|---:|---:|---:|---|---:|\n");
    std::vector<double> small, large;
    for (const auto& c : cmp) {
      std::printf("| %s | %.2f | %.2f | %s | %+.1f%% |\n", to_string(Bytes(c.bytes)).c_str(), c.measured_GBps, c.predicted_GBps,
                  c.algo.c_str(), 100 * c.error());
      (c.bytes >= (std::int64_t{64} << 20) ? large : small).push_back(std::fabs(c.error()));
    }
    std::printf("\nMedian absolute error: %.1f%% for sizes >= 64 MiB (%zu points), %.1f%% below (%zu points).\n\n",
                100 * median(large), large.size(), 100 * median(small), small.size());
  }
  return 0;
}
