// Max-min fairness on textbook cases, solved by hand.
#include "sim/sharing.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace dtsim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Builds a problem from (link, count) lists per flow.
SharingProblem make(std::vector<double> caps, std::vector<std::vector<std::pair<std::uint32_t, double>>> flows,
                    std::vector<double> flow_caps = {}) {
  SharingProblem p;
  p.clear();
  p.capacity = std::move(caps);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    for (auto [l, c] : flows[f]) {
      p.use_link.push_back(l);
      p.use_count.push_back(c);
    }
    p.flow_begin.push_back(static_cast<std::uint32_t>(p.use_link.size()));
    p.flow_cap.push_back(flow_caps.empty() ? kInf : flow_caps[f]);
  }
  return p;
}

TEST(MaxMin, TwoFlowsOnOneLinkGetHalfEach) {
  auto p = make({10}, {{{0, 1}}, {{0, 1}}});
  MaxMinSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 5);
  EXPECT_DOUBLE_EQ(p.rate[1], 5);
}

TEST(MaxMin, ABottleneckElsewhereFreesCapacityForTheOtherFlow) {
  // Flow 0 crosses link 0 (10) and link 1 (4); flow 1 only link 0. Flow 0 is held to 4 by link 1,
  // so flow 1 gets the remaining 6 of link 0, not the naive half.
  auto p = make({10, 4}, {{{0, 1}, {1, 1}}, {{0, 1}}});
  MaxMinSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 4);
  EXPECT_DOUBLE_EQ(p.rate[1], 6);
}

TEST(MaxMin, ParkingLot) {
  // Links 0 and 1 of capacity 1; the long flow crosses both, one short flow on each.
  auto p = make({1, 1}, {{{0, 1}, {1, 1}}, {{0, 1}}, {{1, 1}}});
  MaxMinSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 0.5);
  EXPECT_DOUBLE_EQ(p.rate[1], 0.5);
  EXPECT_DOUBLE_EQ(p.rate[2], 0.5);
}

TEST(MaxMin, BertsekasGallagerExample) {
  // Data Networks (Bertsekas & Gallager, 1992), sec. 6.5.2 style: links A (cap 1), B (cap 1),
  // C (cap 1). Flows: f0 on A,B,C; f1 on A; f2 on B; f3 on C, f4 on C.
  // Link C saturates first: three flows -> 1/3 each for f0, f3, f4. Then A: f1 gets 2/3;
  // B: f2 gets 2/3.
  auto p = make({1, 1, 1}, {{{0, 1}, {1, 1}, {2, 1}}, {{0, 1}}, {{1, 1}}, {{2, 1}}, {{2, 1}}});
  MaxMinSharing().solve(p);
  EXPECT_NEAR(p.rate[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(p.rate[1], 2.0 / 3, 1e-12);
  EXPECT_NEAR(p.rate[2], 2.0 / 3, 1e-12);
  EXPECT_NEAR(p.rate[3], 1.0 / 3, 1e-12);
  EXPECT_NEAR(p.rate[4], 1.0 / 3, 1e-12);
}

TEST(MaxMin, CoupledFlowCountsEachUseOfALink) {
  // A coupled flow crosses link 0 twice (two ring edges share it); a plain flow crosses it once.
  // Per-connection fairness: each use gets 12/3 = 4, so the coupled flow's rate is 4 (8 on the link).
  auto p = make({12}, {{{0, 2}}, {{0, 1}}});
  MaxMinSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 4);
  EXPECT_DOUBLE_EQ(p.rate[1], 4);
}

TEST(MaxMin, RateCapsFreeCapacityForOthers) {
  auto p = make({10}, {{{0, 1}}, {{0, 1}}}, {2, kInf});
  MaxMinSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 2);
  EXPECT_DOUBLE_EQ(p.rate[1], 8);
}

TEST(MaxMin, TotalOnEveryLinkStaysWithinCapacity) {
  // Many overlapping flows on a chain of links with different capacities.
  std::vector<double> caps = {7, 3, 11, 5, 13};
  std::vector<std::vector<std::pair<std::uint32_t, double>>> flows;
  for (std::uint32_t a = 0; a < 5; ++a)
    for (std::uint32_t b = a; b < 5; ++b) {
      std::vector<std::pair<std::uint32_t, double>> f;
      for (std::uint32_t l = a; l <= b; ++l) f.push_back({l, 1});
      flows.push_back(f);
    }
  auto p = make(caps, flows);
  MaxMinSharing().solve(p);
  std::vector<double> load(5, 0);
  for (std::size_t f = 0; f < flows.size(); ++f)
    for (auto [l, c] : flows[f]) load[l] += p.rate[f] * c;
  for (std::size_t l = 0; l < 5; ++l) EXPECT_LE(load[l], caps[l] * (1 + 1e-12));
  // Max-min property: every flow crosses a saturated link on which it has the largest rate.
  for (std::size_t f = 0; f < flows.size(); ++f) {
    bool bottlenecked = false;
    for (auto [l, c] : flows[f]) {
      if (load[l] < caps[l] * (1 - 1e-9)) continue;
      bool largest = true;
      for (std::size_t g = 0; g < flows.size(); ++g)
        for (auto [l2, c2] : flows[g])
          if (l2 == l && p.rate[g] > p.rate[f] * (1 + 1e-9)) largest = false;
      bottlenecked = bottlenecked || largest;
    }
    EXPECT_TRUE(bottlenecked) << "flow " << f;
  }
}

TEST(ConstantRate, IgnoresOtherFlows) {
  auto p = make({10, 4}, {{{0, 1}}, {{0, 1}, {1, 2}}});
  ConstantRateSharing().solve(p);
  EXPECT_DOUBLE_EQ(p.rate[0], 10);
  EXPECT_DOUBLE_EQ(p.rate[1], 2);  // link 1 used twice: 4 / 2
}

TEST(SharingModels, AreFoundByName) {
  EXPECT_NE(make_sharing_model("max-min"), nullptr);
  EXPECT_NE(make_sharing_model("constant"), nullptr);
  EXPECT_EQ(make_sharing_model("fair-ish"), nullptr);
}

}  // namespace
}  // namespace dtsim
