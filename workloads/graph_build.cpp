#include "workloads/graph_build.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "workloads/framework_program.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/program.hpp"
#include "workloads/schedule.hpp"
#include "workloads/strategies.hpp"

namespace dtsim::workloads {

namespace {

using I = std::int64_t;

// A pass, timed: its segments' kernels become compute ops (consecutive ones merged).
void append_pass(const Pass& pass, const ComputeModel& cm, StageWriter& w) {
  StageGraph& g = w.g;
  for (const Segment& seg : pass.segments) {
    Time t = Time::zero();
    for (const Kernel& k : seg.kernels) {
      const Time kt = cm.kernel_time(k);
      if (w.host_cost > Time::zero()) {
        // The kernel starts when the host has issued it and the GPU has finished the ones before.
        const Time wait = w.host_cost > w.gpu_lead ? w.host_cost - w.gpu_lead : Time::zero();
        w.gpu_lead = (w.gpu_lead > w.host_cost ? w.gpu_lead - w.host_cost : Time::zero()) + kt;
        t += wait + kt;
      } else {
        t += kt;
      }
      g.flops += k.flops;
    }
    if (seg.comm && seg.comm_overlaps) {
      g.comms.push_back(*seg.comm);
      w.push(OpKind::comm, static_cast<int>(g.comms.size() - 1), 0, t, true);
      continue;
    }
    if (t > Time::zero()) {
      if (!g.ops.empty() && g.ops.back().kind == OpKind::compute && g.ops.back().label == w.label) {
        g.ops.back().duration += t;
      } else {
        w.push(OpKind::compute, 0, 0, t);
      }
    }
    if (seg.comm) {
      g.comms.push_back(*seg.comm);
      w.push(OpKind::comm, static_cast<int>(g.comms.size() - 1));
    }
  }
}

// What every stage builder needs: the inputs, the layout, the pipeline's shape and the GPU kind
// being timed.
struct Builder {
  const StepInputs& in;
  const Layout& lay;
  int vstages = 1;
  int micro = 1;
  const hw::GpuSpec* gpu = nullptr;

