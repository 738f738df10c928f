// Model FLOPs and layer programs against published formulas.
#include "workloads/program.hpp"

#include <gtest/gtest.h>

namespace dtsim::workloads {
namespace {

TransformerSpec gpt3_175b() {
  // Brown et al. 2020, Table 2.1.
  TransformerSpec m;
  m.name = "gpt3-175b";
  m.hidden = 12288;
  m.layers = 96;
  m.heads = 96;
  m.kv_heads = 96;
  m.head_dim = 128;
  m.ffn = 4 * 12288;
  m.vocab = 50257;
  m.max_seq = 2048;
  return m;
}

TEST(ModelFlops, Gpt3MatchesMegatronsFormula) {
  // Narayanan et al. 2021, eq. (3) without recomputation: F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
  const TransformerSpec m = gpt3_175b();
  const double s = 2048, l = 96, h = 12288, V = 50257;
  const double megatron = 72 * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(model_flops_per_sample(ModelSpec(m), 2048), megatron, 0.002 * megatron);
}

TEST(ModelFlops, ResNet50IsSixTimesItsMacs) {
  const double macs = 4.09e9;  // torchvision's published forward cost at 224 x 224
  EXPECT_NEAR(model_flops_per_sample(ModelSpec(make_resnet50()), 0), 6 * macs, 0.01 * 6 * macs);
}

TEST(LayerProgram, BlockGemmFlopsAreTwiceTheWeightsPerToken) {
  // Every weight is used once per token in the forward pass (2 FLOPs per multiply-add), split
  // over the TP ranks; attention's two batched products add 4 s h per token (before causal
  // masking halves them in the fused kernel).
  TransformerSpec m = gpt3_175b();
  ProgramShape sh;
  sh.micro_batch = 2;
  sh.seq = 2048;
  sh.tp = 8;
  sh.attention = Attention::standard;
  const LayerProgram p = transformer_block(m, sh);
  const double tokens = 2 * 2048, h = 12288;
  const double weights = 12 * h * h / 8;
  const double attention = 4 * tokens * 2048 * h / 8;
  EXPECT_NEAR(p.forward.flops(), 2 * tokens * weights + attention, 1e-9 * p.forward.flops());
  // Backward: the data and weight gradients of every GEMM, twice the forward.
  EXPECT_NEAR(p.backward.flops(), 2 * p.forward.flops(), 1e-9 * p.backward.flops());
}

TEST(LayerProgram, Flash1IsTheFusedKernelWithTheFirstGenerationsFlag) {
  // Same FLOPs, bytes and kernel list as flash; only the attention kernel's flag differs, which
  // the compute model times at FlashAttention 1's rate (compute_test).
  const TransformerSpec m = gpt3_175b();
  ProgramShape sh;
  sh.micro_batch = 1;
  sh.seq = 2048;
  sh.tp = 8;
  sh.attention = Attention::flash;
  const LayerProgram v2 = transformer_block(m, sh);
  sh.attention = Attention::flash1;
  const LayerProgram v1 = transformer_block(m, sh);
  EXPECT_DOUBLE_EQ(v1.forward.flops(), v2.forward.flops());
  EXPECT_DOUBLE_EQ(v1.backward.flops(), v2.backward.flops());
  int attention = 0;
  for (const LayerProgram* p : {&v1, &v2}) {
    for (const auto& seg : p->forward.segments) {
      for (const Kernel& k : seg.kernels) {
        if (k.cls != KernelClass::attention) continue;
        EXPECT_EQ(k.flash1, p == &v1);
        ++attention;
      }
    }
  }
  EXPECT_EQ(attention, 2);
}

TEST(LayerProgram, QkvOnlyBiasesAreCountedOnce) {
  // Qwen2.5-0.5B (Hugging Face config.json): hidden 896, 14 heads of 64, 2 KV heads, FFN 4864,
  // SwiGLU, RMSNorm, biases on q, k and v only. By hand, per layer: q, k, v weights
  // 896 x (896 + 2 x 128) = 1,032,192 and their biases 1,152; o 896 x 896 = 802,816; gate, up and
  // down 3 x 896 x 4864 = 13,074,432; two RMSNorm weights 1,792: 14,912,384.
  TransformerSpec m;
  m.name = "qwen2-shape";
  m.hidden = 896;
  m.layers = 24;
  m.heads = 14;
  m.kv_heads = 2;
  m.head_dim = 64;
  m.ffn = 4864;
  m.vocab = 151936;
  m.max_seq = 32768;
  m.gated_mlp = true;
  m.bias = false;
  m.qkv_bias = true;
  m.norm = Norm::rmsnorm;
  m.positions = Positions::rotary;
  ProgramShape sh;
  sh.micro_batch = 1;
  sh.seq = 1024;
  const LayerProgram p = transformer_block(m, sh);
  EXPECT_EQ(p.params, 14'912'384);
  std::int64_t sum = 0;
  for (auto t : p.tensors) sum += t;
  EXPECT_EQ(sum, p.params);
}

TEST(LayerProgram, MegatronTensorParallelismHasTwoAllReducesEachWay) {
  TransformerSpec m = gpt3_175b();
  ProgramShape sh;
  sh.micro_batch = 1;
  sh.seq = 2048;
  sh.tp = 8;
  const LayerProgram p = transformer_block(m, sh);
  auto count = [](const Pass& pass, CollOp op) {
    int n = 0;
    for (const auto& s : pass.segments) n += (s.comm && s.comm->op == op) ? 1 : 0;
    return n;
  };
  EXPECT_EQ(count(p.forward, CollOp::allreduce), 2);
  EXPECT_EQ(count(p.backward, CollOp::allreduce), 2);
  // Each moves the [tokens, hidden] activation in 16 bits.
  for (const auto& s : p.forward.segments) {
    if (s.comm) {
      EXPECT_EQ(s.comm->bytes.count(), 2048 * 12288 * 2);
    }
  }
  // With sequence parallelism: all-gather before and reduce-scatter after each TP region.
  sh.sequence_parallel = true;
  const LayerProgram q = transformer_block(m, sh);
  EXPECT_EQ(count(q.forward, CollOp::allgather), 2);
  EXPECT_EQ(count(q.forward, CollOp::reducescatter), 2);
  // Backward: the duals, plus the column-parallel layers' saved input shards gathered again for
  // their weight gradients (tp_overlap_test.cpp).
  EXPECT_EQ(count(q.backward, CollOp::allgather), 4);
  EXPECT_EQ(count(q.backward, CollOp::reducescatter), 2);
  EXPECT_EQ(count(q.forward, CollOp::allreduce), 0);
}

TEST(LayerProgram, FullRecomputationRepeatsTheForward) {
  TransformerSpec m = gpt3_175b();
  ProgramShape sh;
  sh.seq = 2048;
  sh.recompute = Recompute::full;
  const LayerProgram p = transformer_block(m, sh);
  EXPECT_DOUBLE_EQ(p.recompute.flops(), p.forward.flops());
}

TEST(LayerProgram, InvalidLayoutsNameTheField) {
  TransformerSpec m = gpt3_175b();
  ProgramShape sh;
  sh.seq = 2048;
  sh.tp = 7;
  EXPECT_EQ(validate_transformer(m, sh).error().field, "parallel.tp");
  sh.tp = 8;
  sh.cp = 3;
  EXPECT_EQ(validate_transformer(m, sh).error().field, "parallel.cp");
}


// Context parallelism: the collectives each form puts in one block, collected in pass order.
std::vector<std::pair<CommStep, bool>> cp_comms(const Pass& pass) {
  std::vector<std::pair<CommStep, bool>> out;
  for (const Segment& s : pass.segments) {
    if (s.comm && s.comm->group == CommGroup::cp) out.emplace_back(*s.comm, s.comm_overlaps);
  }
  return out;
}

// Llama 3 8B's shape, and the context-parallel layout both tests below run it on: micro-batch 1 of
// 32,768 tokens, tp 2 with sequence parallelism, cp 4.
TransformerSpec llama3_8b_shape() {
  TransformerSpec m;
  m.name = "llama3-8b-shape";
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 14336;
  m.vocab = 128256;
  m.max_seq = 32768;
  m.gated_mlp = true;
  m.positions = Positions::rotary;
  return m;
}

ProgramShape cp_shape() {
  ProgramShape sh;
  sh.seq = 32768;
  sh.tp = 2;
  sh.cp = 4;
  sh.sequence_parallel = true;
  return sh;
}

TEST(ContextParallelComm, EachFormMovesWhatItsPaperDescribes) {
  // Llama 3 8B's attention (32 query and 8 key/value heads of 128), tp 2, cp 4, micro-batch 1 of
  // 32,768 tokens: 8,192 local tokens, 16 query and 4 key/value heads per rank, bf16. By hand:
  // K and V of one rank 2 x 8,192 x 4 x 128 x 2 B = 16 MiB; Q, K and V 8,192 x (16 + 8) x 128 x 2
  // B = 48 MiB; the context 8,192 x 16 x 128 x 2 B = 32 MiB.
  const TransformerSpec m = llama3_8b_shape();
  ProgramShape sh = cp_shape();
  const std::int64_t MiB = 1 << 20;

  // Ring attention: the four ranks' K and V pass around the ring beside attention, and again with
  // their gradients in the backward pass.
  sh.cp_comm = CpComm::p2p;
  LayerProgram p = transformer_block(m, sh);
  auto f = cp_comms(p.forward), b = cp_comms(p.backward);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].first.op, CollOp::allgather);
  EXPECT_EQ(f[0].first.bytes.count(), 4 * 16 * MiB);
  EXPECT_TRUE(f[0].second);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].first.bytes.count(), 2 * 4 * 16 * MiB);
  EXPECT_TRUE(b[0].second);
  const double flops = p.forward.flops();

  // All-gather attention (Llama 3): the same gather, exposed. As Transformer Engine runs it
  // (AttnFuncWithCPAndKVAllGather), the backward pass gathers K and V again, exposed, before the
  // attention's gradient kernel, and reduce-scatters their gradients after it.
  sh.cp_comm = CpComm::allgather;
  p = transformer_block(m, sh);
  f = cp_comms(p.forward);
  b = cp_comms(p.backward);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].first.op, CollOp::allgather);
  EXPECT_EQ(f[0].first.bytes.count(), 4 * 16 * MiB);
  EXPECT_FALSE(f[0].second);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first.op, CollOp::allgather);
  EXPECT_EQ(b[0].first.bytes.count(), 4 * 16 * MiB);
  EXPECT_FALSE(b[0].second);
  EXPECT_EQ(b[1].first.op, CollOp::reducescatter);
  EXPECT_EQ(b[1].first.bytes.count(), 4 * 16 * MiB);
  EXPECT_FALSE(b[1].second);
  {
    // The re-gather ends the segment before the one holding the attention's gradient kernel,
    // whose own collective is the reduce-scatter.
    int regather = -1, attention_bwd = -1;
    for (int i = 0; i < static_cast<int>(p.backward.segments.size()); ++i) {
      const Segment& s = p.backward.segments[static_cast<std::size_t>(i)];
      if (s.comm && s.comm->group == CommGroup::cp && s.comm->op == CollOp::allgather) regather = i;
      for (const Kernel& k : s.kernels) {
        if (k.cls == KernelClass::attention_bwd) attention_bwd = i;
      }
    }
    ASSERT_GE(regather, 0);
    EXPECT_EQ(attention_bwd, regather + 1);
    const Segment& core = p.backward.segments[static_cast<std::size_t>(attention_bwd)];
    ASSERT_TRUE(core.comm.has_value());
    EXPECT_EQ(core.comm->op, CollOp::reducescatter);
  }
  EXPECT_DOUBLE_EQ(p.forward.flops(), flops);

  // Ulysses: Q, K and V to head shards, the context back; the backward pass the same in reverse.
  sh.cp_comm = CpComm::a2a;
  p = transformer_block(m, sh);
  f = cp_comms(p.forward);
  b = cp_comms(p.backward);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].first.op, CollOp::alltoall);
  EXPECT_EQ(f[0].first.bytes.count(), 48 * MiB);
  EXPECT_EQ(f[1].first.bytes.count(), 32 * MiB);
  EXPECT_FALSE(f[0].second || f[1].second);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first.op, CollOp::alltoall);
  EXPECT_EQ(b[1].first.op, CollOp::alltoall);
  EXPECT_EQ(b[0].first.bytes.count(), 32 * MiB);
  EXPECT_EQ(b[1].first.bytes.count(), 48 * MiB);
  EXPECT_DOUBLE_EQ(p.forward.flops(), flops);
  EXPECT_TRUE(validate_transformer(m, sh).ok());

  // Ulysses needs the key/value heads of a rank (4 here) to split over cp.
  sh.cp = 8;
  sh.seq = 65536;
  EXPECT_EQ(validate_transformer(m, sh).error().field, "parallel.cp_comm");
  sh.cp_comm = CpComm::allgather;
  EXPECT_TRUE(validate_transformer(m, sh).ok());

  // Ulysses splits the sequence over cp; the other two cut it into 2 cp load-balanced chunks.
  sh.cp = 4;
  sh.seq = 32764;  // 4 x 8,191: a multiple of cp, not of 2 cp
  sh.sequence_parallel = false;  // 8,191 local tokens do not split over tp 2 either
  EXPECT_EQ(validate_transformer(m, sh).error().field, "parallel.cp");
  sh.cp_comm = CpComm::a2a;
  EXPECT_TRUE(validate_transformer(m, sh).ok());
}

