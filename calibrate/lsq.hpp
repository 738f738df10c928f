// Least-squares helpers of `dtsim fit` (Eigen): the alpha-beta line with relative-error weights,
// piecewise alpha-beta regimes, and Levenberg-Marquardt for models that are not linear in their
// parameters. Everything here minimizes relative errors, (model - measured) / measured, so that a
// 10 us point and a 10 ms point count alike (the sizes of a collective sweep span six decades).
#pragma once

#include <functional>
#include <vector>

#include <Eigen/Dense>

namespace dtsim::calibrate {

struct XY {
  double x = 0;  // size (bytes)
  double y = 0;  // time (s), > 0
};

// t = alpha + beta x, alpha >= 0, beta >= 0.
struct AlphaBeta {
  double alpha = 0;
  double beta = 0;
  double operator()(double x) const { return alpha + beta * x; }
};

// Minimizes sum(((alpha + beta x_i) - y_i) / y_i)^2 subject to alpha, beta >= 0.
AlphaBeta fit_alpha_beta(const std::vector<XY>& pts);
// Sum of squared relative errors of a line over points [first, last).
double relative_sse(const std::vector<XY>& pts, const AlphaBeta& ab, std::size_t first, std::size_t last);

// Piecewise alpha-beta: consecutive size ranges, each with its own line (NCCL's protocols).
struct Regime {
  double from = 0, to = 0;  // sizes covered (inclusive), of the fitted points
  AlphaBeta line;
  std::size_t first = 0, last = 0;  // index range [first, last) into the sorted points
};

// Splits points sorted by x into 1..max_regimes regimes (boundaries only between distinct sizes,
// at least `min_points` points each), choosing the count by the Bayesian information criterion
// on the relative errors (3 parameters per regime: alpha, beta and its boundary).
std::vector<Regime> fit_regimes(const std::vector<XY>& sorted, int max_regimes, int min_points = 3);
// The line of the regime that covers x (the nearest one outside all ranges).
const Regime& regime_for(const std::vector<Regime>& rs, double x);

struct LmResult {
  Eigen::VectorXd x;
  double cost = 0;  // 0.5 * |r|^2 at x
  int iterations = 0;
  bool converged = false;
};

// Levenberg-Marquardt with a forward-difference Jacobian. `residuals(x, r)` fills r (size m).
LmResult levenberg_marquardt(const std::function<void(const Eigen::VectorXd&, Eigen::VectorXd&)>& residuals,
                             Eigen::VectorXd x0, int m, int max_iterations = 200);

// Median and largest of |v| (0 for an empty vector).
double median_abs(std::vector<double> v);
double max_abs(const std::vector<double>& v);

}  // namespace dtsim::calibrate