  // A layer's passes, preceded under ZeRO-3 by the wait for its gathered parameters.
  void append_layer(std::initializer_list<const Pass*> passes, double params, const ComputeModel& cm, StageWriter& w) const {
    zero3_gather(w, in, lay, params);
    for (const Pass* p : passes) append_pass(*p, cm, w);
  }
  // The bucket cap in parameters of a stage's model chunk (strategies.hpp, bucket_policy), which
  // Megatron-Core's parameter all-gather buckets share: none (one bucket) where Megatron turns
  // bucketing off.
  double bucket_cap_params(int stage, int chunk) const {
    const bool transformer = std::holds_alternative<TransformerSpec>(in.model);
    const BucketPolicy policy = bucket_policy(in, lay, transformer);
    if (!megatron_bucketed(policy, stage, chunk)) return std::numeric_limits<double>::infinity();
    return policy.cap.as_double() / hw::dtype_bytes(in.training.grad_dtype);
  }
  Status transformer(const TransformerSpec& m, std::vector<StageGraph>& stages, std::vector<StageWriter>& writers, double& act_msg_bytes) const;
  Status cnn(const CnnSpec& m, std::vector<StageGraph>& stages, std::vector<StageWriter>& writers) const;
};

Status Builder::transformer(const TransformerSpec& m, std::vector<StageGraph>& stages, std::vector<StageWriter>& writers,
                            double& act_msg_bytes) const {
  const TrainingSpec& tr = in.training;
  const ParallelSpec& par = in.parallel;
  const ProgramShape sh = program_shape(m, tr, par, lay);
  if (auto st = validate_transformer(m, sh); !st) return st;
  const int p = lay.pp();
  const Framework fw = tr.framework;
  if (auto st = validate_framework(fw, sh); !st) return st;
  const ComputeModel cm(*gpu, in.compute);
  const bool megatron = fw == Framework::megatron;
  const LayerProgram emb = megatron ? transformer_embedding(m, sh) : framework_embedding(m, sh, fw);
  const LayerProgram block = megatron ? transformer_block(m, sh) : framework_block(m, sh, fw);
  const LayerProgram head = megatron ? transformer_head(m, sh) : framework_head(m, sh, fw);
  for (StageWriter& w : writers) w.host_cost = host_per_kernel(in.compute, fw);
  // Blocks of each virtual stage (parallel.pipeline_split).
  std::vector<std::vector<const LayerProgram*>> vs_layers(static_cast<std::size_t>(vstages));
  auto blocks = virtual_stage_blocks(m.layers, vstages, par.split);
  if (!blocks) return blocks.error();
  for (int g = 0; g < vstages; ++g) {
    auto& L = vs_layers[static_cast<std::size_t>(g)];
    if (g == 0) L.push_back(&emb);
    for (int i = 0; i < (*blocks)[static_cast<std::size_t>(g)]; ++i) L.push_back(&block);
    if (g == vstages - 1) L.push_back(&head);
  }
  const int e_bytes = tr.precision == hw::DType::fp32 || tr.precision == hw::DType::tf32 ? 4 : 2;
  // Pipeline messages: each TP rank sends its 1/tp share of the [tokens, hidden] activation
  // (sequence parallelism, or Megatron's scatter/gather of pipeline tensors).
  act_msg_bytes = static_cast<double>(tr.micro_batch * (sh.seq / sh.cp) * m.hidden * e_bytes) / lay.tp();

  const ActivationShape as = activation_shape(sh, tr, e_bytes);
  const double per_layer_act = layer_activation_bytes(m, as);
  const int v = vstages / p;
  for (int s = 0; s < p; ++s) {
    auto ops = stage_schedule(par.schedule, p, micro, v, s);
    if (!ops) return ops.error();
    StageGraph& sp = stages[static_cast<std::size_t>(s)];
    StageWriter& w = writers[static_cast<std::size_t>(s)];
    // The last backward of each chunk makes its gradients final.
    std::vector<std::size_t> last_b(static_cast<std::size_t>(v), 0);
    for (std::size_t i = 0; i < ops->size(); ++i) {
      if ((*ops)[i].kind == PipeOp::Kind::backward) last_b[static_cast<std::size_t>((*ops)[i].chunk)] = i;
    }
    const bool reduce_each_backward = par.zero >= 3 && lay.grad_dp() > 1;
    // --overlap-param-gather: each chunk's first forward waits for its parameter buckets.
    std::vector<char> gathered_chunk(static_cast<std::size_t>(v), overlaps_param_gather(in, lay) ? 0 : 1);
    for (std::size_t i = 0; i < ops->size(); ++i) {
      const PipeOp& op = (*ops)[i];
      const int g = virtual_stage(p, s, op.chunk);
      const auto& L = vs_layers[static_cast<std::size_t>(g)];
      w.begin(fmt::format("{} mb {}{}", op.kind == PipeOp::Kind::forward ? "forward" : "backward", op.microbatch,
                          v > 1 ? fmt::format(" chunk {}", op.chunk) : std::string()));
      const bool dataparallel = par.dp_impl == DpImpl::dataparallel;
      if (op.kind == PipeOp::Kind::forward) {
        // Token ids in (int64); logits out, in the activation type.
        if (dataparallel) dataparallel_before_forward(w, in, lay, 8.0 * static_cast<double>(sh.seq), static_cast<double>(parameter_count(m)));
        if (g > 0) w.push(OpKind::recv_act, op.microbatch, g);
        std::vector<double> bucket_at(L.size(), 0.0);
        if (!gathered_chunk[static_cast<std::size_t>(op.chunk)]) {
          gathered_chunk[static_cast<std::size_t>(op.chunk)] = 1;
          std::vector<double> params;
          for (const LayerProgram* lp : L) params.push_back(static_cast<double>(lp->params));
          bucket_at = param_gather_buckets(params, bucket_cap_params(s, op.chunk));
        }
        for (std::size_t k = 0; k < L.size(); ++k) {
          param_gather_wait(w, bucket_at[k]);
          append_layer({&L[k]->forward}, static_cast<double>(L[k]->params), cm, w);
        }
        if (g < vstages - 1) w.push(OpKind::send_act, op.microbatch, g);
        if (dataparallel) dataparallel_after_forward(w, in, lay, static_cast<double>(sh.seq * m.vocab * e_bytes));
      } else {
        if (g < vstages - 1) w.push(OpKind::recv_grad, op.microbatch, g);
        for (auto it = L.rbegin(); it != L.rend(); ++it) {
          append_layer({&(*it)->recompute, &(*it)->backward}, static_cast<double>((*it)->params), cm, w);
          sp.recompute_flops += (*it)->recompute.flops();
          // ZeRO-3 / FSDP reduce-scatters a layer's gradients after every micro-batch's backward
          // (docs/model.md, "ZeRO-3 gradient reduction per micro-batch"); otherwise only the
          // last backward of the chunk makes them final.
          const bool last = i == last_b[static_cast<std::size_t>(op.chunk)];
          if (last || reduce_each_backward) {
            sp.grad_slots.push_back(
                LayerSlot{static_cast<double>((*it)->params), static_cast<double>((*it)->expert_params), (*it)->tensors, !last});
            w.slot_chunk.push_back(op.chunk);
            w.push(OpKind::grads_ready, static_cast<int>(sp.grad_slots.size() - 1));
          }
        }
        if (g > 0) w.push(OpKind::send_grad, op.microbatch, g);
        if (dataparallel) dataparallel_after_backward(w, in, lay, static_cast<double>(parameter_count(m)));
      }
    }
    w.push(OpKind::end_backward);
    for (int c = 0; c < v; ++c) {
      for (const LayerProgram* lp : vs_layers[static_cast<std::size_t>(virtual_stage(p, s, c))]) {
        sp.dense_params += static_cast<double>(lp->params);
        sp.expert_params += static_cast<double>(lp->expert_params);
        sp.layers += lp == &block ? 1 : 0;
        sp.has_embedding = sp.has_embedding || lp == &emb;
        sp.has_head = sp.has_head || lp == &head;
      }
    }
    sp.in_flight = max_in_flight(*ops);
    // Activations: the peak number of (micro-batch, chunk) pairs in flight, each holding a chunk's
    // layers; the first stage also keeps embedding outputs, the last the fp32 logits of one
    // micro-batch for the loss.
    const double layers_per_chunk = static_cast<double>(sp.layers) / v;
    sp.activation_bytes = sp.in_flight * layers_per_chunk * per_layer_act;
    // The embedding's output is the first block's input, which the block's count already holds;
    // the embedding adds only its dropout mask (one byte per element; Korthikanti et al. 2022, 4.3).
    if (sp.has_embedding && as.dropout) {
      sp.activation_bytes += sp.in_flight * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp) * m.hidden) / (sh.sequence_parallel ? sh.tp : 1);
    }
    if (sp.has_head) sp.activation_bytes += 4.0 * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp)) * static_cast<double>(m.vocab) / lay.tp();
  }
  return {};
}