// The all-gather form's second gather adds one context-parallel collective to the backward pass
// and moves nothing else: under FP8 casts, userbuffers and full recomputation its tensor-parallel
// collectives (op, bytes, overlap, in order) and every pass's FLOPs equal ring attention's, whose
// block also runs the attention core in a segment of its own, apart from the output projection.
TEST(ContextParallelComm, TheSecondGatherLeavesTheTensorParallelCollectivesAlone) {
  const TransformerSpec m = llama3_8b_shape();
  ProgramShape sh = cp_shape();
  sh.precision = hw::DType::fp8;
  sh.fp8_recipe = Fp8Recipe::current;
  sh.tp_overlap = TpOverlap::userbuffers;
  sh.recompute = Recompute::full;
  struct Comm {
    CollOp op;
    std::int64_t bytes;
    bool overlaps;
    bool operator==(const Comm&) const = default;
  };
  const auto tp_comms = [](const Pass& pass) {
    std::vector<Comm> out;
    for (const Segment& s : pass.segments) {
      if (s.comm && s.comm->group == CommGroup::tp) out.push_back(Comm{s.comm->op, s.comm->bytes.count(), s.comm_overlaps});
    }
    return out;
  };
  sh.cp_comm = CpComm::p2p;
  const LayerProgram ring = transformer_block(m, sh);
  sh.cp_comm = CpComm::allgather;
  const LayerProgram gather = transformer_block(m, sh);
  EXPECT_FALSE(tp_comms(ring.backward).empty());
  EXPECT_TRUE(tp_comms(gather.forward) == tp_comms(ring.forward));
  EXPECT_TRUE(tp_comms(gather.backward) == tp_comms(ring.backward));
  EXPECT_TRUE(tp_comms(gather.recompute) == tp_comms(ring.recompute));
  EXPECT_DOUBLE_EQ(gather.forward.flops(), ring.forward.flops());
  EXPECT_DOUBLE_EQ(gather.backward.flops(), ring.backward.flops());
  EXPECT_DOUBLE_EQ(gather.recompute.flops(), ring.recompute.flops());
  // Forward and recomputation gather once each (the recomputed forward gathers again, as the
  // forward does); the backward pass gathers, then reduce-scatters.
  const auto ops = [](const Pass& pass) {
    std::vector<CollOp> out;
    for (const auto& c : cp_comms(pass)) out.push_back(c.first.op);
    return out;
  };
  EXPECT_EQ(ops(gather.forward), std::vector<CollOp>{CollOp::allgather});
  EXPECT_EQ(ops(gather.recompute), std::vector<CollOp>{CollOp::allgather});
  EXPECT_EQ(ops(gather.backward), (std::vector<CollOp>{CollOp::allgather, CollOp::reducescatter}));
}

