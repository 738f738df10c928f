// training.framework: the eager PyTorch and torch.compile programs against hand-computed kernel
// counts and bytes, the host-issue model against its closed forms (launch-bound steps take
// kernels x host cost), multi_tensor_apply's launch count against the H100 traces, and the
// megatron program untouched by every framework constant.
#include "workloads/framework_program.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/hw/fixtures.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {
namespace {

using hw::testing::cluster;
using hw::testing::nvswitch_node;

// A two-layer GPT-2-style model (learned positions, biases, layer norm, gelu_new MLP, tied).
TransformerSpec tiny_gpt2(std::int64_t vocab = 1000) {
  TransformerSpec m;
  m.name = "tiny-gpt2";
  m.hidden = 64;
  m.layers = 2;
  m.heads = 2;
  m.kv_heads = 2;
  m.head_dim = 32;
  m.ffn = 256;
  m.vocab = vocab;
  m.max_seq = 128;
  return m;
}

// A two-layer Llama-style model (rotary, RMSNorm, SwiGLU, no biases, grouped-query attention).
TransformerSpec tiny_llama() {
  TransformerSpec m = tiny_gpt2(1024);
  m.name = "tiny-llama";
  m.kv_heads = 1;
  m.bias = false;
  m.gated_mlp = true;
  m.positions = Positions::rotary;
  m.norm = Norm::rmsnorm;
  return m;
}

ProgramShape shape(std::int64_t b, std::int64_t s, double dropout) {
  ProgramShape sh;
  sh.micro_batch = b;
  sh.seq = s;
  sh.precision = hw::DType::bf16;
  sh.dropout = dropout;
  return sh;
}

std::size_t count(const Pass& p) {
  std::size_t n = 0;
  for (const Segment& s : p.segments) n += s.kernels.size();
  return n;
}

const Kernel* find(const Pass& p, std::string_view name) {
  for (const Segment& s : p.segments) {
    for (const Kernel& k : s.kernels) {
      if (name == k.name) return &k;
    }
  }
  return nullptr;
}

TEST(FrameworkProgram, EagerGpt2BlockLaunchesTheTracesKernels) {
  // Forward, as the GPT-2 trace's first block runs it: layer norm (1); c_attn: weight, input and
  // bias casts, workspace memset, GEMM (5); the key/value cache concatenations (2); SDPA: Philox
  // seed, memset, kernel (3); c_proj: weight and bias casts, memset, GEMM (4); dropout, residual
  // add (2); layer norm (1); c_fc (5); gelu_new (9); c_proj with its fp32 input (5); dropout,
  // residual add (2): 39.
  const LayerProgram p = framework_block(tiny_gpt2(), shape(2, 128, 0.1), Framework::pytorch_eager);
  EXPECT_EQ(count(p.forward), 39u);
  // Backward: the residual gradients summed (1); dropout: cast, mask (2); c_proj: memset, dgrad,
  // wgrad, memset, bias sum, bias cast, input cast, weight cast (8); gelu_new (14); c_fc (8); layer
  // norm (2); dropout (2); c_proj without the input cast (7); SDPA: memset, dO.O, kernel, dQ
  // conversion, two head-layout copies and the QKV concatenation (7); c_attn (8); layer norm (2): 61.
  EXPECT_EQ(count(p.backward), 61u);
}

TEST(FrameworkProgram, CompiledBlockFusesEveryElementwiseChain) {
  // Inductor: fused norm (1); weight cast + GEMM (2); SDPA: seed, memset, kernel (3); weight cast +
  // GEMM (2); dropout + residual (1); fused norm (1); c_fc (2); GELU (1); c_proj (2); dropout +
  // residual (1): 16 kernels where eager launches 39.
  const LayerProgram p = framework_block(tiny_gpt2(), shape(2, 128, 0.1), Framework::torch_compile);
  EXPECT_EQ(count(p.forward), 16u);
  for (const Segment& s : p.forward.segments) {
    for (const Kernel& k : s.kernels) EXPECT_FALSE(k.unaligned) << k.name;
  }
}

TEST(FrameworkProgram, EagerLossIsFp32OverTheVocabulary) {
  // logits.float(): read bf16, write fp32 (6 bytes per logit); log_softmax: read and write fp32 (8);
  // its backward reads the gradient and the output and writes fp32 (12); the LM head GEMM of an
  // odd vocabulary is unaligned.
  const std::int64_t T = 2 * 128, V = 1001;
  const LayerProgram head = framework_head(tiny_gpt2(V), shape(2, 128, 0.1), Framework::pytorch_eager);
  const double logits = static_cast<double>(T * V);
  ASSERT_NE(find(head.forward, "cast_logits"), nullptr);
  EXPECT_DOUBLE_EQ(find(head.forward, "cast_logits")->bytes, 6 * logits);
  EXPECT_DOUBLE_EQ(find(head.forward, "log_softmax")->bytes, 8 * logits);
  EXPECT_DOUBLE_EQ(find(head.backward, "log_softmax_grad")->bytes, 12 * logits);
  EXPECT_TRUE(find(head.forward, "lm_head")->unaligned);
  const LayerProgram aligned = framework_head(tiny_gpt2(1000), shape(2, 128, 0.1), Framework::pytorch_eager);
  EXPECT_FALSE(find(aligned.forward, "lm_head")->unaligned);
}

TEST(FrameworkProgram, EagerRmsNormIsSixFp32Kernels) {
  // Hugging Face's LlamaRMSNorm: pow, mean, + eps, rsqrt, x * rstd, weight * x; the element-wise
  // ones move 8 bytes per element (fp32 in and out).
  const LayerProgram p = framework_block(tiny_llama(), shape(2, 128, 0), Framework::pytorch_eager);
  const double el = 2.0 * 128 * 64;
  EXPECT_DOUBLE_EQ(find(p.forward, "rms_pow")->bytes, 8 * el);
  EXPECT_DOUBLE_EQ(find(p.forward, "rms_weight")->bytes, 8 * el);
  // No dropout without a probability; grouped-query attention sums dK and dV over the groups.
  EXPECT_EQ(find(p.forward, "dropout"), nullptr);
  EXPECT_NE(find(p.backward, "sdpa_reduce_head"), nullptr);
}

TEST(FrameworkProgram, UnalignedGemmRunsAtItsOwnEfficiency) {
  const hw::GpuSpec g = hw::testing::gpu();
  ComputeParams cp;
  cp.kernel_overhead = Time::zero();
  const ComputeModel cm(g, cp);
  Kernel k = gemm("lm_head", 8192, 50257, 768, 1, hw::DType::bf16, 2, 2);
  k.unaligned = true;
  // flops / (peak x efficiency): 2 x 8192 x 50257 x 768 / (100 TFLOP/s x 0.123).
  const double expect = 2.0 * 8192 * 50257 * 768 / (100e12 * 0.123);
  EXPECT_NEAR(cm.kernel_time(k).seconds(), expect, 1e-9);
}

TEST(FrameworkProgram, MultiTensorLaunchesMatchTheTraces) {
  // Closed forms: 100 tensors of one chunk with four lists (36 per launch) take 3 launches; one
  // tensor of 640 chunks takes 2 (320 blocks per launch).
  EXPECT_EQ(multi_tensor_launches(std::vector<std::int64_t>(100, 65536), 4), 3);
  EXPECT_EQ(multi_tensor_launches({640 * 65536}, 4), 2);
  // The GPT-2 trace's fused AdamW launches 7 multi_tensor_apply kernels over GPT2LMHeadModel's
  // parameter tensors (the tied wte, wpe, 12 blocks of 12 tensors, ln_f's two).
  std::vector<std::int64_t> gpt2{50257 * 768, 1024 * 768};
  for (int l = 0; l < 12; ++l) {
    for (std::int64_t t : {768, 768, 768 * 2304, 2304, 768 * 768, 768, 768, 768, 768 * 3072, 3072, 3072 * 768, 768}) gpt2.push_back(t);
  }
  gpt2.push_back(768);
  gpt2.push_back(768);
  EXPECT_EQ(multi_tensor_launches(gpt2, 4), 7);
  // The Llama trace's: 60 launches over LlamaForCausalLM's tensors in named_parameters order
  // (embed_tokens; per layer q, k, v, o, gate, up, down, the two norms; the final norm).
  std::vector<std::int64_t> llama{128256LL * 2048};
  for (int l = 0; l < 16; ++l) {
    for (std::int64_t t : {2048LL * 2048, 512LL * 2048, 512LL * 2048, 2048LL * 2048, 8192LL * 2048, 8192LL * 2048, 2048LL * 8192, 2048LL, 2048LL}) {
      llama.push_back(t);
    }
  }
  llama.push_back(2048);
  EXPECT_EQ(multi_tensor_launches(llama, 4), 60);
}

// A two-layer BERT-style encoder (post-norm, learned positions, token types, biases, exact GELU,
// the MLM head over an unaligned vocabulary, tied).
TransformerSpec tiny_bert() {
  TransformerSpec m = tiny_gpt2(30522);
  m.name = "tiny-bert";
  m.encoder = true;
  return m;
}

TEST(FrameworkProgram, EagerBertBlockIsPostNormWithThreeProjections) {
  // Forward, from transformers' modeling_bert.py: q, k and v, each with its weight, input (the
  // previous layer norm's fp32 output) and bias casts, memset and GEMM (15); SDPA: Philox seed,
  // memset, kernel (3); the output dense (bf16 input): weight and bias casts, memset, GEMM (4);
  // dropout, residual add (2); layer norm (1); intermediate dense (5); exact GELU (1); output
  // dense (4); dropout, residual add (2); layer norm (1): 38. No KV-cache concatenation (encoder).
  const LayerProgram p = framework_block(tiny_bert(), shape(2, 128, 0.1), Framework::pytorch_eager);
  EXPECT_EQ(count(p.forward), 38u);
  EXPECT_EQ(find(p.forward, "cache_cat"), nullptr);
  EXPECT_EQ(find(p.forward, "gelu_op"), nullptr);
  // Backward: the block input feeds q, k, v and the attention's residual add (3 sums), the
  // attention norm's output the MLP and its residual add (1); q, k, v: memset, dgrad, wgrad,
  // memset, bias sum, bias cast, input cast, weight cast (24); SDPA: memset, dO.O, kernel, dQ
  // conversion, three head-layout copies (7); output dense (7); dropout (2); layer norms (2 x 2);
  // intermediate dense (8); GELU (1); output dense (7); dropout (2): 66.
  EXPECT_EQ(count(p.backward), 66u);
  // Eager drops the all-ones padding mask (cuDNN, no mask); compiled, it is expanded and passed.
  EXPECT_FALSE(find(p.forward, "attention")->sdpa_masked);
  const LayerProgram c = framework_block(tiny_bert(), shape(2, 128, 0.1), Framework::torch_compile);
  EXPECT_TRUE(find(c.forward, "attention")->sdpa_masked);
}

TEST(FrameworkProgram, EagerBertEmbeddingAndMlmHead) {
  // BertEmbeddings: word and token-type lookups, their add, the position lookup and add, layer
  // norm, dropout, and the padding mask's all-ones check (8).
  const ProgramShape sh = shape(2, 128, 0.1);
  const LayerProgram e = framework_embedding(tiny_bert(), sh, Framework::pytorch_eager);
  EXPECT_EQ(count(e.forward), 8u);
  ASSERT_NE(find(e.forward, "token_type_embedding"), nullptr);
  EXPECT_DOUBLE_EQ(find(e.forward, "token_type_embedding")->bytes, 8.0 * 2 * 128 * 64);
  // Backward: dropout (1), layer norm (2), the word table (zero, 8 sort kernels, sums, scatter:
  // 11), the tied decoder's gradient added (1), positions (1), the token-type table (11): 27.
  EXPECT_EQ(count(e.backward), 27u);
  // BertOnlyMLMHead: transform dense reading the fp32 layer-norm output (weight, input, bias
  // casts, memset, GEMM: 5), GELU, layer norm, decoder with its bias (5); the loss: logits cast,
  // log-softmax, NLL (3), no label shift: 15. 30522 is not a multiple of 8: align1 GEMMs in eager.
  const LayerProgram h = framework_head(tiny_bert(), sh, Framework::pytorch_eager);
  EXPECT_EQ(count(h.forward), 15u);
  EXPECT_NE(find(h.forward, "cast_input"), nullptr);
  EXPECT_EQ(find(h.forward, "shift_labels"), nullptr);
  EXPECT_TRUE(find(h.forward, "lm_head")->unaligned);
  EXPECT_TRUE(find(h.backward, "dgrad")->unaligned || find(h.backward, "wgrad")->unaligned);
  const LayerProgram hc = framework_head(tiny_bert(), sh, Framework::torch_compile);
  EXPECT_FALSE(find(hc.forward, "lm_head")->unaligned);
}

// A VGG-like CNN without batch norm: conv(3->8, 3x3, bias) ReLU maxpool conv(8->8, bias) ReLU,
// flatten, fc(128->16) ReLU Dropout fc(16->10), on 8x8 images.
CnnSpec tiny_vgg() {
  CnnSpec m;
  m.name = "tiny-vgg";
  m.image = 8;
  auto layer = [&](CnnLayer::Kind k, std::int64_t in_c, std::int64_t out_c, std::int64_t in_hw, std::int64_t out_hw) {
    CnnLayer l;
    l.kind = k;
    l.name = "l" + std::to_string(m.layers.size());
    l.in_channels = in_c;
    l.out_channels = out_c;
    l.kernel = k == CnnLayer::Kind::conv ? 3 : k == CnnLayer::Kind::pool ? 2 : 1;
    l.stride = k == CnnLayer::Kind::pool ? 2 : 1;
    l.padding = k == CnnLayer::Kind::conv ? 1 : 0;
    l.in_h = l.in_w = in_hw;
    l.out_h = l.out_w = out_hw;
    l.bias = k == CnnLayer::Kind::conv || k == CnnLayer::Kind::fc;
    m.layers.push_back(l);
  };
  using K = CnnLayer::Kind;
  layer(K::conv, 3, 8, 8, 8);
  layer(K::relu, 8, 8, 8, 8);
  layer(K::pool, 8, 8, 8, 4);
  layer(K::conv, 8, 8, 4, 4);
  layer(K::relu, 8, 8, 4, 4);
  layer(K::fc, 128, 16, 1, 1);
  layer(K::relu, 16, 16, 1, 1);
  layer(K::dropout, 16, 16, 1, 1);
  layer(K::fc, 16, 10, 1, 1);
  return m;
}

std::size_t total(const std::vector<LayerProgram>& ps, bool forward) {
  std::size_t n = 0;
  for (const LayerProgram& p : ps) n += count(forward ? p.forward : p.backward);
  return n;
}

TEST(FrameworkProgram, CnnWithoutBatchNormAddsConvolutionBiasesAndKeepsItsReLUs) {
  const ProgramShape sh = shape(2, 0, 0);
  // Eager: conv 1: weight and image casts, cuDNN, the bias cast and add (ATen adds a convolution's
  // bias after cuDNN), ReLU, max pool (7); conv 2: weight cast, cuDNN, bias cast and add, ReLU (5);
  // fc 1: weight and bias casts, memset, GEMM, ReLU, dropout (6); fc 2 (4); the loss: log-softmax,
  // the cast to fp32, NLL (3): 25.
  const auto eager = framework_cnn(tiny_vgg(), sh, Framework::pytorch_eager);
  EXPECT_EQ(total(eager, true), 25u);
  // Backward: conv 1: wgrad (no input gradient), weight-gradient cast, bias sum and cast, ReLU,
  // pool (6); conv 2: dgrad too (6); fc 1: memset, dgrad, wgrad, memset, bias sum and cast,
  // weight-gradient cast, ReLU, dropout (9); fc 2 (7); the loss: fill, NLL, cast, log-softmax (4):
  // 32.
  EXPECT_EQ(total(eager, false), 32u);
  const Kernel* bias = find(eager[0].forward, "bias_add");
  ASSERT_NE(bias, nullptr);
  EXPECT_DOUBLE_EQ(bias->bytes, 2.0 * 8 * 8 * 8 * 2 * 2);  // the bf16 output read and written
  EXPECT_DOUBLE_EQ(find(eager[0].backward, "bias_grad")->bytes, 2.0 * 8 * 8 * 8 * 2);
  // torch.compile: the peeled bias add and the ReLU are one kernel after each convolution (no
  // batch norm to fuse into); after a GEMM the ReLU stays a kernel of its own. Forward: 4 + pool,
  // 3, 2 + ReLU + dropout, 2, the fused loss: 15. Backward: 3 + ReLU + pool, 4 + ReLU, 4 + ReLU +
  // dropout, 4, the fused loss: 21.
  const auto compiled = framework_cnn(tiny_vgg(), sh, Framework::torch_compile);
  EXPECT_EQ(total(compiled, true), 15u);
  EXPECT_EQ(total(compiled, false), 21u);
  EXPECT_NE(find(compiled[0].forward, "bias_relu"), nullptr);
  EXPECT_NE(find(compiled[2].forward, "relu"), nullptr);
}

// The parameter tensors of a framework model in named_parameters() order.
std::vector<std::int64_t> program_tensors(const TransformerSpec& m) {
  const ProgramShape sh = shape(1, 128, 0);
  std::vector<std::int64_t> t = framework_embedding(m, sh, Framework::pytorch_eager).tensors;
  const std::vector<std::int64_t> block = framework_block(m, sh, Framework::pytorch_eager).tensors;
  for (std::int64_t l = 0; l < m.layers; ++l) t.insert(t.end(), block.begin(), block.end());
  const std::vector<std::int64_t> head = framework_head(m, sh, Framework::pytorch_eager).tensors;
  t.insert(t.end(), head.begin(), head.end());
  return t;
}

TEST(FrameworkProgram, ProgramTensorsAreTheModulesParameters) {
  // GPT2LMHeadModel (124M): the optimizer's 7 fused AdamW launches of the GPT-2 trace, over
  // 124,439,808 parameters in 2 + 12 x 12 + 2 tensors.
  TransformerSpec gpt2 = tiny_gpt2(50257);
  gpt2.hidden = 768;
  gpt2.heads = gpt2.kv_heads = 12;
  gpt2.head_dim = 64;
  gpt2.ffn = 3072;
  gpt2.layers = 12;
  gpt2.max_seq = 1024;
  const auto g = program_tensors(gpt2);
  EXPECT_EQ(g.size(), 148u);
  EXPECT_EQ(std::accumulate(g.begin(), g.end(), std::int64_t{0}), 124'439'808);
  EXPECT_EQ(multi_tensor_launches(g, 4), 7);
  // LlamaForCausalLM (Llama-3.2-1B's shape, tied): the Llama trace's 60 launches.
  TransformerSpec llama = tiny_llama();
  llama.hidden = 2048;
  llama.heads = 32;
  llama.kv_heads = 8;
  llama.head_dim = 64;
  llama.ffn = 8192;
  llama.vocab = 128256;
  llama.layers = 16;
  llama.tied_embeddings = true;
  const auto l = program_tensors(llama);
  EXPECT_EQ(std::accumulate(l.begin(), l.end(), std::int64_t{0}), 1'235'814'400);
  EXPECT_EQ(multi_tensor_launches(l, 4), 60);
  // Qwen2 (0.5B): q, k and v carry biases: 12 tensors per layer, 494,032,768 parameters.
  TransformerSpec qwen = llama;
  qwen.hidden = 896;
  qwen.heads = 14;
  qwen.kv_heads = 2;
  qwen.ffn = 4864;
  qwen.vocab = 151936;
  qwen.layers = 24;
  qwen.qkv_bias = true;
  EXPECT_EQ(framework_block(qwen, shape(1, 128, 0), Framework::pytorch_eager).tensors.size(), 12u);
  const auto q = program_tensors(qwen);
  EXPECT_EQ(std::accumulate(q.begin(), q.end(), std::int64_t{0}), 494'032'768);
  // BertForMaskedLM: 16 tensors per layer; BERT-large's 335,141,888 counts the pooler (1,049,600),
  // which the masked-LM model does not build, and not the MLM head (1,082,170).
  TransformerSpec bert = tiny_bert();
  bert.hidden = 1024;
  bert.heads = bert.kv_heads = 16;
  bert.head_dim = 64;
  bert.ffn = 4096;
  bert.layers = 24;
  bert.max_seq = 512;
  EXPECT_EQ(framework_block(bert, shape(1, 128, 0), Framework::pytorch_eager).tensors.size(), 16u);
  const auto b = program_tensors(bert);
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), std::int64_t{0}), 335'141'888 - 1'049'600 + 1'082'170);
}