Status Builder::cnn(const CnnSpec& m, std::vector<StageGraph>& stages, std::vector<StageWriter>& writers) const {
  const TrainingSpec& tr = in.training;
  if (lay.tp() != 1 || lay.pp() != 1 || lay.cp() != 1 || lay.ep() != 1) {
    return Error(fmt::format("model '{}' is a CNN: only data parallelism is modelled for CNNs (tp = pp = cp = ep = 1)", m.name), "parallel");
  }
  const ComputeModel cm(*gpu, in.compute);
  ProgramShape sh;
  sh.micro_batch = tr.micro_batch;
  sh.precision = tr.precision;
  sh.recompute = tr.recompute;
  sh.dropout = tr.dropout.value_or(0.0);
  const Framework fw = tr.framework;
  const auto layers = fw == Framework::megatron ? cnn_program(m, sh) : framework_cnn(m, sh, fw);
  StageGraph& sp = stages[0];
  StageWriter& w = writers[0];
  w.host_cost = host_per_kernel(in.compute, fw);
  const bool dataparallel = in.parallel.dp_impl == DpImpl::dataparallel;
  const int e_bytes = tr.precision == hw::DType::fp32 || tr.precision == hw::DType::tf32 ? 4 : 2;
  // Without a described input pipeline: fp32 images (torchvision's ToTensor and Normalize).
  const double image_bytes = tr.data ? tr.data->input_bytes.as_double() : 3.0 * static_cast<double>(m.image * m.image) * 4.0;
  std::vector<double> bucket_at(layers.size(), 0.0);
  if (overlaps_param_gather(in, lay)) {
    std::vector<double> params;
    for (const auto& l : layers) params.push_back(static_cast<double>(l.params));
    bucket_at = param_gather_buckets(params, bucket_cap_params(0, 0));
  }
  for (int mb = 0; mb < micro; ++mb) {
    w.begin(fmt::format("forward mb {}", mb));
    if (dataparallel) dataparallel_before_forward(w, in, lay, image_bytes, static_cast<double>(parameter_count(m)));
    for (std::size_t k = 0; k < layers.size(); ++k) {
      if (mb == 0) param_gather_wait(w, bucket_at[k]);
      append_layer({&layers[k].forward}, static_cast<double>(layers[k].params), cm, w);
    }
    if (dataparallel) dataparallel_after_forward(w, in, lay, static_cast<double>(m.classes * e_bytes));
    w.begin(fmt::format("backward mb {}", mb));
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      append_layer({&it->recompute, &it->backward}, static_cast<double>(it->params), cm, w);
      sp.recompute_flops += it->recompute.flops();
      if (mb == micro - 1 || (in.parallel.zero >= 3 && lay.grad_dp() > 1)) {
        sp.grad_slots.push_back(LayerSlot{static_cast<double>(it->params), 0, it->tensors, mb != micro - 1});
        w.slot_chunk.push_back(0);
        w.push(OpKind::grads_ready, static_cast<int>(sp.grad_slots.size() - 1));
      }
    }
    if (dataparallel) dataparallel_after_backward(w, in, lay, static_cast<double>(parameter_count(m)));
  }
  w.push(OpKind::end_backward);
  for (const auto& l : layers) sp.dense_params += static_cast<double>(l.params);
  sp.layers = static_cast<int>(layers.size());
  sp.in_flight = 1;
  // Every layer's input is kept for the backward pass.
  for (const CnnLayer& l : m.layers) sp.activation_bytes += static_cast<double>(tr.micro_batch * l.in_channels * l.in_h * l.in_w * e_bytes);
  return {};
}

}  // namespace

