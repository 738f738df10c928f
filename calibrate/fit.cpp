// Fitting a hardware profile to a dataset: the GEMM, memory, host-link and collective
// parameters, the held-out split and the residuals, and the profile as YAML. Reading the
// measurements into the dataset is in dataset.cpp.
#include "calibrate/fit.hpp"
#include "calibrate/fit_collectives.hpp"
#include "calibrate/fit_internal.hpp"
#include "calibrate/fit_memory.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "comm/collective.hpp"
#include "config/hardware.hpp"
#include "config/profile.hpp"
#include "hw/topology.hpp"
#include "workloads/compute.hpp"

namespace dtsim::calibrate {

namespace detail {

SuiteResiduals summarize(const std::string& suite, const std::string& model, const std::vector<Scored>& s) {
  SuiteResiduals r;
  r.suite = suite;
  r.model = model;
  r.points = static_cast<int>(s.size());
  std::vector<double> held, all;
  double worst = -1;
  for (const Scored& x : s) {
    all.push_back(x.err);
    if (x.held) held.push_back(x.err);
  }
  r.held_out = static_cast<int>(held.size());
  r.fitted = r.points - r.held_out;
  const std::vector<double>& use = held.empty() ? all : held;
  r.median = median_abs(use);
  r.worst = max_abs(use);
  r.median_all = median_abs(all);
  r.worst_all = max_abs(all);
  for (const Scored& x : s) {
    if ((held.empty() || x.held) && std::fabs(x.err) > worst) {
      worst = std::fabs(x.err);
      r.worst_where = x.where;
    }
  }
  return r;
}

// GPUs in one node of a node preset (0 when it cannot be loaded).
int preset_gpus(const std::string& node) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{node, 1, std::nullopt}, ctx);
  return spec && spec->groups.size() == 1 ? spec->groups.front().node.gpus : 0;
}

}  // namespace detail


namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Held-out split and residual statistics

using detail::fraction_text;
using detail::round_sig;
using detail::Scored;
using detail::split;
using detail::summarize;
using detail::time_text;



json residual_json(const SuiteResiduals& r) {
  auto pct = [](double x) { return std::round(x * 1e4) / 1e2; };
  return json{{"suite", r.suite},
              {"model", r.model},
              {"points", r.points},
              {"fitted", r.fitted},
              {"held_out", r.held_out},
              {"median_abs_error_pct", pct(r.median)},
              {"worst_abs_error_pct", pct(r.worst)},
              {"median_abs_error_all_pct", pct(r.median_all)},
              {"worst_abs_error_all_pct", pct(r.worst_all)},
              {"worst_point", r.worst_where}};
}


// ---------------------------------------------------------------------------------------------
// Hardware

Expected<hw::GpuSpec> load_gpu(const std::string& preset) {
  config::LoadContext ctx;
  config::HardwareLoader hl(ctx);
  YAML::Node doc(YAML::NodeType::Map);
  doc["gpu"] = preset;
  config::MapReader r(doc, "", "--gpu", ctx);
  auto g = hl.gpu(r, "gpu");
  if (!g) return Error(ctx.diagnostics.empty() ? "unknown GPU preset '" + preset + "'" : ctx.diagnostics.items().front().message);
  return *g;
}


double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---------------------------------------------------------------------------------------------
// The fit

class Fitter {
 public:
  Fitter(const Dataset& d, const FitOptions& o) : d_(d), o_(o) {}

  Expected<FitResult> run() {
    if (d_.empty()) return Error("no measurements to fit (every record failed, or the inputs hold none)");
    res_.notes = d_.notes;
    if (auto st = resolve_hardware(); !st) return st.error();
    fit_overhead();
    if (auto st = fit_memory(); !st) return st.error();
    if (auto st = fit_gemm(); !st) return st.error();
    fit_hostlinks();
    if (auto st = collectives_.fit(); !st) return st.error();
    finish();
    return std::move(res_);
  }

 private:
  Status resolve_hardware() {
    res_.gpu_preset = !o_.gpu.empty() ? o_.gpu : gpu_preset_for(d_.device_name);
    res_.node_preset = !o_.node.empty() ? o_.node : node_preset_for(res_.gpu_preset);
    const bool need_gpu = !d_.gemm.empty() || !d_.memory.empty();
    if (res_.gpu_preset.empty() && need_gpu) {
      return Error(fmt::format("cannot tell which GPU preset '{}' is; name it with --gpu (dtsim's presets/gpus/)",
                               d_.device_name.empty() ? std::string("(no device name in the data)") : d_.device_name));
    }
    if (!res_.gpu_preset.empty()) {
      auto g = load_gpu(res_.gpu_preset);
      if (!g) return Error("--gpu: " + g.error().message);
      gpu_ = *g;
      if (d_.device_sms > 0 && d_.device_sms != gpu_.sms) {
        res_.notes.push_back(fmt::format("the device has {} SMs, preset {} says {}: the fit uses {}", d_.device_sms, gpu_.name, gpu_.sms,
                                         d_.device_sms));
        gpu_.sms = d_.device_sms;
      }
    }
    return {};
  }

