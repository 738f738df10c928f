// Activation memory against Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", Table 2 (bytes per layer, 16-bit activations, dropout, standard attention).
#include "workloads/memory.hpp"

#include <gtest/gtest.h>

namespace dtsim::workloads {
namespace {

TransformerSpec gpt(std::int64_t h, std::int64_t a) {
  TransformerSpec m;
  m.name = "gpt";
  m.hidden = h;
  m.heads = a;
  m.kv_heads = a;
  m.head_dim = h / a;
  m.ffn = 4 * h;
  m.layers = 1;
  m.vocab = 1000;
  m.max_seq = 2048;
  return m;
}

struct Case {
  double s, b, h, a, t;
};

class Korthikanti : public ::testing::Test {
 protected:
  const Case c{2048, 1, 12288, 96, 8};  // GPT-3 175B shapes from the paper
  TransformerSpec m = gpt(12288, 96);
  ActivationShape shape(int tp, bool sp, Recompute r) const {
    ActivationShape x;
    x.micro_batch = 1;
    x.seq = 2048;
    x.tp = tp;
    x.sequence_parallel = sp;
    x.recompute = r;
    x.attention = Attention::standard;
    x.act_bytes = 2;
    x.dropout = true;
    return x;
  }
  double sbh() const { return c.s * c.b * c.h; }
  double as_h() const { return c.a * c.s / c.h; }
};

TEST_F(Korthikanti, NoParallelism) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(1, false, Recompute::none)), sbh() * (34 + 5 * as_h()));
}

TEST_F(Korthikanti, TensorParallel) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(8, false, Recompute::none)), sbh() * (10 + 24 / c.t + 5 * as_h() / c.t));
}

TEST_F(Korthikanti, TensorAndSequenceParallel) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(8, true, Recompute::none)), sbh() / c.t * (34 + 5 * as_h()));
}

TEST_F(Korthikanti, SelectiveRecomputation) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(8, true, Recompute::selective)), 34 * sbh() / c.t);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(8, false, Recompute::selective)), sbh() * (10 + 24 / c.t));
}

TEST_F(Korthikanti, FullRecomputationKeepsTheLayerInput) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(1, false, Recompute::full)), 2 * sbh());
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, shape(8, true, Recompute::full)), 2 * sbh() / c.t);
}

TEST_F(Korthikanti, Fp8KeepsTheGemmInputsInOneByte) {
  // Under fp8 Transformer Engine keeps its FP8 copy of each GEMM input. Outside the TP regions:
  // the two layer-norm inputs (2 + 2), the attention and MLP inputs (1 + 1), the masks (1 + 1):
  // 8 sbh for 10. Inside: Q, K, V (6 h), the attention output as the projection's input (1 h for
  // 2), the MLP's first output (8 h) and its activation as the second GEMM's input (4 h for 8):
  // 19 sbh / t for 24. The scores are unchanged.
  ActivationShape x = shape(1, false, Recompute::none);
  x.gemm_input_bytes = 1;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, x), sbh() * (27 + 5 * as_h()));
  // A fused attention kernel keeps its 16-bit output for its own backward too (2 + 1 bytes): 8 +
  // 21 sbh / t with sequence parallelism, and its fp32 log-sum-exp per query row.
  x = shape(8, true, Recompute::none);
  x.gemm_input_bytes = 1;
  x.attention = Attention::flash;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, x), sbh() / c.t * 29 + (c.a / c.t) * c.b * c.s * 4);
  // Full recomputation keeps the 16-bit layer input.
  x.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, x), 2 * sbh() / c.t);
}

TEST(StageMemory, MixedPrecisionAdamIsSixteenBytesPerParameterShardedByZero) {
  // 2 (bf16 weights) + 4 (fp32 gradients) + 12 (fp32 master + two Adam moments) bytes per
  // parameter; ZeRO-1 shards the 12, ZeRO-2 also the 4, ZeRO-3 also the 2 (Rajbhandari et al. 2020).
  TrainingSpec t;
  t.precision = hw::DType::bf16;
  t.grad_dtype = hw::DType::fp32;
  t.optimizer = Optimizer::adam;
  MemoryParams mp;
  mp.reserved = Bytes(0);
  mp.fragmentation = 0;
  StageMemoryInput in;
  in.dense_params = 1e9;
  in.dp = 8;
  const Bytes cap = Bytes::GiB(80);
  EXPECT_DOUBLE_EQ(stage_memory(in, t, 0, mp, cap).total, 1e9 * (2 + 4 + 12));
  EXPECT_DOUBLE_EQ(stage_memory(in, t, 1, mp, cap).total, 1e9 * (2 + 4 + 12.0 / 8));
  EXPECT_DOUBLE_EQ(stage_memory(in, t, 2, mp, cap).total, 1e9 * (2 + (4 + 12.0) / 8));
  EXPECT_DOUBLE_EQ(stage_memory(in, t, 3, mp, cap).total, 1e9 * (2 + 4 + 12.0) / 8);
  in.dense_params = 10e9;  // 180 GB does not fit in 80 GiB
  EXPECT_FALSE(stage_memory(in, t, 0, mp, cap).fits);
}

}  // namespace
}  // namespace dtsim::workloads