hw::Topology one_gpu() {
  auto c = cluster(nvswitch_node(), 1, hw::FabricKind::single_switch);
  c.groups[0].gpus_per_node = 1;
  return std::move(hw::Topology::build(c)).value();
}

StepInputs tiny_inputs(Framework fw, std::int64_t batch) {
  StepInputs in;
  in.model = tiny_gpt2();
  in.training.global_batch = batch;
  in.training.micro_batch = batch;
  in.training.seq_len = 128;
  in.training.framework = fw;
  return in;
}

std::size_t step_kernels(const StepInputs& in) {
  const auto& m = std::get<TransformerSpec>(in.model);
  ProgramShape sh = shape(in.training.micro_batch, in.training.seq_len, 0.1);
  const Framework fw = in.training.framework;
  std::size_t n = 0;
  for (const LayerProgram& p : {framework_embedding(m, sh, fw), framework_head(m, sh, fw)}) n += count(p.forward) + count(p.backward);
  const LayerProgram b = framework_block(m, sh, fw);
  n += static_cast<std::size_t>(m.layers) * (count(b.forward) + count(b.backward));
  return n;
}

TEST(HostIssue, LaunchBoundStepTakesKernelsTimesHostCost) {
  // With a host cost far above every kernel's time, the GPU finishes each kernel before the next
  // is issued: step = (kernels + optimizer launches) x host cost + the last kernel's time.
  StepInputs in = tiny_inputs(Framework::pytorch_eager, 1);
  in.compute.eager_host_per_kernel = Time::ms(1);
  auto r = simulate_step(one_gpu(), in);
  ASSERT_TRUE(r) << r.error().message;
  const double launches = static_cast<double>(step_kernels(in)) + 1.0;  // one fused AdamW launch
  EXPECT_GT(r->step_time_s, launches * 1e-3);
  EXPECT_LT(r->step_time_s, launches * 1e-3 + 1e-4);
}