TEST(CnnProgram, ItsLayersHoldEveryParameter) {
  // Gradient buckets are filled from the programs' layers: together they must hold every weight,
  // batch norm's scale and shift included (torchvision's counts: He et al. 2016, Simonyan and
  // Zisserman 2015, Krizhevsky et al. 2012).
  ProgramShape sh;
  sh.micro_batch = 2;
  for (const auto& [m, published] : {std::pair{make_resnet50(), 25'557'032LL}, std::pair{make_vgg16(), 138'357'544LL},
                                     std::pair{make_alexnet(), 61'100'840LL}}) {
    std::int64_t sum = 0;
    for (const auto& l : cnn_program(m, sh)) sum += l.params;
    EXPECT_EQ(sum, published) << m.name;
  }
}

}  // namespace
}  // namespace dtsim::workloads

namespace dtsim::workloads {
namespace {

// GPT-3 Small's shape (Brown et al. 2020) with GPT-2's vocabulary padded to 50,304, no biases.
TransformerSpec gpt_small() {
  TransformerSpec m;
  m.name = "gpt-small";
  m.hidden = 768;
  m.layers = 12;
  m.heads = 12;
  m.ffn = 3072;
  m.vocab = 50304;
  m.max_seq = 1024;
  return m;
}

// One GPT block with standard (unfused) attention laid out as dtsim-validate does (head_layout:
// split), bf16, b = 2, s = 1024, h = 768, 12 heads, dropout 0.1, written out by hand: every
// kernel's bytes, FLOPs and kind.
TEST(LayerProgram, StandardAttentionBlockKernelsByHand) {
  TransformerSpec m = gpt_small();
  m.bias = true;
  ProgramShape sh;
  sh.micro_batch = 2;
  sh.seq = 1024;
  sh.attention = Attention::standard;
  sh.head_layout_split = true;
  sh.dropout = 0.1;
  const double b = 2, s = 1024, h = 768, a = 12, d = 64, f = 3072, T = b * s;
  const LayerProgram p = transformer_block(m, sh);
  std::vector<Kernel> fwd;
  for (const auto& seg : p.forward.segments) fwd.insert(fwd.end(), seg.kernels.begin(), seg.kernels.end());
  struct Want {
    const char* name;
    KernelClass cls;
    MemoryKind kind;
    double flops, bytes, elements;
  };
  const double mask = 1;  // one byte per element, stored for the backward
  const std::vector<Want> want{
      {"layernorm", KernelClass::memory, MemoryKind::norm, 0, 2 * T * h * 2, 0},
      {"qkv", KernelClass::gemm, MemoryKind::stream, 2 * T * 3 * h * h, 2 * (T * h + h * 3 * h + T * 3 * h), 0},
      {"layout_qkv", KernelClass::memory, MemoryKind::layout_split, 0, 2 * T * 3 * h * 2, 0},
      {"scores", KernelClass::gemm, MemoryKind::stream, 2 * (b * a) * s * s * d, 2 * (b * a) * (s * d + d * s + s * s), 0},
      {"softmax", KernelClass::memory, MemoryKind::softmax, 0, 2 * b * a * s * s * 2, 0},
      {"attention_dropout", KernelClass::memory, MemoryKind::dropout, 0, b * a * s * s * (2 * 2 + mask), b * a * s * s},
      {"context", KernelClass::gemm, MemoryKind::stream, 2 * (b * a) * s * d * s, 2 * (b * a) * (s * s + s * d + s * d), 0},
      {"layout_context", KernelClass::memory, MemoryKind::layout, 0, 2 * T * h * 2, 0},
      {"attention_out", KernelClass::gemm, MemoryKind::stream, 2 * T * h * h, 2 * (T * h + h * h + T * h), 0},
      {"dropout_residual", KernelClass::memory, MemoryKind::dropout, 0, T * h * (3 * 2 + mask), T * h},
      {"layernorm", KernelClass::memory, MemoryKind::norm, 0, 2 * T * h * 2, 0},
      {"mlp_up", KernelClass::gemm, MemoryKind::stream, 2 * T * f * h, 2 * (T * h + h * f + T * f), 0},
      {"activation", KernelClass::memory, MemoryKind::activation, 0, 2 * T * f * 2, 0},
      {"mlp_down", KernelClass::gemm, MemoryKind::stream, 2 * T * h * f, 2 * (T * f + f * h + T * h), 0},
      {"dropout_residual", KernelClass::memory, MemoryKind::dropout, 0, T * h * (3 * 2 + mask), T * h},
  };
  ASSERT_EQ(fwd.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_STREQ(fwd[i].name, want[i].name);
    EXPECT_EQ(fwd[i].cls, want[i].cls);
    if (want[i].cls == KernelClass::memory) {
      EXPECT_EQ(fwd[i].kind, want[i].kind);
    }
    EXPECT_DOUBLE_EQ(fwd[i].flops, want[i].flops);
    EXPECT_DOUBLE_EQ(fwd[i].bytes, want[i].bytes);
    EXPECT_DOUBLE_EQ(fwd[i].elements, want[i].elements);
  }
  // Backward: the dropout reads its mask back (stream), the residual dropout passes the gradient
  // through the mask (2 tensors and the mask), layout copies move what they moved forward, norms
  // and activations 1.5x forward under their backward kinds.
  std::vector<Kernel> bwd;
  for (const auto& seg : p.backward.segments) bwd.insert(bwd.end(), seg.kernels.begin(), seg.kernels.end());
  int dropouts = 0, layouts = 0, norms = 0;
  for (const Kernel& k : bwd) {
    if (k.cls != KernelClass::memory) continue;
    const std::string n = k.name;
    if (n == "attention_dropout") {
      ++dropouts;
      EXPECT_EQ(k.kind, MemoryKind::stream);
      EXPECT_DOUBLE_EQ(k.bytes, b * a * s * s * (2 * 2 + mask));
      EXPECT_DOUBLE_EQ(k.elements, 0);
    } else if (n == "dropout_residual") {
      ++dropouts;
      EXPECT_DOUBLE_EQ(k.bytes, T * h * (2 * 2 + mask));
    } else if (n == "layout_qkv") {
      ++layouts;
      EXPECT_EQ(k.kind, MemoryKind::layout_split);
      EXPECT_DOUBLE_EQ(k.bytes, 2 * T * 3 * h * 2);
    } else if (n == "layout_context") {
      ++layouts;
      EXPECT_EQ(k.kind, MemoryKind::layout);
      EXPECT_DOUBLE_EQ(k.bytes, 2 * T * h * 2);
    } else if (n == "layernorm") {
      ++norms;
      EXPECT_EQ(k.kind, MemoryKind::norm_bwd);
      EXPECT_DOUBLE_EQ(k.bytes, 1.5 * 2 * T * h * 2);
    }
  }
  EXPECT_EQ(dropouts, 3);
  EXPECT_EQ(layouts, 2);
  EXPECT_EQ(norms, 2);

  // Regenerated masks (dtsim-validate): no mask bytes, and the backward draws random numbers again.
  sh.dropout_regenerated = true;
  sh.dropout_hash_rng = true;
  const LayerProgram r = transformer_block(m, sh);
  int regenerated = 0;
  for (const auto& seg : r.backward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) == "attention_dropout") {
        ++regenerated;
        EXPECT_TRUE(k.hash_rng);
        EXPECT_EQ(k.kind, MemoryKind::dropout);
        EXPECT_DOUBLE_EQ(k.elements, b * a * s * s);
        EXPECT_DOUBLE_EQ(k.bytes, b * a * s * s * 2 * 2);
      }
    }
  }
  EXPECT_EQ(regenerated, 1);
  // Without dropout: no dropout kernel, a plain residual add.
  sh.dropout = 0;
  for (const auto& seg : transformer_block(m, sh).forward.segments) {
    for (const Kernel& k : seg.kernels) {
      EXPECT_NE(k.kind, MemoryKind::dropout) << k.name;
      EXPECT_STRNE(k.name, "attention_dropout");
    }
  }
}

