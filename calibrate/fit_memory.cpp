#include "calibrate/fit_memory.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "calibrate/fit_internal.hpp"
#include "calibrate/lsq.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;
using workloads::MemoryKind;

using detail::fraction_text;
using detail::time_text;

double round4(double x) { return detail::round_sig(x, 4); }


// The held-out |relative error| median of `p` per harness kernel of one kind (kernels without
// held-out points are left out: nothing to judge them by).
std::map<std::string, double> held_medians(const std::vector<MemorySample>& s, const std::vector<std::size_t>& idx, const std::vector<bool>& held,
                                           const hw::GpuSpec& gpu, const workloads::ComputeParams& p) {
  const workloads::ComputeModel cm(gpu, p);
  std::map<std::string, std::vector<double>> e;
  for (std::size_t i : idx) {
    if (!held[i]) continue;
    const auto k = memory_kernel_of(s[i]);
    e[s[i].kernel].push_back((cm.kernel_time(*k).seconds() - s[i].time_s) / s[i].time_s);
  }
  std::map<std::string, double> out;
  for (auto& [kernel, v] : e) out[kernel] = median_abs(v);
  return out;
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
  else if (k == "layout_heads") kind = MemoryKind::layout;
  else if (k == "layout_qkv") kind = MemoryKind::layout_split;
  else return std::nullopt;
  workloads::Kernel out = workloads::memory_op("memory", s.bytes, hw::DType::bf16, kind);
  if (kind == MemoryKind::dropout) {
    out.elements = s.elements > 0 ? s.elements : s.bytes / 6.0;  // three bf16 tensors
    out.hash_rng = true;  // the harness's kernels draw from a 64-bit hash
  }
  return out;
}

std::vector<bool> memory_held_out(const std::vector<MemorySample>& samples, int every) {
  // Per harness kernel, by size: every `every`-th point, and at least the largest one of a kernel
  // with 2 to every-1 points, so that each kernel has held-out points.
  std::map<std::string, std::vector<std::size_t>> by;
  for (std::size_t i = 0; i < samples.size(); ++i) by[samples[i].kernel].push_back(i);
  std::vector<bool> held(samples.size(), false);
  if (every < 2) return held;
  for (auto& [kernel, idx] : by) {
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return samples[a].bytes < samples[b].bytes; });
    const auto e = static_cast<std::size_t>(every);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      if (i % e == e - 1) held[idx[i]] = true;
    }
    if (idx.size() >= 2 && idx.size() < e) held[idx.back()] = true;
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
    } else if (pts.size() < 3) {
      // Too few sizes to separate a fixed cost from a rate: keep the fixed cost, fit the rate
      // (weighted least squares in closed form, as for the stream kind).
      overhead = params.kind_overhead(kind).seconds();
      double num = 0, den = 0;
      for (const XY& p : pts) {
        num += p.x * (p.y - overhead) / (p.y * p.y);
        den += p.x * p.x / (p.y * p.y);
      }
      const double slope = den > 0 ? num / den : 0;
      if (kind == MemoryKind::dropout && fp32 > 0) ops = slope;
      else eff = slope > 0 ? 1.0 / slope : 1.0;
      out.notes.push_back(fmt::format("memory.{}: {} point(s) to fit; its fixed cost kept at {:.3f} us", name, pts.size(), overhead * 1e6));
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
      auto& kp = trial.kinds[static_cast<std::size_t>(kind)];
      kp.efficiency = eff;
      kp.overhead = Time::from_seconds(overhead);
      // A kind with an SM limit: the limit becomes at least the rate measured here (per SM and
      // cycle, rounded up as written), so the profile gives this GPU its measured rate; a GPU
      // that its bandwidth bound here leaves the limit where it was.
      if (const double cycles = workloads::sm_cycles_per_s(gpu); kp.sm_bytes_per_cycle > 0 && cycles > 0) {
        const double written = std::stod(fraction_text(eff));
        kp.sm_bytes_per_cycle = std::max(kp.sm_bytes_per_cycle, std::ceil(std::max(eff, written) * bw / cycles * 1e4) / 1e4);
      }
    }
    // Keep the fit only where no harness kernel of the kind does worse on its held-out points than
    // with dtsim's values.
    const auto before = held_medians(samples, idx, held, gpu, params), after = held_medians(samples, idx, held, gpu, trial);
    std::string worse;
    for (const auto& [kernel, a] : after) {
      if (a > before.at(kernel) + 1e-12) {
        worse = fmt::format("{} ({:.1f}% median held-out error, dtsim's values {:.1f}%)", kernel, 100 * a, 100 * before.at(kernel));
        break;
      }
    }
    if (!worse.empty()) {
      out.notes.push_back(fmt::format("memory.{}: the fit does worse on {}; dtsim's values kept", name, worse));
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
      if (const double c = params.kinds[static_cast<std::size_t>(kind)].sm_bytes_per_cycle; c > 0 && workloads::sm_cycles_per_s(gpu) > 0) {
        out.params[fmt::format("compute.memory.{}.sm_bytes_per_cycle", name)] = fmt::format("{:.4f}", std::ceil(c * 1e4) / 1e4);
        j["sm_bytes_per_cycle"] = round4(c);
      }
    }
    out.fit[name] = j;
  }
  return out;
}

}  // namespace dtsim::calibrate
