// Pipeline schedules: op orders checked against hand-derived sequences, timings against the
// closed forms of Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM", section 2.2).
#include "workloads/schedule.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::workloads {
namespace {

using Kind = PipeOp::Kind;

// Parses "F0 F1 B0" (chunk 0) or "F0c1 B2c0" (micro-batch, then chunk) into ops.
std::vector<PipeOp> parse_ops(const std::string& text) {
  std::vector<PipeOp> ops;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    PipeOp op;
    op.kind = token.at(0) == 'F' ? Kind::forward : Kind::backward;
    const std::size_t c = token.find('c');
    op.microbatch = std::stoi(token.substr(1, c == std::string::npos ? std::string::npos : c - 1));
    op.chunk = c == std::string::npos ? 0 : std::stoi(token.substr(c + 1));
    ops.push_back(op);
  }
  return ops;
}

std::string format_ops(const std::vector<PipeOp>& ops) {
  std::string out;
  for (const PipeOp& op : ops) {
    if (!out.empty()) out += ' ';
    out += op.kind == Kind::forward ? 'F' : 'B';
    out += std::to_string(op.microbatch) + 'c' + std::to_string(op.chunk);
  }
  return out;
}

std::vector<PipeOp> schedule_or_fail(PipelineSchedule s, int p, int m, int v, int stage) {
  auto ops = stage_schedule(s, p, m, v, stage);
  EXPECT_TRUE(ops.ok()) << (ops.ok() ? "" : ops.error().to_string());
  return ops.ok() ? std::move(ops).value() : std::vector<PipeOp>{};
}

void expect_ops(PipelineSchedule s, int p, int m, int v, int stage, const std::string& expected) {
  EXPECT_EQ(format_ops(schedule_or_fail(s, p, m, v, stage)), format_ops(parse_ops(expected)))
      << to_string(s) << " p=" << p << " m=" << m << " v=" << v << " stage=" << stage;
}

TEST(ScheduleNames, RoundTripAndUnknown) {
  for (PipelineSchedule s :
       {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b, PipelineSchedule::interleaved_1f1b}) {
    EXPECT_EQ(parse_pipeline_schedule(to_string(s)), s);
  }
  EXPECT_EQ(to_string(PipelineSchedule::gpipe), "gpipe");
  EXPECT_EQ(to_string(PipelineSchedule::one_f_one_b), "1f1b");
  EXPECT_EQ(to_string(PipelineSchedule::interleaved_1f1b), "interleaved-1f1b");
  EXPECT_FALSE(parse_pipeline_schedule("pipedream").has_value());
  EXPECT_FALSE(parse_pipeline_schedule("").has_value());
}

TEST(ScheduleOrder, GPipeRunsAllForwardsThenBackwardsInReverse) {
  for (int stage = 0; stage < 3; ++stage) {
    expect_ops(PipelineSchedule::gpipe, 3, 4, 1, stage, "F0 F1 F2 F3 B3 B2 B1 B0");
  }
}