// Megatron-LM's standard attention (head_layout: permute, the default): Q, K and V are strided
// views of the fused projection, the context is permuted and copied once (a PyTorch copy: stream
// kind); in the backward the context gradient stays a view and only the Q, K and V gradients are
// concatenated (the split's backward).
TEST(LayerProgram, MegatronStandardAttentionCopiesOnlyTheContext) {
  TransformerSpec m = gpt_small();
  ProgramShape sh;
  sh.micro_batch = 2;
  sh.seq = 1024;
  sh.attention = Attention::standard;
  const double T = 2 * 1024, h = 768;
  const LayerProgram p = transformer_block(m, sh);
  int forward_copies = 0, backward_copies = 0;
  for (const auto& seg : p.forward.segments) {
    for (const Kernel& k : seg.kernels) {
      const std::string n = k.name;
      EXPECT_NE(n, "layout_qkv");
      if (n == "layout_context") {
        ++forward_copies;
        EXPECT_EQ(k.kind, MemoryKind::stream);
        EXPECT_DOUBLE_EQ(k.bytes, 2 * T * h * 2);
      }
    }
  }
  for (const auto& seg : p.backward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) == "layout_context") {
        ++backward_copies;
        EXPECT_EQ(k.kind, MemoryKind::stream);
        EXPECT_DOUBLE_EQ(k.bytes, 2 * T * 3 * h * 2);
      }
    }
  }
  EXPECT_EQ(forward_copies, 1);
  EXPECT_EQ(backward_copies, 1);

  // Grouped queries (4 K/V heads for 12 query heads, d = 64): Q copied (read and written), K and
  // V each read at 4 heads and written at 12; the backward sums the repeats (read 12, write 4).
  m.kv_heads = 4;
  const double q = T * h, kv = T * 4 * 64;
  const LayerProgram g = transformer_block(m, sh);
  int gqa = 0;
  for (const auto& seg : g.forward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) != "gqa_copies") continue;
      ++gqa;
      EXPECT_EQ(k.kind, MemoryKind::stream);
      EXPECT_DOUBLE_EQ(k.bytes, (2 * q + 2 * (kv + q)) * 2);
    }
  }
  for (const auto& seg : g.backward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) != "gqa_copies") continue;
      ++gqa;
      EXPECT_DOUBLE_EQ(k.bytes, 2 * (q + kv) * 2);
    }
  }
  EXPECT_EQ(gqa, 2);
}

