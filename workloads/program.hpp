// What one rank computes and communicates for each layer and micro-batch: kernels grouped into
// segments, each segment followed (or accompanied) by a collective. The backward pass mirrors the
// forward: segments in reverse, every kernel replaced by its gradient kernels, every collective by
// its dual (all-gather <-> reduce-scatter, all-to-all <-> all-to-all; an all-reduce of a
// row-parallel layer's output has none, its gradient being the same on every rank), and a
// segment's backward_comm runs where the forward has none.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <vector>

#include "comm/metrics.hpp"
#include "sim/expected.hpp"
#include "workloads/compute.hpp"
#include "workloads/layout.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace dtsim::workloads {

enum class CommGroup : unsigned char { tp, cp, ep };
std::string_view to_string(CommGroup g);

struct CommStep {
  CollOp op = CollOp::allreduce;
  CommGroup group = CommGroup::tp;
  Bytes bytes;  // the collective's size, as nccl-tests counts it
};

struct Segment {
  std::vector<Kernel> kernels;
  std::optional<CommStep> comm;
  bool comm_overlaps = false;  // the collective runs beside the kernels (ring attention)
  // A collective the forward pass does not run here but its gradient does, after the next
  // segment's gradient kernels: Megatron's identity-forward, all-reduce-backward operator in front
  // of a column-parallel layer without sequence parallelism, and the all-gather form of context
  // parallelism's second gather of K and V before attention's gradient kernels.
  std::optional<CommStep> backward_comm = std::nullopt;

  // This segment's collective is a tensor-parallel `op`, beside the kernels or not.
  bool tp_op(CollOp op) const { return comm && comm->group == CommGroup::tp && comm->op == op; }
  // ... and one the segment's kernels wait for (not overlapped).
  bool blocking_tp_op(CollOp op) const { return tp_op(op) && !comm_overlaps; }
};

struct Pass {
  std::vector<Segment> segments;
  double flops() const;
};

struct LayerProgram {
  std::string name;             // "embedding", "block", "head", "conv1", ...
  Pass forward;
  Pass backward;
  Pass recompute;               // run before the backward pass (empty without recomputation)
  std::int64_t params = 0;      // parameters this rank holds for the layer (dense part)
  std::int64_t expert_params = 0;  // MoE experts' parameters (reduced over the expert-DP group)
  bool embedding_tied = false;  // head or embedding of a model with tied embeddings
  // The dense parameter tensors this rank holds, in forward order, summing to `params` (for DDP's
  // gradient buckets); empty: the layer is one tensor.
  std::vector<std::int64_t> tensors;
};

// Shapes that every layer program of one run shares.
struct ProgramShape {
  std::int64_t micro_batch = 1;
  std::int64_t seq = 0;          // full sequence
  int tp = 1, cp = 1, ep = 1;
  CpComm cp_comm = CpComm::p2p;  // how context parallelism moves K and V (training.hpp)
  bool sequence_parallel = false;
  TpOverlap tp_overlap = TpOverlap::backward;  // training.hpp
  hw::DType precision = hw::DType::bf16;
  Recompute recompute = Recompute::none;
  Attention attention = Attention::flash;
  double dropout = 0;              // probability; 0: no dropout kernels
  bool dropout_regenerated = false;  // backward regenerates the mask (random numbers again)
  bool dropout_hash_rng = false;     // random numbers from a 64-bit hash (else Philox)
  bool head_layout_split = false;    // standard attention: dtsim-validate's split/merge kernels (else Megatron's permute)
  bool cross_entropy_unfused = false;  // Megatron-LM's cross-entropy as PyTorch operations on fp32 logits (training.hpp)
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;  // precision fp8: Transformer Engine's scaling (training.hpp)
  // More than one pipeline stage: the head sits on another stage than the embedding, so a tied
  // table has a second copy there (Megatron-Core's LanguageModule keeps one on the last stage).
  bool head_apart = false;
  // Every field takes part, so a cache keyed by shapes (planning's StepEstimator) compares them all.
  auto operator<=>(const ProgramShape&) const = default;
};

// The shapes of one run: its training settings on its layout (the engine and the memory estimate
// build programs from the same shape).
ProgramShape program_shape(const TransformerSpec& m, const TrainingSpec& tr, const ParallelSpec& par, const Layout& lay);

// What one layer of this shape keeps for its backward pass (memory.hpp), activations of act_bytes each.
ActivationShape activation_shape(const ProgramShape& sh, const TrainingSpec& tr, int act_bytes);

// Checks the model against the layout (heads divisible by tp, and so on); errors name fields.
Status validate_transformer(const TransformerSpec& m, const ProgramShape& s);

LayerProgram transformer_embedding(const TransformerSpec& m, const ProgramShape& s);
LayerProgram transformer_block(const TransformerSpec& m, const ProgramShape& s);
LayerProgram transformer_head(const TransformerSpec& m, const ProgramShape& s);

// The optimizer's update of `params` parameters on one rank: one memory-bound pass over the fp32
// state (Adam: master weights, two moments, read and written; SGD: weights and momentum), the
// gradient read and, with 16-bit training, the 16-bit weight copy written.
Kernel optimizer_update(const TrainingSpec& tr, double params);
// Zeroing the gradient buffers before the next accumulation (Megatron-LM's zero_grad_buffer, a
// memset of every gradient; dtsim-validate does the same): `params` gradients of grad_dtype written.
Kernel gradient_zeroing(const TrainingSpec& tr, double params);

// A CNN as one layer program per weighted layer (data parallel only).
std::vector<LayerProgram> cnn_program(const CnnSpec& m, const ProgramShape& s);

// Model FLOPs of one sample (forward + backward, no recomputation), by the convention of
// PaLM (Chowdhery et al. 2022, appendix B) and Megatron-LM (Narayanan et al. 2021): 6 FLOPs per
// parameter used in a matrix multiply (embeddings excluded, the LM head included) per token, plus
// 12 x layers x (heads x head_dim) x seq per token for attention. CNNs: 3 x 2 x MACs.
double model_flops_per_sample(const ModelSpec& m, std::int64_t seq);

}  // namespace dtsim::workloads
