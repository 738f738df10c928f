// parallel.tp_overlap: where a tensor-parallel rank's collectives run beside its GEMMs, checked
// against Megatron-LM's column-parallel backward and Transformer Engine's userbuffers methods
// (ring exchange in front of a GEMM, 4-piece pipeline behind it), worked out by hand for a GPT-3
// 175B block (hidden 12288, 2048 tokens, tp 8).
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/program.hpp"

namespace dtsim::workloads {
namespace {

constexpr std::int64_t kTokens = 2048, kHidden = 12288, kTp = 8;
constexpr std::int64_t kActBytes = kTokens * kHidden * 2;  // one [tokens, hidden] bf16 tensor

TransformerSpec gpt3_175b() {
  TransformerSpec m;
  m.name = "gpt3-175b";
  m.hidden = kHidden;
  m.layers = 96;
  m.heads = 96;
  m.kv_heads = 96;
  m.head_dim = 128;
  m.ffn = 4 * kHidden;
  m.vocab = 50257;
  m.max_seq = 2048;
  return m;
}

ProgramShape shape(TpOverlap o, bool sp) {
  ProgramShape sh;
  sh.micro_batch = 1;
  sh.seq = kTokens;
  sh.tp = static_cast<int>(kTp);
  sh.sequence_parallel = sp;
  sh.tp_overlap = o;
  return sh;
}

struct Site {
  CollOp op;
  std::int64_t bytes;
  bool overlapped;
  std::vector<std::string_view> kernels;  // the segment's kernels (those beside an overlapped collective)
  std::vector<std::int64_t> rows;         // their m
  std::vector<std::int64_t> batch;
};

std::vector<Site> sites(const Pass& pass) {
  std::vector<Site> out;
  for (const Segment& s : pass.segments) {
    if (!s.comm || s.comm->group != CommGroup::tp) continue;
    Site site{s.comm->op, s.comm->bytes.count(), s.comm_overlaps, {}, {}, {}};
    for (const Kernel& k : s.kernels) {
      site.kernels.emplace_back(k.name);
      site.rows.push_back(k.m);
      site.batch.push_back(k.batch);
    }
    out.push_back(site);
  }
  return out;
}

int count(const std::vector<Site>& v, CollOp op, bool overlapped) {
  int n = 0;
  for (const Site& s : v) n += (s.op == op && s.overlapped == overlapped) ? 1 : 0;
  return n;
}

TEST(TpOverlap, NoneBlocksEveryCollectiveAndRegathersTheSavedInput) {
  const LayerProgram p = transformer_block(gpt3_175b(), shape(TpOverlap::none, true));
  const auto b = sites(p.backward);
  // Row-parallel input gradients (2 all-gathers), column-parallel input gradients (2
  // reduce-scatters) and the 2 re-gathers of the column-parallel layers' saved input shards, all
  // blocking, each one [tokens, hidden] tensor.
  EXPECT_EQ(count(b, CollOp::allgather, false), 4);
  EXPECT_EQ(count(b, CollOp::reducescatter, false), 2);
  EXPECT_EQ(b.size(), 6u);
  for (const Site& s : b) EXPECT_EQ(s.bytes, kActBytes);
}

TEST(TpOverlap, BackwardReducesTheInputGradientBesideTheWeightGradient) {
  const TransformerSpec m = gpt3_175b();
  const LayerProgram p = transformer_block(m, shape(TpOverlap::backward, true));
  const auto b = sites(p.backward);
  // Megatron's LinearWithGradAccumulationAndAsyncCommunication: re-gather beside dgrad, the
  // reduce-scatter beside wgrad, for QKV and MLP-up; the row-parallel gathers still block.
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(count(b, CollOp::allgather, false), 2);
  EXPECT_EQ(count(b, CollOp::allgather, true), 2);
  EXPECT_EQ(count(b, CollOp::reducescatter, true), 2);
  for (const Site& s : b) {
    EXPECT_EQ(s.bytes, kActBytes);
    if (!s.overlapped) continue;
    ASSERT_EQ(s.kernels.size(), 1u);
    EXPECT_EQ(s.kernels[0], s.op == CollOp::allgather ? "dgrad" : "wgrad");
  }
  // The dgrad / wgrad pairs beside them: QKV's (k = hidden, n = 3 x hidden / tp) in the attention
  // half, MLP-up's (n = 4 x hidden / tp) in the MLP half. A wgrad's m is the GEMM's k.
  std::vector<std::int64_t> wgrad_m;
  for (const Site& s : b) {
    if (s.overlapped && s.op == CollOp::reducescatter) wgrad_m.push_back(s.rows[0]);
  }
  EXPECT_EQ(wgrad_m, (std::vector<std::int64_t>{kHidden, kHidden}));
  // Nothing is computed twice or left out: the same FLOPs as with every collective blocking.
  const LayerProgram q = transformer_block(m, shape(TpOverlap::none, true));
  EXPECT_DOUBLE_EQ(p.backward.flops(), q.backward.flops());
  EXPECT_DOUBLE_EQ(p.forward.flops(), q.forward.flops());
  // Without sequence parallelism: the all-reduce of the input gradient beside wgrad, no re-gather.
  const auto nb = sites(transformer_block(m, shape(TpOverlap::backward, false)).backward);
  EXPECT_EQ(count(nb, CollOp::allreduce, true), 2);
  EXPECT_EQ(count(nb, CollOp::allreduce, false), 0);
  EXPECT_EQ(nb.size(), 2u);
}

TEST(TpOverlap, UserbuffersRingExchangesGathersAndPipelinesScatters) {
  const TransformerSpec m = gpt3_175b();
  const LayerProgram p = transformer_block(m, shape(TpOverlap::userbuffers, true));
  const auto f = sites(p.forward);
  // Forward: QKV and MLP-up each behind a ring exchange: 7 of 8 token pieces (256 rows each)
  // computed beside the all-gather, the 8th after it; attention-out and MLP-down each in 4 pieces
  // of 512 rows: the first alone, 3 beside the reduce-scatter of 3/4 of the output, then the last
  // quarter's reduce-scatter alone.
  ASSERT_EQ(f.size(), 6u);
  for (int i : {0, 3}) {
    EXPECT_EQ(f[i].op, CollOp::allgather);
    EXPECT_TRUE(f[i].overlapped);
    EXPECT_EQ(f[i].bytes, kActBytes);
    EXPECT_EQ(f[i].rows, (std::vector<std::int64_t>{kTokens / kTp}));
    EXPECT_EQ(f[i].batch, (std::vector<std::int64_t>{kTp - 1}));
  }
  for (int i : {1, 4}) {
    EXPECT_EQ(f[i].op, CollOp::reducescatter);
    EXPECT_TRUE(f[i].overlapped);
    EXPECT_EQ(f[i].bytes, kActBytes - kActBytes / 4);
    EXPECT_EQ(f[i].rows, (std::vector<std::int64_t>{kTokens / 4}));
    EXPECT_EQ(f[i].batch, (std::vector<std::int64_t>{3}));
    EXPECT_EQ(f[i + 1].op, CollOp::reducescatter);
    EXPECT_FALSE(f[i + 1].overlapped);
    EXPECT_EQ(f[i + 1].bytes, kActBytes / 4);
    EXPECT_TRUE(f[i + 1].kernels.empty());
  }
  // The GEMMs are cut, not repeated: the same FLOPs as one piece each.
  const LayerProgram q = transformer_block(m, shape(TpOverlap::backward, true));
  EXPECT_NEAR(p.forward.flops(), q.forward.flops(), 1e-12 * q.forward.flops());
  EXPECT_NEAR(p.backward.flops(), q.backward.flops(), 1e-12 * q.backward.flops());
  // Backward: the row-parallel input gradients' gathers ring-exchanged beside their dgrad pieces;
  // the bulk overlaps of QKV and MLP-up as in `backward`. No tensor-parallel collective blocks but
  // the forward's last scatter pieces.
  const auto b = sites(p.backward);
  EXPECT_EQ(count(b, CollOp::allgather, true), 4);
  EXPECT_EQ(count(b, CollOp::reducescatter, true), 2);
  EXPECT_EQ(b.size(), 6u);
  int ring = 0;
  for (const Site& s : b) {
    if (s.op == CollOp::allgather && s.rows == std::vector<std::int64_t>{kTokens / kTp} && s.batch == std::vector<std::int64_t>{kTp - 1}) ++ring;
  }
  EXPECT_EQ(ring, 2);
  // Full recomputation repeats the overlapped forward.
  ProgramShape rs = shape(TpOverlap::userbuffers, true);
  rs.recompute = Recompute::full;
  EXPECT_EQ(sites(transformer_block(m, rs).recompute).size(), f.size());
}

TEST(TpOverlap, UserbuffersNeedSequenceParallelism) {
  const ProgramShape sh = shape(TpOverlap::userbuffers, false);
  const auto st = validate_transformer(gpt3_175b(), sh);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().field, "parallel.tp_overlap");
  ProgramShape one = sh;
  one.tp = 1;
  EXPECT_TRUE(validate_transformer(gpt3_175b(), one));
}

// The rewrites above find a column-parallel layer's input- and weight-gradient GEMMs by their role,
// which the backward's derivation sets: a weighted GEMM (Y = X W) gives one input gradient and one
// weight gradient, a product of two activations (attention's scores without flash) two input
// gradients, and the forward pass keeps GemmRole::forward.
TEST(GemmRoles, TheBackwardNamesEachGradientByWhatItComputes) {
  ProgramShape sh = shape(TpOverlap::none, false);
  sh.attention = Attention::standard;
  const LayerProgram block = transformer_block(gpt3_175b(), sh);
  int weight_grads = 0, input_grads = 0, forward_weighted = 0, forward_activation = 0;
  for (const Segment& s : block.forward.segments) {
    for (const Kernel& k : s.kernels) {
      if (k.cls != KernelClass::gemm) continue;
      EXPECT_EQ(k.role, GemmRole::forward) << k.name;
      (k.weighted ? forward_weighted : forward_activation) += 1;
    }
  }
  for (const Segment& s : block.backward.segments) {
    for (const Kernel& k : s.kernels) {
      if (k.cls != KernelClass::gemm) continue;
      EXPECT_NE(k.role, GemmRole::forward) << k.name;
      (k.role == GemmRole::weight_grad ? weight_grads : input_grads) += 1;
    }
  }
  EXPECT_EQ(forward_weighted, 4);  // QKV, projection, MLP up, MLP down
  EXPECT_EQ(forward_activation, 2);  // Q K^T and the probabilities times V
  EXPECT_EQ(weight_grads, forward_weighted);
  EXPECT_EQ(input_grads, forward_weighted + 2 * forward_activation);
}

}  // namespace
}  // namespace dtsim::workloads