  workloads::ComputeParams compute_params() const {
    workloads::ComputeParams p;
    for (const auto& [name, value] : res_.params) {
      if (name.rfind("compute.", 0) == 0) {
        const Status st = workloads::set_compute_param(p, name.substr(8), value);
        DTSIM_ASSERT(st.ok(), "fit: a compute parameter the fit wrote does not read back");
      }
    }
    return p;
  }

  void fit_overhead() {
    std::map<std::string, std::vector<double>> by;
    for (const auto& s : d_.overhead) by[s.what].push_back(s.time_s);
    json j = json::object();
    for (const auto& [what, v] : by) j[what + "_us"] = round_sig(median_of(v) * 1e6, 4);
    if (!by.empty()) res_.fit["overhead"] = j;
    if (by.count("kernel_gpu")) {
      overhead_ = median_of(by["kernel_gpu"]);
      res_.params["compute.kernel_overhead"] = time_text(overhead_.value());
    }
  }

  Status fit_memory() {
    if (d_.memory.empty()) return {};
    MemoryFit mf = fit_memory_kinds(d_.memory, gpu_, overhead_, compute_params(), o_.holdout_every);
    for (auto& [k, v] : mf.params) res_.params[k] = v;
    for (auto& n : mf.notes) res_.notes.push_back(std::move(n));
    res_.fit["memory"] = std::move(mf.fit);
    return {};
  }

