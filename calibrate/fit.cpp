// Fitting a hardware profile to a dataset: the GEMM, memory, host-link and collective
// parameters, the held-out split and the residuals, and the profile as YAML. Reading the
// measurements into the dataset is in dataset.cpp.
#include "calibrate/fit.hpp"
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

namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Held-out split and residual statistics

// Indices of `n` items sorted by `less`; every `every`-th (1-based) is held out.
template <class Less>
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split(std::size_t n, int every, Less less) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), less);
  std::vector<std::size_t> train, held;
  for (std::size_t i = 0; i < n; ++i) {
    if (every >= 2 && i % static_cast<std::size_t>(every) == static_cast<std::size_t>(every - 1)) held.push_back(idx[i]);
    else train.push_back(idx[i]);
  }
  return {train, held};
}

struct Scored {
  double err = 0;
  std::string where;
  bool held = false;
};

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

double round_sig(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double p = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * p) / p;
}

std::string time_text(double seconds) { return fmt::format("{:.3f} us", seconds * 1e6); }
std::string fraction_text(double f) { return fmt::format("{:.4f}", f); }

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

// GPUs in one node of a node preset (0 when it cannot be loaded).
int preset_gpus(const std::string& node) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{node, 1, std::nullopt}, ctx);
  return spec && spec->groups.size() == 1 ? spec->groups.front().node.gpus : 0;
}

// The communication model on one cluster, with link efficiencies that the fit changes.
struct CommState {
  comm::CommParams comm = comm::CommParams::nccl_defaults();
  std::map<std::string, double> link_eff;
};

class CollectiveSim {
 public:
  static Expected<std::unique_ptr<CollectiveSim>> make(const std::string& node, int nodes, int gpus_per_node) {
    config::LoadContext ctx;
    auto spec = config::load_cluster(config::ClusterRequest{node, nodes, gpus_per_node}, ctx);
    if (!spec) return Error(ctx.diagnostics.empty() ? "cannot build the cluster" : ctx.diagnostics.items().front().message);
    auto sim = std::make_unique<CollectiveSim>();
    sim->base_ = *spec;
    sim->ranks_ = nodes * gpus_per_node;
    const hw::NodeSpec& ns = spec->groups.front().node;
    sim->intra_link_ = ns.nvlink && ns.nvlink_topology != hw::NvlinkTopology::none ? ns.nvlink->name : ns.pcie.name;
    sim->nic_link_ = spec->fabric.nic ? spec->fabric.nic->name : (ns.nic ? ns.nic->name : "");
    auto t = sim->topology(CommState{});
    if (!t) return t.error();
    return sim;
  }

  double link_default(const std::string& name) const {
    const hw::NodeSpec& ns = base_.groups.front().node;
    for (const auto* l : {ns.nvlink ? &*ns.nvlink : nullptr, &ns.pcie, ns.nic ? &*ns.nic : nullptr, ns.cpu_link ? &*ns.cpu_link : nullptr,
                          base_.fabric.nic ? &*base_.fabric.nic : nullptr, base_.fabric.link ? &*base_.fabric.link : nullptr}) {
      if (l && l->name == name) return l->efficiency;
    }
    return 1.0;
  }
  const std::string& intra_link() const { return intra_link_; }
  const std::string& nic_link() const { return nic_link_; }
  int ranks() const { return ranks_; }

  std::vector<std::pair<comm::Algo, comm::Protocol>> candidates(CollOp op) {
    auto topo = topology(CommState{});
    hw::Router router(**topo);
    comm::Planner planner(**topo, router, comm::CommParams::nccl_defaults());
    return planner.candidates(request(op, 0, std::nullopt, std::nullopt));
  }

  // Time of one collective alone on the cluster, as `dtsim collective` reports it.
  Expected<double> time(const CommState& st, CollOp op, std::int64_t bytes, std::optional<comm::Algo> a,
                        std::optional<comm::Protocol> p, std::string* chosen = nullptr) {
    auto topo = topology(st);
    if (!topo) return topo.error();
    hw::Router router(**topo);
    comm::Planner planner(**topo, router, st.comm);
    auto plan = planner.plan(request(op, bytes, a, p));
    if (!plan) return plan.error();
    if (chosen) *chosen = fmt::format("{}/{}", comm::to_string(plan->algo), comm::to_string(plan->protocol));
    return comm::simulate_alone(**topo, *plan).seconds();
  }

