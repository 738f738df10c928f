#include "workloads/step.hpp"

#include <algorithm>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "workloads/executor.hpp"
#include "workloads/graph_build.hpp"
#include "workloads/graph_json.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads {

std::string_view to_string(TimeKind k) {
  switch (k) {
    case TimeKind::compute: return "compute";
    case TimeKind::tp: return "tp_comm";
    case TimeKind::cp: return "cp_comm";
    case TimeKind::ep: return "ep_comm";
    case TimeKind::pp: return "pp_comm";
    case TimeKind::dp: return "dp_comm";
    case TimeKind::optimizer: return "optimizer";
    case TimeKind::bubble: return "bubble";
    case TimeKind::host: return "host";
    case TimeKind::input: return "input";
    case TimeKind::count: break;
  }
  return "?";
}

namespace {

// The loader's stages per step, in steady state (see InputPipeline).
InputReport input_report(const hw::Topology& topo, const StepInputs& in, const Layout& lay, double gpu_step_s, Time h2d_end) {
  InputReport ir;
  const auto& data = in.training.data;
  if (!data) return ir;
  ir.modelled = true;
  ir.dataset = data->dataset;
  ir.gpu_step_s = gpu_step_s;
  const double batch = static_cast<double>(in.training.global_batch);
  const double per_replica = batch / lay.dp();
  // Reading: a node reads the samples of the data-parallel replicas whose first stage it holds.
  if (data->storage == InputPipeline::Storage::shared) {
    ir.read_s = batch * data->sample_bytes.as_double() / data->read_bandwidth.bytes_per_s();
  } else {
    std::vector<double> node_samples(static_cast<std::size_t>(topo.nodes()), 0.0);
    for (int d = 0; d < lay.dp(); ++d) node_samples[static_cast<std::size_t>(topo.node_of(lay.rank(Coords{0, 0, d, 0})))] += per_replica;
    const double most = *std::max_element(node_samples.begin(), node_samples.end());
    ir.read_s = most * data->sample_bytes.as_double() / data->read_bandwidth.bytes_per_s();
  }
  // Decoding: each replica's samples by its own workers (CPU cores) or its GPU's decoder.
  const double rate = data->decoder == InputPipeline::Decoder::cpu ? data->decode_rate * data->cores_per_gpu : data->decode_rate;
  ir.decode_s = per_replica / rate;
  // nn.DataParallel copies its batch inside the step (a transfer); otherwise the copies ran beside it.
  ir.h2d_s = in.parallel.dp_impl == DpImpl::dataparallel ? 0.0 : h2d_end.seconds();
  ir.period_s = std::max({ir.read_s, ir.decode_s, ir.h2d_s});
  ir.gpu_samples_per_s = batch / gpu_step_s;
  ir.loader_samples_per_s = ir.period_s > 0 ? batch / ir.period_s : 0.0;
  if (ir.period_s <= gpu_step_s) ir.bound_by = "gpus";
  else if (ir.period_s == ir.read_s) ir.bound_by = "storage";
  else if (ir.period_s == ir.decode_s) ir.bound_by = "decode";
  else ir.bound_by = "host-to-device copy";
  return ir;
}

// The step's figures from what the graph held and what running it took.
StepResult step_result(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph, const GpuKinds& kinds,
                       ExecutionRecord rec) {
  StepResult r;
  r.layout = lay.describe();
  r.gpus = lay.gpus();
  r.micro_batches = graph.micro_batches;
  r.params = static_cast<double>(parameter_count(in.model));
  const auto* tm = std::get_if<TransformerSpec>(&in.model);
  r.active_params = tm ? static_cast<double>(active_parameter_count(*tm)) : r.params;
  r.seq = tm ? (in.training.seq_len > 0 ? in.training.seq_len : tm->max_seq) : 0;
  const RankRecord* critical = &rec.ranks.front();
  for (const RankRecord& e : rec.ranks) {
    if (e.end > critical->end) critical = &e;
  }
  const TrainingSpec& tr = in.training;
  r.input = input_report(topo, in, lay, critical->end.seconds(), rec.h2d_end);
  // In steady state a step takes at least the loader's period; the wait is booked as input time on
  // every stage (the first stage waits for data, the others for the first).
  const double input_wait = r.input.modelled ? std::max(0.0, r.input.period_s - r.input.gpu_step_s) : 0.0;
  r.step_time_s = critical->end.seconds() + input_wait;
  r.breakdown_s = critical->time;
  r.breakdown_s[static_cast<std::size_t>(TimeKind::input)] += input_wait;
  const double gbatch = static_cast<double>(tr.global_batch);
  r.samples_per_s = gbatch / r.step_time_s;
  r.tokens_per_s = tm ? gbatch * static_cast<double>(r.seq) / r.step_time_s : 0.0;
  r.model_flops_per_step = model_flops_per_sample(in.model, r.seq) * gbatch;
  // One FLOP convention for MFU and HFU (Korthikanti et al. 2022): hardware FLOPs are the model
  // FLOPs plus the FLOPs of the recomputed kernels, so HFU >= MFU by construction. The kernels'
  // own count (a causal flash-attention kernel skips the masked half) is kept beside it.
  double kernel_flops = 0, recompute_flops = 0;
  for (const StageGraph& sp : graph.stage_graphs()) {
    kernel_flops += sp.flops;
    recompute_flops += sp.recompute_flops;
  }
  const double replicas = static_cast<double>(lay.tp()) * lay.cp() * lay.dp();
  r.kernel_flops_per_step = kernel_flops * replicas;
  r.hardware_flops_per_step = r.model_flops_per_step + recompute_flops * replicas;
  const auto peak_of = [&](const hw::GpuSpec& g) {
    const auto pk = g.peak.find(tr.precision);
    return pk != g.peak.end() ? pk->second.flops_per_s() : 0.0;
  };
  // Mixed kinds: the mean peak over the GPUs, so that MFU is against the cluster's total peak.
  double peak_sum = 0;
  for (int rank = 0; rank < lay.gpus(); ++rank) peak_sum += peak_of(*kinds.kinds[static_cast<std::size_t>(kinds.kind_of_rank[static_cast<std::size_t>(rank)])]);
  r.peak_flops_per_gpu = peak_sum / lay.gpus();
  if (kinds.mixed()) {
    for (std::size_t k = 0; k < kinds.kinds.size(); ++k) {
      KindReport kr;
      kr.gpu = kinds.kinds[k]->name;
      for (int rank : kinds.kind_of_rank) kr.gpus += rank == static_cast<int>(k) ? 1 : 0;
      kr.peak_flops_per_gpu = peak_of(*kinds.kinds[k]);
      for (const RankRecord& e : rec.ranks) {
        if (kinds.kind_of(lay, e.stage, e.replica) != static_cast<int>(k)) continue;
        kr.compute_s = std::max(kr.compute_s, e.time[static_cast<std::size_t>(TimeKind::compute)]);
        kr.end_s = std::max(kr.end_s, e.end.seconds());
      }
      kr.utilization = r.step_time_s > 0 ? kr.compute_s / r.step_time_s : 0.0;
      // Every GPU does the same model work per step (the layout splits it evenly).
      if (kr.peak_flops_per_gpu > 0) kr.mfu = r.model_flops_per_step / r.gpus / (r.step_time_s * kr.peak_flops_per_gpu);
      r.kinds.push_back(kr);
    }
  }
  r.tflops_per_gpu = r.model_flops_per_step / r.step_time_s / r.gpus * 1e-12;
  if (r.peak_flops_per_gpu > 0) {
    r.mfu = r.model_flops_per_step / (r.step_time_s * r.gpus * r.peak_flops_per_gpu);
    r.hfu = r.hardware_flops_per_step / (r.step_time_s * r.gpus * r.peak_flops_per_gpu);
  }
  double busy = 0;
  for (double t : r.breakdown_s) busy += t;
  r.idle_s = std::max(0.0, r.step_time_s - busy);
  // Eager frameworks: memory as PyTorch allocates it, from the memory-only estimate (same stages).
  std::optional<MemoryEstimate> eager_memory;
  if (tr.framework != Framework::megatron) {
    // The layout checks are the engine's own, passed already.
    if (auto est = estimate_memory(topo, in)) eager_memory = std::move(*est);
  }
  for (int s = 0; s < lay.pp(); ++s) {
    const RankRecord& e = rec.ranks[static_cast<std::size_t>(s * rec.replicas)];
    const StageGraph& sp = graph.stage_graphs()[static_cast<std::size_t>(s)];
    StageReport st;
    st.stage = s;
    st.layers = sp.layers;
    st.end_s = e.end.seconds() + input_wait;
    st.time_s = e.time;
    st.time_s[static_cast<std::size_t>(TimeKind::input)] += input_wait;
    double b = 0;
    for (double t : st.time_s) b += t;
    st.idle_s = std::max(0.0, r.step_time_s - b);
    st.in_flight = sp.in_flight;
    StageMemoryInput mi;
    mi.stage = s;
    mi.dense_params = sp.dense_params;
    mi.expert_params = sp.expert_params;
    mi.dp = lay.grad_dp();
    mi.expert_dp = lay.expert_grad_dp();
    mi.activations = sp.activation_bytes;
    if (in.parallel.zero >= 3) mi.gathered_params = 2.0 * sp.dense_params / std::max(1, sp.layers);
    // The stage's smallest GPU (clusters of several kinds may differ in memory).
    int rank = lay.rank(Coords{0, 0, 0, s});
    for (int d = 1; d < lay.dp(); ++d) {
      const int other = lay.rank(Coords{0, 0, d, s});
      if (topo.node_template(topo.node_of(other)).spec().gpu.memory < topo.node_template(topo.node_of(rank)).spec().gpu.memory) rank = other;
    }
    const Bytes capacity = topo.node_template(topo.node_of(rank)).spec().gpu.memory;
    st.memory = eager_memory ? eager_memory->stages[static_cast<std::size_t>(s)].memory : stage_memory(mi, tr, in.parallel.zero, in.memory, capacity);
    if (st.memory.total > r.peak_memory.total) r.peak_memory = st.memory;
    if (!st.memory.fits && r.fits) {
      r.fits = false;
      r.memory_note = fmt::format("out of memory: rank {} (pipeline stage {}) needs {:.1f} GiB but its GPU has {:.1f} GiB", rank, s,
                                  st.memory.total / 1073741824.0, st.memory.capacity / 1073741824.0);
    }
    r.stages.push_back(st);
  }
  r.symmetric = rec.symmetric;
  const int tpcp = lay.tp() * lay.cp();
  if (rec.symmetric && (lay.dp() > 1 || tpcp > 1)) {
    std::string who;
    if (lay.dp() > 1) who = fmt::format("1 of {} data-parallel replicas", lay.dp());
    if (tpcp > 1) who += fmt::format("{}1 of {} tensor/context-parallel ranks", who.empty() ? "" : " and ", tpcp);
    r.symmetry_note = fmt::format(
        "symmetric ranks simulated once: per pipeline stage, {} run compute; all communication that crosses a node or shares one "
        "with them is on the network",
        who);
  } else if (tpcp > 1) {
    r.symmetry_note = fmt::format("every data-parallel replica simulated; the {} tensor/context-parallel ranks of a replica run identical programs and are simulated once", tpcp);
  }
  r.events = rec.events;
  r.collectives = rec.collectives;
  if (in.record_timeline) r.timeline = make_timeline(std::move(rec.timeline), rec.replicas, lay);
  return r;
}

}  // namespace

