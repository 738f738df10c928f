// NCCL all-reduce, GEMM and HBM figures (docs/validation.md), and the helpers shared by all.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "bench/accuracy.hpp"
#include "calibrate/published.hpp"
#include "config/hardware.hpp"
#include "workloads/compute.hpp"

namespace dtsim::accuracy {

std::string fit_of(const config::Registry& reg, const std::string& dataset, const std::vector<std::string>& constants) {
  return reg.fed_any(dataset, constants) ? "in-sample" : "held-out";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string thousands(double v) {
  const std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string out = v < 0 && digits != "0" ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

Expected<std::vector<std::vector<std::pair<std::string, std::string>>>> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(fmt::format("{}: cannot be read", path));
  std::vector<std::vector<std::pair<std::string, std::string>>> rows;
  std::vector<std::string> header;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (cells.size() != header.size()) return Error(fmt::format("{}:{}: {} fields where the header has {}", path, n, cells.size(), header.size()));
    std::vector<std::pair<std::string, std::string>> row;
    for (std::size_t i = 0; i < cells.size(); ++i) row.emplace_back(header[i], cells[i]);
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return Error(fmt::format("{}: no rows", path));
  return rows;
}

std::string field(const std::vector<std::pair<std::string, std::string>>& row, const std::string& name) {
  for (const auto& [k, v] : row) {
    if (k == name) return v;
  }
  return {};
}

namespace {

std::string source_path(const std::string& rel) { return std::string(DTSIM_SOURCE_DIR) + "/" + rel; }

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }

Expected<hw::GpuSpec> gpu_of(const std::string& node) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{node, 1, std::nullopt}, ctx);
  if (!spec) return Error(ctx.diagnostics.to_string());
  return spec->groups[0].node.gpu;
}

}  // namespace

Status nccl_allreduce(const config::Registry& reg, Results& out) {
  struct Target {
    const char* dataset;
    const char* system;
    const char* preset;
    std::optional<comm::Algo> algo;
    const char* what;
    std::vector<std::string> constants;  // the registry constants these predictions use
  };
  const Target targets[] = {
      {"azure-nd-h100-v5-allreduce", "azure-nd-h100-v5", "dgx-h100", comm::Algo::nvls,
       "dgx-h100 preset, `--algo nvls` (the source forced NVLS)",
       {"links.nvlink4.efficiency", "comm.nvls.efficiency", "comm.nvls.latency"}},
      {"azure-nd-a100-v4-allreduce", "azure-nd-a100-v4", "dgx-a100-80g", std::nullopt,
       "dgx-a100-80g preset, `--algo auto` (the source's label says NVLS, impossible on A100: data/registry.yaml)",
       {"links.nvlink3.efficiency"}},
  };
  const std::string csv = "data/published/nccl-allreduce-8gpu-published.csv";
  auto rows = calibrate::read_published_busbw(source_path(csv));
  if (!rows) return rows.error();
  for (const Target& t : targets) {
    std::vector<calibrate::PublishedBusbw> mine;
    for (const auto& r : *rows) {
      if (r.system == t.system) mine.push_back(r);
    }
    if (mine.empty()) return Error(fmt::format("{}: no rows for {}", csv, t.system));
    config::LoadContext ctx;
    auto spec = config::load_cluster(config::ClusterRequest{t.preset, 1, std::nullopt}, ctx);
    if (!spec) return Error(ctx.diagnostics.to_string());
    auto topo = hw::Topology::build(*spec);
    if (!topo) return topo.error();
    // nccl-tests' host launches bound small sizes (one thread drove all GPUs: -g N).
    const int per_thread = mine.empty() ? 1 : calibrate::published_gpus_per_thread(mine[0]);
    const auto cmp = calibrate::predict_allreduce(*topo, comm::CommParams::nccl_defaults(), mine, t.algo, per_thread);
    const std::string fit = fit_of(reg, t.dataset, t.constants);
    std::string md = fmt::format("### {} ({}) vs dtsim {}\n\nDataset `{}`: **{}** ({}).\n\n", t.system, mine[0].gpu, t.what, t.dataset, fit,
                                 fit == "in-sample" ? "it fed a constant these predictions use" : "it fed no constant these predictions use");
    md += "| size | measured busbw (GB/s) | dtsim busbw (GB/s) | dtsim algo | error |\n|---:|---:|---:|---|---:|\n";
    std::vector<double> small, large;
    for (const auto& c : cmp) {
      md += fmt::format("| {} | {:.2f} | {:.2f} | {} | {} |\n", to_string(Bytes(c.bytes)), c.measured_GBps, c.predicted_GBps, c.algo, pct(c.error()));
      (c.bytes >= (std::int64_t{64} << 20) ? large : small).push_back(std::fabs(c.error()));
      out.figures.push_back(Figure{t.dataset, to_string(Bytes(c.bytes)), c.measured_GBps, c.predicted_GBps, fit});
    }
    md += fmt::format("\nMedian absolute error: {:.1f}% for sizes >= 64 MiB ({} points), {:.1f}% below ({} points).\n", 100 * median(large),
                      large.size(), 100 * median(small), small.size());
    out.sections.push_back(Section{std::string("nccl-") + t.system, md});
  }
  return {};
}