 private:
  comm::CollectiveRequest request(CollOp op, std::int64_t bytes, std::optional<comm::Algo> a, std::optional<comm::Protocol> p) const {
    comm::CollectiveRequest req;
    req.op = op;
    req.size = Bytes(bytes);
    for (int i = 0; i < ranks_; ++i) req.ranks.push_back(i);
    req.algo = a;
    req.protocol = p;
    return req;
  }

  Expected<hw::Topology*> topology(const CommState& st) {
    std::string key;
    for (const auto& [n, e] : st.link_eff) key += fmt::format("{}={:.17g};", n, e);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      hw::ClusterSpec spec = base_;
      config::HardwareProfile prof;
      for (const auto& [n, e] : st.link_eff) prof.links[n].efficiency = e;
      config::apply_profile(prof, spec);
      auto t = hw::Topology::build(spec);
      if (!t) return t.error();
      if (cache_.size() > 64) cache_.clear();
      it = cache_.emplace(key, std::make_unique<hw::Topology>(std::move(*t))).first;
    }
    return it->second.get();
  }

  hw::ClusterSpec base_;
  int ranks_ = 0;
  std::string intra_link_, nic_link_;
  std::map<std::string, std::unique_ptr<hw::Topology>> cache_;
};

// One parameter the collective fit moves: a comm.* time or fraction, or a link type's efficiency.
struct Knob {
  enum class Kind { time, fraction, link };
  Kind kind = Kind::time;
  std::string name;  // comm parameter name without "comm.", or the link type
  bool valid() const { return !name.empty(); }
  std::string profile_name() const { return kind == Kind::link ? "links." + name + ".efficiency" : "comm." + name; }
};

Time* time_field(comm::CommParams& p, const std::string& name) {
  if (name == "nvls.latency") return &p.nvls_latency;
  if (name == "nvls.net_latency") return &p.nvls_net_latency;
  for (comm::Algo a : {comm::Algo::ring, comm::Algo::tree}) {
    for (comm::Protocol pr : comm::kAllProtocols) {
      const std::string prefix = fmt::format("{}.{}.", comm::to_string(a), comm::to_string(pr));
      if (name == prefix + "base_latency") return &p.lat(a, pr).base;
      if (name == prefix + "step_latency.net") return &p.lat(a, pr).step[static_cast<std::size_t>(comm::Transport::net)];
    }
  }
  return nullptr;
}

double* fraction_field(comm::CommParams& p, const std::string& name) {
  if (name == "nvls.efficiency") return &p.nvls_efficiency;
  if (name == "nvls.tree_factor") return &p.nvls_tree_factor;
  if (name == "ring.LL.bandwidth_factor.allreduce") return &p.ring_ll_allreduce;
  if (name == "ring.LL.bandwidth_factor.other") return &p.ring_ll_other;
  if (name == "ring.LL128.bandwidth_factor") return &p.ring_ll128;
  if (name == "tree.Simple.bandwidth_factor") return &p.tree_simple;
  if (name == "tree.LL.bandwidth_factor") return &p.tree_ll;
  if (name == "tree.LL128.bandwidth_factor") return &p.tree_ll128;
  return nullptr;
}

double get_knob(CommState& st, const Knob& k, const CollectiveSim& sim) {
  switch (k.kind) {
    case Knob::Kind::time: return time_field(st.comm, k.name)->seconds();
    case Knob::Kind::fraction: return *fraction_field(st.comm, k.name);
    case Knob::Kind::link: {
      const auto it = st.link_eff.find(k.name);
      return it == st.link_eff.end() ? sim.link_default(k.name) : it->second;
    }
  }
  return 0;
}

void set_knob(CommState& st, const Knob& k, double v) {
  switch (k.kind) {
    case Knob::Kind::time: *time_field(st.comm, k.name) = Time::from_seconds(std::max(0.0, v)); break;
    case Knob::Kind::fraction: *fraction_field(st.comm, k.name) = std::clamp(v, 1e-3, 1.0); break;
    case Knob::Kind::link: st.link_eff[k.name] = std::clamp(v, 1e-3, 1.0); break;
  }
}