  Status fit_gemm() {
    if (d_.gemm.empty()) return {};
    std::vector<hw::DType> dtypes;
    std::vector<GemmSample> usable;
    for (const auto& g : d_.gemm) {
      if (!gpu_.peak.count(g.dtype)) {
        res_.notes.push_back(fmt::format("{}: {} GEMMs: preset {} has no {} peak; left out", g.where, hw::to_string(g.dtype), gpu_.name,
                                         hw::to_string(g.dtype)));
        continue;
      }
      usable.push_back(g);
      if (std::find(dtypes.begin(), dtypes.end(), g.dtype) == dtypes.end()) dtypes.push_back(g.dtype);
    }
    if (usable.empty()) return {};
    std::sort(dtypes.begin(), dtypes.end());
    gemm_ = usable;
    // Held out per dtype: sort by (dtype, flops).
    auto flops = [](const GemmSample& g) { return 2.0 * static_cast<double>(g.m) * g.n * g.k * g.batch; };
    std::vector<bool> held(usable.size(), false);
    for (hw::DType d : dtypes) {
      std::vector<std::size_t> mine;
      for (std::size_t i = 0; i < usable.size(); ++i) {
        if (usable[i].dtype == d) mine.push_back(i);
      }
      auto [tr, he] = split(mine.size(), o_.holdout_every, [&](std::size_t a, std::size_t b) {
        return std::make_tuple(flops(usable[mine[a]]), usable[mine[a]].m, usable[mine[a]].n) <
               std::make_tuple(flops(usable[mine[b]]), usable[mine[b]].m, usable[mine[b]].n);
      });
      for (std::size_t j : he) held[mine[j]] = true;
    }
    gemm_held_ = held;
    std::vector<std::size_t> train;
    for (std::size_t i = 0; i < usable.size(); ++i) {
      if (!held[i]) train.push_back(i);
    }
    const workloads::ComputeParams base = compute_params();
    const auto nd = static_cast<Eigen::Index>(dtypes.size());
    auto params_of = [&](const Eigen::VectorXd& x) {
      workloads::ComputeParams p = base;
      for (Eigen::Index j = 0; j < nd; ++j) {
        p.gemm_efficiency[static_cast<std::size_t>(dtypes[static_cast<std::size_t>(j)])] = std::exp(x(j));
      }
      p.k_half = std::exp(x(nd));
      return p;
    };
    auto residuals = [&](const Eigen::VectorXd& x, Eigen::VectorXd& r) {
      const workloads::ComputeModel cm(gpu_, params_of(x));
      for (std::size_t i = 0; i < train.size(); ++i) {
        const GemmSample& g = usable[train[i]];
        const double t = cm.kernel_time(workloads::gemm("gemm", g.m, g.n, g.k, g.batch, g.dtype, g.in_bytes, g.out_bytes)).seconds();
        r(static_cast<Eigen::Index>(i)) = (t - g.time_s) / g.time_s;
      }
    };
    // For a given k_half the compute-bound points are linear in 1 / efficiency of their dtype:
    // t - overhead = flops / (peak x tile x depth) x (1 / e). Solve that in closed form (weighted
    // least squares, re-deciding which points are compute-bound), and search k_half in one
    // dimension (a log grid, then golden section); Levenberg-Marquardt polishes the result.
    auto solve_for = [&](double k_half, Eigen::VectorXd& x) {
      x.resize(nd + 1);
      x(nd) = std::log(k_half);
      for (Eigen::Index j = 0; j < nd; ++j) x(j) = std::log(base.efficiency(dtypes[static_cast<std::size_t>(j)]));
      for (int pass = 0; pass < 8; ++pass) {
        const workloads::ComputeModel cm(gpu_, params_of(x));
        std::vector<double> num(static_cast<std::size_t>(nd), 0.0), den(static_cast<std::size_t>(nd), 0.0);
        for (std::size_t i : train) {
          const GemmSample& g = usable[i];
          const auto k = workloads::gemm("gemm", g.m, g.n, g.k, g.batch, g.dtype, g.in_bytes, g.out_bytes);
          const double eff = cm.gemm_efficiency(g.m, g.n, g.k, g.batch, g.dtype);
          const double e = std::exp(x(std::find(dtypes.begin(), dtypes.end(), g.dtype) - dtypes.begin()));
          const double compute = eff > 0 ? k.flops / (gpu_.peak.at(g.dtype).flops_per_s() * eff) : 0;
          const double memory = k.bytes / (gpu_.memory_bandwidth.bytes_per_s() * base.memory_efficiency);
          if (compute < memory) continue;  // memory-bound: says nothing about the efficiency
          const double a = compute * e;  // time at efficiency 1
          const double y = g.time_s - base.kernel_overhead.seconds();
          const auto j = static_cast<std::size_t>(std::find(dtypes.begin(), dtypes.end(), g.dtype) - dtypes.begin());
          num[j] += a * y / (g.time_s * g.time_s);
          den[j] += a * a / (g.time_s * g.time_s);
        }
        for (Eigen::Index j = 0; j < nd; ++j) {
          const auto ju = static_cast<std::size_t>(j);
          if (den[ju] > 0 && num[ju] > 0) x(j) = -std::log(num[ju] / den[ju]);  // e = 1 / u
        }
      }
      Eigen::VectorXd r(static_cast<Eigen::Index>(train.size()));
      residuals(x, r);
      return r.squaredNorm();
    };
    Eigen::VectorXd x, best_x;
    double best = std::numeric_limits<double>::infinity(), best_log = 0;
    const double lo = std::log(1.0), hi = std::log(1e5);
    for (int i = 0; i <= 48; ++i) {
      const double l = lo + (hi - lo) * i / 48.0;
      const double c = solve_for(std::exp(l), x);
      if (c < best) {
        best = c;
        best_log = l;
        best_x = x;
      }
    }
    {
      const double phi = (std::sqrt(5.0) - 1) / 2;
      double a = std::max(lo, best_log - (hi - lo) / 48.0), b = std::min(hi, best_log + (hi - lo) / 48.0);
      for (int it = 0; it < 60; ++it) {
        const double c1 = b - phi * (b - a), c2 = a + phi * (b - a);
        if (solve_for(std::exp(c1), x) < solve_for(std::exp(c2), x)) b = c2;
        else a = c1;
      }
      const double c = solve_for(std::exp(0.5 * (a + b)), x);
      if (c < best) {
        best = c;
        best_x = x;
      }
    }
    const LmResult lm = levenberg_marquardt(residuals, best_x, static_cast<int>(train.size()));
    json eff = json::object();
    for (Eigen::Index j = 0; j < nd; ++j) {
      double e = std::exp(lm.x(j));
      const std::string name(hw::to_string(dtypes[static_cast<std::size_t>(j)]));
      if (e > 1.0) {
        res_.notes.push_back(fmt::format("gemm.{}: efficiency fits to {:.3f} (> 1 of preset {}'s peak); kept at 1", name, e, gpu_.name));
        e = 1.0;
      }
      res_.params["compute.gemm.efficiency." + name] = fraction_text(e);
      eff[name] = round_sig(e, 4);
    }
    const double k_half = std::clamp(std::exp(lm.x(nd)), 1.0, 1e6);
    res_.params["compute.gemm.k_half"] = fmt::format("{:.1f}", k_half);
    res_.fit["gemm"] = json{{"efficiency", eff},
                            {"k_half", round_sig(k_half, 4)},
                            {"gpu_preset", gpu_.name},
                            {"sms", gpu_.sms},
                            {"method", "relative-error least squares of dtsim's GEMM kernel time: efficiencies in closed form per "
                                       "k_half, k_half by 1-D search, Levenberg-Marquardt polish"}};
    return {};
  }

