// Pipeline-parallel schedules: the order in which each pipeline stage runs the forward and
// backward passes of its micro-batches. Pure functions; the step simulation executes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/expected.hpp"

namespace dtsim::workloads {

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved_1f1b };
std::string_view to_string(PipelineSchedule s);  // "gpipe", "1f1b", "interleaved-1f1b"
std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s);

struct PipeOp {
  enum class Kind : unsigned char { forward, backward };
  Kind kind = Kind::forward;
  int microbatch = 0;  // 0..m-1
  int chunk = 0;       // model chunk on this device, 0..v-1 (always 0 without interleaving)
  bool operator==(const PipeOp&) const = default;
};

// Megatron's interleaving: chunk c of stage s holds virtual stage c * p + s of the p * v.
inline int virtual_stage(int p, int stage, int chunk) { return chunk * p + stage; }

// How transformer blocks are spread over the p * v virtual stages (`parallel.pipeline_split`):
//  even            as evenly as possible, the first virtual stages taking the remainder (Megatron-LM's
//                  default split)
//  embedding_loss  the embedding and the output layer with its loss each take one block's place: the
//                  split is made over layers + 2 slots, and the first and last virtual stages give one
//                  slot each to them (Llama 3 405B: "we reduce one Transformer layer each from the first
//                  and the last stages", Dubey et al. 2024, section 3.3.2; Megatron-LM's
//                  --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split)
enum class PipelineSplit { even, embedding_loss };
std::string_view to_string(PipelineSplit s);  // "even", "embedding-loss"
std::optional<PipelineSplit> parse_pipeline_split(std::string_view s);

// Transformer blocks of each virtual stage 0..vstages-1 (they sum to `layers`). Error (field
// "parallel.pp") when a virtual stage would get fewer than none, or every one none.
Expected<std::vector<int>> virtual_stage_blocks(std::int64_t layers, int vstages, PipelineSplit split);

// The op order of pipeline stage `stage` (0..p-1) for `m` micro-batches and `v` model chunks per
// stage. GPipe and 1F1B need v == 1; interleaved 1F1B needs v >= 2 and m % p == 0 (as
// Megatron-LM). Errors name the field ("parallel.virtual_stages", "training.global_batch", ...).
Expected<std::vector<PipeOp>> stage_schedule(PipelineSchedule s, int p, int m, int v, int stage);

// The most micro-batch activations a stage holds at once (forwards done whose backward is not),
// counting each (micro-batch, chunk) pair, following the op order.
int max_in_flight(const std::vector<PipeOp>& ops);

// Reference timing with fixed durations per op (forward `tf`, backward `tb`, both for one chunk)
// and free communication: each stage runs its ops in order; F(mb) of virtual stage g waits for
// F(mb) of g-1; B(mb) of g waits for B(mb) of g+1 (the last virtual stage's B waits for its own F).
struct IdealPipelineTiming {
  double makespan = 0;            // until the last op of any stage ends
  std::vector<double> busy;       // per stage: time spent in ops
};
IdealPipelineTiming ideal_pipeline_timing(PipelineSchedule s, int p, int m, int v, double tf, double tb);

}  // namespace dtsim::workloads
