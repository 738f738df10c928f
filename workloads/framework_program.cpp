#include "workloads/framework_program.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "workloads/framework_builder.hpp"

namespace dtsim::workloads {

using namespace framework_detail;

namespace {

// Hugging Face's GPT-2 family uses gelu_new (the tanh approximation written out in PyTorch ops);
// BERT-style encoders the exact GELU (one kernel); gated MLPs SiLU.
bool tanh_gelu(const TransformerSpec& m) { return !m.encoder && !m.gated_mlp && m.positions == Positions::learned; }

// Parameter tensors in named_parameters() order, which is the order the optimizer's
// multi_tensor_apply takes them in (module definition order in transformers): GPT-2's block
// ln_1, c_attn, c_proj, ln_2, c_fc, c_proj (12 tensors); Llama and Qwen2 decoder layers q, k, v, o
// (Qwen2: q, k and v with biases), gate, up, down, then both norms; BERT's layer query, key, value,
// output dense, its layer norm, intermediate dense, output dense, its layer norm (16).
std::vector<I> block_tensors(const TransformerSpec& m) {
  const I h = m.hidden, f = m.ffn;
  const I heads = m.heads, kv = m.kv_heads > 0 ? m.kv_heads : m.heads, hd = m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
  const I q = heads * hd, kvd = kv * hd;
  const bool qkv_bias = m.bias || m.qkv_bias;
  std::vector<I> t;
  auto linear = [&](I in, I out, bool bias) {
    t.push_back(in * out);
    if (bias) t.push_back(out);
  };
  auto norm = [&] {
    t.push_back(h);
    if (m.norm == Norm::layernorm) t.push_back(h);
  };
  auto mlp = [&] {
    if (m.gated_mlp) linear(h, f, m.bias);
    linear(h, f, m.bias);
  };
  if (tanh_gelu(m)) {
    norm();
    linear(h, q + 2 * kvd, qkv_bias);
    linear(q, h, m.bias);
    norm();
    mlp();
    linear(f, h, m.bias);
  } else if (m.encoder) {
    linear(h, q, qkv_bias);
    linear(h, kvd, qkv_bias);
    linear(h, kvd, qkv_bias);
    linear(q, h, m.bias);
    norm();
    mlp();
    linear(f, h, m.bias);
    norm();
  } else {
    linear(h, q, qkv_bias);
    linear(h, kvd, qkv_bias);
    linear(h, kvd, qkv_bias);
    linear(q, h, m.bias);
    mlp();
    linear(f, h, m.bias);
    norm();
    norm();
  }
  return t;
}

I sum(const std::vector<I>& t) {
  I n = 0;
  for (const I v : t) n += v;
  return n;
}

}  // namespace

Status validate_framework(Framework fw, const ProgramShape& s) {
  if (fw == Framework::megatron) return {};
  if (s.tp != 1 || s.cp != 1 || s.ep != 1) {
    return Error(fmt::format("framework {} is modelled for data parallelism only (tp = cp = ep = 1)", to_string(fw)), "training.framework");
  }
  if (s.precision != hw::DType::bf16 && s.precision != hw::DType::fp16 && s.precision != hw::DType::fp32) {
    return Error(fmt::format("framework {} runs bf16 or fp16 autocast or fp32, not {}", to_string(fw), hw::to_string(s.precision)),
                 "training.precision");
  }
  return {};
}

Time host_per_kernel(const ComputeParams& p, Framework fw) {
  switch (fw) {
    case Framework::pytorch_eager: return p.eager_host_per_kernel;
    case Framework::torch_compile: return p.compile_host_per_kernel;
    case Framework::megatron: break;
  }
  return Time::zero();
}

LayerProgram framework_block(const TransformerSpec& m, const ProgramShape& sh, Framework fw) {
  Builder bl;
  bl.compile = fw == Framework::torch_compile;
  bl.amp = amp_of(sh);
  bl.math = math_of(sh);
  const I T = sh.micro_batch * sh.seq, h = m.hidden, f = m.ffn;
  const I heads = m.heads, kv = m.kv_heads > 0 ? m.kv_heads : m.heads, hd = m.head_dim > 0 ? m.head_dim : m.hidden / m.heads;
  const I q = heads * hd, kvd = kv * hd;
  const double Th = d(T) * d(h), Tf = d(T) * d(f);
  const bool fused_qkv = tanh_gelu(m);  // GPT-2's c_attn; BERT, Llama, Qwen: three projections
  const bool qkv_bias = m.bias || m.qkv_bias;
  const double ab = bl.amp ? 2 : 4;  // bytes of a GEMM output

  // Attention.
  bl.norm(m.norm, Th, d(T), true);
  if (fused_qkv) {
    bl.linear("qkv", T, q + 2 * kvd, h, qkv_bias, true);
  } else {
    // Pre-norm: the norm's output feeds q, k and v. Post-norm (BERT): the block's input is the
    // previous norm's output, which feeds q, k, v and the attention's residual add.
    bl.grad_sum(Th, m.encoder ? 4 : 3);
    bl.linear("q", T, q, h, qkv_bias, true);
    bl.linear("k", T, kvd, h, qkv_bias, true);
    bl.linear("v", T, kvd, h, qkv_bias, true);
  }
  if (m.positions == Positions::rotary) {
    // HF apply_rotary_pos_emb: q * cos + rotate_half(q) * sin (rotate_half: a negation and a
    // concatenation), in fp32 (cos and sin are fp32), for q and k; then cast back for SDPA.
    for (const double el : {d(T) * d(q), d(T) * d(kvd)}) {
      if (bl.compile) {
        bl.f(ew("rotary", el, 4));
        bl.b({ew("rotary_grad", el, 4)});
        continue;
      }
      bl.f(ew("rotary_cos", el, 6));
      bl.f(ew("rotary_neg", el / 2, 8));
      bl.f(ew("rotary_cat", el, 8));
      bl.f(ew("rotary_sin", el, 8));
      bl.f(ew("rotary_add", el, 12));
      bl.f(ew("cast_rotary", el, 6));
      bl.b({ew("cast_rotary_grad", el, 6), ew("rotary_sin_grad", el, 12), ew("rotary_neg_grad", el / 2, 8), ew("rotary_cat_grad", el, 8),
            ew("rotary_cos_grad", el, 12), ew("rotary_grad_sum", el, 12)});
    }
  }
  if (!m.encoder && !bl.compile) {
    // Hugging Face decoders update their key/value cache in training too (torch.cat into an empty
    // cache, one copy of K and of V). PyTorch's strided copies are stream kernels here (the H100
    // traces show them at 1.2-1.9 TB/s, below the stream rate; docs/model.md).
    bl.f(ew("cache_cat", d(T) * d(kvd), 4));
    bl.f(ew("cache_cat", d(T) * d(kvd), 4));
  }
  {
    // Hugging Face skips its causal mask and calls SDPA with is_causal (flash or cuDNN, half the
    // scores) except while tracing: under torch.compile the decoder's causal mask is materialised
    // and passed, so SDPA runs the memory-efficient kernel over the full score matrix
    // (transformers masking_utils._ignore_causal_mask_sdpa). An encoder's all-ones padding mask is
    // dropped the same way in eager only (_ignore_bidirectional_mask_sdpa,
    // _prepare_4d_attention_mask_for_sdpa: "not is_tracing and all ones"): compiled, it is
    // expanded and passed too.
    const bool masked = bl.compile;
    const double causal = m.encoder || masked ? 1.0 : 0.5;
    Kernel a;
    a.name = "attention";
    a.cls = KernelClass::attention;
    a.dtype = bl.amp ? bl.math : hw::DType::fp32;
    a.sdpa = true;
    a.sdpa_masked = masked;
    a.flops = 4.0 * d(sh.micro_batch * heads) * d(sh.seq) * d(sh.seq) * d(hd) * causal;
    a.bytes = d(T) * d(2 * q + 2 * kvd) * ab;
    a.elements = sh.dropout > 0 ? d(sh.micro_batch * heads) * d(sh.seq) * d(sh.seq) * causal : 0;
    Kernel ab_ = a;
    ab_.name = "attention_bwd";
    ab_.cls = KernelClass::attention_bwd;
    ab_.flops = 2.5 * a.flops;
    ab_.bytes = 2.0 * a.bytes;
    if (sh.dropout > 0) bl.f(tiny("philox_seed"));
    bl.f(tiny("memset"));
    bl.f(a);
    // cuDNN's backward: dO . O per row, the kernel, the fp32 dQ accumulator converted; with
    // grouped-query attention the per-head dK and dV are summed over each group.
    std::vector<Kernel> g{tiny("memset"), ew("sdpa_dot_do_o", d(T) * d(q), 4), ab_, ew("sdpa_convert_dq", d(T) * d(q), 6)};
    if (kv != heads) {
      g.push_back(ew("sdpa_reduce_head", d(T) * d(q), 4));
      g.push_back(ew("sdpa_reduce_head", d(T) * d(q), 4));
    }
    if (!bl.compile) {
      // The head-major gradients copied back to [tokens, features] (and concatenated for a fused
      // QKV projection).
      g.push_back(ew("layout_grad", d(T) * d(kvd), 4));
      g.push_back(ew("layout_grad", d(T) * d(kvd), 4));
      if (fused_qkv) {
        g.push_back(ew("cat_grad", d(T) * d(q + 2 * kvd), 4));
      } else {
        g.push_back(ew("layout_grad", d(T) * d(q), 4));
      }
    }
    bl.b(std::move(g));
  }
  bl.linear("attention_out", T, h, q, m.bias, false);
  bl.dropout_residual(Th, sh.dropout);

  // MLP.
  bl.norm(m.norm, Th, d(T), true);
  if (m.gated_mlp) {
    bl.grad_sum(Th, 2);
    bl.linear("mlp_gate", T, f, h, m.bias, true);
    bl.linear("mlp_up", T, f, h, m.bias, true);
    if (bl.compile) {
      bl.f(ew("swiglu", Tf, 6, MemoryKind::activation));
      bl.b({ew("swiglu_grad", Tf, 10, MemoryKind::activation_bwd)});
    } else {
      bl.f(ew("silu", Tf, 4, MemoryKind::activation));
      bl.f(ew("gate_mul", Tf, 6));
      bl.b({ew("gate_mul_grad", Tf, 6), ew("gate_mul_grad", Tf, 6), ew("silu_grad", Tf, 6, MemoryKind::activation_bwd)});
    }
    bl.linear("mlp_down", T, h, f, m.bias, false);
  } else {
    bl.linear("mlp_up", T, f, h, m.bias, true);
    const bool tanh = tanh_gelu(m);
    if (bl.compile) {
      bl.f(ew("gelu", Tf, 4, MemoryKind::activation));
      bl.b({ew("gelu_grad", Tf, 6, MemoryKind::activation_bwd)});
    } else if (tanh) {
      // gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the input upcast to fp32: nine
      // kernels forward (bytes per element as the mixed bf16/fp32 operands are), fourteen backward.
      for (const double bpe : {4.0, 6.0, 8.0, 8.0, 10.0, 8.0, 8.0, 8.0, 10.0}) bl.f(ew("gelu_op", Tf, bpe));
      std::vector<Kernel> g;
      for (const double bpe : {10.0, 12.0, 6.0, 12.0, 8.0, 6.0, 8.0, 8.0, 8.0, 12.0, 6.0, 6.0, 4.0, 6.0}) g.push_back(ew("gelu_op_grad", Tf, bpe));
      bl.b(std::move(g));
    } else {
      bl.f(ew("gelu", Tf, 4, MemoryKind::activation));
      bl.b({ew("gelu_grad", Tf, 6, MemoryKind::activation_bwd)});
    }
    bl.linear("mlp_down", T, h, f, m.bias, tanh && !bl.compile);
  }
  bl.dropout_residual(Th, sh.dropout);
  bl.grad_sum(Th, 2);  // the residual stream's gradient meets the branch's

  LayerProgram p = bl.finish("block");
  // Activation checkpointing (Hugging Face gradient_checkpointing) reruns the block's forward
  // before its backward; selective recomputation has no Hugging Face counterpart.
  if (sh.recompute == Recompute::full) p.recompute = p.forward;
  p.tensors = block_tensors(m);
  p.params = sum(p.tensors);
  return p;
}

LayerProgram framework_embedding(const TransformerSpec& m, const ProgramShape& sh, Framework fw) {
  Builder bl;
  bl.compile = fw == Framework::torch_compile;
  bl.amp = amp_of(sh);
  bl.math = math_of(sh);
  const I T = sh.micro_batch * sh.seq, h = m.hidden;
  const double Th = d(T) * d(h);
  const double tables = m.positions == Positions::learned ? 2.0 : 1.0;  // token (+ position) lookups
  // BERT adds a token-type lookup (BertEmbeddings: word + token type + position, then its layer
  // norm and dropout); its position ids and token-type ids are buffers, sliced without a kernel.
  const double types = m.encoder ? 1.0 : 0.0;
  const I B = sh.micro_batch, S = sh.seq;
  if (bl.compile) {
    bl.f(ew("embedding", Th, 8.0 + 4.0 * (tables + types - 1.0) + (sh.dropout > 0 ? 5.0 : 0.0)));
    if (m.encoder) {
      // The layer norm fused into the lookups' kernel; its backward is two kernels. The padding
      // mask expanded to [batch, 1, seq, seq] in bf16 for SDPA (see framework_block).
      bl.b({ew("norm_grad_input", Th, 12, MemoryKind::norm_bwd), ew("norm_grad_weight", Th, 8, MemoryKind::norm_bwd)});
      bl.f(ew("attention_mask", d(B) * d(S) * d(S), 2));
    }
  } else if (m.encoder) {
    bl.f(ew("embedding", Th, 8));
    bl.f(ew("token_type_embedding", Th, 8));
    bl.f(ew("embedding_add", Th, 12));
    bl.f(ew("position_embedding", d(sh.seq) * d(h), 8));
    bl.f(ew("embedding_add", Th, 12));
    bl.norm(m.norm, Th, d(T), false);
    if (sh.dropout > 0) bl.f(dropout_kernel(Th, 4));
    bl.f(tiny("mask_all_ones"));  // the padding mask's check in eager (then dropped)
  } else {
    bl.f(ew("embedding", Th, 8));
    if (m.positions == Positions::learned) {
      bl.f(tiny("arange"));
      bl.f(tiny("position_ids"));
      bl.f(ew("position_embedding", d(sh.seq) * d(h), 8));
      bl.f(ew("embedding_add", Th, 12));
    } else {
      // Rotary tables: inverse frequencies, their outer product with the positions, cos and sin.
      for (const char* n : {"arange", "cast", "rotary_freq", "cat", "cos", "scale", "sin", "scale"}) bl.f(tiny(n));
    }
    if (sh.dropout > 0) bl.f(dropout_kernel(Th, 4));
  }
  // Backward: the gradient of every looked-up row scattered into the (zeroed) fp32 table:
  // PyTorch's embedding_dense_backward sorts the token ids (cub radix sort) and sums rows.
  std::vector<Kernel> g;
  if (sh.dropout > 0) g.push_back(ew("dropout_grad", Th, 9));
  g.push_back(ew("zero_table", d(m.vocab) * d(h), 4));
  for (int i = 0; i < (bl.compile ? 0 : 8); ++i) g.push_back(tiny("sort_ids"));
  g.push_back(ew("embedding_grad", Th, 8));
  g.push_back(ew("embedding_grad_scatter", Th, 8));
  if (m.tied_embeddings) g.push_back(ew("tied_grad_add", d(m.vocab) * d(h), 12));
  if (m.positions == Positions::learned) g.push_back(ew("position_embedding_grad", Th, 8));
  if (m.encoder) {
    // The token-type table's gradient: the same embedding_dense_backward (zeroed table, sort of
    // the ids, row sums) as the word table's.
    g.push_back(tiny("zero_token_type_table"));
    for (int i = 0; i < (bl.compile ? 0 : 8); ++i) g.push_back(tiny("sort_ids"));
    g.push_back(ew("token_type_grad", Th, 8));
    if (!bl.compile) g.push_back(ew("token_type_grad_scatter", Th, 8));
  }
  bl.b(std::move(g));
  LayerProgram p = bl.finish("embedding");
  // Tensors: the word table, the position table (learned), BERT's token types and layer norm.
  p.tensors = {m.vocab * h};
  if (m.positions == Positions::learned) p.tensors.push_back(m.max_seq * h);
  if (m.encoder) p.tensors.insert(p.tensors.end(), {2 * h, h, h});
  p.params = sum(p.tensors);
  p.embedding_tied = m.tied_embeddings;
  return p;
}

LayerProgram framework_head(const TransformerSpec& m, const ProgramShape& sh, Framework fw) {
  Builder bl;
  bl.compile = fw == Framework::torch_compile;
  bl.amp = amp_of(sh);
  bl.math = math_of(sh);
  const I T = sh.micro_batch * sh.seq, h = m.hidden, V = m.vocab;
  const double Th = d(T) * d(h), TV = d(T) * d(V);
  if (m.encoder) {
    // BERT's MLM head: dense + GELU + LayerNorm before the decoder; the dense layer reads the
    // last block's fp32 layer-norm output (post-norm), which autocast casts.
    bl.linear("mlm_transform", T, h, h, true, true);
    bl.f(ew("gelu", Th, 4, MemoryKind::activation));
    bl.b({ew("gelu_grad", Th, 6, MemoryKind::activation_bwd)});
  }
  bl.norm(m.norm, Th, d(T), true);
  bl.linear("lm_head", T, V, h, m.encoder, true);
  if (bl.compile) {
    // Inductor fuses the upcast into the log-softmax reduction (reads the bf16 logits, writes fp32
    // log-probabilities), and the backward into one kernel (reads them, writes the bf16 gradient).
    bl.f(ew("cross_entropy", TV, 6, MemoryKind::softmax));
    bl.f(tiny("nll_loss"));
    bl.b({tiny("nll_loss_grad"), ew("cross_entropy_grad", TV, 6, MemoryKind::softmax_bwd)});
  } else {
    // Hugging Face's loss: logits.float(), labels shifted, log_softmax and nll_loss in fp32;
    // backward: a zeroed fp32 gradient, the scatter of -1/N, log_softmax backward, the cast back.
    bl.f(ew("cast_logits", TV, 6));
    // Causal LMs shift their labels (pad, slice, copy); the masked-LM loss takes them as they are.
    if (!m.encoder) {
      for (const char* n : {"shift_labels", "labels_copy", "labels_copy"}) bl.f(tiny(n));
    }
    bl.f(ew("log_softmax", TV, 8, MemoryKind::softmax));
    bl.f(tiny("nll_loss"));
    bl.b({tiny("loss_grad"), ew("zero_logits_grad", TV, 4), tiny("nll_loss_grad"), ew("log_softmax_grad", TV, 12, MemoryKind::softmax_bwd),
          ew("cast_logits_grad", TV, 6)});
  }
  LayerProgram p = bl.finish("head");
  // Tensors: BertForMaskedLM's MLM head (transform dense, layer norm, decoder bias; it builds its
  // BertModel without the pooler), or a decoder's final norm; an untied LM head's weight.
  const I norm_tensors = m.norm == Norm::layernorm ? 2 : 1;
  if (m.encoder) p.tensors = {h * h, h};
  for (I i = 0; i < norm_tensors; ++i) p.tensors.push_back(h);
  if (m.encoder) p.tensors.push_back(V);
  if (!m.tied_embeddings) p.tensors.push_back(V * h);
  p.params = sum(p.tensors);
  p.embedding_tied = m.tied_embeddings;
  return p;
}

int multi_tensor_launches(const std::vector<std::int64_t>& tensors, int depth) {
  static constexpr std::array<int, 5> kMaxTensors{110, 64, 48, 36, 30};
  constexpr I kChunk = 65536;
  constexpr I kMaxBlocks = 320;
  const int max_tensors = kMaxTensors[static_cast<std::size_t>(std::clamp(depth, 1, 5) - 1)];
  // A launch happens when the blocks are full, or when the tensors are full at a tensor's last
  // chunk; a tensor cut by a launch carries over as the first tensor of the next one.
  int launches = 0, held = 0;
  I blocks = 0;
  for (const I t : tensors) {
    if (t <= 0) continue;
    ++held;
    const I chunks = (t + kChunk - 1) / kChunk;
    for (I c = 0; c < chunks; ++c) {
      ++blocks;
      const bool last = c == chunks - 1;
      if (blocks == kMaxBlocks || (held == max_tensors && last)) {
        ++launches;
        blocks = 0;
        held = last ? 0 : 1;
      }
    }
  }
  if (blocks > 0) ++launches;
  return launches;
}

std::vector<Kernel> framework_optimizer(const TrainingSpec& tr, const std::vector<std::int64_t>& tensors) {
  double params = 0;
  for (const I t : tensors) params += d(t);
  std::vector<Kernel> out;
  auto launches = [&](int n, const char* name, double bytes_per_param) {
    for (int i = 0; i < n; ++i) out.push_back(memory_op(name, params * bytes_per_param / n, hw::DType::fp32, MemoryKind::optimizer));
  };
  if (tr.optimizer == Optimizer::adam) {
    // torch.optim.AdamW(fused=True): one pass reading the fp32 parameter, gradient and both
    // moments and writing the parameter and the moments (28 bytes per parameter), four lists.
    launches(multi_tensor_launches(tensors, 4), "fused_adamw", 28);
  } else {
    // SGD with momentum, foreach: buf.mul_(momentum), buf.add_(grad), param.add_(buf, -lr).
    launches(multi_tensor_launches(tensors, 1), "foreach_mul", 8);
    launches(multi_tensor_launches(tensors, 2), "foreach_add", 12);
    launches(multi_tensor_launches(tensors, 2), "foreach_add", 12);
  }
  return out;
}

}  // namespace dtsim::workloads
