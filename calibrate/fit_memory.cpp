#include "calibrate/fit_memory.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "calibrate/lsq.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;
using workloads::MemoryKind;

double round4(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(x))));
  return std::round(x * scale) / scale;
}

std::string time_text(double seconds) { return fmt::format("{:.3f} us", seconds * 1e6); }
std::string fraction_text(double f) { return fmt::format("{:.4f}", f); }

double median_abs_of(std::vector<double> v) {
  if (v.empty()) return 0;
  for (double& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The held-out relative errors of `p` on the samples of one kind.
double held_median(const std::vector<MemorySample>& s, const std::vector<std::size_t>& idx, const std::vector<bool>& held,
                   const hw::GpuSpec& gpu, const workloads::ComputeParams& p) {
  const workloads::ComputeModel cm(gpu, p);
  std::vector<double> e, all;
  for (std::size_t i : idx) {
    const auto k = memory_kernel_of(s[i]);
    const double err = (cm.kernel_time(*k).seconds() - s[i].time_s) / s[i].time_s;
    all.push_back(err);
    if (held[i]) e.push_back(err);
  }
  return median_abs_of(e.empty() ? all : e);
}

}  // namespace

std::optional<workloads::Kernel> memory_kernel_of(const MemorySample& s) {
  const std::string& k = s.kernel;
  MemoryKind kind;
  if (k == "copy" || k == "memcpy" || k == "triad") kind = MemoryKind::stream;
  else if (k == "layernorm_fwd") kind = MemoryKind::norm;
  else if (k == "layernorm_bwd") kind = MemoryKind::norm_bwd;
  else if (k == "gelu_fwd") kind = MemoryKind::activation;
  else if (k == "gelu_bwd") kind = MemoryKind::activation_bwd;
  else if (k == "softmax_fwd") kind = MemoryKind::softmax;
  else if (k == "softmax_bwd") kind = MemoryKind::softmax_bwd;
  else if (k == "dropout_residual") kind = MemoryKind::dropout;
  else if (k == "adam") kind = MemoryKind::optimizer;
  else if (k == "layout_qkv" || k == "layout_heads") kind = MemoryKind::layout;
  else return std::nullopt;
  workloads::Kernel out = workloads::memory_op("memory", s.bytes, hw::DType::bf16, kind);
  if (kind == MemoryKind::dropout) out.elements = s.elements > 0 ? s.elements : s.bytes / 6.0;  // three bf16 tensors
  return out;
}

std::vector<bool> memory_held_out(const std::vector<MemorySample>& samples, int every) {
  std::vector<std::size_t> idx(samples.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(samples[a].kernel, samples[a].bytes) < std::tie(samples[b].kernel, samples[b].bytes);
  });
  std::vector<bool> held(samples.size(), false);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (every >= 2 && i % static_cast<std::size_t>(every) == static_cast<std::size_t>(every - 1)) held[idx[i]] = true;
  }
  return held;
}

