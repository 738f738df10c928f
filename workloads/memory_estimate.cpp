#include "workloads/memory_estimate.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "workloads/framework_program.hpp"
#include "workloads/program.hpp"
#include "workloads/schedule.hpp"

namespace dtsim::workloads {

namespace {

using I = std::int64_t;

int element_bytes(hw::DType precision) { return precision == hw::DType::fp32 || precision == hw::DType::tf32 ? 4 : 2; }

// Eager PyTorch / torch.compile: the tensors Hugging Face code keeps (memory_eager.hpp) replace the
// Megatron counts; the stage's layers, parameters and micro-batches in flight are the same.
void eager_transformer_stage(const TransformerSpec& m, const TrainingSpec& tr, const ProgramShape& sh, double layers_per_chunk,
                             StageFootprint& f) {
  EagerShape es;
  es.seq = sh.seq;
  es.tp = sh.tp;
  es.act_bytes = element_bytes(tr.precision);
  es.dropout = sh.dropout > 0;
  es.attention = tr.attention;
  es.compiled = tr.framework == Framework::torch_compile;
  const double tokens = static_cast<double>(tr.micro_batch * (sh.seq / sh.cp));
  f.activation_bytes = f.in_flight * layers_per_chunk * tokens * sum_bytes(eager_block_buffers(m, es));
  if (f.has_embedding) f.activation_bytes += f.in_flight * tokens * sum_bytes(eager_embedding_buffers(m, es));
  if (f.has_head) {
    f.activation_bytes += tokens * sum_bytes(eager_head_buffers(m, es));
    const LossBuffers l = eager_loss_bytes(m, es);
    f.loss = LossBuffers{tokens * l.forward, tokens * l.backward};
  }
  // GEMM weights: the blocks' and the output projection (a tied one casts the token table; BERT's
  // MLM head adds its transform); the embedding tables are looked up in fp32.
  const double h = static_cast<double>(m.hidden);
  f.matmul_params = f.layers * block_gemm_weights(m) / sh.tp;
  if (f.has_head) f.matmul_params += (static_cast<double>(m.vocab) * h + (m.encoder ? h * h : 0.0)) / sh.tp;
}

Status transformer_stages(const TransformerSpec& m, const StepInputs& in, const Layout& lay, int micro, int v, MemoryEstimate& out) {
  const TrainingSpec& tr = in.training;
  const ParallelSpec& par = in.parallel;
  const ProgramShape sh = program_shape(m, tr, par, lay);
  if (auto st = validate_transformer(m, sh); !st) return st;
  // The layouts the engine refuses for a PyTorch framework are refused here too, so that a plan's
  // estimate rejects them with the engine's reason instead of ranking them.
  if (auto st = validate_framework(tr.framework, sh); !st) return st;
  const int p = lay.pp();
  const int vstages = p * v;
  const LayerProgram emb = transformer_embedding(m, sh);
  const LayerProgram block = transformer_block(m, sh);
  const LayerProgram head = transformer_head(m, sh);
  const int e_bytes = element_bytes(tr.precision);
  const ActivationShape as = activation_shape(sh, tr, e_bytes);
  const double per_layer_act = layer_activation_bytes(m, as);
  // Blocks of each virtual stage, as the engine splits them.
  auto split = virtual_stage_blocks(m.layers, vstages, par.split);
  if (!split) return split.error();
  for (int s = 0; s < p; ++s) {
    StageFootprint f;
    f.stage = s;
    for (int c = 0; c < v; ++c) {
      const int g = virtual_stage(p, s, c);
      const int blocks = (*split)[static_cast<std::size_t>(g)];
      f.layers += blocks;
      f.dense_params += static_cast<double>(blocks) * static_cast<double>(block.params);
      f.expert_params += static_cast<double>(blocks) * static_cast<double>(block.expert_params);
      if (g == 0) {
        f.has_embedding = true;
        f.dense_params += static_cast<double>(emb.params);
        f.expert_params += static_cast<double>(emb.expert_params);
      }
      if (g == vstages - 1) {
        f.has_head = true;
        f.dense_params += static_cast<double>(head.params);
        f.expert_params += static_cast<double>(head.expert_params);
      }
    }
    auto ops = stage_schedule(par.schedule, p, micro, v, s);
    if (!ops) return ops.error();
    f.in_flight = max_in_flight(*ops);
    const double layers_per_chunk = static_cast<double>(f.layers) / v;
    f.activation_bytes = f.in_flight * layers_per_chunk * per_layer_act;
    // The embedding's output is the first block's input, which the block's count already holds;
    // the embedding adds only its dropout mask (one byte per element; Korthikanti et al. 2022, 4.3).
    if (f.has_embedding && as.dropout) {
      f.activation_bytes += f.in_flight * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp) * m.hidden) / (sh.sequence_parallel ? sh.tp : 1);
    }
    if (f.has_head) f.activation_bytes += 4.0 * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp)) * static_cast<double>(m.vocab) / lay.tp();
    if (tr.framework != Framework::megatron) eager_transformer_stage(m, tr, sh, layers_per_chunk, f);
    out.stages.push_back(f);
  }
  return {};
}

