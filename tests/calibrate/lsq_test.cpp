// Least-squares helpers against closed forms: data generated from known lines and models must
// give those lines and parameters back.
#include <gtest/gtest.h>

#include <cmath>

#include "calibrate/lsq.hpp"

namespace dtsim::calibrate {
namespace {

std::vector<XY> line(double alpha, double beta, double from, double to) {
  std::vector<XY> p;
  for (double x = from; x <= to; x *= 2) p.push_back(XY{x, alpha + beta * x});
  return p;
}

TEST(Lsq, AlphaBetaRecoversAnExactLine) {
  // 8 B .. 8 GiB: ten decades of sizes; 5 us latency, 100 GB/s.
  const auto p = line(5e-6, 1e-11, 8, 8.0 * (1 << 30));
  const AlphaBeta ab = fit_alpha_beta(p);
  EXPECT_NEAR(ab.alpha, 5e-6, 5e-6 * 1e-9);
  EXPECT_NEAR(ab.beta, 1e-11, 1e-11 * 1e-9);
  EXPECT_NEAR(relative_sse(p, ab, 0, p.size()), 0.0, 1e-20);
}

TEST(Lsq, AlphaBetaStaysOnTheFeasibleSide) {
  // Times that fall with size would need beta < 0: the fit keeps beta = 0, alpha the weighted mean.
  const std::vector<XY> p{{1, 4e-6}, {2, 3e-6}, {4, 2e-6}};
  const AlphaBeta ab = fit_alpha_beta(p);
  EXPECT_GE(ab.beta, 0.0);
  EXPECT_GE(ab.alpha, 0.0);
  // One size only: a constant.
  const AlphaBeta c = fit_alpha_beta({{64, 2e-6}, {64, 4e-6}});
  EXPECT_EQ(c.beta, 0.0);
  EXPECT_NEAR(c.alpha, (0.5e6 + 0.25e6) / (0.25e12 + 0.0625e12), 1e-18);  // sum(1/y) / sum(1/y^2)
}

TEST(Lsq, RegimesRecoverTwoProtocols) {
  // Small sizes: 2 us + 1/10 GB/s; large: 20 us + 1/200 GB/s (the lines cross near 180 KiB).
  auto p = line(2e-6, 1e-10, 1024, 128 * 1024.0);
  const auto q = line(20e-6, 5e-12, 256 * 1024.0, 1024.0 * (1 << 20));
  p.insert(p.end(), q.begin(), q.end());
  const auto rs = fit_regimes(p, 3);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].to, 128 * 1024.0);
  EXPECT_EQ(rs[1].from, 256 * 1024.0);
  EXPECT_NEAR(rs[0].line.alpha, 2e-6, 1e-15);
  EXPECT_NEAR(rs[0].line.beta, 1e-10, 1e-19);
  EXPECT_NEAR(rs[1].line.alpha, 20e-6, 1e-14);
  EXPECT_NEAR(rs[1].line.beta, 5e-12, 1e-21);
  EXPECT_EQ(&regime_for(rs, 4096), &rs[0]);
  EXPECT_EQ(&regime_for(rs, 1e12), &rs[1]);
  // One exact line is one regime.
  EXPECT_EQ(fit_regimes(line(3e-6, 2e-11, 8, 1e9), 3).size(), 1u);
  EXPECT_EQ(fit_regimes(p, 1).size(), 1u);
}

TEST(Lsq, LevenbergMarquardtRecoversANonlinearModel) {
  // y = a * x / (x + k): a saturating curve like the GEMM depth term.
  const double a = 0.7, k = 300;
  std::vector<double> xs;
  for (double x = 16; x <= 65536; x *= 2) xs.push_back(x);
  auto res = [&](const Eigen::VectorXd& v, Eigen::VectorXd& r) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double y = a * xs[i] / (xs[i] + k);
      r(static_cast<Eigen::Index>(i)) = (std::exp(v(0)) * xs[i] / (xs[i] + std::exp(v(1))) - y) / y;
    }
  };
  Eigen::VectorXd x0(2);
  x0 << std::log(0.9), std::log(128.0);
  const LmResult lm = levenberg_marquardt(res, x0, static_cast<int>(xs.size()));
  EXPECT_TRUE(lm.converged);
  EXPECT_NEAR(std::exp(lm.x(0)), a, 1e-6);
  EXPECT_NEAR(std::exp(lm.x(1)), k, 1e-3);
}

TEST(Lsq, MedianAndWorst) {
  EXPECT_DOUBLE_EQ(median_abs({-3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_abs({-4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(max_abs({-4, 1, 2, 3}), 4.0);
  EXPECT_DOUBLE_EQ(median_abs({}), 0.0);
}

}  // namespace
}  // namespace dtsim::calibrate