Expected<StepGraph> build_step_graph(const hw::Topology& topo, const StepInputs& in) {
  auto lay = Layout::make(in.parallel, topo.gpus());
  if (!lay) return lay.error();
  return build_step_graph(topo, in, *lay);
}

Timeline make_timeline(std::vector<TimelineEvent> events, int replicas, const Layout& lay) {
  Timeline timeline_;
  timeline_.events = std::move(events);
  timeline_.replicas = replicas;
  for (int s = 0; s < lay.pp(); ++s) {
    for (int d = 0; d < replicas; ++d) {
      std::vector<int> ranks;
      for (int t = 0; t < lay.tp(); ++t) {
        for (int c = 0; c < lay.cp(); ++c) ranks.push_back(lay.rank(Coords{t, c, d, s}));
      }
      std::sort(ranks.begin(), ranks.end());
      timeline_.ranks.push_back(std::move(ranks));
    }
  }
  std::stable_sort(timeline_.events.begin(), timeline_.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
    return std::tie(a.stage, a.replica, a.track, a.start) < std::tie(b.stage, b.replica, b.track, b.start);
  });
  // A pass split only by bookkeeping (gradients becoming final mid-backward) is one event.
  std::vector<TimelineEvent> merged;
  for (TimelineEvent& ev : timeline_.events) {
    if (!merged.empty()) {
      TimelineEvent& prev = merged.back();
      if (prev.stage == ev.stage && prev.replica == ev.replica && prev.track == ev.track &&
          ev.track == TimelineEvent::Track::compute && prev.name == ev.name && prev.end == ev.start) {
        prev.end = ev.end;
        continue;
      }
    }
    merged.push_back(std::move(ev));
  }
  timeline_.events = std::move(merged);
  return timeline_;
}