Status cnn_stages(const CnnSpec& m, const StepInputs& in, const Layout& lay, MemoryEstimate& out) {
  if (lay.tp() != 1 || lay.pp() != 1 || lay.cp() != 1 || lay.ep() != 1) {
    return Error(fmt::format("model '{}' is a CNN: only data parallelism is modelled for CNNs (tp = pp = cp = ep = 1)", m.name), "parallel");
  }
  const TrainingSpec& tr = in.training;
  ProgramShape sh;
  sh.micro_batch = tr.micro_batch;
  sh.precision = tr.precision;
  sh.recompute = tr.recompute;
  StageFootprint f;
  const auto layers = cnn_program(m, sh);
  for (const auto& l : layers) f.dense_params += static_cast<double>(l.params);
  f.layers = static_cast<int>(layers.size());
  f.in_flight = 1;
  const int e_bytes = element_bytes(tr.precision);
  if (tr.framework == Framework::megatron) {
    for (const CnnLayer& l : m.layers) f.activation_bytes += static_cast<double>(tr.micro_batch * l.in_channels * l.in_h * l.in_w * e_bytes);
  } else {
    EagerShape es;
    es.act_bytes = e_bytes;
    es.compiled = tr.framework == Framework::torch_compile;
    f.activation_bytes = static_cast<double>(tr.micro_batch) * sum_bytes(eager_cnn_buffers(m, es));
    for (const CnnLayer& l : m.layers) {
      if (l.kind == CnnLayer::Kind::conv || l.kind == CnnLayer::Kind::fc) {
        f.matmul_params += static_cast<double>(l.params() - (l.bias ? l.out_channels : 0));
      }
    }
  }
  out.stages.push_back(f);
  return {};
}

}  // namespace

Expected<MemoryEstimate> estimate_memory(const hw::Topology& topo, const StepInputs& in) {
  auto lay = Layout::make(in.parallel, topo.gpus());
  if (!lay) return lay.error();
  const ParallelSpec& par = in.parallel;
  const TrainingSpec& tr = in.training;
  const int v = par.schedule == PipelineSchedule::interleaved_1f1b ? par.virtual_stages : 1;
  if (par.schedule != PipelineSchedule::interleaved_1f1b && par.virtual_stages != 1) {
    return Error("virtual_stages > 1 needs schedule: interleaved-1f1b", "parallel.virtual_stages");
  }
  if (tr.micro_batch < 1) return Error("must be at least 1", "training.micro_batch");
  if (tr.global_batch < 1) return Error("must be at least 1", "training.global_batch");
  const I per_step = tr.micro_batch * lay->dp();
  if (tr.global_batch % per_step != 0) {
    return Error(fmt::format("global_batch ({}) must be a multiple of micro_batch x dp = {} x {} = {}", tr.global_batch, tr.micro_batch,
                             lay->dp(), per_step),
                 "training.global_batch");
  }
  if (par.zero < 0 || par.zero > 3) return Error(fmt::format("zero must be 0, 1, 2 or 3, got {}", par.zero), "parallel.zero");
  MemoryEstimate out;
  out.micro_batches = static_cast<int>(tr.global_batch / per_step);
  for (const hw::NodeGroup& g : topo.spec().groups) {
    if (auto st = check_precision(g.node.gpu, tr.precision); !st) return st.error();
  }
  if (const auto* tm = std::get_if<TransformerSpec>(&in.model)) {
    if (auto st = transformer_stages(*tm, in, *lay, out.micro_batches, v, out); !st) return st.error();
  } else {
    if (auto st = cnn_stages(std::get<CnnSpec>(in.model), in, *lay, out); !st) return st.error();
  }
  for (StageFootprint& f : out.stages) {
    StageMemoryInput mi;
    mi.stage = f.stage;
    mi.dense_params = f.dense_params;
    mi.expert_params = f.expert_params;
    mi.dp = lay->grad_dp();
    mi.expert_dp = lay->expert_grad_dp();
    mi.activations = f.activation_bytes;
    if (par.zero >= 3) mi.gathered_params = 2.0 * f.dense_params / std::max(1, f.layers);
    // The stage's smallest GPU (clusters of several kinds may differ in memory), as the engine.
    int rank = lay->rank(Coords{0, 0, 0, f.stage});
    for (int d = 1; d < lay->dp(); ++d) {
      const int other = lay->rank(Coords{0, 0, d, f.stage});
      if (topo.node_template(topo.node_of(other)).spec().gpu.memory < topo.node_template(topo.node_of(rank)).spec().gpu.memory) rank = other;
    }
    const Bytes capacity = topo.node_template(topo.node_of(rank)).spec().gpu.memory;
    if (tr.framework == Framework::megatron) {
      f.memory = stage_memory(mi, tr, par.zero, in.memory, capacity);
    } else {
      EagerStageInput ei;
      ei.stage = f.stage;
      ei.params = f.dense_params + f.expert_params;
      ei.matmul_params = f.matmul_params;
      ei.dp = lay->grad_dp();
      ei.ddp_buckets = lay->dp() > 1 && par.dp_impl == DpImpl::ddp;
      ei.activations = f.activation_bytes;
      ei.loss = f.loss;
      f.memory = eager_stage_memory(ei, tr, par.zero, in.memory, capacity);
    }
    if (f.memory.total > out.peak.total) out.peak = f.memory;
    if (!f.memory.fits && out.fits) {
      out.fits = false;
      out.note = fmt::format("out of memory: rank {} (pipeline stage {}) needs {:.1f} GiB but its GPU has {:.1f} GiB", rank, f.stage,
                             f.memory.total / 1073741824.0, f.memory.capacity / 1073741824.0);
    }
  }
  return out;
}

}  // namespace dtsim::workloads