// The head's fused cross-entropy passes over a row of logits three times (maximum, sum, write). A row of
// GPT-2's padded vocabulary (50,304 x 2 B = 98 KiB) is longer than the 64 KiB a resident block
// keeps on chip, so the logits are read three times; split over 2 vocabulary-parallel ranks (49
// KiB) they are read once. The backward reads the fp32 log-probabilities and writes the gradient.
TEST(LayerProgram, CrossEntropyBytesByHand) {
  TransformerSpec m = gpt_small();
  const double T = 8 * 1024, V = 50304;
  struct Case {
    int tp;
    double forward_bytes, backward_bytes;
  };
  for (const Case& c : {Case{1, T * V * (3 * 2 + 4), T * V * (2 + 4)}, Case{2, T * (V / 2) * (2 + 4), T * (V / 2) * (2 + 4)}}) {
    SCOPED_TRACE(c.tp);
    ProgramShape sh;
    sh.micro_batch = 8;
    sh.seq = 1024;
    sh.tp = c.tp;
    const LayerProgram p = transformer_head(m, sh);
    const Kernel* ce = nullptr;
    for (const auto& seg : p.forward.segments) {
      for (const Kernel& k : seg.kernels) {
        if (std::string(k.name) == "cross_entropy") ce = &k;
      }
    }
    ASSERT_NE(ce, nullptr);
    EXPECT_DOUBLE_EQ(ce->bytes, c.forward_bytes);
    EXPECT_EQ(ce->kind, MemoryKind::softmax);
    int backward_ce = 0;
    for (const auto& seg : p.backward.segments) {
      for (const Kernel& k : seg.kernels) {
        if (std::string(k.name) == "cross_entropy") {
          ++backward_ce;
          EXPECT_DOUBLE_EQ(k.bytes, c.backward_bytes);
          EXPECT_EQ(k.kind, MemoryKind::softmax_bwd);
        }
      }
    }
    EXPECT_EQ(backward_ce, 1);
  }
  // The boundary: a row of 32,768 bf16 logits (64 KiB) is read once, one of 32,770 three times.
  for (const std::int64_t v : {32768, 32770}) {
    m.vocab = v;
    ProgramShape sh;
    sh.micro_batch = 1;
    sh.seq = 1024;
    const LayerProgram p = transformer_head(m, sh);
    const double passes = v > 32768 ? 3 : 1;
    bool seen = false;
    for (const auto& seg : p.forward.segments) {
      for (const Kernel& k : seg.kernels) {
        if (std::string(k.name) != "cross_entropy") continue;
        seen = true;
        EXPECT_DOUBLE_EQ(k.bytes, 1024.0 * static_cast<double>(v) * (passes * 2 + 4)) << v;
      }
    }
    EXPECT_TRUE(seen);
  }
}

