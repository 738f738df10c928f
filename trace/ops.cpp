#include "trace/ops.hpp"

#include <algorithm>
#include <unordered_map>

namespace dtsim::trace {

namespace {

std::int64_t numel(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

int element_bytes(const CpuOp& op) {
  auto d = dtype_of(op);
  return d ? hw::dtype_bytes(*d) : 4;
}

}  // namespace

StepOps link_step(const Trace& t) {
  StepOps s;
  std::unordered_map<std::int64_t, const RuntimeCall*> by_correlation;
  for (const auto& r : t.runtime) {
    if (r.correlation >= 0) by_correlation[r.correlation] = &r;
  }
  std::unordered_map<std::int64_t, const CpuOp*> by_external;
  for (const auto& c : t.cpu) {
    if (c.external_id >= 0) by_external[c.external_id] = &c;
  }
  std::vector<Interval> optimizer;
  for (const auto& a : t.annotations) {
    if (a.gpu && a.name.rfind("Optimizer.step", 0) == 0) optimizer.push_back(a.time);
  }
  s.ops.reserve(t.gpu.size());
  for (const auto& g : t.gpu) {
    StepOp o;
    o.op = &g;
    o.cls = classify(g);
    if (auto it = by_correlation.find(g.correlation); it != by_correlation.end()) {
      o.launch = it->second;
      ++s.linked_launches;
    }
    if (auto it = by_external.find(g.external_id); it != by_external.end()) {
      o.launcher = it->second;
      ++s.linked_operators;
      o.dtype = dtype_of(*o.launcher);
      if (o.cls == KernelClass::gemm) o.gemm = gemm_shape(*o.launcher);
      // cuDNN runs 1x1 convolutions (and some others) as cuBLASLt GEMMs: the operator decides.
      if (o.cls == KernelClass::gemm && o.launcher->name.find("conv") != std::string::npos) o.cls = KernelClass::convolution;
    }
    const bool in_opt = std::any_of(optimizer.begin(), optimizer.end(),
                                    [&](const Interval& w) { return g.time.ts_ns >= w.ts_ns && g.time.ts_ns < w.end_ns(); });
    if (in_opt && o.cls != KernelClass::communication) o.cls = KernelClass::optimizer;
    s.ops.push_back(o);
  }
  std::stable_sort(s.ops.begin(), s.ops.end(), [](const StepOp& a, const StepOp& b) { return a.op->time.ts_ns < b.op->time.ts_ns; });
  if (s.ops.empty()) return s;  // read_trace refuses such a trace; other callers get an empty step
  s.gpu_begin_ns = s.ops.front().op->time.ts_ns;
  s.gpu_end_ns = s.gpu_begin_ns;
  for (const auto& o : s.ops) s.gpu_end_ns = std::max(s.gpu_end_ns, o.op->time.end_ns());

  for (const auto& c : t.cpu) s.host_event_starts.push_back(c.time.ts_ns);
  for (const auto& r : t.runtime) s.host_event_starts.push_back(r.time.ts_ns);
  for (const auto& a : t.annotations) {
    if (!a.gpu) s.host_event_starts.push_back(a.time.ts_ns);
  }
  std::sort(s.host_event_starts.begin(), s.host_event_starts.end());
  if (const Annotation* step = t.profiler_step()) s.host_begin_ns = step->time.ts_ns;
  else s.host_begin_ns = s.host_event_starts.empty() ? s.gpu_begin_ns : std::min(s.host_event_starts.front(), s.gpu_begin_ns);

  s.profiler_overhead = t.profiler_overhead;
  for (const auto& c : t.cpu) {
    if (c.name == "torch::autograd::AccumulateGrad" && !c.input_dims.empty()) {
      s.gradients.push_back(GradientOp{numel(c.input_dims[0]) * element_bytes(c), c.time.ts_ns, c.time.end_ns()});
    }
  }
  std::stable_sort(s.gradients.begin(), s.gradients.end(),
                   [](const GradientOp& a, const GradientOp& b) { return a.host_end_ns < b.host_end_ns; });
  // Autograd arrows: pair the two ends of each id (an end without its partner is left out).
  std::unordered_map<std::int64_t, std::int64_t> forward_of;
  for (const auto& f : t.autograd_flows) {
    if (f.start) forward_of.emplace(f.id, f.ts_ns);
  }
  for (const auto& f : t.autograd_flows) {
    if (f.start) continue;
    if (auto it = forward_of.find(f.id); it != forward_of.end() && it->second <= f.ts_ns) s.autograd.push_back(AutogradEdge{it->second, f.ts_ns});
  }
  std::stable_sort(s.autograd.begin(), s.autograd.end(), [](const AutogradEdge& a, const AutogradEdge& b) { return a.backward_ns < b.backward_ns; });
  return s;
}

}  // namespace dtsim::trace