MemoryFit fit_memory_kinds(const std::vector<MemorySample>& samples, const hw::GpuSpec& gpu, std::optional<double> kernel_overhead,
                           const workloads::ComputeParams& base, int holdout_every) {
  MemoryFit out;
  const double bw = gpu.memory_bandwidth.bytes_per_s();
  const double fp32 = gpu.peak.count(hw::DType::fp32) ? gpu.peak.at(hw::DType::fp32).flops_per_s() : 0;
  const std::vector<bool> held = memory_held_out(samples, holdout_every);
  std::map<MemoryKind, std::vector<std::size_t>> by_kind;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (auto k = memory_kernel_of(samples[i])) {
      by_kind[k->kind].push_back(i);
    } else {
      out.notes.push_back(fmt::format("{}: memory kernel '{}' stands for no kind of dtsim's model; left out", samples[i].where,
                                      samples[i].kernel));
    }
  }
  workloads::ComputeParams params = base;
  const workloads::ComputeParams defaults;
  for (const auto& [kind, idx] : by_kind) {
    std::vector<XY> pts;
    for (std::size_t i : idx) {
      if (held[i]) continue;
      const MemorySample& s = samples[i];
      // Dropout: its random numbers, not its bytes, bound it (when the data says so).
      const double x = kind == MemoryKind::dropout && fp32 > 0 ? memory_kernel_of(s)->elements / fp32 : s.bytes / bw;
      pts.push_back(XY{x, s.time_s});
    }
    if (pts.empty()) continue;
    const std::string name(workloads::to_string(kind));
    workloads::ComputeParams trial = params;
    double eff = 0, overhead = 0, ops = 0;
    if (kind == MemoryKind::stream && kernel_overhead) {
      // t - o = (bytes / bw) u with u = 1 / efficiency: weighted least squares in closed form.
      double num = 0, den = 0;
      for (const XY& p : pts) {
        num += p.x * (p.y - *kernel_overhead) / (p.y * p.y);
        den += p.x * p.x / (p.y * p.y);
      }
      eff = num > 0 ? den / num : 1.0;
      overhead = *kernel_overhead;
    } else {
      const AlphaBeta ab = fit_alpha_beta(pts);
      overhead = ab.alpha;
      if (kind == MemoryKind::dropout && fp32 > 0) ops = ab.beta;
      else eff = ab.beta > 0 ? 1.0 / ab.beta : 1.0;
    }
    if (eff > 1.0) {
      out.notes.push_back(fmt::format("memory.{}: efficiency fits to {:.3f} (> 1: the preset's HBM bandwidth is low); kept at 1", name, eff));
    }
    eff = std::clamp(eff, 1e-3, 1.0);
    if (kind == MemoryKind::stream) {
      trial.memory_efficiency = eff;
      trial.kernel_overhead = Time::from_seconds(overhead);
    } else if (kind == MemoryKind::dropout) {
      if (ops > 0) trial.dropout_ops = ops;
      trial.kinds[static_cast<std::size_t>(kind)].overhead = Time::from_seconds(overhead);
    } else {
      trial.kinds[static_cast<std::size_t>(kind)].efficiency = eff;
      trial.kinds[static_cast<std::size_t>(kind)].overhead = Time::from_seconds(overhead);
    }
    // Keep the fit only where it is no worse than what is already there on the held-out points.
    const double before = held_median(samples, idx, held, gpu, params), after = held_median(samples, idx, held, gpu, trial);
    if (after > before) {
      out.notes.push_back(fmt::format("memory.{}: the fit ({:.1f}% median held-out error) is worse than the defaults ({:.1f}%); defaults kept",
                                      name, 100 * after, 100 * before));
      continue;
    }
    params = trial;
    json j{{"samples", idx.size()}, {"fixed_cost_us", round4(overhead * 1e6)}, {"hbm_bandwidth_GBps", round4(bw * 1e-9)}};
    if (kind == MemoryKind::stream) {
      out.params["compute.memory.efficiency"] = fraction_text(eff);
      if (!kernel_overhead) {
        out.params["compute.kernel_overhead"] = time_text(overhead);
        out.notes.push_back("no overhead suite: compute.kernel_overhead is the stream kernels' intercept");
      }
      j["efficiency"] = round4(eff);
    } else if (kind == MemoryKind::dropout) {
      if (ops > 0) {
        out.params["compute.dropout_ops"] = fmt::format("{:.4g}", ops);
        j["ops_per_element"] = round4(ops);
        j["elements_per_s"] = round4(fp32 / ops);
      }
      out.params[fmt::format("compute.memory.{}.overhead", name)] = time_text(overhead);
    } else {
      out.params[fmt::format("compute.memory.{}.efficiency", name)] = fraction_text(eff);
      out.params[fmt::format("compute.memory.{}.overhead", name)] = time_text(overhead);
      j["efficiency"] = round4(eff);
      j["achieved_GBps"] = round4(eff * bw * 1e-9);
    }
    out.fit[name] = j;
  }
  (void)defaults;
  return out;
}

}  // namespace dtsim::calibrate