TEST(ScheduleOrder, OneFOneBHandWritten) {
  // Stage 1 of 4: p - s - 1 = 2 warm-up forwards, 4 steady (F, B) pairs, 2 cool-down backwards.
  expect_ops(PipelineSchedule::one_f_one_b, 4, 6, 1, 1, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  // The last stage has no warm-up; the first stage warms up with p - 1 forwards.
  expect_ops(PipelineSchedule::one_f_one_b, 4, 3, 1, 3, "F0 B0 F1 B1 F2 B2");
  expect_ops(PipelineSchedule::one_f_one_b, 4, 5, 1, 0, "F0 F1 F2 F3 B0 F4 B1 B2 B3 B4");
  // Fewer micro-batches than warm-up slots: the warm-up is cut to m, leaving GPipe-like order
  // but with backwards in increasing micro-batch order.
  expect_ops(PipelineSchedule::one_f_one_b, 4, 2, 1, 0, "F0 F1 B0 B1");
}

// Interleaved p = 2, v = 2, m = 4, derived by hand from the formulas (p * v = 4 ops per group):
//   forward k:  chunk = (k % 4) / 2,          micro-batch = (k / 4) * 2 + k % 2
//     k = 0..7 -> F0c0 F1c0 F0c1 F1c1 F2c0 F3c0 F2c1 F3c1
//   backward k: chunk = 1 - (k % 4) / 2, same micro-batch
//     k = 0..7 -> B0c1 B1c1 B0c0 B1c0 B2c1 B3c1 B2c0 B3c0
// Stage 0: warm-up min((2 - 0 - 1) * 2 + (2 - 1) * 2, 8) = 4 forwards (k = 0..3), then pairs
//   (F k=4, B k=0) (F5, B1) (F6, B2) (F7, B3), then cool-down B k = 4..7.
// Stage 1: warm-up min(0 + 2, 8) = 2 forwards, then 6 pairs, then B k = 6, 7.
TEST(ScheduleOrder, InterleavedHandDerived) {
  expect_ops(PipelineSchedule::interleaved_1f1b, 2, 4, 2, 0,
             "F0c0 F1c0 F0c1 F1c1 "
             "F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 "
             "B2c1 B3c1 B2c0 B3c0");
  expect_ops(PipelineSchedule::interleaved_1f1b, 2, 4, 2, 1,
             "F0c0 F1c0 "
             "F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 "
             "B2c0 B3c0");
}

// m == p: older Megatron-LM runs every forward first on every stage. The clamped warm-up
// formula does that on stage 0 (min(2 + 2, 4) = 4) but not on stage 1 (min(0 + 2, 4) = 2); the
// stage-1 order is still consistent (the timing tests below run it to completion).
TEST(ScheduleOrder, InterleavedMicrobatchesEqualStages) {
  expect_ops(PipelineSchedule::interleaved_1f1b, 2, 2, 2, 0, "F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0");
  expect_ops(PipelineSchedule::interleaved_1f1b, 2, 2, 2, 1, "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 B0c0 B1c0");
}

struct Case {
  PipelineSchedule schedule;
  int p;
  int m;
  int v;
};

std::vector<Case> valid_cases() {
  std::vector<Case> cases;
  for (int p : {1, 2, 3, 4, 8}) {
    for (int m : {1, 2, 3, 4, 7, 8, 16}) {
      cases.push_back({PipelineSchedule::gpipe, p, m, 1});
      cases.push_back({PipelineSchedule::one_f_one_b, p, m, 1});
    }
    for (int v : {2, 3, 4}) {
      for (int groups : {1, 2, 3, 5}) cases.push_back({PipelineSchedule::interleaved_1f1b, p, groups * p, v});
    }
  }
  return cases;
}

std::string describe(const Case& c) {
  return std::string(to_string(c.schedule)) + " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m) +
         " v=" + std::to_string(c.v);
}

TEST(ScheduleProperties, EveryOpOnceAndBackwardAfterForward) {
  for (const Case& c : valid_cases()) {
    for (int stage = 0; stage < c.p; ++stage) {
      SCOPED_TRACE(describe(c) + " stage=" + std::to_string(stage));
      const std::vector<PipeOp> ops = schedule_or_fail(c.schedule, c.p, c.m, c.v, stage);
      ASSERT_EQ(ops.size(), 2 * static_cast<std::size_t>(c.m) * static_cast<std::size_t>(c.v));
      std::map<std::pair<int, int>, std::size_t> forward_at;
      std::map<std::pair<int, int>, std::size_t> backward_at;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const PipeOp& op = ops[i];
        ASSERT_GE(op.microbatch, 0);
        ASSERT_LT(op.microbatch, c.m);
        ASSERT_GE(op.chunk, 0);
        ASSERT_LT(op.chunk, c.v);
        auto& seen = op.kind == Kind::forward ? forward_at : backward_at;
        EXPECT_TRUE(seen.emplace(std::pair{op.microbatch, op.chunk}, i).second)
            << "duplicate " << format_ops({op});
      }
      EXPECT_EQ(forward_at.size(), static_cast<std::size_t>(c.m * c.v));
      EXPECT_EQ(backward_at.size(), static_cast<std::size_t>(c.m * c.v));
      for (const auto& [key, b] : backward_at) {
        const auto f = forward_at.find(key);
        ASSERT_NE(f, forward_at.end());
        EXPECT_LT(f->second, b) << "backward before forward: micro-batch " << key.first << " chunk " << key.second;
      }
    }
  }
}

TEST(ScheduleInFlight, GPipeHoldsEveryMicrobatch) {
  for (int p : {1, 2, 4}) {
    for (int m : {1, 3, 8}) {
      for (int stage = 0; stage < p; ++stage) {
        EXPECT_EQ(max_in_flight(schedule_or_fail(PipelineSchedule::gpipe, p, m, 1, stage)), m);
      }
    }
  }
}

