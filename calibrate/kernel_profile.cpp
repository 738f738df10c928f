#include "calibrate/kernel_profile.hpp"
#include "sim/text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "calibrate/fit.hpp"
#include "config/csv.hpp"
#include "config/simulate_loader.hpp"
#include "workloads/compute.hpp"
#include "workloads/layout.hpp"
#include "workloads/program.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;


bool has(const std::string& s, std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) {
    if (s.find(p) != std::string::npos) return true;
  }
  return false;
}

// The kernels of one step the model runs, per family (time and count).
struct Predicted {
  std::map<std::string, std::pair<double, double>> by_family;
  void add(const workloads::Kernel& k, const workloads::ComputeModel& cm, double times) {
    auto& [t, n] = by_family[std::string(workloads::kernel_family(k))];
    t += cm.kernel_time(k).seconds() * times;
    n += times;
  }
  void add(const workloads::Pass& pass, const workloads::ComputeModel& cm, double times) {
    for (const auto& seg : pass.segments) {
      for (const auto& k : seg.kernels) add(k, cm, times);
    }
  }
};

}  // namespace

Expected<std::vector<ProfiledKernel>> parse_kernel_csv(std::string_view text, const std::string& where) {
  // Two layouts: one row per kernel with a `duration_ns` column (dtsim's, as in data/validation/),
  // or `ncu --csv`'s long format, one row per kernel and metric ("Kernel Name", "Metric Name",
  // "Metric Unit", "Metric Value"), of which the gpu__time_duration.sum rows are read.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte order mark
  std::vector<ProfiledKernel> out;
  std::istringstream in{std::string(text)};
  std::string line;
  int n = 0, name_col = -1, dur_col = -1, metric_col = -1, unit_col = -1, value_col = -1;
  std::size_t columns = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line == "\r") continue;
    if (name_col < 0 && line.rfind("==", 0) == 0) continue;  // ncu's "==PROF==" banner lines
    bool unclosed = false;
    const std::vector<std::string> cells = config::split_csv_line(line, &unclosed);
    const auto* f = &cells;
    if (unclosed) return Error(fmt::format("{}:{}: a quoted field is not closed", where, n));
    if (name_col < 0) {
      for (std::size_t i = 0; i < f->size(); ++i) {
        const std::string& h = (*f)[i];
        const int c = static_cast<int>(i);
        if (h == "kernel" || h == "Kernel Name") name_col = c;
        if (h == "duration_ns") dur_col = c;
        if (h == "Metric Name") metric_col = c;
        if (h == "Metric Unit") unit_col = c;
        if (h == "Metric Value") value_col = c;
      }
      const bool long_format = metric_col >= 0 && unit_col >= 0 && value_col >= 0;
      if (name_col < 0 || (dur_col < 0 && !long_format)) {
        return Error(fmt::format("{}:{}: not a kernel profile: the header needs 'kernel' and 'duration_ns' columns "
                                 "(id,kernel,grid,block,duration_ns), or ncu --csv's 'Kernel Name', 'Metric Name', 'Metric Unit' "
                                 "and 'Metric Value'",
                                 where, n));
      }
      columns = f->size();
      continue;
    }
    if (f->size() != columns) {
      return Error(fmt::format("{}:{}: {} fields where the header has {} (truncated line?)", where, n, f->size(), columns));
    }
    std::string d;
    double scale = 1e-9;  // to seconds
    if (dur_col >= 0) {
      d = (*f)[static_cast<std::size_t>(dur_col)];
    } else {
      if ((*f)[static_cast<std::size_t>(metric_col)] != "gpu__time_duration.sum") continue;
      const std::string& unit = (*f)[static_cast<std::size_t>(unit_col)];
      if (unit == "nsecond" || unit == "ns") scale = 1e-9;
      else if (unit == "usecond" || unit == "us") scale = 1e-6;
      else if (unit == "msecond" || unit == "ms") scale = 1e-3;
      else if (unit == "second" || unit == "s") scale = 1;
      else return Error(fmt::format("{}:{}: Metric Unit '{}' is not a time unit", where, n, unit));
      for (char ch : (*f)[static_cast<std::size_t>(value_col)]) {
        if (ch != ',') d += ch;  // thousands separators
      }
    }
    char* end = nullptr;
    const double v = std::strtod(d.c_str(), &end);
    if (d.empty() || end != d.c_str() + d.size() || !(v >= 0) || !std::isfinite(v)) {
      return Error(fmt::format("{}:{}: {} '{}' is not a non-negative number", where, n, dur_col >= 0 ? "duration_ns" : "Metric Value", d));
    }
    out.push_back(ProfiledKernel{(*f)[static_cast<std::size_t>(name_col)], v * scale, n});
  }
  if (name_col < 0) return Error(fmt::format("{}: empty kernel profile (no header)", where));
  if (out.empty()) return Error(fmt::format("{}: the kernel profile has a header but no kernels", where));
  return out;
}

