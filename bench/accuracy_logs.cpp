// The published nccl-tests logs of data/published/nccl-tests/ (docs/validation.md, "NCCL
// all-reduce across nodes"): each compared as `dtsim collective --cluster C --compare LOG` does,
// preset defaults, from 1 MiB up (issue 12's multi-node target counts sizes from 1 MiB).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bench/accuracy.hpp"
#include "calibrate/log_compare.hpp"
#include "comm/params.hpp"
#include "config/hardware.hpp"
#include "sim/units.hpp"

namespace dtsim::accuracy {

namespace {

constexpr std::int64_t kFromBytes = std::int64_t{1} << 20;

struct LogTarget {
  const char* dataset;  // registry id
  const char* log;      // under data/published/nccl-tests/
  const char* what;     // the table's first column
  const char* cluster;  // node preset (with `nodes`) or a cluster file under the repository
  std::optional<int> nodes;
  std::optional<int> gpus;  // when the log's rank lines list only some ranks
  const char* algo = "auto";   // --algo as a user types it (NCCL_ALGO's syntax for a list)
  const char* proto = "auto";  // --proto likewise
  // --set comm.NAME=VALUE for the run's stated NCCL settings (an environment variable the source
  // names), as "NAME=VALUE"
  std::vector<std::string> sets = {};
};

bool is_file(const char* cluster) { return std::string(cluster).find('/') != std::string::npos; }

// The `dtsim collective` options that run the same comparison, for the table.
std::string options(const LogTarget& t) {
  std::string o = fmt::format("--cluster {}", t.cluster);
  if (t.nodes && !is_file(t.cluster) && *t.nodes > 1) o += fmt::format(" --nodes {}", *t.nodes);
  if (t.gpus) o += fmt::format(" --gpus {}", *t.gpus);
  if (std::string_view(t.algo) != "auto") o += fmt::format(" --algo {}", t.algo);
  if (std::string_view(t.proto) != "auto") o += fmt::format(" --proto {}", t.proto);
  for (const auto& s : t.sets) o += fmt::format(" --set comm.{}", s);
  return "`" + o + "`";
}

std::string cluster_path(const char* c) { return is_file(c) ? std::string(DTSIM_SOURCE_DIR) + "/" + c : std::string(c); }

}  // namespace

Status nccl_logs(const config::Registry& reg, Results& out) {
  const LogTarget targets[] = {
      {"nccl-tests-290-h100", "all_reduce_perf-1x-h100-default.log", "1 H100 node, NCCL's default (NVLS), `-g 8`", "dgx-h100", 1, std::nullopt,
       "auto"},
      {"nccl-issue-1047-h100-reducescatter", "reduce_scatter_perf-1x-h100-ring.log", "1 H100 node, reduce-scatter, NCCL's ring", "dgx-h100", 1,
       std::nullopt, "auto"},
      {"coreweave-4x-a100-sharp-allreduce", "all_reduce_perf-4x-a100-ib-sharp.log", "4 HGX A100 nodes, HDR InfiniBand with SHARP (CoreWeave)",
       "dgx-a100-80g", 4, 32, "auto"},
      {"nccl-tests-119-a100-4nic", "all_reduce_perf-3x-a100-4nic-tail.log", "3 A100 40GB servers, 4 x HDR NICs each (six rows)",
       "examples/clusters/a100-40g-4nic-3node.yaml", std::nullopt, std::nullopt, "auto"},
      {"gcp-a3-mega-tcpxo-allreduce", "all_reduce_perf-2x-h100-a3mega-tcpxo.log",
       "2 Google Cloud A3 Mega VMs, 8 x 200 Gb/s GPUDirect-TCPXO, its profile's `NCCL_ALGO=Ring,Tree` `NCCL_PROTO=Simple` `NCCL_BUFFSIZE=8388608`",
       "examples/clusters/gcp-a3-mega-2node.yaml", std::nullopt, std::nullopt, "ring,tree", "Simple", {"buffsize=8M"}},
      {"nccl-tests-309-h100-ib-logs", "all_reduce_perf-2x-h100-ndr-xe9680.log", "2 HGX H100 servers, 8 x NDR each, NCCL 2.26.2, default", "dgx-h100", 2,
       std::nullopt, "auto"},
      {"nccl-tests-309-h100-ib-logs", "all_reduce_perf-4x-h100-ndr-vm.log", "the same servers as 4 VMs", "dgx-h100", 4, std::nullopt, "auto"},
      {"nccl-tests-309-h100-ib400-scaling", "all_reduce_perf-2x-h100-ib400-default.log", "2 H100 nodes of an 8-node IB 400G cluster, default", "dgx-h100",
       2, std::nullopt, "auto"},
      {"nccl-tests-309-h100-ib400-scaling", "all_reduce_perf-4x-h100-ib400-default.log", "4 nodes of it, default", "dgx-h100", 4, std::nullopt,
       "auto"},
      {"nccl-tests-309-h100-ib400-scaling", "all_reduce_perf-8x-h100-ib400-default.log", "all 8 nodes, default", "dgx-h100", 8, std::nullopt,
       "auto"},
      {"nccl-tests-309-h100-ib400-scaling", "all_reduce_perf-8x-h100-ib400-minctas24.log", "all 8 nodes, `NCCL_MIN_CTAS=24` (benchmark tuning)",
       "dgx-h100", 8, std::nullopt, "auto"},
      {"nccl-tests-309-h100-ib400-scaling", "all_reduce_perf-2x-h100-ib400-ring.log", "2 nodes, `NCCL_ALGO=Ring` with the same tuning", "dgx-h100", 2,
       std::nullopt, "ring"},
      {"dstack-nebius-h100-ib", "all_reduce_perf-2x-h100-nebius.log", "2 Nebius H100 VMs, InfiniBand", "dgx-h100", 2, std::nullopt, "auto"},
      {"oci-h100-roce-allreduce", "all_reduce_perf-2x-h100-oci-roce.log", "2 Oracle Cloud H100 nodes, RoCE v2, 16 x 200 Gb/s each, NCCL 2.21.5, default",
       "examples/clusters/oci-h100-roce-2node.yaml", std::nullopt, std::nullopt, "auto"},
      {"oci-a100-1node-allreduce", "all_reduce_perf-1x-a100-oci.log", "1 Oracle Cloud A100 40GB node, NCCL's default, `-g 8` (NCCL version not printed)",
       "dgx-a100-40g", 1, std::nullopt, "auto"},
      {"playground-a100-sendrecv", "sendrecv_perf-1x-a100-g8.log", "1 A100 node, send/recv (each rank to the next), `-g 8` (NCCL version not printed)",
       "dgx-a100-80g", 1, 8, "auto"},
      {"nccl-tests-290-h100", "all_reduce_perf-2x-h100-ndr-default.log", "2 H100 nodes, NDR, default (a cluster its reporter found degraded)",
       "dgx-h100", 2, std::nullopt, "auto"},
      {"nccl-tests-290-h100", "all_reduce_perf-2x-h100-ndr-ring.log", "the same 2 nodes, `NCCL_ALGO=RING`", "dgx-h100", 2, std::nullopt,
       "ring"},
  };
  // Every constant of the registry: a log that fed any of them would be in-sample.
  std::vector<std::string> constants;
  for (const auto& c : reg.constants) constants.push_back(c.name);
  std::string md = "| log | dtsim options | sizes compared | points | median abs. error | worst abs. error | dtsim picks | dataset |\n"
                   "|---|---|---|---:|---:|---:|---|---|\n";
  for (const LogTarget& t : targets) {
    const std::string path = std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-tests/" + t.log;
    auto log = calibrate::read_nccl_tests(path);
    if (!log) return log.error();
    config::LoadContext ctx;
    auto spec = config::load_cluster(config::ClusterRequest{cluster_path(t.cluster), t.nodes, std::nullopt}, ctx);
    if (!spec) return Error(ctx.diagnostics.to_string());
    auto topo = hw::Topology::build(*spec);
    if (!topo) return topo.error();
    calibrate::LogCompareOptions opt;
    auto choice = comm::parse_selection(t.algo, t.proto);
    if (!choice) return Error(fmt::format("{}: --{}: {}", t.log, choice.error().field, choice.error().message));
    opt.choice = *choice;
    opt.gpus = t.gpus;
    comm::CommParams params = comm::CommParams::nccl_defaults();
    for (const auto& set : t.sets) {
      const auto eq = set.find('=');
      if (eq == std::string::npos) return Error(fmt::format("{}: set '{}' is not NAME=VALUE", t.log, set));
      if (auto st = comm::set_comm_param(params, set.substr(0, eq), set.substr(eq + 1)); !st) return Error(fmt::format("{}: --set comm.{}: {}", t.log, set, st.error().message));
    }
    auto cmp = calibrate::compare_log(*topo, params, *log, opt);
    if (!cmp) return Error(fmt::format("{}: {}", path, cmp.error().message));
    const std::string fit = fit_of(reg, t.dataset, constants);
    std::vector<std::string> algos;
    std::int64_t lo = 0, hi = 0;
    int points = 0;
    for (const auto& p : cmp->points) {
      if (p.bytes < kFromBytes) continue;
      if (lo == 0) lo = p.bytes;
      hi = p.bytes;
      ++points;
      if (std::find(algos.begin(), algos.end(), p.algo) == algos.end()) algos.push_back(p.algo);
      out.figures.push_back(Figure{t.dataset, fmt::format("{} {}", t.log, to_string(Bytes(p.bytes))), p.measured_busbw_GBps, p.simulated_busbw_GBps, fit});
    }
    if (points == 0) return Error(fmt::format("{}: no size of 1 MiB or more", path));
    std::string picks;
    for (const auto& a : algos) picks += (picks.empty() ? "" : ", ") + a;
    md += fmt::format("| {} | {} | {}-{} | {} | {:.1f}% | {:.1f}% | {} | `{}` ({}) |\n", t.what, options(t), to_string(Bytes(lo)), to_string(Bytes(hi)),
                      points, 100 * calibrate::median_abs_error(cmp->points, kFromBytes), 100 * calibrate::max_abs_error(cmp->points, kFromBytes), picks,
                      t.dataset, fit);
  }
  out.sections.push_back(Section{"nccl-logs", md});
  return {};
}

}  // namespace dtsim::accuracy