// The knobs of one algorithm/protocol pair: what its fixed latency and its bandwidth depend on
// (mirrors comm::Planner: hierarchical and direct use ring's tables).
std::pair<Knob, Knob> knobs_of(comm::Algo a, comm::Protocol p, CollOp op, bool multinode, const CollectiveSim& sim) {
  const std::string P(comm::to_string(p));
  Knob lat, bw;
  lat.kind = Knob::Kind::time;
  if (a == comm::Algo::nvls) {
    // Across nodes, the NVLS tree: its per-node latency and the ratio that sets both its NVLink
    // and its network rate.
    lat.name = multinode ? "nvls.net_latency" : "nvls.latency";
    bw = Knob{Knob::Kind::fraction, multinode ? "nvls.tree_factor" : "nvls.efficiency"};
    return {lat, bw};
  }
  const std::string table = a == comm::Algo::tree ? "tree" : "ring";
  lat.name = multinode ? fmt::format("{}.{}.step_latency.net", table, P) : fmt::format("{}.{}.base_latency", table, P);
  if (a == comm::Algo::tree) {
    bw = Knob{Knob::Kind::fraction, fmt::format("tree.{}.bandwidth_factor", P)};
  } else if (p == comm::Protocol::ll) {
    const bool ar = multinode || op == CollOp::allreduce || op == CollOp::reduce;
    bw = Knob{Knob::Kind::fraction, ar ? "ring.LL.bandwidth_factor.allreduce" : "ring.LL.bandwidth_factor.other"};
  } else if (p == comm::Protocol::ll128) {
    bw = Knob{Knob::Kind::fraction, "ring.LL128.bandwidth_factor"};
  } else {
    bw = Knob{Knob::Kind::link, multinode ? sim.nic_link() : sim.intra_link()};
  }
  return {lat, bw};
}

