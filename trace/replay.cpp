#include "trace/replay.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "workloads/executor.hpp"
#include "workloads/graph_build.hpp"
#include "workloads/layout.hpp"

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

// The settings the executor runs a traced step with: data parallelism by PyTorch DDP over GPUs
// 0..dp-1, gradients in fp32 (the graph's gradient slots count 4-byte elements), one replica
// standing for all where the cluster has one GPU kind.
workloads::StepInputs executor_inputs(const ReplayInputs& in, bool timeline) {
  workloads::StepInputs si;
  si.parallel.dp = in.dp;
  si.parallel.dp_impl = workloads::DpImpl::ddp;
  si.parallel.zero = in.zero;
  si.training.grad_dtype = hw::DType::fp32;
  si.training.precision = hw::DType::fp32;
  si.compute = in.compute;
  si.comm = in.comm;
  si.sharing = in.sharing;
  si.record_timeline = timeline;
  return si;
}

}  // namespace

Expected<TraceGraph> trace_step_graph(const hw::Topology& topo, const ReplayInputs& in) {
  if (in.dp < 1 || in.dp > topo.gpus()) return Error(fmt::format("data-parallel size {} does not fit the cluster's {} GPUs", in.dp, topo.gpus()), "parallel.dp");
  if (in.zero < 0 || in.zero > 3) return Error(fmt::format("zero must be 0, 1, 2 or 3, got {}", in.zero), "parallel.zero");
  const workloads::StepInputs si = executor_inputs(in, false);
  auto lay = workloads::Layout::make(si.parallel, in.dp);
  if (!lay) return lay.error();
  auto kinds = workloads::gpu_kinds(topo, *lay);
  if (!kinds) return kinds.error();
  TraceGraphInputs gi;
  gi.ops = in.ops;
  gi.traced_gpu = in.traced_gpu;
  gi.targets = kinds->kinds;
  gi.compute = in.compute;
  gi.data_parallel = in.dp > 1;
  gi.dp = in.dp;
  gi.fsdp = in.zero == 3 && in.dp > 1;
  gi.shard_optimizer = in.zero >= 1 && in.dp > 1;
  gi.gradient_bytes = in.gradient_bytes;
  gi.params = in.params;
  return build_trace_graph(gi);
}

Expected<ReplayResult> replay_step(const hw::Topology& topo, const ReplayInputs& in) {
  auto tg = trace_step_graph(topo, in);
  if (!tg) return tg.error();
  const workloads::StepInputs si = executor_inputs(in, true);
  auto lay = workloads::Layout::make(si.parallel, in.dp);
  if (!lay) return lay.error();
  auto rec = workloads::execute_step_graph(topo, si, *lay, tg->graph);
  if (!rec) return rec.error();

  const StepOps& s = *in.ops;
  ReplayResult r;
  r.traced_gpu = in.traced_gpu.name;
  r.target_gpu = tg->graph.gpu_kinds.front();
  r.retimed = tg->graph.gpu_kinds.size() > 1 || r.target_gpu != r.traced_gpu;
  r.mixed = tg->graph.gpu_kinds.size() > 1;
  r.gpus = in.dp;
  r.traced_window_s = static_cast<double>(s.gpu_end_ns - s.gpu_begin_ns) * 1e-9;
  // The slowest rank ends the step; the breakdown is node 0's first rank's (rank 0).
  for (const auto& rank : rec->ranks) r.step_s = std::max(r.step_s, rank.end.seconds());
  const auto& t = rec->ranks.front().time;
  auto time = [&](workloads::TimeKind k) { return t[static_cast<std::size_t>(k)]; };
  r.gpu_busy_s = time(workloads::TimeKind::compute) + tg->side_busy_s;
  r.host_wait_s = std::max(0.0, time(workloads::TimeKind::host) - tg->main_delay_s);
  r.dp_wait_s = time(workloads::TimeKind::dp);
  r.exposed_allreduce_s = r.dp_wait_s;
  r.gpu_delay_s = tg->gpu_delay_s;
  r.side_stream_s = tg->side_busy_s;
  r.gradient_bytes = tg->gradient_bytes;
  r.gradient_source = tg->gradient_source;
  r.buckets = static_cast<int>(tg->graph.stage_graphs().front().buckets.size());
  r.fsdp = in.zero == 3 && in.dp > 1;
  r.zero = in.dp > 1 ? in.zero : 0;
  r.fsdp_units = tg->fsdp_units;
  r.fsdp_unit_tensors = tg->fsdp_unit_tensors;
  r.fsdp_root_bytes = tg->fsdp_root_bytes;
  r.gathers = static_cast<int>(tg->graph.stage_graphs().front().gathers.size());
  for (const auto& e : rec->timeline) {
    if (e.track != workloads::TimelineEvent::Track::dp || e.stage != 0 || e.replica != 0) continue;
    (e.name.find("allgather") != std::string::npos ? r.gather_s : r.allreduce_s) += (e.end - e.start).seconds();
  }
  r.events = rec->events;
  r.symmetric = rec->symmetric;
  if (in.timeline) r.timeline = workloads::make_timeline(std::move(rec->timeline), rec->replicas, *lay);
  r.removed_comm_ops = tg->removed_comm_ops;
  r.classes = tg->classes;
  return r;
}

}  // namespace dtsim::trace
