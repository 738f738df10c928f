#include "trace/trace_graph.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace dtsim::trace {

namespace {

// Re-times one op measured on `src` for `dst`: a fixed part (launch and fixed cost, the compute
// model's kernel_overhead) kept, the rest scaled by the ratio of achievable throughput (and by the
// share of the work left to the op).
class Retimer {
 public:
  Retimer(const hw::GpuSpec& src, const hw::GpuSpec& dst, const workloads::ComputeParams& p)
      : same_(src.name == dst.name), src_(src, p), dst_(dst, p), fixed_ns_(p.kernel_overhead.picoseconds() / 1000) {}

  // `shards`: the op does 1/shards of its traced work (a sharded optimizer step).
  std::int64_t retime(const StepOp& o, int shards = 1) const {
    const std::int64_t t = o.op->time.dur_ns;
    if (same_ && shards == 1) return t;
    const double ratio = (same_ ? 1.0 : throughput_ratio(o)) / shards;
    const std::int64_t fixed = std::min(t, fixed_ns_);
    return fixed + std::llround(static_cast<double>(t - fixed) * ratio);
  }

 private:
  hw::DType usable(const workloads::ComputeModel& m, hw::DType d) const {
    if (m.supports(d)) return d;
    if (m.supports(hw::DType::fp16)) return hw::DType::fp16;
    return hw::DType::fp32;
  }
  double peak(const workloads::ComputeModel& m, hw::DType d) const { return m.gpu().peak.at(usable(m, d)).flops_per_s(); }

  // src throughput / dst throughput: the factor on the variable part of the duration.
  double throughput_ratio(const StepOp& o) const {
    switch (bound_of(o.cls)) {
      case Bound::compute: {
        const hw::DType d = o.dtype.value_or(hw::DType::bf16);
        double src = peak(src_, d), dst = peak(dst_, d);
        if (o.gemm) {
          src *= src_.gemm_efficiency(o.gemm->m, o.gemm->n, o.gemm->k, o.gemm->batch, usable(src_, d));
          dst *= dst_.gemm_efficiency(o.gemm->m, o.gemm->n, o.gemm->k, o.gemm->batch, usable(dst_, d));
        }
        return src / dst;
      }
      case Bound::memory:
      case Bound::communication:
        return src_.gpu().memory_bandwidth.bytes_per_s() / dst_.gpu().memory_bandwidth.bytes_per_s();
    }
    return 1.0;
  }

  bool same_;
  workloads::ComputeModel src_, dst_;
  std::int64_t fixed_ns_;
};

constexpr int kMaxStream = 1023;  // graph_json's bound on GraphOp::stream

// The compute ops in host launch order, with their launch times (trace time). Ops without a
// linked launch keep their GPU order, launched at the latest launch before them.
struct LaunchOrder {
  std::vector<std::size_t> ops;         // indices into StepOps::ops
  std::vector<std::int64_t> launch_end; // when each one's launch call returned
};

LaunchOrder launch_order(const StepOps& s, std::size_t& removed_comm) {
  LaunchOrder lo;
  std::int64_t last = s.host_begin_ns;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const StepOp& o = s.ops[i];
    if (o.cls == KernelClass::communication) {
      ++removed_comm;
      continue;
    }
    last = o.launch ? o.launch->time.end_ns() : std::max(last, s.host_begin_ns);
    lo.ops.push_back(i);
    lo.launch_end.push_back(last);
  }
  std::vector<std::size_t> idx(lo.ops.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return lo.launch_end[a] < lo.launch_end[b]; });
  LaunchOrder sorted;
  for (std::size_t k : idx) sorted.ops.push_back(lo.ops[k]), sorted.launch_end.push_back(lo.launch_end[k]);
  return sorted;
}

