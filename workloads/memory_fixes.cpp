#include "workloads/memory_fixes.hpp"

#include <functional>
#include <optional>

#include <fmt/format.h>

#include "workloads/layout.hpp"
#include "workloads/memory_estimate.hpp"

namespace dtsim::workloads {

namespace {

constexpr double kGiB = 1073741824.0;

// One way to change the inputs: a label for the change and the edit; nullopt when it does not apply.
using Change = std::function<std::optional<std::string>(StepInputs&)>;

std::optional<MemoryFix> try_fit(const hw::Topology& topo, const StepInputs& in, const std::string& label) {
  auto est = estimate_memory(topo, in);
  if (!est || !est->fits) return std::nullopt;
  return MemoryFix{label, est->peak.total, est->peak.capacity};
}

// The candidate values of one dimension, least disruptive first; the first that fits is kept.
std::vector<Change> dimension_changes(const StepInputs& base, const Layout& lay, int gpus_per_node) {
  std::vector<Change> out;
  const bool transformer = std::holds_alternative<TransformerSpec>(base.model);
  // Recomputation: selective only matters without flash attention (flash attention keeps no
  // s x s scores, which is all selective recomputation drops).
  if (base.training.recompute == Recompute::none && base.training.attention == Attention::standard && transformer) {
    out.push_back([](StepInputs& s) -> std::optional<std::string> {
      s.training.recompute = Recompute::selective;
      return "training.recompute: selective";
    });
  }
  if (base.training.recompute != Recompute::full) {
    out.push_back([](StepInputs& s) -> std::optional<std::string> {
      s.training.recompute = Recompute::full;
      return "training.recompute: full";
    });
  }
  if (lay.dp() > 1) {
    for (int z = base.parallel.zero + 1; z <= 3; ++z) {
      out.push_back([z](StepInputs& s) -> std::optional<std::string> {
        s.parallel.zero = z;
        return fmt::format("parallel.zero: {}", z);
      });
    }
  }
  for (std::int64_t mb = base.training.micro_batch / 2; mb >= 1; mb /= 2) {
    out.push_back([mb](StepInputs& s) -> std::optional<std::string> {
      s.training.micro_batch = mb;
      return fmt::format("training.micro_batch: {}", mb);
    });
  }
  if (transformer) {
    for (int f = 2; lay.dp() % f == 0; f *= 2) {
      out.push_back([f, &lay](StepInputs& s) -> std::optional<std::string> {
        s.parallel.pp = lay.pp() * f;
        s.parallel.dp = lay.dp() / f;
        return fmt::format("parallel.pp: {} (dp {})", s.parallel.pp, s.parallel.dp);
      });
    }
    for (int f = 2; lay.dp() % f == 0 && lay.tp() * f <= gpus_per_node; f *= 2) {
      out.push_back([f, &lay](StepInputs& s) -> std::optional<std::string> {
        s.parallel.tp = lay.tp() * f;
        s.parallel.dp = lay.dp() / f;
        return fmt::format("parallel.tp: {} (dp {})", s.parallel.tp, s.parallel.dp);
      });
    }
  }
  return out;
}

// The family a change belongs to ("parallel.zero"), so that only the smallest value of each is kept.
std::string family(const std::string& label) { return label.substr(0, label.find(':')); }

}  // namespace

std::vector<MemoryFix> memory_fixes(const hw::Topology& topo, const StepInputs& in) {
  std::vector<MemoryFix> out;
  auto lay = Layout::make(in.parallel, topo.gpus());
  if (!lay) return out;
  auto est = estimate_memory(topo, in);
  if (!est || est->fits) return out;
  const int per_node = topo.nodes() > 0 ? topo.gpus() / topo.nodes() : 1;
  const std::vector<Change> changes = dimension_changes(in, *lay, per_node);
  std::vector<std::string> done;
  for (const Change& c : changes) {
    StepInputs s = in;
    auto label = c(s);
    if (!label) continue;
    const std::string fam = family(*label);
    bool seen = false;
    for (const auto& d : done) seen = seen || d == fam;
    if (seen) continue;
    if (auto fix = try_fit(topo, s, *label)) {
      out.push_back(*fix);
      done.push_back(fam);
    }
  }
  if (!out.empty()) return out;
  // No single change is enough: combine the strongest change of each family, in order, and name
  // the first combination that fits.
  StepInputs s = in;
  std::string label;
  std::string last_family;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    StepInputs trial = s;
    auto l = changes[i](trial);
    if (!l) continue;
    const std::string fam = family(*l);
    const bool last_of_family = i + 1 == changes.size() || [&] {
      StepInputs probe = in;
      auto next = changes[i + 1](probe);
      return !next || family(*next) != fam;
    }();
    if (!last_of_family) continue;
    // Pipeline and tensor parallelism both take from dp: keep the first one only.
    if ((fam == "parallel.tp" && last_family == "parallel.pp")) continue;
    auto check = Layout::make(trial.parallel, topo.gpus());
    if (!check) continue;
    s = trial;
    label += (label.empty() ? "" : " + ") + *l;
    last_family = fam;
    if (auto fix = try_fit(topo, s, label)) {
      out.push_back(*fix);
      return out;
    }
  }
  return out;
}

std::string describe(const std::vector<MemoryFix>& fixes) {
  std::string out;
  for (const MemoryFix& f : fixes) {
    if (!out.empty()) out += "; ";
    out += fmt::format("{} ({:.1f} of {:.1f} GiB)", f.change, f.peak_bytes / kGiB, f.capacity_bytes / kGiB);
  }
  return out;
}

}  // namespace dtsim::workloads