TEST(HostIssue, LargeBatchesHideTheHost) {
  // GPU-bound: when kernels outlast the host cost, the host runs ahead and costs only the first
  // kernel's issue: the step grows by less than the host cost of a few kernels.
  StepInputs in = tiny_inputs(Framework::pytorch_eager, 256);
  in.compute.eager_host_per_kernel = Time::zero();
  auto free_host = simulate_step(one_gpu(), in);
  in.compute.eager_host_per_kernel = Time::us(2);
  auto paid = simulate_step(one_gpu(), in);
  ASSERT_TRUE(free_host && paid);
  EXPECT_GT(paid->step_time_s, free_host->step_time_s);
  EXPECT_LT(paid->step_time_s - free_host->step_time_s, 0.02 * free_host->step_time_s);
}

// The kernels of one step (without the optimizer), as the step engine builds them.
std::vector<Kernel> step_program(const StepInputs& in) {
  const Framework fw = in.training.framework;
  ProgramShape sh = shape(in.training.micro_batch, in.training.seq_len, 0);
  std::vector<LayerProgram> layers;
  if (const auto* m = std::get_if<TransformerSpec>(&in.model)) {
    sh.dropout = m->bias ? 0.1 : 0.0;  // the step's default (GPT/BERT-style models)
    layers.push_back(framework_embedding(*m, sh, fw));
    for (std::int64_t l = 0; l < m->layers; ++l) layers.push_back(framework_block(*m, sh, fw));
    layers.push_back(framework_head(*m, sh, fw));
  } else {
    layers = framework_cnn(std::get<CnnSpec>(in.model), sh, fw);
  }
  std::vector<Kernel> out;
  for (const LayerProgram& p : layers) {
    for (const Pass* pass : {&p.forward, &p.backward}) {
      for (const Segment& seg : pass->segments) out.insert(out.end(), seg.kernels.begin(), seg.kernels.end());
    }
  }
  return out;
}

