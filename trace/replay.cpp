#include "trace/replay.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "comm/collective.hpp"

namespace dtsim::trace {

std::string gpu_preset_for_device(std::string_view device) {
  auto has = [&](std::string_view s) { return device.find(s) != std::string_view::npos; };
  if (has("H100")) return has("PCIe") ? "h100-pcie" : "h100-sxm";
  if (has("H200")) return "h200-sxm";
  if (has("A100")) return has("40GB") ? "a100-sxm4-40g" : "a100-sxm4-80g";
  if (has("B200")) return "b200";
  if (has("V100")) return has("PCIE") || has("PCIe") ? "v100-pcie-32g" : "v100-sxm2-32g";
  if (has("L40S")) return "l40s";
  if (has("RTX 4090")) return "rtx-4090";
  if (has("L4")) return "l4";
  if (has("T4")) return "t4";
  return "";
}

namespace {

double ns_to_s(std::int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// Re-times one op measured on `src` for `dst`: a fixed part (launch and fixed cost, the compute
// model's kernel_overhead) kept, the rest scaled by the ratio of achievable throughput.
class Retimer {
 public:
  Retimer(const hw::GpuSpec& src, const hw::GpuSpec& dst, const workloads::ComputeParams& p)
      : same_(src.name == dst.name), src_(src, p), dst_(dst, p), fixed_ns_(p.kernel_overhead.picoseconds() / 1000) {}
  bool same() const { return same_; }

  std::int64_t retime(const StepOp& o) const {
    const std::int64_t t = o.op->time.dur_ns;
    if (same_) return t;
    const double ratio = throughput_ratio(o);
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

struct Bucket {
  std::int64_t bytes = 0;
  std::size_t ready_op = 0;  // the bucket is complete when this op (host order) has ended
};

}  // namespace

Expected<ReplayResult> replay_step(const hw::Topology& topo, const hw::GpuSpec& target_gpu, const ReplayInputs& in) {
  const StepOps& s = *in.ops;
  ReplayResult r;
  r.traced_gpu = in.traced_gpu.name;
  r.target_gpu = target_gpu.name;
  r.gpus = in.dp;
  r.traced_window_s = ns_to_s(s.gpu_end_ns - s.gpu_begin_ns);
  if (in.dp < 1 || in.dp > topo.gpus()) return Error(fmt::format("data-parallel size {} does not fit the cluster's {} GPUs", in.dp, topo.gpus()), "parallel.dp");
  const Retimer retimer(in.traced_gpu, target_gpu, in.compute);
  r.retimed = !retimer.same();

  // The program: GPU ops in host launch order (ops without a linked launch keep their GPU order).
  std::vector<std::size_t> order;
  std::vector<std::int64_t> launch_end;  // host time of each op's launch, in trace time
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].cls == KernelClass::communication) {
      ++r.removed_comm_ops;
      continue;
    }
    order.push_back(i);
  }
  if (order.empty()) return Error("the trace holds no compute operations (only communication kernels)", "model.trace");
  {
    std::int64_t last = s.host_begin_ns;
    for (std::size_t i : order) {
      const StepOp& o = s.ops[i];
      last = o.launch ? o.launch->time.end_ns() : std::max(last, s.host_begin_ns);
      launch_end.push_back(last);
    }
    std::vector<std::size_t> idx(order.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return launch_end[a] < launch_end[b]; });
    std::vector<std::size_t> o2;
    std::vector<std::int64_t> l2;
    for (std::size_t k : idx) o2.push_back(order[k]), l2.push_back(launch_end[k]);
    order.swap(o2);
    launch_end.swap(l2);
  }

  // Gradients: complete after the last op launched before the host accumulated them.
  std::vector<Bucket> buckets;
  if (in.dp > 1) {
    std::vector<std::pair<std::int64_t, std::size_t>> grads;  // bytes, op position
    for (const auto& g : s.gradients) {
      const auto it = std::upper_bound(launch_end.begin(), launch_end.end(), g.host_end_ns);
      const std::size_t pos = it == launch_end.begin() ? 0 : static_cast<std::size_t>(it - launch_end.begin()) - 1;
      grads.emplace_back(g.bytes, pos);
    }
    std::int64_t traced_bytes = 0;
    for (const auto& g : grads) traced_bytes += g.first;
    if (in.gradient_bytes) {
      // A model named beside the trace: its gradient bytes, spread over the backward pass as the
      // trace's gradients are (or, without any, all at the end of the backward pass).
      const double scale = traced_bytes > 0 ? static_cast<double>(*in.gradient_bytes) / static_cast<double>(traced_bytes) : 0;
      if (grads.empty()) grads.emplace_back(*in.gradient_bytes, order.size() - 1);
      else for (auto& g : grads) g.first = std::llround(static_cast<double>(g.first) * scale);
    }
    for (const auto& g : grads) r.gradient_bytes += g.first;
    if (r.gradient_bytes == 0) {
      return Error("data parallelism needs gradient sizes: the trace has no torch::autograd::AccumulateGrad operators with shapes "
                   "(profile with record_shapes=True) and no model is named beside it (model: {trace: FILE, gradients_from: MODEL})",
                   "model.trace");
    }
    Bucket cur;
    for (const auto& g : grads) {
      cur.bytes += g.first;
      cur.ready_op = std::max(cur.ready_op, g.second);
      const std::int64_t cap = (buckets.empty() ? in.params.first_bucket : in.params.bucket).count();
      if (cur.bytes >= cap) buckets.push_back(cur), cur = Bucket{};
    }
    if (cur.bytes > 0) buckets.push_back(cur);
  }
  r.buckets = static_cast<int>(buckets.size());

