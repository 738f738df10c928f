#include "workloads/framework_program.hpp"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace dtsim::workloads {

namespace {

using I = std::int64_t;

double d(I v) { return static_cast<double>(v); }

// A memory-bound kernel over `el` elements moving `bpe` bytes per element (read + written).
Kernel ew(const char* name, double el, double bpe, MemoryKind kind = MemoryKind::stream) {
  return memory_op(name, el * bpe, hw::DType::fp32, kind);
}
// A kernel of negligible size (memsets of GEMM workspaces, scalar ops, index arithmetic): its
// fixed cost and its launch only.
Kernel tiny(const char* name) { return memory_op(name, 0, hw::DType::fp32, MemoryKind::stream); }

// Dropout (PyTorch's fused_dropout_kernel_vec, Philox): reads the input, writes the output and a
// one-byte mask.
Kernel dropout_kernel(double el, double elem_bytes) {
  Kernel k = memory_op("dropout", el * (2.0 * elem_bytes + 1.0), hw::DType::fp32, MemoryKind::dropout);
  k.elements = el;
  return k;
}

// One layer's kernels: the forward in order, the backward as one group per forward op (the
// autograd engine runs them in reverse order of the forward).
struct Builder {
  bool compile = false;
  bool amp = true;  // fp32 parameters, bf16 autocast (casts before every matrix product)
  std::vector<Kernel> fwd;
  std::vector<std::vector<Kernel>> bwd;

  void f(Kernel k) { fwd.push_back(std::move(k)); }
  void b(std::vector<Kernel> g) { bwd.push_back(std::move(g)); }

  Kernel mm(const char* name, I m, I n, I k) const {
    Kernel g = gemm(name, m, n, k, 1, amp ? hw::DType::bf16 : hw::DType::fp32, amp ? 2 : 4, amp ? 2 : 4);
    g.weighted = true;
    // Inductor pads GEMM shapes to aligned sizes (torch._inductor.config.shape_padding); eager
    // cuBLAS falls back to unvectorised kernels (docs/model.md).
    g.unaligned = !compile && amp && (m % 8 != 0 || n % 8 != 0 || k % 8 != 0);
    return g;
  }

  // nn.Linear / HF Conv1D: y[T, n] = x[T, k] W (+ bias). x32: the input is fp32 (a norm's or an
  // fp32 chain's output), which autocast casts for this product; needs_dgrad: the input needs a
  // gradient.
  void linear(const char* name, I T, I n, I k, bool bias, bool x32, bool needs_dgrad = true) {
    if (compile) {
      // Inductor: the weight cast is a kernel of its own, the input cast is fused into its producer,
      // the bias into the GEMM's epilogue; backward: the bias gradient is one reduction, the weight
      // gradient's cast to fp32 one kernel.
      if (amp) f(ew("cast_weight", d(n) * d(k), 6));
      f(mm(name, T, n, k));
      std::vector<Kernel> g;
      if (needs_dgrad) g.push_back(mm("dgrad", T, k, n));
      g.push_back(mm("wgrad", k, n, T));
      if (bias) g.push_back(ew("bias_grad", d(T) * d(n), 2));
      if (amp) g.push_back(ew("cast_weight_grad", d(n) * d(k), 6));
      b(std::move(g));
      return;
    }
    if (amp) f(ew("cast_weight", d(n) * d(k), 6));
    if (amp && x32) f(ew("cast_input", d(T) * d(k), 6));
    if (amp && bias) f(ew("cast_bias", d(n), 6));
    f(tiny("memset"));
    f(mm(name, T, n, k));
    std::vector<Kernel> g{tiny("memset")};
    if (needs_dgrad) g.push_back(mm("dgrad", T, k, n));
    g.push_back(mm("wgrad", k, n, T));
    if (bias) {
      g.push_back(tiny("memset"));
      g.push_back(ew("bias_grad", d(T) * d(n), amp ? 2 : 4));
      if (amp) g.push_back(ew("cast_bias_grad", d(n), 6));
    }
    if (amp && x32 && needs_dgrad) g.push_back(ew("cast_input_grad", d(T) * d(k), 6));
    if (amp) g.push_back(ew("cast_weight_grad", d(n) * d(k), 6));
    b(std::move(g));
  }