TEST(HostIssue, StepsRespectTheirClosedFormBounds) {
  // For held-out shapes (BERT-large's encoder, a Qwen2-style decoder with q/k/v biases, VGG-16 and
  // AlexNet without batch norm): a step is never shorter than its GPU roofline (each kernel's
  // FLOPs at the peak or its bytes at the memory bandwidth, summed) nor than the host's issue of
  // every kernel (kernels x host cost); doubling the batch never shortens it; torch.compile is
  // never slower than eager.
  TransformerSpec bert = tiny_bert();
  bert.hidden = 1024;
  bert.heads = 16;
  bert.kv_heads = 16;
  bert.head_dim = 64;
  bert.ffn = 4096;
  bert.layers = 4;
  bert.max_seq = 512;
  TransformerSpec qwen = tiny_llama();
  qwen.hidden = 896;
  qwen.heads = 14;
  qwen.kv_heads = 2;
  qwen.head_dim = 64;
  qwen.ffn = 4864;
  qwen.vocab = 151936;
  qwen.layers = 4;
  qwen.qkv_bias = true;
  qwen.tied_embeddings = true;
  const std::vector<std::pair<ModelSpec, std::int64_t>> cases = {{bert, 512}, {qwen, 512}, {make_vgg16(), 0}, {make_alexnet(), 0}};
  const hw::Topology topo = one_gpu();
  const hw::GpuSpec g = hw::testing::gpu();
  double peak = 0;  // the highest dense peak of any type: a lower bound for every product
  for (const auto& [type, rate] : g.peak) peak = std::max(peak, rate.flops_per_s());
  for (const auto& [model, seq] : cases) {
    const std::string name = model_name(model);
    const bool cnn = std::holds_alternative<CnnSpec>(model);
    double previous_eager = 0;
    for (const std::int64_t b : {1, 2, 4, 8}) {
      double eager = 0;
      for (const Framework fw : {Framework::pytorch_eager, Framework::torch_compile}) {
        StepInputs in;
        in.model = model;
        in.training.global_batch = b;
        in.training.micro_batch = b;
        in.training.seq_len = seq;
        in.training.framework = fw;
        if (cnn) in.training.optimizer = Optimizer::sgd_momentum;
        auto r = simulate_step(topo, in);
        ASSERT_TRUE(r) << name << ": " << r.error().message;
        double roofline = 0;
        const std::vector<Kernel> ks = step_program(in);
        for (const Kernel& k : ks) {
          roofline += std::max(k.flops / peak, k.bytes / g.memory_bandwidth.bytes_per_s());
        }
        const double host = static_cast<double>(ks.size()) * host_per_kernel(in.compute, fw).seconds();
        EXPECT_GE(r->step_time_s, roofline) << name << " b" << b;
        EXPECT_GE(r->step_time_s, host) << name << " b" << b;
        if (fw == Framework::pytorch_eager) {
          eager = r->step_time_s;
          EXPECT_GE(eager, previous_eager) << name << " b" << b;
          previous_eager = eager;
        } else {
          EXPECT_LE(r->step_time_s, eager) << name << " b" << b;
        }
      }
    }
  }
}

