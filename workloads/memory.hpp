// Memory per GPU: parameters, gradients and optimizer states (per ZeRO stage), activations (per
// layer, as Korthikanti et al. 2022 count them, times the micro-batches the pipeline schedule
// keeps in flight), and a stated allowance for the framework.
#pragma once

#include <string>
#include <vector>

#include "sim/units.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace dtsim::workloads {

struct MemoryParams {
  Bytes reserved = Bytes::GiB(2);   // CUDA context, library workspaces, NCCL buffers
  double fragmentation = 0.05;      // allocator slack on top of the tensors
  // Eager frameworks (memory_eager.hpp): device memory outside PyTorch's allocator, and the cuBLAS
  // workspace PyTorch allocates through its caching allocator.
  Bytes cuda_context = Bytes::MiB(512);
  Bytes cublas_workspace = Bytes::MiB(32);
};

struct ActivationShape {
  std::int64_t micro_batch = 1;
  std::int64_t seq = 0;       // full sequence (context parallelism divides it)
  int tp = 1, cp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  Attention attention = Attention::flash;
  int act_bytes = 2;          // bytes per stored activation element
  // Bytes per element of a GEMM input kept for the weight gradient: 1 under precision fp8
  // (Transformer Engine keeps the FP8 copy it cast; docs/model.md, "Memory per GPU"); 0: act_bytes.
  int gemm_input_bytes = 0;
  bool dropout = true;        // dropout masks are stored (GPT/BERT-style models; not Llama-style)
  bool dropout_present = true;  // dropout runs at all (its output over the attention scores is kept)
};

// Bytes one transformer layer keeps for its backward pass, per micro-batch, on one rank.
// With act_bytes = 2, dropout, MLP = 4h, no GQA and standard attention this is Korthikanti et al.
// 2022's s b h (34 + 5 a s / h) (no parallelism), s b h (10 + 24/t + 5 a s / (h t)) (tensor
// parallel), s b h / t (34 + 5 a s / h) (with sequence parallel); selective recomputation and
// flash attention drop the 5 a s / h term; full recomputation keeps only the layer input.
double layer_activation_bytes(const TransformerSpec& m, const ActivationShape& s);

struct MemoryBreakdown {
  int stage = 0;
  double params = 0, grads = 0, optimizer = 0, activations = 0, reserved = 0, fragmentation = 0;
  double total = 0;
  // Eager frameworks only (eager = true): params include cast_weights, activations include loss,
  // reserved includes workspace; allocated is the allocator's peak of live tensors
  // (torch.cuda.max_memory_allocated) and total the device memory a monitor shows.
  bool eager = false;
  double cast_weights = 0, loss = 0, workspace = 0, allocated = 0;
  std::string peak_phase;
  double capacity = 0;
  bool fits = true;
};

struct StageMemoryInput {
  int stage = 0;
  double dense_params = 0;       // parameters this rank holds
  double expert_params = 0;      // MoE expert parameters this rank holds
  int dp = 1;                    // data-parallel size (ZeRO shards over it)
  int expert_dp = 1;             // data-parallel size of the experts
  double activations = 0;        // bytes of activations at the peak of the schedule
  double gathered_params = 0;    // ZeRO-3: parameters gathered at once (prefetch window)
};

MemoryBreakdown stage_memory(const StageMemoryInput& in, const TrainingSpec& t, int zero, const MemoryParams& mp, Bytes capacity);

}  // namespace dtsim::workloads