Expected<GpuKinds> gpu_kinds(const hw::Topology& topo, const Layout& lay) {
  GpuKinds out;
  auto& kinds = out.kinds;
  auto& kind_of_rank = out.kind_of_rank;
  kind_of_rank.assign(static_cast<std::size_t>(lay.gpus()), 0);
  for (int rank = 0; rank < lay.gpus(); ++rank) {
    const hw::GpuSpec& g = topo.node_template(topo.node_of(rank)).spec().gpu;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const hw::GpuSpec* k) { return k->name == g.name; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), &g);
    kind_of_rank[static_cast<std::size_t>(rank)] = static_cast<int>(it - kinds.begin());
  }
  if (kinds.size() < 2) return out;
  if (lay.ep() > 1) {
    return Error("a cluster of several GPU kinds cannot be simulated with expert parallelism yet (every replica must be simulated)", "parallel.ep");
  }
  for (int rank = 0; rank < lay.gpus(); ++rank) {
    const Coords c = lay.coords(rank);
    const int lead = lay.rank(Coords{0, 0, c.dp, c.pp});
    if (kind_of_rank[static_cast<std::size_t>(rank)] != kind_of_rank[static_cast<std::size_t>(lead)]) {
      return Error(fmt::format("ranks {} ({}) and {} ({}) are in one tensor/context-parallel group: such a group runs at its slowest "
                               "GPU's pace, which dtsim does not simulate; keep tensor and context parallelism within nodes of one kind",
                               lead, kinds[static_cast<std::size_t>(kind_of_rank[static_cast<std::size_t>(lead)])]->name, rank,
                               kinds[static_cast<std::size_t>(kind_of_rank[static_cast<std::size_t>(rank)])]->name),
                   "parallel");
    }
  }
  return out;
}