Expected<std::vector<ProfiledKernel>> read_kernel_csv(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Error(fmt::format("{}: cannot read the kernel profile", path));
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_kernel_csv(ss.str(), path);
}

std::string kernel_family_of(std::string_view raw) {
  const std::string s = ascii_lower(raw);
  if (has(s, {"nccl"})) return "communication";
  if (has(s, {"fill_random", "fill_value", "fill_tokens", "k_cast<"})) return "startup";
  if (has(s, {"flash", "fmha", "attention", "attn", "sdpa"})) return "attention";
  // Matrix products before the element-wise names: cuBLAS and CUTLASS kernels with fused
  // epilogues carry "relu" or "gelu" in their names.
  if (has(s, {"gemm", "nvjet", "cutlass", "xmma", "cublas", "gemv", "splitk", "s16816", "s1688", "h16816", "sm90_xmma", "sm80_xmma"})) return "gemm";
  if (has(s, {"k_ce_", "cross_entropy", "nll_loss", "log_softmax", "logsoftmax"})) return "cross_entropy";
  if (has(s, {"softmax"})) return "softmax";
  if (has(s, {"dropout", "masked_scale"})) return "dropout";
  if (has(s, {"layernorm", "layer_norm", "rmsnorm", "rms_norm", "batch_norm", "batchnorm", "bn_fw", "bn_bw"})) return "norm";
  if (has(s, {"gelu", "silu", "swiglu", "relu", "tanh", "sigmoid"})) return "activation";
  // Optimizers ("lamb" only as a word of its own: demangled PyTorch names are full of "lambda").
  if (has(s, {"adam", "sgd", "multi_tensor_apply", "multi_tensor_lamb", "lamb_", "optimizer"})) return "optimizer";
  if (has(s, {"embedding", "index_select", "embedding_dense"})) return "embedding";
  if (has(s, {"copy", "k_qkv", "k_heads", "transpose", "permute", "cat_", "catarray", "memcpy", "memset", "elementwise", "vectorized",
               "unrolled"})) {
    return "copy";
  }
  return "other";
}

