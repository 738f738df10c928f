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
  EXPECT_EQ(count(q.backward, CollOp::allgather), 2);
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