  // Gradients of a tensor used by `uses` ops are summed by autograd (fp32 residual stream).
  void grad_sum(double el, int uses) {
    std::vector<Kernel> g;
    for (int i = 1; i < uses; ++i) g.push_back(ew("grad_accumulate", el, 12));
    if (!g.empty()) b(std::move(g));
  }

  // LayerNorm (native, fp32 under autocast) or Hugging Face's RMSNorm (eager: x.pow(2).mean(),
  // + eps, rsqrt, x * rstd, weight * x, each a kernel in fp32) over `el` = tokens x hidden.
  void norm(Norm kind, double el, double rows, bool cast_out) {
    if (compile) {
      // One fused reduction + normalisation kernel (reads fp32, writes the bf16 copy the next
      // product reads); backward: one fused kernel for the input gradient, one reduction for the
      // scale (and shift) gradients.
      f(ew("norm", el, 4 + (cast_out ? 2 : 4), MemoryKind::norm));
      b({ew("norm_grad_input", el, 12, MemoryKind::norm_bwd), ew("norm_grad_weight", el, 8, MemoryKind::norm_bwd)});
      return;
    }
    if (kind == Norm::layernorm) {
      f(ew("layernorm", el, 8, MemoryKind::norm));
      b({ew("layernorm_grad_input", el, 12, MemoryKind::norm_bwd), ew("layernorm_grad_weight", el, 8, MemoryKind::norm_bwd)});
      return;
    }
    f(ew("rms_pow", el, 8));
    f(ew("rms_mean", el, 4, MemoryKind::norm));
    f(ew("rms_eps", rows, 8));
    f(ew("rms_rsqrt", rows, 8));
    f(ew("rms_scale", el, 8));
    f(ew("rms_weight", el, 8));
    // Backward of weight * y: grad * weight, grad * y summed over tokens; of x * rstd: grad * rstd,
    // grad * x summed over hidden; rsqrt, mean and pow backward; the two paths into x summed.
    b({ew("rms_weight_grad_input", el, 12), ew("rms_weight_grad_mul", el, 12), ew("rms_weight_grad_sum", el, 4, MemoryKind::norm),
       ew("rms_scale_grad_input", el, 12), ew("rms_scale_grad_mul", el, 12), ew("rms_scale_grad_sum", el, 4, MemoryKind::norm),
       ew("rms_rsqrt_grad", rows, 12), ew("rms_rsqrt_grad_scale", rows, 8), ew("rms_mean_grad", el, 8), ew("rms_pow_grad", el, 8),
       ew("rms_pow_grad_mul", el, 12), ew("rms_grad_sum", el, 12)});
  }

  // Dropout on a [tokens, hidden] tensor in the activation type, then the residual add into the
  // fp32 residual stream.
  void dropout_residual(double el, double p_drop) {
    if (compile) {
      f(ew("dropout_residual", el, 2 + 4 + 4 + (p_drop > 0 ? 1 : 0)));
      if (p_drop > 0) b({ew("dropout_grad", el, 4 + 1 + 2)});
      return;
    }
    if (p_drop > 0) {
      f(dropout_kernel(el, 2));
      b({ew("cast_grad", el, 6), ew("dropout_grad", el, 5)});
    }
    f(ew("residual_add", el, 2 + 4 + 4));
  }