  void fit_hostlinks() {
    if (d_.links.empty()) return;
    std::map<std::string, std::vector<std::size_t>> by;
    for (std::size_t i = 0; i < d_.links.size(); ++i) by[d_.links[i].what].push_back(i);
    json arr = json::array();
    std::vector<double> pinned_bw;
    for (const auto& [what, idx] : by) {
      const auto& ids = idx;  // clang 14 cannot capture a structured binding
      auto [tr, he] = split(idx.size(), o_.holdout_every, [&](std::size_t a, std::size_t b) {
        return d_.links[ids[a]].bytes < d_.links[ids[b]].bytes;
      });
      std::vector<XY> pts;
      for (std::size_t j : tr) pts.push_back(XY{d_.links[idx[j]].bytes, d_.links[idx[j]].time_s});
      std::sort(pts.begin(), pts.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
      const AlphaBeta ab = fit_alpha_beta(pts);
      std::vector<Scored> sc;
      std::vector<bool> is_held(idx.size(), false);
      for (std::size_t j : he) is_held[j] = true;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const LinkSample& s = d_.links[idx[j]];
        sc.push_back(Scored{(ab(s.bytes) - s.time_s) / s.time_s, s.where, is_held[j]});
      }
      res_.residuals.push_back(summarize("hostlink." + what, "alpha-beta", sc));
      const double gbps = ab.beta > 0 ? 1e-9 / ab.beta : 0;
      arr.push_back(json{{"what", what}, {"alpha_us", round_sig(ab.alpha * 1e6, 4)}, {"bandwidth_GBps", round_sig(gbps, 4)}});
      if ((what == "h2d.pinned" || what == "d2h.pinned") && gbps > 0) pinned_bw.push_back(gbps);
    }
    res_.fit["hostlink"] = arr;
    if (!pinned_bw.empty() && !res_.node_preset.empty()) {
      config::LoadContext ctx;
      auto spec = config::load_cluster(config::ClusterRequest{res_.node_preset, 1, std::nullopt}, ctx);
      if (spec) {
        const hw::LinkType& pcie = spec->groups.front().node.pcie;
        const double eff = std::accumulate(pinned_bw.begin(), pinned_bw.end(), 0.0) / static_cast<double>(pinned_bw.size()) /
                           pcie.bandwidth.GBps();
        res_.link_efficiency[pcie.name] = std::clamp(eff, 1e-3, 1.0);
        if (eff > 1) res_.notes.push_back(fmt::format("pinned host copies exceed {}'s line rate; efficiency kept at 1", pcie.name));
      }
    }
  }

