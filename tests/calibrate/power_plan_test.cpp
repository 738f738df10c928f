// The power suite's patterns (calibrate/harness/power_plan.hpp), GPU-free: copies per burst and
// repetitions worked by hand for a 1.5 ms GEMM and a 0.2 ms copy.
#include <gtest/gtest.h>

#include "calibrate/harness/power_plan.hpp"

namespace dtsim::harness {
namespace {

TEST(PowerPlan, CopiesFillTheRestOfTheTimeAtTheRatesMeasuredAlone) {
  const std::vector<PowerPattern> p = power_patterns(1.5e-3, 0.2e-3);
  ASSERT_EQ(p.size(), 7u);
  // Share 1: 16 GEMMs, no copies.
  EXPECT_EQ(p[0].gemms, 16);
  EXPECT_EQ(p[0].copies, 0);
  // Copies = b x 1.5 x (1 - s) / (s x 0.2): share 3/4: 2.5 -> 3 and 40; 1/2: 7.5 -> 8 and 120;
  // 1/4: 22.5 -> 23 and 360.
  const int expect[6][2] = {{1, 3}, {16, 40}, {1, 8}, {16, 120}, {1, 23}, {16, 360}};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(p[static_cast<std::size_t>(i + 1)].gemms, expect[i][0]) << i;
    EXPECT_EQ(p[static_cast<std::size_t>(i + 1)].copies, expect[i][1]) << i;
  }
  EXPECT_DOUBLE_EQ(p[3].share, 0.5);
  EXPECT_EQ(p[2].name(), "gemms=16/copies=40");
  // A copy longer than the GEMM still leaves one copy per burst.
  EXPECT_EQ(power_patterns(1e-3, 1.0)[1].copies, 1);
}

TEST(PowerPlan, RepetitionsFillTheTimedSeconds) {
  // 16 x 1.5 ms = 24 ms per repetition: 2 s is 83.3, so 84; 1 + 8 copies: 3.1 ms, 646 (645.2 up).
  EXPECT_EQ(power_repetitions({16, 0, 1.0}, 1.5e-3, 0.2e-3, 2.0), 84);
  EXPECT_EQ(power_repetitions({1, 8, 0.5}, 1.5e-3, 0.2e-3, 2.0), 646);
  EXPECT_EQ(power_repetitions({1, 0, 1.0}, 1.5e-3, 0.2e-3, 0.0), 1);
}

TEST(PowerPlan, NothingToPlanWithoutBothTimes) {
  EXPECT_TRUE(power_patterns(0, 0.2e-3).empty());
  EXPECT_TRUE(power_patterns(1.5e-3, -1).empty());
}

}  // namespace
}  // namespace dtsim::harness