  LayerProgram finish(const char* name) {
    LayerProgram p;
    p.name = name;
    p.forward.segments.push_back(Segment{std::move(fwd), std::nullopt, false});
    Segment s;
    for (auto it = bwd.rbegin(); it != bwd.rend(); ++it) s.kernels.insert(s.kernels.end(), it->begin(), it->end());
    p.backward.segments.push_back(std::move(s));
    return p;
  }
};

bool amp_of(const ProgramShape& s) { return s.precision == hw::DType::bf16 || s.precision == hw::DType::fp16; }

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
    // cache, one copy of K and of V).
    bl.f(ew("cache_cat", d(T) * d(kvd), 4, MemoryKind::layout));
    bl.f(ew("cache_cat", d(T) * d(kvd), 4, MemoryKind::layout));
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
    a.dtype = bl.amp ? hw::DType::bf16 : hw::DType::fp32;
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
      g.push_back(ew("layout_grad", d(T) * d(kvd), 4, MemoryKind::layout));
      g.push_back(ew("layout_grad", d(T) * d(kvd), 4, MemoryKind::layout));
      if (fused_qkv) {
        g.push_back(ew("cat_grad", d(T) * d(q + 2 * kvd), 4, MemoryKind::layout));
      } else {
        g.push_back(ew("layout_grad", d(T) * d(q), 4, MemoryKind::layout));
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

std::vector<LayerProgram> framework_cnn(const CnnSpec& m, const ProgramShape& sh, Framework fw) {
  const bool compile = fw == Framework::torch_compile;
  const bool amp = amp_of(sh);
  const double eb = amp ? 2 : 4;
  const I b = sh.micro_batch;
  std::vector<LayerProgram> out;
  Builder bl;
  bl.compile = compile;
  bl.amp = amp;
  bool first_weighted = true;
  const char* name = "";
  I params = 0;
  std::vector<I> tensors;  // weight (and bias), batch norm scale and shift
  auto flush = [&] {
    if (bl.fwd.empty()) return;
    LayerProgram p = bl.finish(name);
    p.params = params;
    p.tensors = std::move(tensors);
    out.push_back(std::move(p));
    bl = Builder{};
    bl.compile = compile;
    bl.amp = amp;
    params = 0;
    tensors.clear();
  };
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const CnnLayer& l = m.layers[i];
    const double in_el = d(b * l.in_channels * l.in_h * l.in_w);
    const double out_el = d(b * l.out_channels * l.out_h * l.out_w);
    const bool weighted = l.kind == CnnLayer::Kind::conv || l.kind == CnnLayer::Kind::fc;
    if (weighted) {
      flush();
      name = m.layers[i].name.c_str();
    }
    params += l.params();
    if (l.kind == CnnLayer::Kind::batchnorm) {
      tensors.push_back(l.params() / 2);
      tensors.push_back(l.params() - l.params() / 2);
    } else if (weighted && l.bias) {
      tensors.push_back(l.out_channels);
      tensors.push_back(l.params() - l.out_channels);
    } else if (l.params() > 0) {
      tensors.push_back(l.params());
    }
    // torch.compile fuses batch norm's normalisation with the ReLU that follows it.
    const bool relu_next = i + 1 < m.layers.size() && m.layers[i + 1].kind == CnnLayer::Kind::relu;
    const CnnLayer& prev = m.layers[i > 0 ? i - 1 : 0];
    const bool fusable_before = i > 0 && (prev.kind == CnnLayer::Kind::batchnorm || prev.kind == CnnLayer::Kind::add ||
                                          (prev.kind == CnnLayer::Kind::conv && prev.bias));
    switch (l.kind) {
      case CnnLayer::Kind::conv: {
        // cuDNN implicit GEMM, channels-last; the first convolution's input needs no gradient.
        Kernel k = gemm("conv", b * l.out_h * l.out_w, l.out_channels / l.groups, l.in_channels / l.groups * l.kernel * l.kernel, l.groups,
                        amp ? hw::DType::bf16 : hw::DType::fp32, amp ? 2 : 4, amp ? 2 : 4);
        k.bytes = (in_el + out_el) * eb + d(l.params()) * eb;
        k.weighted = true;
        if (amp) bl.f(ew("cast_weight", d(l.params()), 6));
        if (amp && first_weighted) bl.f(ew("cast_input", in_el, 6));  // the fp32 images
        bl.f(k);
        std::vector<Kernel> g;
        if (!first_weighted) {
          Kernel dx = k;
          dx.name = "dgrad";
          dx.n = k.k;
          dx.k = k.n;
          g.push_back(dx);
        }
        Kernel dw = k;
        dw.name = "wgrad";
        dw.m = k.k;
        dw.n = k.n;
        dw.k = k.m;
        g.push_back(dw);
        if (amp) g.push_back(ew("cast_weight_grad", d(l.params()), 6));
        if (l.bias) {
          // ATen's _convolution runs cuDNN without the bias and adds it over the whole output
          // (output.add_(bias)); convolution_backward sums grad_output over batch and pixels for
          // its gradient. Inductor peels the bias off as well ("cudnn is slower with it",
          // torch/_inductor/kernel/conv.py) and fuses its add into the ReLU that follows.
          if (!compile) {
            if (amp) bl.f(tiny("cast_bias"));
            bl.f(ew("bias_add", out_el, 2 * eb));
          } else {
            bl.f(ew(relu_next ? "bias_relu" : "bias_add", out_el, 2 * eb));
          }
          g.push_back(ew("bias_grad", out_el, eb, MemoryKind::norm_bwd));
          if (amp && !compile) g.push_back(tiny("cast_bias_grad"));
        }
        bl.b(std::move(g));
        first_weighted = false;
        break;
      }
      case CnnLayer::Kind::fc:
        bl.linear("fc", b, l.out_channels, l.in_channels, l.bias, false, !first_weighted);
        first_weighted = false;
        break;
      case CnnLayer::Kind::batchnorm:
        // Channels-last batch norm in training: per-channel statistics (a reduction over the
        // input), then the normalisation; backward: a reduction over gradient and input, then the
        // input gradient.
        // Eager also counts the batches (num_batches_tracked += 1), zeroes a scratch pair and
        // updates the running statistics: three small kernels (ResNet-50 trace: five kernels per
        // batch norm forward, three backward).
        if (!compile) {
          bl.f(tiny("batchnorm_count"));
          bl.f(tiny("batchnorm_fill"));
        }
        bl.f(ew("batchnorm_stats", in_el, eb, MemoryKind::norm));
        if (!compile) bl.f(tiny("batchnorm_running_stats"));
        bl.f(ew(compile && relu_next ? "batchnorm_relu" : "batchnorm", in_el, 2 * eb));
        if (compile) {
          bl.b({ew("batchnorm_grad_reduce", in_el, 2 * eb, MemoryKind::norm_bwd), ew("batchnorm_grad_input", in_el, 3 * eb)});
        } else {
          bl.b({ew("batchnorm_grad_reduce", in_el, 2 * eb, MemoryKind::norm_bwd), tiny("batchnorm_grad_weight"), ew("batchnorm_grad_input", in_el, 3 * eb)});
        }
        break;
      case CnnLayer::Kind::relu:
        // Inductor fuses a ReLU into the element-wise kernel before it (batch norm, the residual
        // add, a peeled convolution bias) and its backward into that op's; after a product
        // without one (cuBLAS's addmm, a bias-free convolution) it is a kernel of its own.
        if (compile && fusable_before) {
          if (prev.kind == CnnLayer::Kind::conv) bl.b({ew("relu_grad", in_el, 3 * eb)});  // then the bias gradient
          break;
        }
        bl.f(ew("relu", in_el, 2 * eb));
        bl.b({ew("relu_grad", in_el, 3 * eb)});
        break;
      case CnnLayer::Kind::add:
        // The block's output joins the shortcut; backward: the gradients of the two paths summed
        // where the block's input forked.
        bl.f(ew("add", out_el, 3 * eb));
        bl.b({ew("grad_accumulate", out_el, 3 * eb)});
        break;
      case CnnLayer::Kind::pool:
        bl.f(ew("pool", in_el + out_el, eb));
        // Max pooling's backward zeroes the input gradient and scatters into it.
        bl.b({ew("pool_grad", in_el + out_el, 2 * eb)});
        break;
      case CnnLayer::Kind::softmax:
        bl.f(ew("cross_entropy", in_el, 2 * eb, MemoryKind::softmax));
        bl.b({ew("cross_entropy_grad", in_el, 3 * eb, MemoryKind::softmax_bwd)});
        break;
      case CnnLayer::Kind::dropout:
        bl.f(dropout_kernel(in_el, eb));
        bl.b({ew("dropout_grad", in_el, 2 * eb + 1)});
        break;
    }
  }
  // The loss (nn.CrossEntropyLoss over [batch, classes]), with the last layer: the ResNet-50
  // trace's softmax_warp_forward (log-softmax in bf16), the autocast copy to fp32,
  // nll_loss_forward; backward a fill, nll_loss_backward, the copy back and softmax_warp_backward.
  // Inductor fuses each direction into one kernel.
  const double logits = d(b) * d(m.classes);
  if (compile) {
    bl.f(ew("cross_entropy", logits, eb + 4, MemoryKind::softmax));
    bl.b({ew("cross_entropy_grad", logits, 4 + eb, MemoryKind::softmax_bwd)});
  } else {
    bl.f(ew("log_softmax", logits, 2 * eb, MemoryKind::softmax));
    bl.f(ew("cast_log_probs", logits, eb + 4));
    bl.f(tiny("nll_loss"));
    bl.b({ew("zero_grad", logits, 4), tiny("nll_loss_grad"), ew("cast_grad", logits, 4 + eb),
          ew("log_softmax_grad", logits, 3 * eb, MemoryKind::softmax_bwd)});
  }
  flush();
  return out;
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