Expected<StepResult> simulate_step(const hw::Topology& topo, const StepInputs& in) { return simulate_step(topo, in, nullptr); }

Expected<StepResult> simulate_step(const hw::Topology& topo, const StepInputs& in, const StepGraph* given) {
  auto lay = Layout::make(in.parallel, topo.gpus());
  if (!lay) return lay.error();
  if (!make_sharing_model(in.sharing)) return Error(fmt::format("unknown sharing model '{}' (max-min, constant)", in.sharing), "sharing");
  // The configuration's own graph: it checks the settings the executor relies on, and a given
  // graph must have its shape.
  auto built = build_step_graph(topo, in, *lay);
  if (!built) return built.error();
  if (given) {
    if (auto st = check_graph_shape(*given, *built); !st) return st.error();
  }
  if (given) {
    // nn.DataParallel's data movements need its single process over several GPUs (the builder
    // writes them only then).
    for (const auto& kind : given->kinds) {
      for (const StageGraph& sg : kind) {
        for (const GraphOp& op : sg.ops) {
          if (op.kind != OpKind::transfer || sg.transfers[static_cast<std::size_t>(op.a)].kind == Transfer::Kind::host) continue;
          if (in.parallel.dp_impl != DpImpl::dataparallel || lay->dp() < 2) {
            return Error(fmt::format("a '{}' transfer op needs parallel.dp_impl: dataparallel over at least 2 GPUs",
                                     to_string(sg.transfers[static_cast<std::size_t>(op.a)].kind)),
                         "graph");
          }
        }
      }
    }
  }
  const StepGraph& graph = given ? *given : *built;
  auto kinds = gpu_kinds(topo, *lay);
  if (!kinds) return kinds.error();
  auto rec = execute_step_graph(topo, in, *lay, graph);
  if (!rec) return rec.error();
  return step_result(topo, in, *lay, graph, *kinds, std::move(*rec));
}

}  // namespace dtsim::workloads