  // Residuals with the profile as written (values rounded as in the file) and with defaults.
  void finish() {
    // Round the link efficiencies as the file writes them.
    for (auto& [name, e] : res_.link_efficiency) e = std::stod(fraction_text(e));
    const workloads::ComputeParams fitted = compute_params();
    const workloads::ComputeParams defaults;
    if (!gemm_.empty()) {
      std::map<hw::DType, std::vector<Scored>> fit_sc, def_sc;
      const workloads::ComputeModel fm(gpu_, fitted), dm(gpu_, defaults);
      for (std::size_t i = 0; i < gemm_.size(); ++i) {
        const GemmSample& g = gemm_[i];
        const auto k = workloads::gemm("gemm", g.m, g.n, g.k, g.batch, g.dtype, g.in_bytes, g.out_bytes);
        fit_sc[g.dtype].push_back(Scored{(fm.kernel_time(k).seconds() - g.time_s) / g.time_s, g.where, gemm_held_[i]});
        def_sc[g.dtype].push_back(Scored{(dm.kernel_time(k).seconds() - g.time_s) / g.time_s, g.where, gemm_held_[i]});
      }
      for (const auto& [d, sc] : fit_sc) {
        res_.residuals.push_back(summarize(fmt::format("gemm.{}", hw::to_string(d)), "profile", sc));
        res_.residuals.push_back(summarize(fmt::format("gemm.{}", hw::to_string(d)), "defaults", def_sc[d]));
      }
    }
    if (!d_.memory.empty()) {
      const std::vector<bool> is_held = memory_held_out(d_.memory, o_.holdout_every);
      std::map<std::string, std::vector<Scored>> fit_sc, def_sc;
      const workloads::ComputeModel fm(gpu_, fitted), dm(gpu_, defaults);
      for (std::size_t i = 0; i < d_.memory.size(); ++i) {
        const MemorySample& s = d_.memory[i];
        const auto mk = memory_kernel_of(s);
        if (!mk) continue;
        const workloads::Kernel& k = *mk;
        fit_sc[s.kernel].push_back(Scored{(fm.kernel_time(k).seconds() - s.time_s) / s.time_s, s.where, is_held[i]});
        def_sc[s.kernel].push_back(Scored{(dm.kernel_time(k).seconds() - s.time_s) / s.time_s, s.where, is_held[i]});
      }
      for (const auto& [kernel, sc] : fit_sc) {
        res_.residuals.push_back(summarize("memory." + kernel, "profile", sc));
        res_.residuals.push_back(summarize("memory." + kernel, "defaults", def_sc[kernel]));
      }
    }
    collectives_.add_residuals();
    json rj = json::array();
    for (const auto& r : res_.residuals) rj.push_back(residual_json(r));
    res_.fit["residuals"] = rj;
    res_.fit["holdout"] = o_.holdout_every >= 2
                              ? fmt::format("every {}th point of each suite, sorted by size, is left out of the fit; residuals are "
                                            "(model - measured) / measured on those points",
                                            o_.holdout_every)
                              : std::string("none: residuals are on the fitted points");
    res_.fit["tool"] = "dtsim fit";
    if (!res_.notes.empty()) res_.fit["notes"] = res_.notes;
    res_.source["inputs"] = d_.inputs;
    if (!d_.device.empty()) res_.source["device"] = d_.device;
    if (!res_.gpu_preset.empty()) res_.source["gpu_preset"] = res_.gpu_preset;
    if (!res_.node_preset.empty()) res_.source["node_preset"] = res_.node_preset;
  }


  const Dataset& d_;
  const FitOptions& o_;
  FitResult res_;
  hw::GpuSpec gpu_;
  std::optional<double> overhead_;
  std::vector<GemmSample> gemm_;
  std::vector<bool> gemm_held_;
  CollectiveFit collectives_{d_, o_, res_};
};

void emit(YAML::Emitter& e, const json& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      e << YAML::Key << it.key() << YAML::Value;
      emit(e, it.value());
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    e << YAML::BeginSeq;
    for (const auto& x : j) emit(e, x);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    e << j.get<std::string>();
  } else if (j.is_boolean()) {
    e << j.get<bool>();
  } else if (j.is_number_integer()) {
    e << j.get<std::int64_t>();
  } else if (j.is_number()) {
    e << fmt::format("{}", j.get<double>());
  } else {
    e << YAML::Null;
  }
}

}  // namespace

Expected<FitResult> fit_profile(const Dataset& d, const FitOptions& o) { return Fitter(d, o).run(); }

std::string profile_yaml(const FitResult& r, const std::string& description) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "profile" << YAML::Value << 1;
  e << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << description;
  e << YAML::Key << "source" << YAML::Value;
  emit(e, r.source);
  e << YAML::Key << "params" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : r.params) e << YAML::Key << name << YAML::Value << value;
  e << YAML::EndMap;
  if (!r.link_efficiency.empty()) {
    e << YAML::Key << "links" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, eff] : r.link_efficiency) {
      e << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "efficiency" << YAML::Value
        << fraction_text(eff) << YAML::EndMap;
    }
    e << YAML::EndMap;
  }
  e << YAML::Key << "fit" << YAML::Value;
  emit(e, r.fit);
  e << YAML::EndMap;
  return std::string("# Hardware profile written by `dtsim fit` (docs/calibration.md). Use it with\n"
                     "#   dtsim simulate CONFIG --hw-profile THIS   or   dtsim collective ... --hw-profile THIS\n") +
         e.c_str() + "\n";
}

std::string residual_table(const FitResult& r) {
  std::string out = fmt::format("{:<32} {:<10} {:>6} {:>6} {:>5}  {:>12} {:>12}  {:>12}\n", "suite", "model", "points", "fitted", "held",
                                "median|err|", "worst|err|", "median(all)");
  for (const auto& s : r.residuals) {
    out += fmt::format("{:<32} {:<10} {:>6} {:>6} {:>5}  {:>11.1f}% {:>11.1f}%  {:>11.1f}%\n", s.suite, s.model, s.points, s.fitted,
                       s.held_out, 100 * s.median, 100 * s.worst, 100 * s.median_all);
  }
  return out;
}

}  // namespace dtsim::calibrate
