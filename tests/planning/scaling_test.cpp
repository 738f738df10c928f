// Scaling figures against hand-computed values: McCandlish et al. 2018's step/example trade-off,
// hardware efficiency, the Pareto front, and the pipeline closed form against the reference
// timing of schedule.hpp.
#include <gtest/gtest.h>

#include "planning/estimate.hpp"
#include "planning/scaling.hpp"
#include "planning/search.hpp"
#include "workloads/schedule.hpp"

namespace dtsim::planning {
namespace {

TEST(NoiseScale, StepsAndExamplesByHand) {
  // B_noise = 1000 samples, S_min = 10,000 steps: E_min = 1e7 samples.
  const NoiseScaleModel m{1000, 10000};
  EXPECT_DOUBLE_EQ(m.e_min(), 1e7);
  // B = B_noise: twice the minimum steps and twice the minimum examples.
  EXPECT_DOUBLE_EQ(m.steps(1000), 20000);
  EXPECT_DOUBLE_EQ(m.examples(1000), 2e7);
  // B = 250: S = 10,000 x (1 + 4) = 50,000; E = 1e7 x 1.25 = 1.25e7 = S x B.
  EXPECT_DOUBLE_EQ(m.steps(250), 50000);
  EXPECT_DOUBLE_EQ(m.examples(250), 1.25e7);
  EXPECT_DOUBLE_EQ(m.steps(250) * 250, m.examples(250));
  EXPECT_DOUBLE_EQ(m.statistical_efficiency(250), 0.8);
  // B = 4000: S = 12,500, E = 5e7; only 20% of the examples are needed at a tiny batch.
  EXPECT_DOUBLE_EQ(m.steps(4000), 12500);
  EXPECT_DOUBLE_EQ(m.statistical_efficiency(4000), 0.2);
  EXPECT_DOUBLE_EQ(m.step_efficiency(4000), 0.8);
}

TEST(NoiseScale, TokensAreConvertedWithTheSequenceLength) {
  config::NoiseScale n;
  n.b_noise_tokens = 2.0e6;
  n.e_min_tokens = 2.0e10;
  auto m = resolve_noise_scale(n, 2048);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->b_noise, 2.0e6 / 2048);          // 976.5625 sequences
  EXPECT_DOUBLE_EQ(m->s_min, (2.0e10 / 2048) / (2.0e6 / 2048));  // 10,000 steps
  // Time to target = S(B) x step time: at B = 512 sequences and a 1.5 s step.
  const double s = 10000 * (1 + 976.5625 / 512);
  EXPECT_NEAR(m->steps(512) * 1.5, s * 1.5, 1e-6);
  EXPECT_FALSE(resolve_noise_scale(n, 0).ok());  // tokens without a sequence length
}

TEST(Scaling, HardwareEfficiencyIsThroughputPerGpuRelativeToTheReference) {
  EXPECT_DOUBLE_EQ(hardware_efficiency(200, 16, 100, 8), 1.0);
  EXPECT_DOUBLE_EQ(hardware_efficiency(300, 32, 100, 8), 0.75);
  EXPECT_DOUBLE_EQ(hardware_efficiency(100, 8, 0, 8), 0.0);
}

TEST(Pareto, KeepsOnlyTheNonDominatedPointsByTime) {
  const std::vector<std::pair<double, double>> pts = {{3, 4}, {1, 5}, {2, 3}, {4, 1}, {2, 3}, {5, 1}};
  const auto f = pareto_front(pts);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0], 1u);  // (1, 5)
  EXPECT_EQ(f[1], 2u);  // (2, 3): the first of the two equal points
  EXPECT_EQ(f[2], 3u);  // (4, 1); (5, 1) is no cheaper
}

TEST(Pipeline, ClosedFormEqualsTheReferenceTimingForUniformStages) {
  using workloads::PipelineSchedule;
  for (auto [sched, p, m, v] : std::vector<std::tuple<PipelineSchedule, int, int, int>>{
           {PipelineSchedule::one_f_one_b, 4, 8, 1}, {PipelineSchedule::gpipe, 4, 8, 1}, {PipelineSchedule::one_f_one_b, 8, 32, 1},
           {PipelineSchedule::interleaved_1f1b, 4, 8, 2}, {PipelineSchedule::interleaved_1f1b, 4, 16, 4}}) {
    const double tf = 1.0, tb = 2.0;  // per chunk
    const auto ref = workloads::ideal_pipeline_timing(sched, p, m, v, tf, tb);
    const std::vector<double> stage(static_cast<std::size_t>(p), v * (tf + tb));
    EXPECT_NEAR(pipeline_makespan(stage, m, v), ref.makespan, 1e-9) << workloads::to_string(sched) << " p " << p << " m " << m << " v " << v;
  }
}

}  // namespace
}  // namespace dtsim::planning