// Adam: fp32 master weight and two moments read and written (24 B), the fp32 gradient read (4 B)
// and the bf16 weight written (2 B): 30 bytes per parameter (the harness's adam kernel).
// Megatron-LM's unfused loss (training.cross_entropy: unfused): the PyTorch passes of
// VocabParallelCrossEntropy over fp32 logits, counted from its source: cast 2 + 4, maximum 4,
// subtraction 4 + 4, exponential 4 + 4, sum 4, division 4 + 4 = 38 bytes per bf16 logit forward;
// softmax times the loss gradient 4 + 4 and the cast back 4 + 2 = 14 backward; at the stream rate.
TEST(LayerProgram, UnfusedCrossEntropyBytesByHand) {
  const TransformerSpec m = gpt_small();
  const double T = 8 * 1024, V = 50304;
  ProgramShape sh;
  sh.micro_batch = 8;
  sh.seq = 1024;
  sh.cross_entropy_unfused = true;
  const LayerProgram p = transformer_head(m, sh);
  int forward = 0, backward = 0;
  for (const auto& seg : p.forward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) != "cross_entropy_unfused") continue;
      ++forward;
      EXPECT_DOUBLE_EQ(k.bytes, T * V * 38);
      EXPECT_EQ(k.kind, MemoryKind::stream);
    }
  }
  for (const auto& seg : p.backward.segments) {
    for (const Kernel& k : seg.kernels) {
      if (std::string(k.name) != "cross_entropy_unfused") continue;
      ++backward;
      EXPECT_DOUBLE_EQ(k.bytes, T * V * 14);
    }
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(backward, 1);
}

TEST(LayerProgram, AdamUpdateBytesByHand) {
  TrainingSpec tr;
  tr.precision = hw::DType::bf16;
  tr.grad_dtype = hw::DType::fp32;
  const Kernel k = optimizer_update(tr, 1e6);
  EXPECT_DOUBLE_EQ(k.bytes, 30e6);
  EXPECT_EQ(k.kind, MemoryKind::optimizer);
  EXPECT_DOUBLE_EQ(gradient_zeroing(tr, 1e6).bytes, 4e6);
}

}  // namespace
}  // namespace dtsim::workloads