  // All-reduce times on the cluster (one collective at a time on the DDP stream, so each alone).
  std::map<std::int64_t, Time> ar_time;
  if (!buckets.empty()) {
    hw::Router router(topo);
    comm::Planner planner(topo, router, in.comm);
    std::vector<int> ranks(static_cast<std::size_t>(in.dp));
    std::iota(ranks.begin(), ranks.end(), 0);
    for (const auto& b : buckets) {
      if (ar_time.count(b.bytes)) continue;
      comm::CollectiveRequest req;
      req.op = CollOp::allreduce;
      req.size = Bytes(b.bytes);
      req.ranks = ranks;
      auto plan = planner.plan(req);
      if (!plan) return plan.error();
      ar_time[b.bytes] = comm::simulate_alone(topo, *plan);
    }
  }

  // Run the program.
  const ReplayParams& p = in.params;
  const std::int64_t overhead_ns = p.profiler_overhead_per_event.picoseconds() / 1000;
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
  std::map<std::int64_t, std::int64_t> stream_free;    // stream -> when its last op ends
  std::map<std::int64_t, std::int64_t> traced_end;     // stream -> when its last op ended in the trace
  std::int64_t host = 0, prev_launch = s.host_begin_ns, end = 0, comm_free = 0, backward_end = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> comm;  // all-reduce intervals
  std::size_t next_bucket = 0;
  bool optimizer_waited = false;
  const double slowdown = in.compute.comm_slowdown;
  // The next bucket's all-reduce, on the DDP stream once its gradients exist at `ready`.
  auto schedule = [&](std::int64_t ready) {
    const Time t = ar_time.at(buckets[next_bucket].bytes);
    const std::int64_t c0 = std::max(ready, comm_free);
    comm_free = c0 + t.picoseconds() / 1000;
    comm.emplace_back(c0, comm_free);
    r.allreduce_s += t.seconds();
    ++next_bucket;
  };
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const StepOp& o = s.ops[order[pos]];
    const std::int64_t le = launch_end[pos];
    const std::int64_t interval = le - prev_launch;
    host += std::max<std::int64_t>(0, interval - overhead_ns * events_in(prev_launch, le) - profiler_spans_in(prev_launch, le));
    prev_launch = le;
    std::int64_t& free = stream_free[o.op->stream];
    // The GPU-side delay measured once both the launch and the previous op on the stream were
    // done: launch latency when the op waited for the host, the inter-kernel gap when it was queued.
    std::int64_t& prev_traced = traced_end[o.op->stream];
    const std::int64_t delay = std::max<std::int64_t>(0, o.op->time.ts_ns - std::max(prev_traced, le));
    prev_traced = std::max(prev_traced, o.op->time.end_ns());
    if (host > end) r.host_wait_s += ns_to_s(host - end);  // the whole GPU waits for the host
    std::int64_t start = std::max(host, free) + delay;
    r.gpu_delay_s += ns_to_s(delay);
    if (o.cls == KernelClass::optimizer && !optimizer_waited && !buckets.empty()) {
      // DDP's end-of-backward hook makes the compute stream wait for every bucket's all-reduce.
      optimizer_waited = true;
      while (next_bucket < buckets.size()) schedule(end);
      if (comm_free > start) {
        r.dp_wait_s += ns_to_s(comm_free - start);
        r.exposed_allreduce_s += ns_to_s(comm_free - std::max(start, backward_end));
        start = comm_free;
      }
    }
    std::int64_t dur = retimer.retime(o);
    const bool overlapped = std::any_of(comm.begin(), comm.end(), [&](const auto& c) { return c.first <= start && start < c.second; });
    if (overlapped) dur = std::llround(static_cast<double>(dur) * (1.0 + slowdown));
    free = start + dur;
    end = std::max(end, free);
    if (o.cls != KernelClass::optimizer) backward_end = std::max(backward_end, free);
    r.gpu_busy_s += ns_to_s(dur);
    auto& c = r.classes[static_cast<std::size_t>(o.cls)];
    c.traced_ns += o.op->time.dur_ns;
    c.replay_ns += dur;
    ++c.count;
    while (next_bucket < buckets.size() && buckets[next_bucket].ready_op <= pos) schedule(free);
  }
  while (next_bucket < buckets.size()) schedule(end);
  if (!optimizer_waited && !comm.empty() && comm_free > end) {
    r.exposed_allreduce_s += ns_to_s(comm_free - end);
    r.dp_wait_s += ns_to_s(comm_free - end);
    end = comm_free;
  }
  r.step_s = ns_to_s(end);
  r.gradient_source = in.gradient_bytes ? "model" : fmt::format("trace ({} AccumulateGrad operators)", s.gradients.size());
  return r;
}

}  // namespace dtsim::trace
