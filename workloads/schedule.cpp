#include "workloads/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

namespace dtsim::workloads {

std::string_view to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved_1f1b: return "interleaved-1f1b";
  }
  DTSIM_ASSERT(false, "unknown PipelineSchedule");
  return {};
}

std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view s) {
  for (PipelineSchedule k :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_1f1b}) {
    if (s == to_string(k)) return k;
  }
  return std::nullopt;
}

std::string_view to_string(PipelineSplit s) {
  switch (s) {
    case PipelineSplit::even: return "even";
    case PipelineSplit::embedding_loss: return "embedding-loss";
  }
  DTSIM_ASSERT(false, "unknown PipelineSplit");
  return {};
}

std::optional<PipelineSplit> parse_pipeline_split(std::string_view s) {
  for (PipelineSplit k : {PipelineSplit::even, PipelineSplit::embedding_loss}) {
    if (s == to_string(k)) return k;
  }
  return std::nullopt;
}

Expected<std::vector<int>> virtual_stage_blocks(std::int64_t layers, int vstages, PipelineSplit split) {
  DTSIM_ASSERT(vstages >= 1, "at least one virtual stage");
  const std::int64_t extra_slots = split == PipelineSplit::embedding_loss ? 2 : 0;
  const std::int64_t slots = layers + extra_slots;
  if (slots < vstages || layers < 1) {
    return Error(fmt::format("{} layers cannot fill {} virtual pipeline stages{}", layers, vstages,
                             extra_slots > 0 ? " (with the embedding and the loss as one layer each)" : ""),
                 "parallel.pp");
  }
  std::vector<int> out(static_cast<std::size_t>(vstages));
  const std::int64_t base = slots / vstages, extra = slots % vstages;
  for (int g = 0; g < vstages; ++g) out[static_cast<std::size_t>(g)] = static_cast<int>(base + (g < extra ? 1 : 0));
  if (extra_slots > 0) {
    // The embedding takes a slot of the first virtual stage, the output layer and loss one of the last.
    out.front() -= 1;
    out.back() -= 1;
    if (out.front() < 0 || out.back() < 0) {
      return Error(fmt::format("{} layers over {} virtual pipeline stages leave no slot for the embedding or the loss", layers, vstages),
                   "parallel.pp");
    }
  }
  return out;
}

