// precision fp8: Transformer Engine's casts around a layer's GEMMs and its FP8 all-gathers, worked
// out by hand for a Llama-3-8B-shaped block (hidden 4096, 32 query and 8 key/value heads of 128,
// SwiGLU MLP of 14336, 4096 tokens) from the byte counts of docs/model.md, "FP8 casts":
// a maximum pass reads 2 bytes per element, a row-wise cast 3 (read 2, write 1), the column-wise
// copy written by the same pass 1, a transpose of an 8-bit tensor on its own 2.
#include <string_view>

#include <gtest/gtest.h>

#include "workloads/program.hpp"

namespace dtsim::workloads {
namespace {

constexpr double T = 4096, h = 4096, q = 4096, kv = 1024, f = 14336;

TransformerSpec llama_block() {
  TransformerSpec m;
  m.name = "llama-8b-shape";
  m.hidden = 4096;
  m.layers = 32;
  m.heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.ffn = 14336;
  m.vocab = 128256;
  m.max_seq = 8192;
  m.gated_mlp = true;
  m.bias = false;
  m.norm = Norm::rmsnorm;
  m.positions = Positions::rotary;
  m.tied_embeddings = false;
  return m;
}

ProgramShape shape(Fp8Recipe r, int tp, bool sp, TpOverlap o = TpOverlap::backward) {
  ProgramShape sh;
  sh.micro_batch = 1;
  sh.seq = 4096;
  sh.tp = tp;
  sh.sequence_parallel = sp;
  sh.tp_overlap = o;
  sh.precision = hw::DType::fp8;
  sh.fp8_recipe = r;
  return sh;
}

double bytes_of(const Pass& p, std::string_view name) {
  double b = 0;
  for (const Segment& s : p.segments) {
    for (const Kernel& k : s.kernels) b += std::string_view(k.name) == name ? k.bytes : 0.0;
  }
  return b;
}

int count_of(const Pass& p, std::string_view name) {
  int n = 0;
  for (const Segment& s : p.segments) {
    for (const Kernel& k : s.kernels) n += std::string_view(k.name) == name ? 1 : 0;
  }
  return n;
}

TEST(Fp8Casts, CurrentScalingOnOneRankByHand) {
  const LayerProgram p = transformer_block(llama_block(), shape(Fp8Recipe::current, 1, false));
  // Forward: QKV's and MLP-up's inputs come from a norm that found the maximum (cast 3 + copy 1),
  // the output projection's (attention's context) and MLP-down's (SwiGLU's output) need the
  // maximum pass too (2 + 3 + 1).
  EXPECT_EQ(count_of(p.forward, "fp8_cast"), 4);
  EXPECT_DOUBLE_EQ(bytes_of(p.forward, "fp8_cast"), T * (4 * h + 6 * q + 4 * h + 6 * f));
  // Backward: each GEMM's output gradient, 6 bytes per element: MLP-down's and the projection's
  // [T, h], MLP-up's [T, 2f], QKV's [T, q + 2 kv].
  EXPECT_EQ(count_of(p.backward, "fp8_cast"), 4);
  EXPECT_DOUBLE_EQ(bytes_of(p.backward, "fp8_cast"), 6 * T * (h + 2 * f + h + (q + 2 * kv)));
  EXPECT_EQ(count_of(p.backward, "fp8_transpose"), 0);
  // Each cast comes right before the GEMM that reads it.
  for (const Pass* pass : {&p.forward, &p.backward}) {
    for (const Segment& s : pass->segments) {
      for (std::size_t i = 0; i < s.kernels.size(); ++i) {
        if (std::string_view(s.kernels[i].name) != "fp8_cast") continue;
        ASSERT_LT(i + 1, s.kernels.size());
        EXPECT_EQ(s.kernels[i + 1].cls, KernelClass::gemm);
        EXPECT_EQ(s.kernels[i + 1].dtype, hw::DType::fp8);
      }
    }
  }
}

TEST(Fp8Casts, DelayedScalingLetsTheNormCastAndFusesTheMaximum) {
  const LayerProgram p = transformer_block(llama_block(), shape(Fp8Recipe::delayed, 1, false));
  // The norms write FP8 themselves; their outputs are only transposed (2). The others are one
  // pass writing both copies (3 + 1); the output gradients likewise.
  EXPECT_DOUBLE_EQ(bytes_of(p.forward, "fp8_cast"), T * (2 * h + 4 * q + 2 * h + 4 * f));
  EXPECT_DOUBLE_EQ(bytes_of(p.backward, "fp8_cast"), 4 * T * (h + 2 * f + h + (q + 2 * kv)));
}

TEST(Fp8Casts, SequenceParallelCastsTheShardAndGathersEightBits) {
  for (TpOverlap o : {TpOverlap::none, TpOverlap::backward, TpOverlap::userbuffers}) {
    SCOPED_TRACE(std::string(to_string(o)));
    const double t = 4;
    const LayerProgram p = transformer_block(llama_block(), shape(Fp8Recipe::current, 4, true, o));
    // Forward: the norms' shards cast row-wise (3) before their gathers; the local inputs of the
    // row-parallel layers as on one rank, split over tp.
    EXPECT_DOUBLE_EQ(bytes_of(p.forward, "fp8_cast"), T / t * h * 3 * 2 + T * (6 * q + 6 * f) / t);
    // Backward: the row-parallel layers' output-gradient shards (maximum and cast, 5) before their
    // gathers, the column-parallel layers' local output gradients (6); the gathered output
    // gradients and the gathered saved inputs transposed for the weight gradients (2 each).
    EXPECT_DOUBLE_EQ(bytes_of(p.backward, "fp8_cast"), 5 * T / t * h * 2 + 6 * T * (2 * f + q + 2 * kv) / t);
    EXPECT_DOUBLE_EQ(bytes_of(p.backward, "fp8_transpose"), 2 * T * h * 4);
    // Every tensor-parallel all-gather moves one byte per element of [T, h]; reduce-scatters stay
    // 16-bit.
    int gathers = 0, scatters = 0;
    for (const Pass* pass : {&p.forward, &p.backward}) {
      for (const Segment& s : pass->segments) {
        if (!s.comm || s.comm->group != CommGroup::tp) continue;
        if (s.comm->op == CollOp::allgather) {
          ++gathers;
          EXPECT_EQ(s.comm->bytes.count(), static_cast<std::int64_t>(T * h));
        } else if (s.comm->op == CollOp::reducescatter) {
          ++scatters;
        }
      }
    }
    // 2 forward, 2 output-gradient gathers and 2 re-gathers backward (userbuffers keeps the ring
    // exchanges as gathers beside GEMM pieces).
    EXPECT_EQ(gathers, 6);
    EXPECT_GE(scatters, 4);
  }
}

TEST(Fp8Casts, ExpertGemmsCastEveryRoutedToken) {
  // 8 experts, top 2, on one rank: each expert GEMM is a batch of 8 problems of 4096 x 2 / 8
  // tokens, so the casts cover 2T routed tokens; the experts' inputs are not a norm's output
  // (the router, a 16-bit Megatron layer, sits between), so they pay the maximum pass too.
  TransformerSpec m = llama_block();
  m.experts = 8;
  m.top_k = 2;
  const LayerProgram p = transformer_block(m, shape(Fp8Recipe::current, 1, false));
  EXPECT_DOUBLE_EQ(bytes_of(p.forward, "fp8_cast"), T * (4 * h + 6 * q) + 6 * (2 * T) * h + 6 * (2 * T) * f);
  EXPECT_DOUBLE_EQ(bytes_of(p.backward, "fp8_cast"), 6 * T * (h + (q + 2 * kv)) + 6 * (2 * T) * h + 6 * (2 * T) * (2 * f));
  for (const Segment& s : p.forward.segments) {
    for (const Kernel& k : s.kernels) {
      if (std::string_view(k.name) == "router") {
        EXPECT_EQ(k.dtype, hw::DType::bf16);
      }
    }
  }
}

TEST(Fp8Casts, CastsAddNoFlopsAndMegatronsOwnLayersStayBf16) {
  ProgramShape bf = shape(Fp8Recipe::current, 1, false);
  bf.precision = hw::DType::bf16;
  const LayerProgram a = transformer_block(llama_block(), bf);
  const LayerProgram b = transformer_block(llama_block(), shape(Fp8Recipe::current, 1, false));
  EXPECT_DOUBLE_EQ(a.forward.flops(), b.forward.flops());
  EXPECT_DOUBLE_EQ(a.backward.flops(), b.backward.flops());
  EXPECT_EQ(count_of(a.forward, "fp8_cast") + count_of(a.backward, "fp8_cast"), 0);
  // The output layer is Megatron's ColumnParallelLinear, not Transformer Engine's: 16-bit GEMMs,
  // no casts.
  const LayerProgram head = transformer_head(llama_block(), shape(Fp8Recipe::current, 1, false));
  int gemms = 0;
  for (const Pass* pass : {&head.forward, &head.backward}) {
    for (const Segment& s : pass->segments) {
      for (const Kernel& k : s.kernels) {
        if (k.cls != KernelClass::gemm) continue;
        ++gemms;
        EXPECT_EQ(k.dtype, hw::DType::bf16) << k.name;
      }
    }
  }
  EXPECT_EQ(gemms, 3);
  EXPECT_EQ(count_of(head.forward, "fp8_cast") + count_of(head.backward, "fp8_cast"), 0);
  // The memory model keeps the FP8 copies of GEMM inputs (one byte) under fp8 only.
  TrainingSpec tr;
  EXPECT_EQ(activation_shape(shape(Fp8Recipe::current, 1, false), tr, 2).gemm_input_bytes, 1);
  EXPECT_EQ(activation_shape(bf, tr, 2).gemm_input_bytes, 0);
}

}  // namespace
}  // namespace dtsim::workloads