TEST(ScheduleInFlight, OneFOneBHoldsAtMostStagesAhead) {
  for (int p : {1, 2, 4, 8}) {
    for (int m : {1, 2, 3, 4, 8, 16}) {
      for (int stage = 0; stage < p; ++stage) {
        EXPECT_EQ(max_in_flight(schedule_or_fail(PipelineSchedule::one_f_one_b, p, m, 1, stage)),
                  std::min(p - stage, m))
            << "p=" << p << " m=" << m << " stage=" << stage;
      }
    }
  }
}

TEST(ScheduleInFlight, InterleavedHandDerived) {
  // p = 2, v = 2, m = 4 (orders in InterleavedHandDerived above). Stage 0: 4 warm-up forwards
  // hold 4; each steady pair runs its forward before its backward, so the count reaches 5 and
  // drops back to 4; the cool-down only releases. Peak 5 (micro-batch, chunk) activations,
  // versus 2 for plain 1F1B holding twice-as-large chunks.
  EXPECT_EQ(max_in_flight(schedule_or_fail(PipelineSchedule::interleaved_1f1b, 2, 4, 2, 0)), 5);
  // Stage 1: 2 warm-up forwards, then pairs: peak 3.
  EXPECT_EQ(max_in_flight(schedule_or_fail(PipelineSchedule::interleaved_1f1b, 2, 4, 2, 1)), 3);
  // m == p: stage 0 runs all 4 forwards first.
  EXPECT_EQ(max_in_flight(schedule_or_fail(PipelineSchedule::interleaved_1f1b, 2, 2, 2, 0)), 4);
}

TEST(ScheduleInFlight, CountsForwardsMinusBackwards) {
  EXPECT_EQ(max_in_flight({}), 0);
  EXPECT_EQ(max_in_flight(parse_ops("F0 B0 F1 B1")), 1);
  EXPECT_EQ(max_in_flight(parse_ops("F0 F1 B0 F2 F3 B1 B2 B3")), 3);
  EXPECT_EQ(max_in_flight(parse_ops("F0c0 F0c1 B0c1 B0c0")), 2);
}

// Narayanan et al. 2021, section 2.2.1: GPipe and PipeDream-Flush (1F1B) both take
// (m + p - 1) * (tf + tb); bubble fraction (p - 1) / m.
TEST(PipelineTiming, GPipeAndOneFOneBMatchClosedForm) {
  const std::vector<std::pair<double, double>> durations = {{1.0, 2.0}, {3.0, 0.5}, {1.0, 1.0}, {0.25, 4.0}};
  for (PipelineSchedule s : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (int m : {1, 2, 3, 4, 6, 8, 13, 32}) {  // m < p, m == p and m > p
        for (const auto& [tf, tb] : durations) {
          SCOPED_TRACE(std::string(to_string(s)) + " p=" + std::to_string(p) + " m=" + std::to_string(m) +
                       " tf=" + std::to_string(tf) + " tb=" + std::to_string(tb));
          const IdealPipelineTiming t = ideal_pipeline_timing(s, p, m, 1, tf, tb);
          const double work = m * (tf + tb);
          EXPECT_DOUBLE_EQ(t.makespan, (m + p - 1) * (tf + tb));
          EXPECT_NEAR((t.makespan - work) / work, static_cast<double>(p - 1) / m, 1e-12);
          ASSERT_EQ(t.busy.size(), static_cast<std::size_t>(p));
          for (double busy : t.busy) EXPECT_DOUBLE_EQ(busy, work);
        }
      }
    }
  }
}

// Narayanan et al. 2021, section 2.2.2: with v chunks per device, each taking tf / v and tb / v,
// the bubble shrinks by v: bubble fraction (p - 1) / (v * m).
TEST(PipelineTiming, InterleavedMatchesClosedForm) {
  const std::vector<std::pair<double, double>> durations = {{1.0, 2.0}, {3.0, 0.5}, {1.0, 1.0}, {0.25, 4.0}};
  for (int p : {1, 2, 3, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int groups : {1, 2, 3, 4}) {  // groups == 1 is m == p
        const int m = groups * p;
        for (const auto& [tf, tb] : durations) {
          SCOPED_TRACE("p=" + std::to_string(p) + " v=" + std::to_string(v) + " m=" + std::to_string(m) +
                       " tf=" + std::to_string(tf) + " tb=" + std::to_string(tb));
          const IdealPipelineTiming t =
              ideal_pipeline_timing(PipelineSchedule::interleaved_1f1b, p, m, v, tf / v, tb / v);
          const double work = m * (tf + tb);
          const double tol = 1e-9 * work;
          EXPECT_NEAR(t.makespan, (m + static_cast<double>(p - 1) / v) * (tf + tb), tol);
          EXPECT_NEAR((t.makespan - work) / work, static_cast<double>(p - 1) / (v * m), 1e-9);
          ASSERT_EQ(t.busy.size(), static_cast<std::size_t>(p));
          for (double busy : t.busy) EXPECT_NEAR(busy, work, tol);
        }
      }
    }
  }
}