std::optional<comm::Algo> algo_from_label(const std::string& label) {
  std::string l = label;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l.empty() || l == "default" || l == "auto") return std::nullopt;
  if (l.find("nvls") != std::string::npos) return comm::Algo::nvls;
  if (l == "ring") return comm::Algo::ring;
  if (l == "tree") return comm::Algo::tree;
  return std::nullopt;
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
    if (auto st = fit_collectives(); !st) return st.error();
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

  struct Group {
    CollOp op;
    int ranks, nodes;
    std::vector<std::size_t> idx;
  };

  Status fit_collectives() {
    if (d_.collectives.empty()) return {};
    std::map<std::tuple<int, int, int, int>, Group> groups;  // ordered: op priority, intra first, larger first
    auto priority = [](CollOp op) {
      switch (op) {
        case CollOp::allreduce: return 0;
        case CollOp::reducescatter: return 1;
        case CollOp::allgather: return 2;
        case CollOp::broadcast: return 3;
        case CollOp::reduce: return 4;
        case CollOp::alltoall: return 5;
        case CollOp::sendrecv: return 6;
      }
      return 7;
    };
    // A node count the data did not give: as many nodes as the ranks fill of the node preset.
    const int per_node = res_.node_preset.empty() ? 0 : preset_gpus(res_.node_preset);
    for (std::size_t i = 0; i < d_.collectives.size(); ++i) {
      const auto& c = d_.collectives[i];
      int nodes = c.nodes;
      if (!c.nodes_known && per_node > 0 && c.ranks > per_node * nodes) nodes = (c.ranks + per_node - 1) / per_node;
      auto& g = groups[{nodes > 1 ? 1 : 0, priority(c.op), -c.ranks, nodes}];
      g.op = c.op;
      g.ranks = c.ranks;
      g.nodes = nodes;
      g.idx.push_back(i);
    }
    json arr = json::array();
    for (auto& [key, g] : groups) {
      auto j = fit_group(g);
      if (!j) return j.error();
      arr.push_back(*j);
    }
    res_.fit["nccl"] = arr;
    return {};
  }

  Expected<json> fit_group(const Group& g) {
    const std::string suite = fmt::format("nccl.{}.{}x{}", to_string(g.op), g.ranks / std::max(1, g.nodes), g.nodes);
    const auto& cs = d_.collectives;
    auto [train, held] = split(g.idx.size(), o_.holdout_every, [&](std::size_t a, std::size_t b) {
      return std::make_pair(cs[g.idx[a]].bytes, cs[g.idx[a]].in_place) < std::make_pair(cs[g.idx[b]].bytes, cs[g.idx[b]].in_place);
    });
    std::vector<bool> is_held(g.idx.size(), false);
    for (std::size_t j : held) is_held[j] = true;
    // Target algorithm: the option, else the data's label, else dtsim's automatic choice.
    std::optional<comm::Algo> target = o_.algo;
    if (!target) {
      std::set<std::string> labels;
      for (std::size_t i : g.idx) labels.insert(cs[i].algo_label);
      if (labels.size() == 1) target = algo_from_label(*labels.begin());
    }
    json out{{"op", std::string(to_string(g.op))}, {"ranks", g.ranks}, {"nodes", g.nodes},
             {"scope", g.nodes > 1 ? "inter-node" : "intra-node"}, {"algorithm", target ? std::string(comm::to_string(*target)) : "auto"}};

    std::unique_ptr<CollectiveSim> sim;
    std::vector<std::pair<comm::Algo, comm::Protocol>> cands;
    if (g.ranks >= 2 && !res_.node_preset.empty() && g.ranks % g.nodes == 0) {
      auto s = CollectiveSim::make(res_.node_preset, g.nodes, g.ranks / g.nodes);
      if (!s) {
        res_.notes.push_back(fmt::format("{}: no simulator mapping ({} x {} GPUs of {}: {})", suite, g.nodes, g.ranks / g.nodes,
                                         res_.node_preset, s.error().message));
      } else {
        sim = std::move(*s);
        for (const auto& c : sim->candidates(g.op)) {
          if (!target || c.first == *target) cands.push_back(c);
        }
        if (cands.empty()) {
          return Error(fmt::format("{}: dtsim cannot run {} with algorithm {} on {} ({}); choose another --algo", suite, to_string(g.op),
                                   target ? std::string(comm::to_string(*target)) : "auto", res_.node_preset,
                                   cs[g.idx.front()].where));
        }
      }
    } else if (g.ranks < 2) {
      res_.notes.push_back(fmt::format("{}: one rank: NCCL runs no communication; alpha-beta kept in fit: only", suite));
    } else if (res_.node_preset.empty()) {
      res_.notes.push_back(d_.device_name.empty()
                               ? fmt::format("{}: the data names no GPU (an nccl-tests log without '#  Rank' lines): pass --gpu or --node to map "
                                             "collectives onto dtsim",
                                             suite)
                               : fmt::format("{}: no node preset for '{}': pass --node to map collectives onto dtsim", suite, d_.device_name));
    }
    // Protocols the simulator has for the target: one regime each at most.
    std::vector<comm::Protocol> protos;
    for (comm::Protocol p : comm::kAllProtocols) {
      const bool have = sim ? std::any_of(cands.begin(), cands.end(), [&](const auto& c) { return c.second == p; }) : true;
      if (have) protos.push_back(p);
    }
    std::vector<XY> pts;
    for (std::size_t j : train) pts.push_back(XY{static_cast<double>(cs[g.idx[j]].bytes), cs[g.idx[j]].time_s});
    std::stable_sort(pts.begin(), pts.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
    const std::vector<Regime> regimes = fit_regimes(pts, static_cast<int>(protos.size()));
    // Protocol of each regime, in size order; protocols without a regime share the next larger one's.
    auto proto_regime = [&](comm::Protocol p) -> std::size_t {
      const std::size_t k = regimes.size();
      if (k == 1) return 0;
      if (k == protos.size()) return static_cast<std::size_t>(std::find(protos.begin(), protos.end(), p) - protos.begin());
      return p == protos.front() ? 0 : k - 1;  // two regimes of three protocols: smallest one, and the rest
    };
    json rj = json::array();
    for (std::size_t r = 0; r < regimes.size(); ++r) {
      std::string names;
      for (comm::Protocol p : protos) {
        if (proto_regime(p) == r) names += (names.empty() ? "" : ",") + std::string(comm::to_string(p));
      }
      const Regime& re = regimes[r];
      rj.push_back(json{{"from_bytes", static_cast<std::int64_t>(re.from)},
                        {"to_bytes", static_cast<std::int64_t>(re.to)},
                        {"protocols", names},
                        {"alpha_us", round_sig(re.line.alpha * 1e6, 5)},
                        {"bandwidth_GBps", re.line.beta > 0 ? round_sig(1e-9 / re.line.beta, 5) : 0.0}});
    }
    out["regimes"] = rj;
    {
      std::vector<Scored> sc;
      for (std::size_t j = 0; j < g.idx.size(); ++j) {
        const auto& c = cs[g.idx[j]];
        const double t = regime_for(regimes, static_cast<double>(c.bytes)).line(static_cast<double>(c.bytes));
        sc.push_back(Scored{(t - c.time_s) / c.time_s, c.where, is_held[j]});
      }
      res_.residuals.push_back(summarize(suite, "alpha-beta", sc));
    }
    if (!sim) return out;

    // Map each regime onto the knobs of every candidate pair with its protocol: a fixed-latency
    // knob (affine in the knob: probed) and a bandwidth knob (transfer time ~ 1 / knob).
    const bool multinode = g.nodes > 1;
    std::vector<std::string> set_here;
    for (int round = 0; round < 12; ++round) {
      double change = 0;
      for (std::size_t ri = regimes.size(); ri-- > 0;) {
        const Regime& re = regimes[ri];
        for (const auto& [a, p] : cands) {
          if (proto_regime(p) != ri) continue;
          auto [lat, bw] = knobs_of(a, p, g.op, multinode, *sim);
          auto t = [&, algo = a, proto = p](double bytes) { return sim->time(state_, g.op, static_cast<std::int64_t>(bytes), algo, proto); };
          const std::string pair = fmt::format("{}/{}", comm::to_string(a), comm::to_string(p));
          if (bw.valid() && claim(bw, suite, pair) && re.line.beta > 0) {
            const double hi = std::max(re.to, 1024.0);
            auto l0 = t(0), t1 = t(hi);
            if (!l0) return l0.error();
            if (!t1) return t1.error();
            const double k = (*t1 - *l0) / hi;
            const double e = get_knob(state_, bw, *sim);
            if (k > 0) {
              const double want = e * k / re.line.beta;
              const double ne = std::clamp(want, 1e-3, 1.0);
              if (ne != want && round == 0) {
                res_.notes.push_back(fmt::format("{} {}: {} would need {:.4g} to match the measured bandwidth, clamped to {:.4g} (the "
                                                 "measurements are {} than the model allows: check the node preset and the rank count)",
                                                 suite, pair, bw.profile_name(), want, ne, want > 1.0 ? "faster" : "slower"));
              }
              change = std::max(change, std::fabs(ne - e) / e);
              set_knob(state_, bw, ne);
              note_set(set_here, bw);
              covered(suite, pair, bw);
            }
          }
          if (lat.valid() && claim(lat, suite, pair)) {
            auto l0 = t(0);
            if (!l0) return l0.error();
            const double x = get_knob(state_, lat, *sim);
            set_knob(state_, lat, x + 1e-6);
            auto l1 = t(0);
            set_knob(state_, lat, x);
            if (!l1) return l1.error();
            const double slope = (*l1 - *l0) / 1e-6;
            if (slope > 1e-3) {
              const double nx = std::max(0.0, x + (re.line.alpha - *l0) / slope);
              change = std::max(change, std::fabs(nx - x) / std::max(x, 1e-7));
              set_knob(state_, lat, nx);
              note_set(set_here, lat);
              covered(suite, pair, lat);
            }
          }
        }
      }
      if (change < 1e-7) break;
    }
    // The mapping above matches a line, and the model is not one (NVLS's loops and its pipeline's
    // fill and drain, channel pieces, slices). Where one algorithm/protocol pair serves a regime,
    // its own knobs (a latency, a protocol's or NVLS's bandwidth factor; not a link's efficiency,
    // which other regimes share) are then set to the values that minimise the model's squared
    // relative error on the regime's training points, starting from the mapped ones (a
    // golden-section search on each knob in turn, so the polish never ends worse than the mapping
    // on those points).
    for (std::size_t ri = 0; ri < regimes.size(); ++ri) {
      std::vector<std::pair<comm::Algo, comm::Protocol>> serving;
      for (const auto& c : cands) {
        if (proto_regime(c.second) == ri) serving.push_back(c);
      }
      if (serving.size() != 1) continue;
      // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
      const comm::Algo a = serving.front().first;
      const comm::Protocol p = serving.front().second;
      auto [lat, bw] = knobs_of(a, p, g.op, multinode, *sim);
      const std::string pair = fmt::format("{}/{}", comm::to_string(a), comm::to_string(p));
      std::vector<Knob> knobs;
      for (const Knob& k : {lat, bw}) {
        // A link's efficiency also sets the other protocols' rates on that link: left to the
        // mapping, which settles that coupling over its rounds.
        if (k.kind == Knob::Kind::link) continue;
        if (k.valid() && owner_.count(k.profile_name()) && owner_.at(k.profile_name()) == suite + " " + pair) knobs.push_back(k);
      }
      if (knobs.empty()) continue;
      const Regime& re = regimes[ri];
      Status failed;
      auto error = [&]() {
        double sum = 0;
        for (std::size_t i = re.first; i < re.last; ++i) {
          auto t = sim->time(state_, g.op, static_cast<std::int64_t>(pts[i].x), a, p);
          if (!t) {
            failed = t.error();
            return 0.0;
          }
          const double e = (*t - pts[i].y) / pts[i].y;
          sum += e * e;
        }
        return sum;
      };
      for (int round = 0; round < 4; ++round) {
        for (const Knob& k : knobs) {
          const double x0 = get_knob(state_, k, *sim);
          const double best0 = error();
          // Over [x0 / 2, 2 x0] in log space (a fraction stays at most 1).
          double lo = std::log(std::max(x0, 1e-9) / 2), hi = std::log(std::max(x0, 1e-9) * 2);
          if (k.kind != Knob::Kind::time) hi = std::min(hi, 0.0);
          auto at = [&](double l) {
            set_knob(state_, k, std::exp(l));
            return error();
          };
          const double ratio = 0.5 * (std::sqrt(5.0) - 1);
          double c1 = hi - ratio * (hi - lo), c2 = lo + ratio * (hi - lo), f1 = at(c1), f2 = at(c2);
          for (int it = 0; it < 40; ++it) {
            if (f1 < f2) {
              hi = c2, c2 = c1, f2 = f1, c1 = hi - ratio * (hi - lo), f1 = at(c1);
            } else {
              lo = c1, c1 = c2, f1 = f2, c2 = lo + ratio * (hi - lo), f2 = at(c2);
            }
          }
          const double xm = std::exp(0.5 * (lo + hi));
          set_knob(state_, k, xm);
          if (error() > best0) set_knob(state_, k, x0);
          if (!failed.ok()) return failed.error();
          note_set(set_here, k);
        }
      }
    }
    json knobs = json::array();
    for (const auto& k : set_here) knobs.push_back(k);
    out["knobs"] = knobs;
    // The fitted lines are the measured times of whatever NCCL ran at each size, for every pair
    // that could have run it; NCCL's tuner model would choose among them by other numbers
    // (its tree correction factors), so the profile picks the fastest fitted pair instead: within
    // a node only, unless the data crossed nodes (elsewhere the defaults, and NCCL's model, apply).
    if (!set_here.empty()) {
      auto& choice = res_.params["comm.choice"];
      if (multinode) choice = "fastest";
      else if (choice != "fastest") choice = "fastest-on-one-node";
    }
    comm_groups_.push_back(GroupEval{suite, g, is_held, target});
    return out;
  }

  // Which algorithm/protocol pairs of which suite each fitted parameter was fitted for.
  void covered(const std::string& suite, const std::string& pair, const Knob& k) {
    fitted_pairs_[suite].insert(pair);
    auto& c = res_.coverage[k.profile_name()];
    const std::string what = suite + " " + pair;
    if (c.find(what) == std::string::npos) c += (c.empty() ? "" : ", ") + what;
  }

  bool claim(const Knob& k, const std::string& suite, const std::string& pair) {
    const std::string owner = suite + " " + pair;
    auto [it, fresh] = owner_.emplace(k.profile_name(), owner);
    return fresh || it->second == owner;
  }

  void note_set(std::vector<std::string>& list, const Knob& k) {
    if (std::find(list.begin(), list.end(), k.profile_name()) == list.end()) list.push_back(k.profile_name());
    if (k.kind == Knob::Kind::link) res_.link_efficiency[k.name] = state_.link_eff[k.name];
    if (k.kind == Knob::Kind::time) res_.params["comm." + k.name] = time_text(time_field(state_.comm, k.name)->seconds());
    if (k.kind == Knob::Kind::fraction) res_.params["comm." + k.name] = fraction_text(*fraction_field(state_.comm, k.name));
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
    // Collectives: rebuild the state from the texts the profile holds.
    CommState written;
    for (const auto& [name, value] : res_.params) {
      if (name.rfind("comm.", 0) == 0) {
        const Status st = comm::set_comm_param(written.comm, name.substr(5), value);
        DTSIM_ASSERT(st.ok(), "fit: a comm parameter the fit wrote does not read back");
      }
    }
    written.link_eff = res_.link_efficiency;
    for (const GroupEval& ge : comm_groups_) {
      auto sim = CollectiveSim::make(res_.node_preset, ge.g.nodes, ge.g.ranks / ge.g.nodes);
      if (!sim) continue;
      std::vector<Scored> fit_sc, def_sc;
      for (std::size_t j = 0; j < ge.g.idx.size(); ++j) {
        const auto& c = d_.collectives[ge.g.idx[j]];
        auto tf = (*sim)->time(written, c.op, c.bytes, ge.target, std::nullopt);
        auto td = (*sim)->time(CommState{}, c.op, c.bytes, ge.target, std::nullopt);
        if (!tf || !td) continue;
        fit_sc.push_back(Scored{(*tf - c.time_s) / c.time_s, c.where, ge.held[j]});
        def_sc.push_back(Scored{(*td - c.time_s) / c.time_s, c.where, ge.held[j]});
      }
      res_.residuals.push_back(summarize(ge.suite, "profile", fit_sc));
      res_.residuals.push_back(summarize(ge.suite, "defaults", def_sc));
      // Where NCCL's tuner (as modelled, runs with --algo auto) will pick an algorithm/protocol
      // the fit never set, the fitted parameters do not apply: say at which sizes.
      const auto& pairs = fitted_pairs_[ge.suite];
      std::map<std::string, std::vector<std::int64_t>> unfitted;
      std::set<std::int64_t> sizes;
      for (std::size_t idx : ge.g.idx) sizes.insert(d_.collectives[idx].bytes);
      for (std::int64_t bytes : sizes) {
        std::string chosen;
        auto t = (*sim)->time(written, ge.g.op, bytes, std::nullopt, std::nullopt, &chosen);
        if (!t || chosen.empty() || pairs.count(chosen)) continue;
        unfitted[chosen].push_back(bytes);
      }
      for (const auto& [pair, at] : unfitted) {
        res_.warnings.push_back(fmt::format("{}: with --algo auto the tuner picks {}, which this fit did not set, at {} of the measured sizes "
                                            "({} B to {} B): the profile's defaults apply there; pass --algo to the fit and to the runs, "
                                            "or add measurements of {}",
                                            ge.suite, pair, at.size(), at.front(), at.back(), pair));
      }
    }
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

  struct GroupEval {
    std::string suite;
    Group g;
    std::vector<bool> held;
    std::optional<comm::Algo> target;
  };

  const Dataset& d_;
  const FitOptions& o_;
  FitResult res_;
  hw::GpuSpec gpu_;
  std::optional<double> overhead_;
  std::vector<GemmSample> gemm_;
  std::vector<bool> gemm_held_;
  CommState state_;
  std::map<std::string, std::string> owner_;  // knob -> the group and pair that set it
  std::map<std::string, std::set<std::string>> fitted_pairs_;  // suite -> "ring/LL", ... it fitted
  std::vector<GroupEval> comm_groups_;
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