namespace {

constexpr const char* kPipelineField = "parallel.pipeline";
constexpr const char* kVirtualField = "parallel.virtual_stages";
constexpr const char* kBatchField = "training.global_batch";

PipeOp forward(int microbatch, int chunk) { return {PipeOp::Kind::forward, microbatch, chunk}; }
PipeOp backward(int microbatch, int chunk) { return {PipeOp::Kind::backward, microbatch, chunk}; }

// Checks the arguments of stage_schedule; returns the error, if any.
std::optional<Error> check_arguments(PipelineSchedule s, int p, int m, int v, int stage) {
  if (p < 1) return Error(fmt::format("the pipeline needs at least 1 stage, got {}", p), kPipelineField);
  if (m < 1) {
    return Error(fmt::format("not enough micro-batches: got {}, the pipeline needs at least 1", m), kBatchField);
  }
  if (v < 1) return Error(fmt::format("each stage needs at least 1 model chunk, got {}", v), kVirtualField);
  if (stage < 0 || stage >= p) {
    return Error(fmt::format("pipeline stage {} is outside 0..{}", stage, p - 1), kPipelineField);
  }
  // Ops are counted in int: m * v forwards and as many backwards per stage, p * v virtual stages.
  constexpr long long kMaxOps = std::numeric_limits<int>::max() / 2;
  if (static_cast<long long>(m) * v > kMaxOps) {
    return Error(fmt::format("{} micro-batches x {} chunks is too many pipeline ops", m, v), kBatchField);
  }
  if (static_cast<long long>(p) * v > kMaxOps) {
    return Error(fmt::format("{} stages x {} chunks is too many virtual stages", p, v), kVirtualField);
  }
  switch (s) {
    case PipelineSchedule::gpipe:
    case PipelineSchedule::one_f_one_b:
      if (v != 1) {
        return Error(fmt::format("the {} schedule has one model chunk per stage, got {}; use interleaved-1f1b",
                                 to_string(s), v),
                     kVirtualField);
      }
      break;
    case PipelineSchedule::interleaved_1f1b:
      if (v < 2) {
        return Error(fmt::format("interleaved-1f1b needs at least 2 model chunks per stage, got {}", v),
                     kVirtualField);
      }
      if (m % p != 0) {
        return Error(fmt::format("interleaved-1f1b (as Megatron-LM) needs the number of micro-batches to be a "
                                 "multiple of the pipeline size: {} micro-batches, {} stages",
                                 m, p),
                     kBatchField);
      }
      break;
  }
  return std::nullopt;
}

std::vector<PipeOp> gpipe_ops(int m) {
  std::vector<PipeOp> ops;
  ops.reserve(2 * static_cast<std::size_t>(m));
  for (int mb = 0; mb < m; ++mb) ops.push_back(forward(mb, 0));
  for (int mb = m - 1; mb >= 0; --mb) ops.push_back(backward(mb, 0));
  return ops;
}

// PipeDream-Flush: warm-up forwards, then one forward and one backward, then cool-down backwards.
std::vector<PipeOp> one_f_one_b_ops(int p, int m, int stage) {
  const int warmup = std::min(p - stage - 1, m);
  std::vector<PipeOp> ops;
  ops.reserve(2 * static_cast<std::size_t>(m));
  for (int k = 0; k < warmup; ++k) ops.push_back(forward(k, 0));
  for (int i = 0; i < m - warmup; ++i) {
    ops.push_back(forward(warmup + i, 0));
    ops.push_back(backward(i, 0));
  }
  for (int k = m - warmup; k < m; ++k) ops.push_back(backward(k, 0));
  return ops;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving. The k-th forward (and backward)
// of a stage walks groups of p micro-batches through the chunks: chunks 0..v-1 for forwards,
// v-1..0 for backwards.
std::vector<PipeOp> interleaved_ops(int p, int m, int v, int stage) {
  const int total = m * v;
  const int group = p * v;
  const auto microbatch = [&](int k) { return (k / group) * p + k % p; };
  const auto forward_k = [&](int k) { return forward(microbatch(k), (k % group) / p); };
  const auto backward_k = [&](int k) { return backward(microbatch(k), v - 1 - (k % group) / p); };
  // Megatron-Core's warm-up count, clamped to all ops. Older Megatron-LM special-cased m == p
  // to run every forward first; the clamped formula already does that on the early stages and
  // gives a valid (deadlock-free, same-makespan) order on the others.
  const int warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  std::vector<PipeOp> ops;
  ops.reserve(2 * static_cast<std::size_t>(total));
  for (int k = 0; k < warmup; ++k) ops.push_back(forward_k(k));
  for (int i = 0; i < total - warmup; ++i) {
    ops.push_back(forward_k(warmup + i));
    ops.push_back(backward_k(i));
  }
  for (int k = total - warmup; k < total; ++k) ops.push_back(backward_k(k));
  return ops;
}

}  // namespace

Expected<std::vector<PipeOp>> stage_schedule(PipelineSchedule s, int p, int m, int v, int stage) {
  if (auto error = check_arguments(s, p, m, v, stage)) return std::move(*error);
  switch (s) {
    case PipelineSchedule::gpipe: return gpipe_ops(m);
    case PipelineSchedule::one_f_one_b: return one_f_one_b_ops(p, m, stage);
    case PipelineSchedule::interleaved_1f1b: return interleaved_ops(p, m, v, stage);
  }
  DTSIM_ASSERT(false, "unknown PipelineSchedule");
  return Error("unknown pipeline schedule");
}

int max_in_flight(const std::vector<PipeOp>& ops) {
  int held = 0;
  int most = 0;
  for (const PipeOp& op : ops) {
    held += op.kind == PipeOp::Kind::forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

namespace {

// End times of the ops already placed, by (micro-batch, virtual stage); negative: not yet run.
class EndTimes {
 public:
  EndTimes(int microbatches, int virtual_stages)
      : virtual_stages_(virtual_stages),
        forward_(static_cast<std::size_t>(microbatches) * static_cast<std::size_t>(virtual_stages), -1.0),
        backward_(forward_.size(), -1.0) {}
  double& at(PipeOp::Kind kind, int microbatch, int g) {
    auto& times = kind == PipeOp::Kind::forward ? forward_ : backward_;
    return times[static_cast<std::size_t>(microbatch) * static_cast<std::size_t>(virtual_stages_) +
                 static_cast<std::size_t>(g)];
  }

 private:
  int virtual_stages_;
  std::vector<double> forward_;
  std::vector<double> backward_;
};

}  // namespace

IdealPipelineTiming ideal_pipeline_timing(PipelineSchedule s, int p, int m, int v, double tf, double tb) {
  DTSIM_ASSERT(tf >= 0 && tb >= 0, "op durations must be non-negative");
  DTSIM_ASSERT(p >= 1, "the pipeline needs at least 1 stage");
  std::vector<std::vector<PipeOp>> ops;
  ops.reserve(static_cast<std::size_t>(std::max(p, 0)));
  for (int stage = 0; stage < p; ++stage) {
    auto stage_ops = stage_schedule(s, p, m, v, stage);
    if (!stage_ops) assert_fail("stage_ops", __FILE__, __LINE__, stage_ops.error().to_string().c_str());
    ops.push_back(std::move(*stage_ops));
  }
  const int last = p * v - 1;
  EndTimes end(m, p * v);
  std::vector<std::size_t> next(ops.size(), 0);  // per stage: index of its next op
  std::vector<double> free_at(ops.size(), 0.0);  // per stage: when its last placed op ends
  IdealPipelineTiming timing;
  timing.busy.assign(ops.size(), 0.0);

  // Each op starts when its stage's previous op and its dependency have ended; that fixes every
  // start time, so placing ops in rounds over the stages gives a deterministic result. A round
  // that places nothing while ops remain means the orders wait on each other: a deadlock.
  std::size_t remaining = 0;
  for (const auto& stage_ops : ops) remaining += stage_ops.size();
  while (remaining > 0) {
    std::size_t placed = 0;
    for (int stage = 0; stage < p; ++stage) {
      const auto si = static_cast<std::size_t>(stage);
      for (; next[si] < ops[si].size(); ++next[si]) {
        const PipeOp& op = ops[si][next[si]];
        const int g = virtual_stage(p, stage, op.chunk);
        double ready = 0.0;
        if (op.kind == PipeOp::Kind::forward) {
          if (g > 0) ready = end.at(PipeOp::Kind::forward, op.microbatch, g - 1);
        } else {
          ready = g < last ? end.at(PipeOp::Kind::backward, op.microbatch, g + 1)
                           : end.at(PipeOp::Kind::forward, op.microbatch, g);
        }
        if (ready < 0) break;  // its dependency has not run yet
        const double duration = op.kind == PipeOp::Kind::forward ? tf : tb;
        const double finish = std::max(free_at[si], ready) + duration;
        DTSIM_ASSERT(end.at(op.kind, op.microbatch, g) < 0, "a pipeline op is scheduled twice");
        end.at(op.kind, op.microbatch, g) = finish;
        free_at[si] = finish;
        timing.busy[si] += duration;
        ++placed;
      }
    }
    DTSIM_ASSERT(placed > 0, "pipeline schedule deadlock: every stage waits on an op that cannot run");
    remaining -= placed;
  }
  for (double t : free_at) timing.makespan = std::max(timing.makespan, t);
  return timing;
}

}  // namespace dtsim::workloads
