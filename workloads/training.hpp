// Plain descriptions of how a model is trained: batch and sequence sizes, precision,
// recomputation, optimizer, and the parallel layout.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hw/specs.hpp"
#include "sim/units.hpp"
#include "workloads/schedule.hpp"

namespace dtsim::workloads {

enum class Recompute { none, selective, full };
enum class Optimizer { adam, sgd_momentum };
enum class Attention { flash, standard };
// How data-parallel gradients are reduced (issue 7 adds single-process and parameter-server forms).
enum class DpImpl { ddp, horovod, no_overlap };

std::string_view to_string(Recompute r);
std::string_view to_string(Optimizer o);
std::string_view to_string(Attention a);
std::string_view to_string(DpImpl d);
std::optional<Recompute> parse_recompute(std::string_view s);
std::optional<Optimizer> parse_optimizer(std::string_view s);
std::optional<Attention> parse_attention(std::string_view s);
std::optional<DpImpl> parse_dp_impl(std::string_view s);

struct TrainingSpec {
  std::int64_t global_batch = 0;   // samples (sequences or images) per optimizer step
  std::int64_t micro_batch = 1;    // samples per forward/backward pass on one pipeline
  std::int64_t seq_len = 0;        // transformers; 0: the model's max_seq
  hw::DType precision = hw::DType::bf16;   // GEMM and activation type
  hw::DType grad_dtype = hw::DType::fp32;  // gradient reduction type (PyTorch AMP and Megatron default)
  Recompute recompute = Recompute::none;
  Optimizer optimizer = Optimizer::adam;
  Attention attention = Attention::flash;
};

struct ParallelSpec {
  int tp = 1;
  int pp = 1;
  int dp = 0;   // 0: the GPU count divided by tp * pp * cp
  int cp = 1;
  int ep = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  int zero = 0;                    // 0 (plain data parallel), 1, 2 or 3 (3 = FSDP full sharding)
  bool sequence_parallel = false;
  DpImpl dp_impl = DpImpl::ddp;
  Bytes bucket = Bytes(25'000'000);        // DDP gradient bucket (PyTorch default 25 MB)
  Bytes fusion_buffer = Bytes(64 << 20);   // Horovod tensor fusion threshold
  Time fusion_cycle = Time::ms(1);         // Horovod cycle time
  std::string order = "tp-cp-dp-pp";      // rank placement, innermost first (Megatron's default)
};

}  // namespace dtsim::workloads