// The stream most of the compute ops ran on: the one that becomes the graph's stream 0.
std::int64_t main_stream(const StepOps& s, const LaunchOrder& lo) {
  std::map<std::int64_t, std::size_t> count;
  for (std::size_t i : lo.ops) ++count[s.ops[i].op->stream];
  return std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

// The position (launch order) of the first op launched at or after host time `ns`.
std::size_t position_at(const LaunchOrder& lo, std::int64_t ns) {
  const auto it = std::lower_bound(lo.launch_end.begin(), lo.launch_end.end(), ns);
  return std::min(static_cast<std::size_t>(it - lo.launch_end.begin()), lo.ops.size() - 1);
}

struct Grad {
  std::int64_t bytes = 0;
  std::size_t ready = 0;    // position of the op after which it is final
  std::size_t forward = 0;  // position of its first use in the forward pass (FSDP only)
};

// The gradients in the order they became final, each after the last op launched before the host
// accumulated it.
Expected<std::vector<Grad>> gradients(const TraceGraphInputs& in, const LaunchOrder& lo, std::string& source) {
  const StepOps& s = *in.ops;
  std::vector<Grad> grads;
  for (const auto& g : s.gradients) {
    const auto it = std::upper_bound(lo.launch_end.begin(), lo.launch_end.end(), g.host_end_ns);
    const std::size_t pos = it == lo.launch_end.begin() ? 0 : static_cast<std::size_t>(it - lo.launch_end.begin()) - 1;
    // Its producer: the last backward node autograd started before it (AccumulateGrad runs as soon
    // as its input is ready), whose forward operator is where the parameter was used.
    std::size_t forward = 0;
    const auto e = std::upper_bound(s.autograd.begin(), s.autograd.end(), g.host_start_ns,
                                    [](std::int64_t t, const AutogradEdge& a) { return t < a.backward_ns; });
    if (e != s.autograd.begin()) forward = position_at(lo, std::prev(e)->forward_ns);
    grads.push_back(Grad{g.bytes, pos, forward});
  }
  source = fmt::format("trace ({} AccumulateGrad operators)", s.gradients.size());
  if (in.gradient_bytes) {
    // A model named beside the trace: its gradient bytes, spread over the backward pass as the
    // trace's gradients are (or, without any, all at the end of the backward pass).
    std::int64_t traced = 0;
    for (const auto& g : grads) traced += g.bytes;
    const double scale = traced > 0 ? static_cast<double>(*in.gradient_bytes) / static_cast<double>(traced) : 0;
    if (grads.empty()) grads.push_back(Grad{*in.gradient_bytes, lo.ops.size() - 1, 0});
    else for (auto& g : grads) g.bytes = std::llround(static_cast<double>(g.bytes) * scale);
    source = "model";
  }
  std::int64_t total = 0;
  for (const auto& g : grads) total += g.bytes;
  if (total == 0) {
    return Error("data parallelism needs gradient sizes: the trace has no torch::autograd::AccumulateGrad operators with shapes "
                 "(profile with record_shapes=True) and no model is named beside it (model: {trace: FILE, gradients_from: MODEL})",
                 "model.trace");
  }
  return grads;
}

// The longest run of a repeated block in a sequence of sizes: `count` copies of `period` sizes
// from `begin` (count 0: none repeats).
struct Repeat {
  std::size_t begin = 0, period = 0, count = 0;
};
Repeat longest_repeat(const std::vector<std::int64_t>& v) {
  Repeat best;
  const std::size_t n = v.size();
  for (std::size_t p = 2; 2 * p <= n; ++p) {
    for (std::size_t a = 0; a + 2 * p <= n; ++a) {
      std::size_t k = 1;
      while (a + (k + 1) * p <= n && std::equal(v.begin() + static_cast<std::ptrdiff_t>(a), v.begin() + static_cast<std::ptrdiff_t>(a + p),
                                                 v.begin() + static_cast<std::ptrdiff_t>(a + k * p))) {
        ++k;
      }
      if (k >= 2 && k * p > best.count * best.period) best = Repeat{a, p, k};
    }
  }
  return best;
}

// FSDP's units and where their parameters are gathered and their gradients reduced (PyTorch
// FSDP with a per-layer wrap policy: each repeated block of parameters is a unit, the rest the
// root unit). Units are gathered before their first forward use and, except the root (kept after
// forward, FSDP's root), again before their backward starts: the first backward node of an
// operator in the unit's forward span. A unit's gradients are reduce-scattered once they are all
// final, in that order.
struct FsdpPlan {
  std::vector<std::pair<std::size_t, double>> gathers;  // (position, parameters), in position order
  std::vector<int> unit_of_grad;                        // per gradient (in ready order)
  std::vector<double> unit_params;                      // per unit, the root last
  int units = 0;                                        // wrapped units; unit `units` is the root
  int unit_tensors = 0;
  std::int64_t root_bytes = 0;
};

Expected<FsdpPlan> fsdp_plan(const StepOps& s, const LaunchOrder& lo, const std::vector<Grad>& grads) {
  if (s.autograd.empty()) {
    return Error("FSDP on a traced step needs autograd's forward-to-backward arrows (\"fwdbwd\" flow events, written by PyTorch's "
                 "profiler since 1.10): this trace has none",
                 "parallel.zero");
  }
  // Parameters in the order of first forward use (ties: the reverse of backward order, as the
  // forward declared them).
  std::vector<std::size_t> fwd(grads.size());
  std::iota(fwd.begin(), fwd.end(), 0);
  std::stable_sort(fwd.begin(), fwd.end(), [&](std::size_t a, std::size_t b) {
    return grads[a].forward != grads[b].forward ? grads[a].forward < grads[b].forward : a > b;
  });
  std::vector<std::int64_t> sizes;
  for (std::size_t i : fwd) sizes.push_back(grads[i].bytes);
  const Repeat rep = longest_repeat(sizes);
  FsdpPlan plan;
  plan.units = static_cast<int>(rep.count);
  plan.unit_tensors = static_cast<int>(rep.period);
  plan.unit_of_grad.assign(grads.size(), plan.units);
  std::vector<double>& params = plan.unit_params;
  params.assign(static_cast<std::size_t>(plan.units) + 1, 0.0);
  std::vector<std::size_t> begin(static_cast<std::size_t>(plan.units) + 1, lo.ops.size());  // forward span starts
  for (std::size_t k = 0; k < fwd.size(); ++k) {
    const std::size_t g = fwd[k];
    int u = plan.units;
    if (k >= rep.begin && k < rep.begin + rep.count * rep.period) u = static_cast<int>((k - rep.begin) / rep.period);
    plan.unit_of_grad[g] = u;
    params[static_cast<std::size_t>(u)] += static_cast<double>(grads[g].bytes) / 4.0;
    begin[static_cast<std::size_t>(u)] = std::min(begin[static_cast<std::size_t>(u)], grads[g].forward);
    if (u == plan.units) plan.root_bytes += grads[g].bytes;
  }
  // The root first, at the step's start; each unit before its forward span.
  if (params.back() > 0) plan.gathers.emplace_back(0, params.back());
  for (int u = 0; u < plan.units; ++u) plan.gathers.emplace_back(begin[static_cast<std::size_t>(u)], params[static_cast<std::size_t>(u)]);
  // Backward: the earliest backward node of an operator in [begin u, begin u+1 or the root's next use).
  std::vector<std::pair<std::size_t, std::size_t>> arrows;  // (forward, backward) op positions
  for (const auto& e : s.autograd) arrows.emplace_back(position_at(lo, e.forward_ns), position_at(lo, e.backward_ns));
  for (int u = 0; u < plan.units; ++u) {
    const std::size_t lo_pos = begin[static_cast<std::size_t>(u)];
    std::size_t hi_pos = lo.ops.size();
    if (u + 1 < plan.units) hi_pos = begin[static_cast<std::size_t>(u) + 1];
    else {
      for (std::size_t k = rep.begin + rep.count * rep.period; k < fwd.size(); ++k) hi_pos = std::min(hi_pos, grads[fwd[k]].forward);
    }
    std::size_t at = lo.ops.size();
    for (const auto& [f, b] : arrows) {
      if (f >= lo_pos && f < hi_pos) at = std::min(at, b);
    }
    // Without an arrow into the span, just before the unit's first gradient is final.
    if (at == lo.ops.size()) {
      for (std::size_t g = 0; g < grads.size(); ++g) {
        if (plan.unit_of_grad[g] == u) at = std::min(at, grads[g].ready);
      }
    }
    plan.gathers.emplace_back(at, params[static_cast<std::size_t>(u)]);
  }
  std::stable_sort(plan.gathers.begin(), plan.gathers.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return plan;
}

}  // namespace

Expected<TraceGraph> build_trace_graph(const TraceGraphInputs& in) {
  const StepOps& s = *in.ops;
  TraceGraph out;
  const LaunchOrder lo = launch_order(s, out.removed_comm_ops);
  if (lo.ops.empty()) return Error("the trace holds no compute operations (only communication kernels)", "model.trace");
  if (in.targets.empty()) return Error("no GPU to simulate the traced step on", "cluster");
  out.main_stream = main_stream(s, lo);

  // Gradients, and the buckets they are reduced in: DDP's (the first closes at first_bucket
  // bytes, the others at bucket) or FSDP's units (each closes with its last gradient).
  std::vector<Grad> grads;
  if (in.data_parallel) {
    auto g = gradients(in, lo, out.gradient_source);
    if (!g) return g.error();
    grads = std::move(*g);
  }
  FsdpPlan fsdp;
  if (in.fsdp && !grads.empty()) {
    auto f = fsdp_plan(s, lo, grads);
    if (!f) return f.error();
    fsdp = std::move(*f);
    out.fsdp_units = fsdp.units;
    out.fsdp_unit_tensors = fsdp.unit_tensors;
    out.fsdp_root_bytes = fsdp.root_bytes;
  }
  workloads::StageGraph proto;
  proto.labels = {"step"};
  for (int c = 0; c < kKernelClasses; ++c) proto.labels.emplace_back(to_string(static_cast<KernelClass>(c)));
  std::vector<std::vector<int>> slots_after(lo.ops.size());  // gradient slots final after each op
  std::vector<std::vector<int>> gathers_before(lo.ops.size());
  // A gradient that the trace makes final at or after the optimizer's first kernel (one spread
  // from a model named beside a trace without gradients, say) is final when the backward pass
  // ends: just before end_backward, so that DDP still waits for its reduction.
  std::size_t first_optimizer = lo.ops.size();
  for (std::size_t pos = 0; pos < lo.ops.size() && first_optimizer == lo.ops.size(); ++pos) {
    if (s.ops[lo.ops[pos]].cls == KernelClass::optimizer) first_optimizer = pos;
  }
  std::vector<int> at_backward_end;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    out.gradient_bytes += grads[i].bytes;
    proto.grad_slots.push_back(workloads::LayerSlot{static_cast<double>(grads[i].bytes) / 4.0, 0, {}, false});
    proto.slot_bucket.push_back(-1);
    if (grads[i].ready < first_optimizer) slots_after[grads[i].ready].push_back(static_cast<int>(i));
    else at_backward_end.push_back(static_cast<int>(i));
  }
  proto.dense_params = static_cast<double>(out.gradient_bytes) / 4.0;
  if (in.fsdp && !grads.empty()) {
    // A unit's bucket closes at the slot of its last gradient; buckets in the order they close.
    std::vector<int> last(fsdp.unit_params.size(), -1);
    for (std::size_t i = 0; i < grads.size(); ++i) last[static_cast<std::size_t>(fsdp.unit_of_grad[i])] = static_cast<int>(i);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const auto u = static_cast<std::size_t>(fsdp.unit_of_grad[i]);
      if (last[u] != static_cast<int>(i)) continue;
      proto.buckets.push_back(workloads::Bucket{fsdp.unit_params[u], 0});
      proto.slot_bucket[i] = static_cast<int>(proto.buckets.size() - 1);
    }
    for (std::size_t k = 0; k < fsdp.gathers.size(); ++k) {
      proto.gathers.push_back(fsdp.gathers[k].second);
      gathers_before[fsdp.gathers[k].first].push_back(static_cast<int>(k));
    }
  } else {
    double open = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      open += static_cast<double>(grads[i].bytes);
      const std::int64_t cap = (proto.buckets.empty() ? in.params.first_bucket : in.params.bucket).count();
      if (open >= static_cast<double>(cap) || i + 1 == grads.size()) {
        proto.buckets.push_back(workloads::Bucket{open / 4.0, 0});
        proto.slot_bucket[i] = static_cast<int>(proto.buckets.size() - 1);
        open = 0;
      }
    }
  }

  // Host launch intervals less the profiler's recording cost, and the GPU-side delays.
  const std::int64_t overhead_ns = in.params.profiler_overhead_per_event.picoseconds() / 1000;
  auto events_in = [&](std::int64_t from, std::int64_t to) {  // host events starting in (from, to]
    const auto a = std::upper_bound(s.host_event_starts.begin(), s.host_event_starts.end(), from);
    const auto b = std::upper_bound(s.host_event_starts.begin(), s.host_event_starts.end(), to);
    return static_cast<std::int64_t>(b - a);
  };
  auto profiler_spans_in = [&](std::int64_t from, std::int64_t to) {
    std::int64_t ns = 0;
    for (const auto& [ts, dur] : s.profiler_overhead) ns += std::max<std::int64_t>(0, std::min(to, ts + dur) - std::max(from, ts));
    return ns;
  };
  std::map<std::int64_t, int> stream_ids{{out.main_stream, 0}};
  std::map<std::int64_t, std::int64_t> traced_end;  // trace stream -> when its last op ended in the trace
  std::vector<std::int64_t> host_gap(lo.ops.size()), delay(lo.ops.size());
  std::vector<int> stream(lo.ops.size());
  std::int64_t prev_launch = s.host_begin_ns;
  for (std::size_t pos = 0; pos < lo.ops.size(); ++pos) {
    const StepOp& o = s.ops[lo.ops[pos]];
    const std::int64_t le = lo.launch_end[pos];
    host_gap[pos] = std::max<std::int64_t>(0, le - prev_launch - overhead_ns * events_in(prev_launch, le) - profiler_spans_in(prev_launch, le));
    prev_launch = le;
    // The delay measured once both the launch and the previous op on the stream were done: launch
    // latency when the op waited for the host, the inter-kernel gap when it was queued.
    std::int64_t& prev_traced = traced_end[o.op->stream];
    delay[pos] = std::max<std::int64_t>(0, o.op->time.ts_ns - std::max(prev_traced, le));
    prev_traced = std::max(prev_traced, o.op->time.end_ns());
    const auto [it, added] = stream_ids.emplace(o.op->stream, static_cast<int>(stream_ids.size()));
    stream[pos] = std::min(it->second, kMaxStream);
    out.gpu_delay_s += static_cast<double>(delay[pos]) * 1e-9;
    if (stream[pos] == 0) out.main_delay_s += static_cast<double>(delay[pos]) * 1e-9;
  }

  // One stage graph per GPU kind: the same ops, re-timed.
  auto& g = out.graph;
  for (std::size_t k = 0; k < in.targets.size(); ++k) {
    const Retimer retimer(in.traced_gpu, *in.targets[k], in.compute);
    workloads::StageGraph sg = proto;
    bool backward_over = false;
    for (std::size_t pos = 0; pos < lo.ops.size(); ++pos) {
      const StepOp& o = s.ops[lo.ops[pos]];
      if (o.cls == KernelClass::optimizer && !backward_over) {
        // DDP's end-of-backward hook: the optimizer's kernels wait for every bucket's reduction.
        backward_over = true;
        for (int slot : at_backward_end) {
          sg.ops.push_back(workloads::GraphOp{workloads::OpKind::grads_ready, slot, 0, Time::zero(), false, 0, Time::zero(), Time::zero(), 0});
        }
        sg.ops.push_back(workloads::GraphOp{workloads::OpKind::end_backward, 0, 0, Time::zero(), false, 0, Time::zero(), Time::zero(), 0});
      }
      for (int gi : gathers_before[pos]) {
        sg.ops.push_back(workloads::GraphOp{workloads::OpKind::gather_wait, gi, 0, Time::zero(), false, 0, Time::zero(), Time::zero(), 0});
      }
      // Sharded data parallelism: the optimizer updates this rank's 1/dp of the parameters.
      const bool shard = in.shard_optimizer && o.cls == KernelClass::optimizer;
      const std::int64_t dur = retimer.retime(o, shard ? in.dp : 1);
      const int label = 1 + static_cast<int>(o.cls);
      sg.ops.push_back(workloads::GraphOp{workloads::OpKind::compute, 0, 0, Time::ns(dur), false, label, Time::ns(host_gap[pos]),
                                          Time::ns(delay[pos]), stream[pos]});
      for (int slot : slots_after[pos]) {
        sg.ops.push_back(workloads::GraphOp{workloads::OpKind::grads_ready, slot, 0, Time::zero(), false, label, Time::zero(), Time::zero(), 0});
      }
      if (k == 0) {
        auto& c = out.classes[static_cast<std::size_t>(o.cls)];
        c.traced_ns += o.op->time.dur_ns;
        c.replay_ns += dur;
        ++c.count;
        if (stream[pos] != 0) out.side_busy_s += static_cast<double>(dur) * 1e-9;
      }
    }
    if (!backward_over) sg.ops.push_back(workloads::GraphOp{workloads::OpKind::end_backward, 0, 0, Time::zero(), false, 0, Time::zero(), Time::zero(), 0});
    g.gpu_kinds.push_back(in.targets[k]->name);
    g.kinds.push_back({std::move(sg)});
  }
  return out;
}

}  // namespace dtsim::trace