Expected<KernelComparison> compare_kernels(const ValidationPoint& p, const std::vector<ProfiledKernel>& kernels, int steps,
                                           const ValidationOptions& o) {
  KernelComparison c;
  c.point = p.point;
  // Measured: leave out the start-up kernels that precede the first step.
  std::size_t first = 0;
  while (first < kernels.size() && kernel_family_of(kernels[first].name) == "startup") ++first;
  c.startup_kernels = static_cast<int>(first);
  std::map<std::string, std::pair<double, double>> measured;
  int optimizer_kernels = 0;
  for (std::size_t i = first; i < kernels.size(); ++i) {
    std::string fam = kernel_family_of(kernels[i].name);
    if (fam == "startup") fam = "other";
    if (fam == "optimizer") ++optimizer_kernels;
    auto& [t, n] = measured[fam];
    t += kernels[i].duration_s;
    n += 1;
  }
  c.steps = steps > 0 ? steps : optimizer_kernels;
  if (c.steps <= 0) {
    return Error(fmt::format("the kernel profile has no optimizer kernel to count steps by; give the number of steps it holds (--steps)"));
  }

  // Predicted: the point's simulate configuration, its layer programs timed kernel by kernel.
  std::string node = o.node;
  if (node.empty()) node = node_preset_for(gpu_preset_for(p.device_name));
  if (node.empty()) return Error(fmt::format("{}: no node preset for the device '{}'; name one with --node", p.where, p.device_name));
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(p.where, {}, ctx, simulate_yaml(p, node), o.profile);
  if (!cfg) return Error(fmt::format("{}: the equivalent simulate configuration is invalid:\n{}", p.where, ctx.diagnostics.to_string()));
  const auto* m = std::get_if<workloads::TransformerSpec>(&cfg->inputs.model);
  if (m == nullptr) return Error(fmt::format("{}: the validation point is not a transformer", p.where));
  const auto& tr = cfg->inputs.training;
  auto lay = workloads::Layout::make(cfg->inputs.parallel, p.gpus);
  if (!lay) return Error(fmt::format("{}: {}", p.where, lay.error().to_string()));
  const workloads::ProgramShape sh = workloads::program_shape(*m, tr, cfg->inputs.parallel, *lay);
  if (cfg->cluster.groups.empty()) return Error(fmt::format("{}: the equivalent cluster has no nodes", p.where));
  const workloads::ComputeModel cm(cfg->cluster.groups.front().node.gpu, cfg->inputs.compute);
  const double micro = static_cast<double>(tr.global_batch) / static_cast<double>(tr.micro_batch * lay->dp());
  Predicted pred;
  const auto emb = workloads::transformer_embedding(*m, sh);
  const auto block = workloads::transformer_block(*m, sh);
  const auto head = workloads::transformer_head(*m, sh);
  for (const auto* lp : {&emb, &head}) {
    pred.add(lp->forward, cm, micro);
    pred.add(lp->recompute, cm, micro);
    pred.add(lp->backward, cm, micro);
  }
  const double layers = static_cast<double>(m->layers) * micro;
  pred.add(block.forward, cm, layers);
  pred.add(block.recompute, cm, layers);
  pred.add(block.backward, cm, layers);
  const double params = static_cast<double>(emb.params + head.params) +
                        static_cast<double>(block.params + block.expert_params) * static_cast<double>(m->layers);
  pred.add(workloads::optimizer_update(tr, params), cm, 1);
  // The gradient memset is not a kernel in a kernel profile (cudaMemset): left out of the comparison.

  std::map<std::string, FamilyRow> rows;
  for (const auto& [fam, tn] : measured) {
    FamilyRow& r = rows[fam];
    r.family = fam;
    r.measured_s = tn.first / c.steps;
    r.measured_kernels = tn.second / c.steps;
  }
  for (const auto& [fam, tn] : pred.by_family) {
    FamilyRow& r = rows[fam];
    r.family = fam;
    r.predicted_s = tn.first;
    r.predicted_kernels = tn.second;
  }
  for (auto& [fam, r] : rows) {
    c.measured_s += r.measured_s;
    c.predicted_s += r.predicted_s;
    c.rows.push_back(r);
  }
  std::stable_sort(c.rows.begin(), c.rows.end(), [](const FamilyRow& a, const FamilyRow& b) {
    return std::max(a.measured_s, a.predicted_s) > std::max(b.measured_s, b.predicted_s);
  });
  return c;
}

std::string kernel_table(const KernelComparison& c) {
  std::string out = fmt::format("kernels of one step of {} ({} steps in the profile, {} start-up kernels left out)\n", c.point, c.steps,
                                c.startup_kernels);
  out += fmt::format("{:<14} {:>13} {:>14} {:>9} {:>9}  {:>9} {:>10}  {:>16}\n", "family", "measured(ms)", "predicted(ms)", "error",
                     "of step", "kernels", "predicted", "pred - meas (ms)");
  for (const auto& r : c.rows) {
    const std::string err = r.measured_s > 0 ? fmt::format("{:+.1f}%", 100 * r.error()) : std::string("-");
    out += fmt::format("{:<14} {:>13.3f} {:>14.3f} {:>9} {:>8.1f}%  {:>9.0f} {:>10.0f}  {:>+16.3f}\n", r.family, r.measured_s * 1e3,
                       r.predicted_s * 1e3, err, c.measured_s > 0 ? 100 * r.measured_s / c.measured_s : 0.0, r.measured_kernels,
                       r.predicted_kernels, (r.predicted_s - r.measured_s) * 1e3);
  }
  out += fmt::format("{:<14} {:>13.3f} {:>14.3f} {:>+8.1f}%\n", "total", c.measured_s * 1e3, c.predicted_s * 1e3,
                     c.measured_s > 0 ? 100 * (c.predicted_s - c.measured_s) / c.measured_s : 0.0);
  out += "(measured: kernel durations serialised by the profiler, summed per step; predicted: dtsim's kernels for the same step)\n";
  return out;
}

nlohmann::json kernel_json(const KernelComparison& c) {
  json rows = json::array();
  for (const auto& r : c.rows) {
    rows.push_back(json{{"family", r.family},
                        {"measured_s", r.measured_s},
                        {"predicted_s", r.predicted_s},
                        {"error", r.measured_s > 0 ? json(r.error()) : json(nullptr)},
                        {"measured_kernels", r.measured_kernels},
                        {"predicted_kernels", r.predicted_kernels}});
  }
  return json{{"point", c.point},
              {"steps", c.steps},
              {"startup_kernels", c.startup_kernels},
              {"measured_s", c.measured_s},
              {"predicted_s", c.predicted_s},
              {"families", rows}};
}

}  // namespace dtsim::calibrate
