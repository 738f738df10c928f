// The power suite's patterns (calibrate/harness/power_plan.hpp), GPU-free: copies per burst and
// repetitions worked by hand for a 1.5 ms GEMM and a 0.3 ms copy (no count on a rounding tie).
#include <gtest/gtest.h>

#include "calibrate/harness/power_plan.hpp"

namespace dtsim::harness {
namespace {

TEST(PowerPlan, CopiesFillTheRestOfTheTimeAtTheRatesMeasuredAlone) {
  const std::vector<PowerPattern> p = power_patterns(1.5e-3, 0.3e-3);
  ASSERT_EQ(p.size(), 7u);
  // Share 1: 16 GEMMs, no copies.
  EXPECT_EQ(p[0].gemms, 16);
  EXPECT_EQ(p[0].copies, 0);
  // Copies = b x 1.5 x (1 - s) / (s x 0.3): share 3/4: 1.67 -> 2 and 26.7 -> 27; 1/2: 5 and 80;
  // 1/4: 15 and 240.
  const int expect[6][2] = {{1, 2}, {16, 27}, {1, 5}, {16, 80}, {1, 15}, {16, 240}};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[static_cast<std::size_t>(i + 1)].gemms, expect[i][0]) << i;
    EXPECT_EQ(p[static_cast<std::size_t>(i + 1)].copies, expect[i][1]) << i;
  }
  EXPECT_DOUBLE_EQ(p[3].share, 0.5);
  // Named by what was planned, so a resumed run finds its points whatever the copies came to.
  EXPECT_EQ(p[2].name(), "share=0.75/burst=16");
  EXPECT_EQ(power_patterns(1.6e-3, 0.2e-3)[2].name(), "share=0.75/burst=16");
  // A copy longer than the GEMM still leaves one copy per burst; an absurdly short one is capped.
  EXPECT_EQ(power_patterns(1e-3, 1.0)[1].copies, 1);
  EXPECT_EQ(power_patterns(1.0, 1e-12)[6].copies, 10000);
}

TEST(PowerPlan, RepetitionsFillTheTimedSeconds) {
  // 16 x 1.5 ms = 24 ms per repetition: 2 s is 83.3, so 84; 1 GEMM + 5 copies: 3 ms, 667 (666.7 up).
  EXPECT_EQ(power_repetitions({16, 0, 1.0}, 1.5e-3, 0.3e-3, 2.0), 84);
  EXPECT_EQ(power_repetitions({1, 5, 0.5}, 1.5e-3, 0.3e-3, 2.0), 667);
  EXPECT_EQ(power_repetitions({1, 0, 1.0}, 1.5e-3, 0.3e-3, 0.0), 1);
  EXPECT_EQ(power_repetitions({1, 0, 1.0}, 1e-12, 1e-12, 2.0), 100000);
}

TEST(PowerPlan, NothingToPlanWithoutBothTimes) {
  EXPECT_TRUE(power_patterns(0, 0.2e-3).empty());
  EXPECT_TRUE(power_patterns(1.5e-3, -1).empty());
}

}  // namespace
}  // namespace dtsim::harness