Expected<StepGraph> build_step_graph(const hw::Topology& topo, const StepInputs& in, const Layout& lay) {
  const ParallelSpec& par = in.parallel;
  const TrainingSpec& tr = in.training;
  const int p = lay.pp();
  const int v = par.schedule == PipelineSchedule::interleaved_1f1b ? par.virtual_stages : 1;
  if (par.schedule != PipelineSchedule::interleaved_1f1b && par.virtual_stages != 1) {
    return Error("virtual_stages > 1 needs schedule: interleaved-1f1b", "parallel.virtual_stages");
  }
  if (tr.micro_batch < 1) return Error("must be at least 1", "training.micro_batch");
  if (tr.global_batch < 1) return Error("must be at least 1", "training.global_batch");
  const I per_step = tr.micro_batch * lay.dp();
  if (tr.global_batch % per_step != 0) {
    return Error(fmt::format("global_batch ({}) must be a multiple of micro_batch x dp = {} x {} = {}", tr.global_batch, tr.micro_batch,
                             lay.dp(), per_step),
                 "training.global_batch");
  }
  if (par.zero < 0 || par.zero > 3) return Error(fmt::format("zero must be 0, 1, 2 or 3, got {}", par.zero), "parallel.zero");
  if (!in.symmetric && lay.ep() > 1) return Error("symmetric: false is not supported with expert parallelism", "symmetric");
  for (const hw::NodeGroup& g : topo.spec().groups) {
    if (auto st = check_precision(g.node.gpu, tr.precision); !st) return st.error();
  }
  if (auto st = check_dp_impl(in.parallel, lay, topo); !st) return st.error();
  auto kinds = gpu_kinds(topo, lay);
  if (!kinds) return kinds.error();

  StepGraph graph;
  graph.stages = p;
  graph.virtual_stages = p * v;
  graph.micro_batches = static_cast<int>(tr.global_batch / per_step);
  for (const hw::GpuSpec* k : kinds->kinds) graph.gpu_kinds.push_back(k->name);
  graph.kinds.assign(kinds->kinds.size(), {});
  const auto* tm = std::get_if<TransformerSpec>(&in.model);
  const BucketPolicy buckets = bucket_policy(in, lay, tm != nullptr);
  // Built on the last kind first (the order of the errors a kind-specific check would give).
  for (std::size_t k = kinds->kinds.size(); k-- > 0;) {
    const Builder b{in, lay, graph.virtual_stages, graph.micro_batches, kinds->kinds[k]};
    std::vector<StageGraph>& stages = graph.kinds[k];
    stages.assign(static_cast<std::size_t>(p), StageGraph{});
    std::vector<StageWriter> writers;
    for (StageGraph& sg : stages) writers.push_back(StageWriter{sg, 0, Time::zero(), Time::zero()});
    const Status st = tm ? b.transformer(*tm, stages, writers, graph.act_msg_bytes) : b.cnn(std::get<CnnSpec>(in.model), stages, writers);
    if (!st) return st.error();
    // The strategies' passes over the finished stage graphs.
    for (std::size_t s = 0; s < stages.size(); ++s) {
      add_buckets(stages[s], in, buckets, static_cast<int>(s), writers[s].slot_chunk);
      const StageWriter& w = writers[s];
      stages[s].optimizer = optimizer_time(stages[s], w.host_cost, w.gpu_lead, in, lay, *kinds->kinds[k]);
      stages[s].tied_grad_bytes = tied_embedding_bytes(stages[s], in, lay);
    }
  }
  return graph;
}

}  // namespace dtsim::workloads