namespace {

// The GEMM efficiency of a dtype has one source (its GPU's rows), so only k_half and the kernel
// overhead can be left out: these figures are partly in-sample, and say so.
const char* const kGemmLoso = "leave-one-source-out for k_half and kernel_overhead (efficiency in-sample)";

struct GemmRow {
  std::string gpu, dtype;
  std::int64_t m = 0, n = 0, k = 0;
  double tflops = 0;
};

double predict_gemm(const hw::GpuSpec& gpu, const workloads::ComputeParams& p, const GemmRow& r) {
  const workloads::ComputeModel cm(gpu, p);
  const auto d = *hw::parse_dtype(r.dtype);
  const int in = hw::dtype_bytes(d), outb = d == hw::DType::fp8 ? 2 : in;
  const workloads::Kernel g = workloads::gemm("g", r.m, r.n, r.k, 1, d, in, outb);
  return g.flops / cm.kernel_time(g).seconds() * 1e-12;
}

std::string shape(const GemmRow& r) {
  if (r.m == r.n && r.n == r.k) return fmt::format("{}^3", r.m);
  return fmt::format("{} x {} x {}", r.m, r.n, r.k);
}

// k_half and kernel_overhead refitted on `rows` alone: the grid point with the least sum of
// squared log errors (k_half 0..1024 by 8, overhead 0..20 us by 0.25 us).
workloads::ComputeParams refit_small_gemm(const hw::GpuSpec& gpu, const std::vector<GemmRow>& rows) {
  workloads::ComputeParams best;
  double best_cost = INFINITY;
  for (int kh = 0; kh <= 1024; kh += 8) {
    for (int q = 0; q <= 80; ++q) {
      workloads::ComputeParams p;
      p.k_half = kh;
      p.kernel_overhead = Time::ns(250 * q);
      double cost = 0;
      for (const auto& r : rows) cost += std::pow(std::log(predict_gemm(gpu, p, r) / r.tflops), 2);
      if (cost < best_cost) {
        best_cost = cost;
        best = p;
      }
    }
  }
  return best;
}

}  // namespace