// A small case worked by hand: interleaved p = 2, v = 2, m = 2 (m == p), forward 1, backward 2
// per chunk. Virtual stages g0 (s0 c0), g1 (s1 c0), g2 (s0 c1), g3 (s1 c1).
//   s0: F0g0 [0,1] F1g0 [1,2] F0g2 [2,3] F1g2 [3,4] ... B0g2 waits B0g3.
//   s1: F0g1 [1,2] F1g1 [2,3] F0g3 [3,4] B0g3 [4,6] F1g3 [6,7] B1g3 [7,9] B0g1 waits B0g2.
//   s0: B0g2 [6,8] B1g2 [9,11] B0g0 waits B0g1; s1: B0g1 [9,11] B1g1 [11,13] (B1g1 needs B1g2 at 11).
//   s0: B0g0 [11,13] B1g0 [13,15]. Makespan 15 = (2 + 1/2) * 6.
TEST(PipelineTiming, InterleavedSmallCaseByHand) {
  const IdealPipelineTiming t = ideal_pipeline_timing(PipelineSchedule::interleaved_1f1b, 2, 2, 2, 1.0, 2.0);
  EXPECT_DOUBLE_EQ(t.makespan, 15.0);
  ASSERT_EQ(t.busy.size(), 2u);
  EXPECT_DOUBLE_EQ(t.busy[0], 12.0);
  EXPECT_DOUBLE_EQ(t.busy[1], 12.0);
}

TEST(PipelineTiming, ZeroDurationsAndDeterminism) {
  const IdealPipelineTiming zero = ideal_pipeline_timing(PipelineSchedule::one_f_one_b, 4, 8, 1, 0.0, 0.0);
  EXPECT_EQ(zero.makespan, 0.0);
  const IdealPipelineTiming a = ideal_pipeline_timing(PipelineSchedule::interleaved_1f1b, 4, 8, 3, 0.7, 1.3);
  const IdealPipelineTiming b = ideal_pipeline_timing(PipelineSchedule::interleaved_1f1b, 4, 8, 3, 0.7, 1.3);
  EXPECT_EQ(a.makespan, b.makespan);
  EXPECT_EQ(a.busy, b.busy);
}

void expect_error(PipelineSchedule s, int p, int m, int v, int stage, const std::string& field) {
  const auto result = stage_schedule(s, p, m, v, stage);
  ASSERT_FALSE(result.ok()) << to_string(s) << " p=" << p << " m=" << m << " v=" << v << " stage=" << stage;
  EXPECT_EQ(result.error().field, field) << result.error().to_string();
  EXPECT_FALSE(result.error().message.empty());
}

TEST(ScheduleErrors, InvalidInputsNameTheirField) {
  using enum PipelineSchedule;
  for (PipelineSchedule s : {gpipe, one_f_one_b, interleaved_1f1b}) {
    const int v = s == interleaved_1f1b ? 2 : 1;
    expect_error(s, 0, 4, v, 0, "parallel.pipeline");
    expect_error(s, -1, 4, v, 0, "parallel.pipeline");
    expect_error(s, 2, 0, v, 0, "training.global_batch");
    expect_error(s, 2, -4, v, 0, "training.global_batch");
    expect_error(s, 2, 4, 0, 0, "parallel.virtual_stages");
    expect_error(s, 2, 4, v, 2, "parallel.pipeline");
    expect_error(s, 2, 4, v, -1, "parallel.pipeline");
  }
  expect_error(gpipe, 2, 4, 2, 0, "parallel.virtual_stages");
  expect_error(one_f_one_b, 2, 4, 3, 1, "parallel.virtual_stages");
  expect_error(interleaved_1f1b, 2, 4, 1, 0, "parallel.virtual_stages");
  expect_error(interleaved_1f1b, 4, 6, 2, 0, "training.global_batch");  // 6 % 4 != 0
  expect_error(interleaved_1f1b, 4, 2, 2, 0, "training.global_batch");  // m < p
}

TEST(ScheduleErrors, MultipleMessageMentionsPipelineSize) {
  const auto result = stage_schedule(PipelineSchedule::interleaved_1f1b, 4, 6, 2, 0);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("multiple of the pipeline size"), std::string::npos)
      << result.error().message;
}

}  // namespace
}  // namespace dtsim::workloads
