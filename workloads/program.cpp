#include "workloads/program.hpp"

#include <algorithm>

#include "workloads/fp8_casts.hpp"
#include "workloads/program_kernels.hpp"

#include <fmt/format.h>

namespace dtsim::workloads {

ActivationShape activation_shape(const ProgramShape& sh, const TrainingSpec& tr, int act_bytes) {
  ActivationShape as;
  as.micro_batch = tr.micro_batch;
  as.seq = sh.seq;
  as.tp = sh.tp;
  as.cp = sh.cp;
  as.sequence_parallel = sh.sequence_parallel;
  as.recompute = tr.recompute;
  as.attention = tr.attention;
  as.act_bytes = act_bytes;
  if (sh.precision == hw::DType::fp8) as.gemm_input_bytes = 1;
  as.dropout = sh.dropout > 0 && !sh.dropout_regenerated;  // masks kept for the backward pass
  as.dropout_present = sh.dropout > 0;
  return as;
}

std::string_view to_string(CommGroup g) {
  switch (g) {
    case CommGroup::tp: return "tp";
    case CommGroup::cp: return "cp";
    case CommGroup::ep: return "ep";
  }
  return "?";
}

double Pass::flops() const {
  double f = 0;
  for (const Segment& s : segments) {
    for (const Kernel& k : s.kernels) f += k.flops;
  }
  return f;
}

namespace {

using detail::I;
using detail::Types;
using detail::types_of;
using detail::lin;
using detail::non_te;
using detail::bmm;
using detail::kRowOnChipBytes;
using detail::mem;
using detail::dropout_op;
using detail::residual_op;
using detail::dual;
using detail::backward_of;

struct Dims {
  I b, s, sl, T, Tn, h, heads, kv, d, qdim, kvdim, f, t, cp, ep;
};

Dims dims_of(const TransformerSpec& m, const ProgramShape& sh) {
  Dims x{};
  x.b = sh.micro_batch;
  x.s = sh.seq;
  x.cp = sh.cp;
  x.sl = sh.seq / sh.cp;
  x.T = x.b * x.sl;
  x.t = sh.tp;
  x.Tn = sh.sequence_parallel ? x.T / x.t : x.T;
  x.h = m.hidden;
  x.heads = m.heads;
  x.kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  x.d = m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
  x.qdim = x.heads * x.d;
  x.kvdim = x.kv * x.d;
  x.f = m.ffn;
  x.ep = sh.ep;
  return x;
}

std::optional<CommStep> tp_comm(const ProgramShape& sh, CollOp op, double bytes) {
  if (sh.tp <= 1) return std::nullopt;
  return CommStep{op, CommGroup::tp, Bytes(static_cast<I>(bytes))};
}

bool gemm_role(const Kernel& k, GemmRole r) { return k.cls == KernelClass::gemm && k.role == r; }

// `parts` problems of `rows` rows each of a GEMM (its m dimension cut into pieces, as Transformer
// Engine's overlapped GEMMs cut the tokens); FLOPs and bytes in proportion to the rows.
Kernel gemm_rows(const Kernel& k, I rows, I parts) {
  Kernel c = k;
  const double frac = static_cast<double>(rows * parts) / static_cast<double>(k.m);
  c.m = rows;
  c.batch = k.batch * parts;
  c.flops = k.flops * frac;
  c.bytes = k.bytes * frac;
  return c;
}

// Megatron's column-parallel backward (tp_overlap backward and userbuffers): the input gradient's
// reduction (the collective behind the layer's weight-gradient GEMM in the backward pass) runs
// beside that GEMM, and with sequence parallelism the layer's saved input shard is all-gathered
// again, beside the input-gradient GEMM, for the weight gradient. With tp_overlap none the
// re-gather blocks, as every collective does.
Pass column_parallel_backward(const Pass& bwd, const ProgramShape& sh) {
  const bool sp = sh.sequence_parallel && sh.tp > 1;
  Pass out;
  for (const Segment& s : bwd.segments) {
    const CollOp reduce = sp ? CollOp::reducescatter : CollOp::allreduce;
    int j = -1;
    for (int i = static_cast<int>(s.kernels.size()) - 1; i >= 1 && j < 0; --i) {
      if (gemm_role(s.kernels[static_cast<std::size_t>(i)], GemmRole::weight_grad) &&
          gemm_role(s.kernels[static_cast<std::size_t>(i) - 1], GemmRole::input_grad)) {
        j = i;
      }
    }
    if (!s.blocking_tp_op(reduce) || j < 0) {
      out.segments.push_back(s);
      continue;
    }
    const auto at = [&](int i) { return s.kernels.begin() + i; };
    const bool async = sh.tp_overlap != TpOverlap::none;
    Segment before{std::vector<Kernel>(s.kernels.begin(), at(j - 1)), std::nullopt, false};
    Segment dgrad{{s.kernels[static_cast<std::size_t>(j) - 1]}, std::nullopt, false};
    if (sp) {
      if (async) {
        dgrad.comm = CommStep{CollOp::allgather, CommGroup::tp, s.comm->bytes};
        dgrad.comm_overlaps = true;
      } else {
        before.comm = CommStep{CollOp::allgather, CommGroup::tp, s.comm->bytes};
      }
    }
    Segment wgrad{{s.kernels[static_cast<std::size_t>(j)]}, s.comm, async};
    Segment after{std::vector<Kernel>(at(j + 1), s.kernels.end()), std::nullopt, false};
    if (!before.kernels.empty() || before.comm) out.segments.push_back(std::move(before));
    out.segments.push_back(std::move(dgrad));
    out.segments.push_back(std::move(wgrad));
    if (!after.kernels.empty()) out.segments.push_back(std::move(after));
  }
  return out;
}

// Transformer Engine's userbuffers (tp_overlap userbuffers, Megatron's --tp-comm-overlap, with
// the methods of NeMo's and Megatron-Bridge's H100 configurations): a sequence-parallel all-gather
// in front of a GEMM becomes a ring exchange, the GEMM in tp pieces of the tokens, each piece
// computed while the next travels, so the gather runs beside all but the last piece; a
// reduce-scatter behind a GEMM is pipelined in 4 pieces, each piece reduced while the next is
// computed, so all but the first piece's GEMM and the last piece's reduction overlap.
Pass userbuffers(const Pass& pass, const ProgramShape& sh) {
  constexpr I kPipelineSplits = 4;
  Pass out;
  const auto& seg = pass.segments;
  for (std::size_t i = 0; i < seg.size(); ++i) {
    Segment s = seg[i];
    if (s.blocking_tp_op(CollOp::allgather) && i + 1 < seg.size() && !seg[i + 1].kernels.empty() && seg[i + 1].kernels.front().cls == KernelClass::gemm &&
        !seg[i + 1].comm_overlaps) {
      const CommStep gather = *s.comm;
      s.comm.reset();
      if (!s.kernels.empty()) out.segments.push_back(std::move(s));
      Segment next = seg[++i];
      const Kernel g = next.kernels.front();
      const I rows = g.m / sh.tp;
      Segment ring{{gemm_rows(g, rows, sh.tp - 1)}, gather, true};
      out.segments.push_back(std::move(ring));
      next.kernels.front() = gemm_rows(g, g.m - rows * (sh.tp - 1), 1);
      s = std::move(next);
    }
    if (s.blocking_tp_op(CollOp::reducescatter) && !s.kernels.empty() && s.kernels.back().cls == KernelClass::gemm && s.kernels.back().m >= kPipelineSplits) {
      const CommStep scatter = *s.comm;
      const Kernel g = s.kernels.back();
      const I rows = g.m / kPipelineSplits;
      s.kernels.back() = gemm_rows(g, g.m - rows * (kPipelineSplits - 1), 1);
      s.comm.reset();
      out.segments.push_back(std::move(s));
      const I piece = scatter.bytes.count() / kPipelineSplits;
      out.segments.push_back(Segment{{gemm_rows(g, rows, kPipelineSplits - 1)}, CommStep{scatter.op, scatter.group, Bytes(scatter.bytes.count() - piece)}, true});
      out.segments.push_back(Segment{{}, CommStep{scatter.op, scatter.group, Bytes(piece)}, false});
      continue;
    }
    out.segments.push_back(std::move(s));
  }
  return out;
}

}  // namespace

ProgramShape program_shape(const TransformerSpec& m, const TrainingSpec& tr, const ParallelSpec& par, const Layout& lay) {
  ProgramShape sh;
  sh.micro_batch = tr.micro_batch;
  sh.seq = tr.seq_len > 0 ? tr.seq_len : m.max_seq;
  sh.tp = lay.tp();
  sh.cp = lay.cp();
  sh.cp_comm = par.cp_comm;
  sh.ep = lay.ep();
  sh.sequence_parallel = par.sequence_parallel && lay.tp() > 1;
  sh.tp_overlap = par.tp_overlap;
  sh.precision = tr.precision;
  sh.recompute = tr.recompute;
  sh.attention = tr.attention;
  // GPT/BERT-style models (with biases) train with dropout 0.1 by default (GPT-2, BERT, Megatron's
  // GPT); Llama-style models without.
  sh.dropout = tr.dropout.value_or(m.bias ? 0.1 : 0.0);
  sh.dropout_regenerated = tr.dropout_mask_regenerated;
  sh.dropout_hash_rng = tr.dropout_hash_rng;
  sh.head_layout_split = tr.head_layout_split;
  sh.cross_entropy_unfused = tr.cross_entropy_unfused;
  sh.fp8_recipe = tr.fp8_recipe;
  sh.head_apart = lay.pp() > 1;
  return sh;
}

Status validate_transformer(const TransformerSpec& m, const ProgramShape& s) {
  const I kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  if (s.seq <= 0) return Error("the sequence length must be positive", "training.seq_len");
  if (s.micro_batch <= 0) return Error("the micro-batch must be positive", "training.micro_batch");
  if (m.heads % s.tp != 0) return Error(fmt::format("tp ({}) must divide the {} attention heads", s.tp, m.heads), "parallel.tp");
  if (kv % s.tp != 0 && s.tp % kv != 0) {
    return Error(fmt::format("tp ({}) and the {} key/value heads must divide one another", s.tp, kv), "parallel.tp");
  }
  if (m.ffn % s.tp != 0) return Error(fmt::format("tp ({}) must divide the MLP size {}", s.tp, m.ffn), "parallel.tp");
  if (s.cp > 1 && s.cp_comm == CpComm::a2a) {
    const I local_heads = m.heads / s.tp, local_kv = std::max<I>(1, kv / s.tp);
    if (local_heads % s.cp != 0 || local_kv % s.cp != 0) {
      return Error(fmt::format("cp_comm a2a shards attention heads over cp ({}): the {} query and {} key/value heads on each tensor-parallel "
                               "rank must both be multiples of it (use cp_comm p2p or allgather)",
                               s.cp, local_heads, local_kv),
                   "parallel.cp_comm");
    }
  }
  if (s.cp > 1 && s.cp_comm == CpComm::a2a && s.seq % s.cp != 0) {
    return Error(fmt::format("cp ({}) needs the sequence length ({}) to be a multiple of cp (Ulysses splits the sequence over cp)", s.cp, s.seq),
                 "parallel.cp");
  }
  if (s.cp > 1 && s.cp_comm != CpComm::a2a && s.seq % (2 * s.cp) != 0) {
    return Error(fmt::format("cp ({}) needs the sequence length ({}) to be a multiple of 2 x cp (load-balanced causal chunks)", s.cp, s.seq),
                 "parallel.cp");
  }
  if (s.tp > 1 && s.tp_overlap == TpOverlap::userbuffers && !s.sequence_parallel) {
    return Error("tp_overlap userbuffers overlaps the sequence-parallel all-gathers and reduce-scatters: it needs sequence_parallel: true (as "
                 "Megatron-LM's --tp-comm-overlap does)",
                 "parallel.tp_overlap");
  }
  if (s.sequence_parallel && s.tp > 1 && (s.micro_batch * s.seq / s.cp) % s.tp != 0) {
    return Error("sequence parallelism needs micro_batch x seq_len / cp to be a multiple of tp", "parallel.sequence_parallel");
  }
  if (m.experts > 0) {
    if (m.experts % s.ep != 0) return Error(fmt::format("ep ({}) must divide the {} experts", s.ep, m.experts), "parallel.ep");
    if (s.tp > 1 && !s.sequence_parallel) {
      return Error("MoE layers with tp > 1 need sequence_parallel: true (as Megatron-Core)", "parallel.sequence_parallel");
    }
  } else if (s.ep > 1) {
    return Error(fmt::format("ep is {} but model '{}' has no experts", s.ep, m.name), "parallel.ep");
  }
  return {};
}

LayerProgram transformer_block(const TransformerSpec& m, const ProgramShape& sh) {
  const Types ty = types_of(sh.precision);
  const Dims x = dims_of(m, sh);
  const double act_bytes = static_cast<double>(x.T * x.h * ty.act);  // a full [tokens, hidden] tensor
  const bool sp = sh.sequence_parallel && sh.tp > 1;
  const double causal = m.encoder ? 1.0 : 0.5;
  LayerProgram p;
  p.name = "block";
  Pass& fwd = p.forward;

  // Attention.
  Segment ln1{{mem(ty, "layernorm", 2.0 * x.Tn * x.h, MemoryKind::norm)}, std::nullopt, false};
  Segment attn;
  // Entering the tensor-parallel region: an all-gather of the sequence shards, or without sequence
  // parallelism Megatron's copy (identity forward, all-reduce of the input gradient backward).
  if (sp) {
    ln1.comm = tp_comm(sh, CollOp::allgather, act_bytes);
  } else {
    ln1.backward_comm = tp_comm(sh, CollOp::allreduce, act_bytes);
  }
  fwd.segments.push_back(ln1);
  attn.kernels.push_back(lin(ty, "qkv", x.T, (x.qdim + 2 * x.kvdim) / x.t, x.h));
  if (m.positions == Positions::rotary) attn.kernels.push_back(mem(ty, "rotary", 2.0 * x.T * (x.qdim + x.kvdim) / x.t));
  std::vector<Kernel> core;
  const I hp = x.heads / x.t;  // heads on this rank
  // Elements of this rank's Q, K and V together, of its context (Q's shape), and of K or V alone.
  const double qkv_el = static_cast<double>(x.T) * static_cast<double>(x.qdim + 2 * x.kvdim) / static_cast<double>(x.t);
  const double ctx_el = static_cast<double>(x.T) * static_cast<double>(x.qdim) / static_cast<double>(x.t);
  const double kv_el = static_cast<double>(x.T) * static_cast<double>(x.kvdim) / static_cast<double>(x.t);
  if (fused(sh.attention)) {
    Kernel a;
    a.name = "attention";
    a.cls = KernelClass::attention;
    a.flash1 = sh.attention == Attention::flash1;
    a.dtype = ty.act_math;
    a.flops = 4.0 * static_cast<double>(x.b * hp) * static_cast<double>(x.sl) * static_cast<double>(x.s) * static_cast<double>(x.d) * causal;
    a.bytes = static_cast<double>(x.T) * static_cast<double>(2 * x.qdim + 2 * x.kvdim) / static_cast<double>(x.t) * ty.act;
    core.push_back(a);
  } else {
    // Unfused attention: the heads are laid out as [b, heads, s, d] for the batched products.
    // dtsim-validate's kernels (head_layout: split) copy Q, K and V out of the [tokens, (heads + 2
    // kv) d] projection and the context back, and the reverse in the backward pass. Megatron-LM
    // (the default) takes Q, K and V as strided views of the projection and copies only the
    // context (permute + contiguous); in its backward the context gradient stays a strided view
    // (the batched products take it as it is) and only the Q, K and V gradients are copied, by the
    // split's backward (a concatenation). With grouped queries Megatron-LM also copies Q (its
    // heads are no longer one stride apart) and repeats K and V over the query heads
    // (repeat_interleave); their backward sums the repeats. All PyTorch copies: stream kernels, the
    // grouped-query copies counted as one kernel.
    if (sh.head_layout_split) {
      Kernel split = mem(ty, "layout_qkv", 2.0 * qkv_el, MemoryKind::layout_split);
      split.backward_bytes = split.bytes;
      attn.kernels.push_back(split);
    } else if (x.kvdim < x.qdim) {
      Kernel gqa = mem(ty, "gqa_copies", 2.0 * ctx_el + 2.0 * (kv_el + ctx_el));
      gqa.backward_bytes = 2.0 * (ctx_el + kv_el) * ty.act;
      attn.kernels.push_back(gqa);
    }
    const double scores = static_cast<double>(x.b * hp) * static_cast<double>(x.sl) * static_cast<double>(x.s);
    core.push_back(bmm(ty, "scores", x.b * hp, x.sl, x.s, x.d));
    core.push_back(mem(ty, "softmax", 2.0 * scores, MemoryKind::softmax));
    if (sh.dropout > 0) core.push_back(dropout_op(ty, sh, "attention_dropout", scores));
    core.push_back(bmm(ty, "context", x.b * hp, x.sl, x.d, x.s));
    Kernel merge = mem(ty, "layout_context", 2.0 * ctx_el, sh.head_layout_split ? MemoryKind::layout : MemoryKind::stream);
    merge.backward_bytes = sh.head_layout_split ? merge.bytes : 2.0 * qkv_el * ty.act;
    core.push_back(merge);
  }
  // K and V of the whole context-parallel group, as p2p and allgather move them.
  const Bytes kv_gathered(static_cast<I>(2.0 * kv_el * ty.act * static_cast<double>(x.cp)));
  if (sh.cp > 1 && sh.cp_comm == CpComm::p2p) {
    // Ring attention: K and V chunks travel around the context-parallel ring while attention runs.
    fwd.segments.push_back(attn);
    attn = Segment{};
    Segment ring;
    ring.kernels = core;
    ring.comm = CommStep{CollOp::allgather, CommGroup::cp, kv_gathered};
    ring.comm_overlaps = true;
    fwd.segments.push_back(ring);
  } else if (sh.cp > 1 && sh.cp_comm == CpComm::allgather) {
    // All-gather attention (Llama 3): every rank gathers the whole sequence's K and V, then runs
    // its queries against them; the backward pass reduce-scatters their gradients (the dual).
    // Transformer Engine's implementation of it (AttnFuncWithCPAndKVAllGather, which Megatron-Core's
    // cp_comm_type all_gather runs) keeps only the local K and V for the backward pass and gathers
    // them again there, before the attention's gradient kernels: the core's backward_comm.
    const CommStep gather{CollOp::allgather, CommGroup::cp, kv_gathered};
    attn.comm = gather;
    fwd.segments.push_back(attn);
    Segment gathered{core, std::nullopt, false};
    gathered.backward_comm = gather;
    fwd.segments.push_back(gathered);
    attn = Segment{};
  } else if (sh.cp > 1 && sh.cp_comm == CpComm::a2a) {
    // Ulysses: an all-to-all turns sequence shards of Q, K and V into head shards of the whole
    // sequence, attention runs on heads / cp heads, and a second all-to-all returns the context to
    // sequence shards. The same FLOPs and bytes as the kernels above (sl x s x heads = s x s x
    // heads / cp); the backward pass runs both all-to-alls again in reverse.
    attn.comm = CommStep{CollOp::alltoall, CommGroup::cp, Bytes(static_cast<I>(qkv_el * ty.act))};
    fwd.segments.push_back(attn);
    Segment heads;
    heads.kernels = core;
    heads.comm = CommStep{CollOp::alltoall, CommGroup::cp, Bytes(static_cast<I>(ctx_el * ty.act))};
    fwd.segments.push_back(heads);
    attn = Segment{};
  } else {
    attn.kernels.insert(attn.kernels.end(), core.begin(), core.end());
  }
  attn.kernels.push_back(lin(ty, "attention_out", x.T, x.h, x.qdim / x.t));
  attn.comm = tp_comm(sh, sp ? CollOp::reducescatter : CollOp::allreduce, act_bytes);
  fwd.segments.push_back(attn);

  // MLP (dense) or experts.
  Segment pre{{residual_op(ty, sh, "dropout_residual", static_cast<double>(x.Tn * x.h)), mem(ty, "layernorm", 2.0 * x.Tn * x.h, MemoryKind::norm)},
              std::nullopt, false};
  const I gate = m.gated_mlp ? 2 : 1;
  if (m.experts > 0) {
    // Tokens stay split across the TP ranks (sequence parallel); each rank routes its tokens to
    // top_k experts over the expert-parallel group and gets them back.
    const I Tm = x.Tn;
    pre.kernels.push_back(lin(non_te(ty), "router", Tm, m.experts, x.h));
    const double routed = static_cast<double>(Tm * m.top_k * x.h * ty.act);
    pre.comm = CommStep{CollOp::alltoall, CommGroup::ep, Bytes(static_cast<I>(routed))};
    fwd.segments.push_back(pre);
    const I local_experts = m.experts / x.ep;
    const I tokens_per_expert = std::max<I>(1, Tm * m.top_k / local_experts * 1);
    Segment experts;
    Kernel up = gemm("expert_up", tokens_per_expert, gate * x.f, x.h, local_experts, ty.math, ty.gemm_in, ty.act);
    up.weighted = true;
    Kernel down = gemm("expert_down", tokens_per_expert, x.h, x.f, local_experts, ty.math, ty.gemm_in, ty.act);
    down.weighted = true;
    experts.kernels = {up, mem(ty, "activation", static_cast<double>(local_experts * tokens_per_expert * x.f * (gate + 1)), MemoryKind::activation), down};
    experts.comm = CommStep{CollOp::alltoall, CommGroup::ep, Bytes(static_cast<I>(routed))};
    fwd.segments.push_back(experts);
    p.expert_params = local_experts * ((gate + 1) * x.h * x.f + (m.bias ? gate * x.f + x.h : 0));
  } else {
    Segment mlp;
    if (sp) {
      pre.comm = tp_comm(sh, CollOp::allgather, act_bytes);
    } else {
      pre.backward_comm = tp_comm(sh, CollOp::allreduce, act_bytes);
    }
    fwd.segments.push_back(pre);
    mlp.kernels.push_back(lin(ty, "mlp_up", x.T, gate * x.f / x.t, x.h));
    mlp.kernels.push_back(mem(ty, "activation", static_cast<double>(x.T) * static_cast<double>(x.f / x.t) * static_cast<double>(gate + 1), MemoryKind::activation));
    mlp.kernels.push_back(lin(ty, "mlp_down", x.T, x.h, x.f / x.t));
    mlp.comm = tp_comm(sh, sp ? CollOp::reducescatter : CollOp::allreduce, act_bytes);
    fwd.segments.push_back(mlp);
  }
  fwd.segments.push_back(Segment{{residual_op(ty, sh, "dropout_residual", static_cast<double>(x.Tn * x.h))}, std::nullopt, false});

  p.backward = column_parallel_backward(backward_of(fwd), sh);
  if (sh.precision == hw::DType::fp8) add_fp8_casts(fwd, p.backward, sh);
  if (sh.tp_overlap == TpOverlap::userbuffers && sp) {
    p.backward = userbuffers(p.backward, sh);
    fwd = userbuffers(fwd, sh);
  }
  if (sh.recompute == Recompute::full) {
    p.recompute = fwd;
  } else if (sh.recompute == Recompute::selective && sh.attention == Attention::standard) {
    // Korthikanti et al. 2022: recompute only the attention core (scores, softmax, dropout, context).
    Segment s;
    for (const Kernel& k : core) s.kernels.push_back(k);
    p.recompute.segments.push_back(s);
  }
  // Parameters on this rank: attention and MLP matrices split over tp (norms replicated; the
  // small replicated biases of row-parallel layers are counted once per rank too).
  const I norms = (m.norm == Norm::layernorm ? 2 : 1) * x.h * 2;
  // Biases: every linear layer's (GPT, BERT), or only Q, K and V's (Qwen2's qkv_bias).
  const bool qkv_bias = m.bias || m.qkv_bias;
  const I attn_params = x.h * (x.qdim + 2 * x.kvdim) + x.qdim * x.h + (qkv_bias ? x.qdim + 2 * x.kvdim : 0) + (m.bias ? x.h : 0);
  const I mlp_params = m.experts > 0 ? x.h * m.experts : (gate + 1) * x.h * x.f + (m.bias ? gate * x.f + x.h : 0);
  p.params = (attn_params + mlp_params) / x.t + norms;
  // The same parameters as tensors, in forward order: norm, QKV (weight, bias), output projection
  // (weight, bias), norm, MLP up (one weight per gate branch, biases), MLP down (weight, bias) or
  // the MoE router. Integer division leftovers go to the last tensor, so that they sum to params.
  const I norm = norms / 2;
  std::vector<I> t{norm, x.h * (x.qdim + 2 * x.kvdim) / x.t};
  if (qkv_bias) t.push_back((x.qdim + 2 * x.kvdim) / x.t);
  t.push_back(x.qdim * x.h / x.t);
  if (m.bias) t.push_back(x.h / x.t);
  t.push_back(norm);
  if (m.experts > 0) {
    t.push_back(x.h * m.experts / x.t);
  } else {
    for (I g = 0; g < gate; ++g) t.push_back(x.h * x.f / x.t);
    if (m.bias) t.push_back(gate * x.f / x.t);
    t.push_back(x.f * x.h / x.t);
    if (m.bias) t.push_back(x.h / x.t);
  }
  I sum = 0;
  for (I v : t) sum += v;
  t.back() += p.params - sum;
  p.tensors = std::move(t);
  return p;
}

LayerProgram transformer_embedding(const TransformerSpec& m, const ProgramShape& sh) {
  const Types ty = types_of(sh.precision);
  const Dims x = dims_of(m, sh);
  LayerProgram p;
  p.name = "embedding";
  const double act_bytes = static_cast<double>(x.T * x.h * ty.act);
  // Vocabulary-parallel lookup: each TP rank gathers its rows, then the partial embeddings are
  // summed (all-reduce, or reduce-scatter into sequence-parallel shards).
  Segment s{{mem(ty, "embedding", 2.0 * x.T * x.h)}, std::nullopt, false};
  s.comm = tp_comm(sh, sh.sequence_parallel ? CollOp::reducescatter : CollOp::allreduce, act_bytes);
  p.forward.segments.push_back(s);
  // The gradient of the all-reduce is the same on every rank (no communication); the gradient of a
  // reduce-scatter is an all-gather of the sequence-parallel gradient shards first.
  if (sh.sequence_parallel && sh.tp > 1) p.backward.segments.push_back(Segment{{}, tp_comm(sh, CollOp::allgather, act_bytes), false});
  p.backward.segments.push_back(Segment{{mem(ty, "embedding_grad", 3.0 * x.T * x.h)}, std::nullopt, false});
  p.params = m.vocab * x.h / x.t + (m.positions == Positions::learned ? m.max_seq * x.h : 0) + (m.encoder ? 2 * x.h + 2 * x.h : 0);
  p.embedding_tied = m.tied_embeddings;
  return p;
}

LayerProgram transformer_head(const TransformerSpec& m, const ProgramShape& sh) {
  const Types ty = types_of(sh.precision);
  const Dims x = dims_of(m, sh);
  LayerProgram p;
  p.name = "head";
  const double act_bytes = static_cast<double>(x.T * x.h * ty.act);
  Segment norm{{mem(ty, "final_norm", 2.0 * x.Tn * x.h, MemoryKind::norm)}, std::nullopt, false};
  Segment logits;
  if (sh.sequence_parallel && sh.tp > 1) {
    norm.comm = tp_comm(sh, CollOp::allgather, act_bytes);
  } else {
    norm.backward_comm = tp_comm(sh, CollOp::allreduce, act_bytes);
  }
  p.forward.segments.push_back(norm);
  if (m.encoder) logits.kernels.push_back(lin(non_te(ty), "mlm_transform", x.T, x.h, x.h));
  logits.kernels.push_back(lin(non_te(ty), "lm_head", x.T, m.vocab / x.t, x.h));
  // Vocabulary-parallel cross-entropy: a row-wise log-softmax (one block per row) that passes over
  // the 16-bit logits three times (maximum, sum, write) and writes fp32 log-probabilities; its
  // backward reads those and writes the 16-bit logit gradient. A row longer than an SM keeps on
  // chip for each of its resident blocks is read from HBM all three times (docs/model.md,
  // "Cross-entropy"). The TP ranks exchange per-token maxima and sums (two all-reduces of one fp32
  // per token, merged here).
  const double logit_el = static_cast<double>(x.T) * static_cast<double>(m.vocab / x.t);
  const double row_bytes = static_cast<double>(m.vocab / x.t) * ty.act;
  const double passes = row_bytes > kRowOnChipBytes ? 3.0 : 1.0;
  Kernel ce = memory_op("cross_entropy", logit_el * (passes * ty.act + 4.0), ty.act_math, MemoryKind::softmax);
  ce.backward_bytes = logit_el * (ty.act + 4.0);
  if (sh.cross_entropy_unfused) {
    // Megatron-LM's VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py,
    // r0.8.0) after logits.float(), one PyTorch operation per pass, fp32 in place: the cast
    // (16-bit read, fp32 written), the row maximum (read), the subtraction, the exponential (read
    // and written each), the row sum (read) and the division into the softmax kept for the
    // backward (read and written); 38 bytes per logit with 16-bit logits. Backward: the softmax
    // times the loss gradient in place (8 bytes) and the fp32 gradient cast back to 16 bits
    // (4 + 2): 14 bytes. All at the stream rate.
    ce = memory_op("cross_entropy_unfused", logit_el * (ty.act + 4.0 + 4.0 + 8.0 + 8.0 + 4.0 + 8.0), ty.act_math, MemoryKind::stream);
    ce.backward_bytes = logit_el * (8.0 + 4.0 + ty.act);
  }
  logits.kernels.push_back(ce);
  logits.comm = tp_comm(sh, CollOp::allreduce, 8.0 * static_cast<double>(x.T));
  p.forward.segments.push_back(logits);
  p.backward = column_parallel_backward(backward_of(p.forward), sh);
  if (sh.recompute == Recompute::full) p.recompute = Pass{};
  // A tied table is the embedding's when both sit on one stage. With more than one pipeline stage
  // Megatron-Core keeps "a second copy of word_embeddings on the last stage" with its own gradient
  // and optimizer state, all-reduced with the first stage's (megatron/core/models/common/
  // language_module/language_module.py, setup_embeddings_and_output_layer; gpt_model.py allocates
  // the output layer's weight unless it is on the embedding's stage).
  const bool own_table = !m.tied_embeddings || sh.head_apart;
  p.params = (own_table ? m.vocab * x.h / x.t : 0) + (m.norm == Norm::layernorm ? 2 : 1) * x.h +
             (m.encoder ? x.h * x.h + 3 * x.h + m.vocab / x.t : 0);
  p.embedding_tied = m.tied_embeddings;
  return p;
}
Kernel optimizer_update(const TrainingSpec& tr, double params) {
  const bool mixed = tr.precision != hw::DType::fp32 && tr.precision != hw::DType::tf32;
  const double per_param = (tr.optimizer == Optimizer::adam ? 24.0 : 16.0) + (mixed ? 2.0 : 0.0) + hw::dtype_bytes(tr.grad_dtype);
  return memory_op("optimizer", params * per_param, hw::DType::fp32, MemoryKind::optimizer);
}

Kernel gradient_zeroing(const TrainingSpec& tr, double params) {
  return memory_op("zero_grad", params * hw::dtype_bytes(tr.grad_dtype), hw::DType::fp32, MemoryKind::stream);
}

double model_flops_per_sample(const ModelSpec& model, std::int64_t seq) {
  if (const auto* c = std::get_if<CnnSpec>(&model)) {
    double macs = 0;
    for (const CnnLayer& l : c->layers) macs += static_cast<double>(l.macs());
    return 6.0 * macs;
  }
  const auto& m = std::get<TransformerSpec>(model);
  const double matmul = static_cast<double>(active_parameter_count(m) - embedding_parameters(m)) +
                        (m.tied_embeddings ? static_cast<double>(m.vocab * m.hidden) : 0.0);
  const double d = static_cast<double>(m.head_dim > 0 ? m.head_dim : m.hidden / m.heads);
  const double attn = 12.0 * static_cast<double>(m.layers) * static_cast<double>(m.heads) * d * static_cast<double>(seq);
  return static_cast<double>(seq) * (6.0 * matmul + attn);
}

}  // namespace dtsim::workloads