Status gemm_and_hbm(const config::Registry& reg, Results& out) {
  const std::string csv = "data/published/gemm-hbm-published.csv";
  auto rows = read_csv(source_path(csv));
  if (!rows) return rows.error();
  struct Gpu {
    const char* name;  // as in the CSV
    const char* node;
    const char* short_name;
    const char* gemm_dataset;
    const char* hbm_dataset;
    const char* efficiency;  // the constant of its dtype
  };
  const Gpu gpus[] = {{"H100-SXM-80GB", "dgx-h100", "H100", "azure-nd-h100-v5-gemm", "azure-nd-h100-v5-hbm", "compute.gemm.efficiency.fp8"},
                      {"A100-SXM4-80GB", "dgx-a100-80g", "A100", "azure-nd-a100-v4-gemm", "azure-nd-a100-v4-hbm", "compute.gemm.efficiency.fp16"}};
  std::map<std::string, std::vector<GemmRow>> gemm;
  std::map<std::string, std::vector<std::pair<std::string, double>>> hbm;
  for (const auto& row : *rows) {
    const std::string kind = field(row, "kind");
    if (kind == "gemm") {
      gemm[field(row, "gpu")].push_back(GemmRow{field(row, "gpu"), field(row, "dtype"), std::stoll(field(row, "m")), std::stoll(field(row, "n")),
                                                std::stoll(field(row, "k")), std::stod(field(row, "value"))});
    } else if (kind == "hbm") {
      hbm[field(row, "gpu")].emplace_back(field(row, "dtype"), std::stod(field(row, "value")));
    }
  }
  std::string md = "| GPU | dtype | M x N x K | published TFLOP/s | dtsim | error | fit |\n|---|---|---|---:|---:|---:|---|\n";
  std::string loso =
      "| GPU | dtype | M x N x K | published TFLOP/s | dtsim, k_half and overhead fitted on the other GPU | error |\n|---|---|---|---:|---:|---:|\n";
  std::string hbm_md = "| GPU | kernel | published TB/s | dtsim | error | fit | memory.efficiency fitted on the other GPU | dtsim then | error |\n"
                       "|---|---|---:|---:|---:|---|---:|---:|---:|\n";
  for (const Gpu& g : gpus) {
    auto spec = gpu_of(g.node);
    if (!spec) return spec.error();
    const Gpu& other = &g == &gpus[0] ? gpus[1] : gpus[0];
    auto other_spec = gpu_of(other.node);
    if (!other_spec) return other_spec.error();
    const auto& mine = gemm[g.name];
    if (mine.empty()) return Error(fmt::format("{}: no GEMM rows for {}", csv, g.name));
    const std::string fit = fit_of(reg, g.gemm_dataset, {g.efficiency, "compute.gemm.k_half", "compute.kernel_overhead"});
    const workloads::ComputeParams refit = refit_small_gemm(*other_spec, gemm[other.name]);
    for (const auto& r : mine) {
      const double p = predict_gemm(*spec, workloads::ComputeParams{}, r);
      md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {} | {} |\n", g.short_name, r.dtype, shape(r), r.tflops, p, pct(p / r.tflops - 1), fit);
      out.figures.push_back(Figure{g.gemm_dataset, shape(r), r.tflops, p, fit});
      const double q = predict_gemm(*spec, refit, r);
      loso += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {} |\n", g.short_name, r.dtype, shape(r), r.tflops, q, pct(q / r.tflops - 1));
      out.figures.push_back(Figure{g.gemm_dataset, shape(r), r.tflops, q, kGemmLoso});
    }
    loso += fmt::format("| {} | | refit on {}: | k_half {:.0f}, kernel_overhead {} | | |\n", g.short_name, other.short_name, refit.k_half,
                        to_string(refit.kernel_overhead));
    // HBM: a large copy, where the kernel overhead is negligible.
    const double bytes = 8e9;
    const std::string hfit = fit_of(reg, g.hbm_dataset, {"compute.memory.efficiency"});
    double other_copy = 0;
    for (const auto& [kernel, v] : hbm[other.name]) {
      if (kernel == "copy") other_copy = v;
    }
    if (other_copy <= 0 || hbm[g.name].empty()) return Error(fmt::format("{}: no HBM copy rows for {} and {}", csv, g.name, other.name));
    workloads::ComputeParams lp;
    lp.memory_efficiency = other_copy * 1e12 / other_spec->memory_bandwidth.bytes_per_s();
    for (const auto& [kernel, v] : hbm[g.name]) {
      const auto predict = [&](const workloads::ComputeParams& p) {
        const workloads::ComputeModel cm(*spec, p);
        return bytes / cm.kernel_time(workloads::memory_op("copy", bytes)).seconds() * 1e-12;
      };
      const double p = predict(workloads::ComputeParams{}), q = predict(lp);
      hbm_md += fmt::format("| {} | {} | {:.2f} | {:.2f} | {} | {} | {:.3f} | {:.2f} | {} |\n", g.short_name, kernel, v, p, pct(p / v - 1), hfit,
                            lp.memory_efficiency, q, pct(q / v - 1));
      out.figures.push_back(Figure{g.hbm_dataset, kernel, v, p, hfit});
      out.figures.push_back(Figure{g.hbm_dataset, kernel, v, q, "leave-one-source-out"});
    }
  }
  out.sections.push_back(Section{"gemm", md});
  out.sections.push_back(Section{"gemm-loso", loso});
  out.sections.push_back(Section{"hbm", hbm_md});
  return {};
}

}  // namespace dtsim::accuracy