TEST(HostIssue, MegatronIgnoresEveryFrameworkConstant) {
  StepInputs in = tiny_inputs(Framework::megatron, 4);
  auto before = simulate_step(one_gpu(), in);
  in.compute.eager_host_per_kernel = Time::ms(5);
  in.compute.compile_host_per_kernel = Time::ms(5);
  in.compute.gemm_unaligned_efficiency = 0.01;
  in.compute.sdpa_fwd_efficiency = 0.01;
  in.compute.sdpa_bwd_efficiency = 0.01;
  auto after = simulate_step(one_gpu(), in);
  ASSERT_TRUE(before && after);
  EXPECT_EQ(before->step_time_s, after->step_time_s);
}

TEST(HostIssue, FrameworksNeedDataParallelLayouts) {
  ProgramShape sh = shape(1, 128, 0);
  sh.tp = 2;
  const Status st = validate_framework(Framework::pytorch_eager, sh);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().field, "training.framework");
  EXPECT_TRUE(validate_framework(Framework::megatron, sh));
}

}  // namespace
}  // namespace dtsim::workloads

namespace dtsim::workloads {
namespace {

TEST(HostIssue, FrameworksRefuseFp8AndFp64) {
  // The eager and compiled programs run autocast (bf16, fp16) or fp32 kernels; fp8 needs
  // Transformer Engine, which neither framework setting models.
  for (hw::DType t : {hw::DType::fp8, hw::DType::fp64}) {
    ProgramShape sh = shape(1, 128, 0);
    sh.precision = t;
    const Status st = validate_framework(Framework::pytorch_eager, sh);
    ASSERT_FALSE(st) << hw::to_string(t);
    EXPECT_EQ(st.error().field, "training.precision");
    EXPECT_TRUE(validate_framework(Framework::megatron, sh));
  }
  ProgramShape fp32 = shape(1, 128, 0);
  fp32.precision = hw::DType::fp32;
  EXPECT_TRUE(validate_framework(Framework::pytorch_eager, fp32));
}

TEST(FrameworkProgram, Fp32EagerDropoutHasNoCastAndFp32Bytes) {
  // Without autocast the residual branch is fp32: dropout reads 4 and writes 4 bytes plus a 1-byte
  // mask per element, the backward has no cast of the gradient, and the residual add reads two fp32
  // tensors and writes one (12 bytes).
  ProgramShape sh = shape(2, 128, 0.1);
  sh.precision = hw::DType::fp32;
  const LayerProgram p = framework_block(tiny_gpt2(), sh, Framework::pytorch_eager);
  EXPECT_EQ(find(p.backward, "cast_grad"), nullptr);
  const Kernel* add = find(p.forward, "residual_add");
  ASSERT_NE(add, nullptr);
  const double el = 2.0 * 128 * 64;
  EXPECT_DOUBLE_EQ(add->bytes, el * 12);
  // With autocast the cast is there (GPT-2 trace: the bf16 branch's gradient cast from fp32).
  const LayerProgram amp = framework_block(tiny_gpt2(), shape(2, 128, 0.1), Framework::pytorch_eager);
  EXPECT_NE(find(amp.backward, "cast_grad"), nullptr);
}

TEST(FrameworkProgram, MatrixProductsRunInTheRunsMathType) {
  // AMP with fp16 autocasts to fp16 (V100 has no bf16); tf32 keeps fp32 storage and runs
  // convolutions and GEMMs on TF32 tensor cores; fp32 is plain fp32.
  const std::pair<hw::DType, hw::DType> cases[] = {{hw::DType::bf16, hw::DType::bf16},
                                                   {hw::DType::fp16, hw::DType::fp16},
                                                   {hw::DType::tf32, hw::DType::tf32},
                                                   {hw::DType::fp32, hw::DType::fp32}};
  for (const auto& [precision, math] : cases) {
    ProgramShape sh = shape(2, 0, 0);
    sh.precision = precision;
    const auto cnn = framework_cnn(tiny_vgg(), sh, Framework::pytorch_eager);
    const Kernel* conv = find(cnn[0].forward, "conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->dtype, math) << hw::to_string(precision);
    ProgramShape tsh = shape(2, 128, 0);
    tsh.precision = precision;
    const LayerProgram block = framework_block(tiny_gpt2(), tsh, Framework::pytorch_eager);
    for (const Kernel& k : block.forward.segments.front().kernels) {
      if (k.cls == KernelClass::gemm) {
        EXPECT_EQ(k.dtype, math) << k.name << " " << hw::to_string(precision);
      }
    }
  }
}

}  // namespace
}  // namespace dtsim::workloads
