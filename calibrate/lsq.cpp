#include "calibrate/lsq.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dtsim::calibrate {

AlphaBeta fit_alpha_beta(const std::vector<XY>& pts) {
  AlphaBeta ab;
  if (pts.empty()) return ab;
  // Rows [1/y, x/y] . [alpha, beta] = 1: each row's residual is the point's relative error. Sizes
  // are scaled to [0, 1] to keep the columns comparable (they span up to ten decades).
  double xmax = 0;
  for (const XY& p : pts) xmax = std::max(xmax, std::fabs(p.x));
  const double scale = xmax > 0 ? xmax : 1.0;
  Eigen::MatrixXd a(static_cast<Eigen::Index>(pts.size()), 2);
  const Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(pts.size()));
  double s11 = 0, sxx = 0, sx = 0, s1 = 0;
  bool distinct = false;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const double w = 1.0 / pts[i].y;
    const double x = pts[i].x / scale;
    a(static_cast<Eigen::Index>(i), 0) = w;
    a(static_cast<Eigen::Index>(i), 1) = x * w;
    s11 += w * w;
    sxx += x * x * w * w;
    sx += x * w;
    s1 += w;
    distinct = distinct || pts[i].x != pts.front().x;
  }
  if (distinct) {
    const Eigen::Vector2d v = a.colPivHouseholderQr().solve(b);
    ab.alpha = v(0);
    ab.beta = v(1);
  } else {
    ab.alpha = s1 / s11;  // one size: a constant
    ab.beta = 0;
  }
  if (ab.alpha < 0 || !std::isfinite(ab.alpha)) {  // on the boundary alpha = 0
    ab.alpha = 0;
    ab.beta = sxx > 0 ? sx / sxx : 0;
  }
  if (ab.beta < 0 || !std::isfinite(ab.beta)) {  // on the boundary beta = 0
    ab.beta = 0;
    ab.alpha = s1 / s11;
  }
  ab.beta /= scale;
  return ab;
}

double relative_sse(const std::vector<XY>& pts, const AlphaBeta& ab, std::size_t first, std::size_t last) {
  double s = 0;
  for (std::size_t i = first; i < last; ++i) {
    const double e = (ab(pts[i].x) - pts[i].y) / pts[i].y;
    s += e * e;
  }
  return s;
}

namespace {

// Best alpha for a fixed beta, and best beta for a fixed alpha (relative-error weights).
double alpha_given_beta(const std::vector<XY>& p, std::size_t a, std::size_t b, double beta) {
  double num = 0, den = 0;
  for (std::size_t i = a; i < b; ++i) {
    num += (p[i].y - beta * p[i].x) / (p[i].y * p[i].y);
    den += 1.0 / (p[i].y * p[i].y);
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

double beta_given_alpha(const std::vector<XY>& p, std::size_t a, std::size_t b, double alpha) {
  double num = 0, den = 0;
  for (std::size_t i = a; i < b; ++i) {
    num += p[i].x * (p[i].y - alpha) / (p[i].y * p[i].y);
    den += p[i].x * p[i].x / (p[i].y * p[i].y);
  }
  return den > 0 ? std::max(0.0, num / den) : 0.0;
}

}  // namespace

std::vector<Regime> fit_regimes(const std::vector<XY>& sorted, int max_regimes, int min_points) {
  const std::size_t n = sorted.size();
  std::vector<Regime> best;
  if (n == 0) return best;
  // Boundaries: indices where the size changes.
  std::vector<std::size_t> cuts;
  for (std::size_t i = 1; i < n; ++i) {
    if (sorted[i].x != sorted[i - 1].x) cuts.push_back(i);
  }
  auto ok = [&](std::size_t a, std::size_t b) { return b > a && b - a >= static_cast<std::size_t>(std::max(1, min_points)); };
  double best_bic = std::numeric_limits<double>::infinity();
  const double dn = static_cast<double>(n);
  const double floor = 1e-24 * dn;
  // Lines of consecutive ranges, constrained so that the regime of smaller sizes has the lower
  // fixed cost and the lower bandwidth: then the fastest line at each size is that size's own, as
  // when NCCL's tuner picks the fastest protocol (LL, then LL128, then Simple).
  auto consider = [&](const std::vector<std::size_t>& bounds) {
    const std::size_t k = bounds.size() - 1;
    std::vector<Regime> rs(k);
    for (std::size_t r = 0; r < k; ++r) {
      const std::vector<XY> part(sorted.begin() + static_cast<std::ptrdiff_t>(bounds[r]), sorted.begin() + static_cast<std::ptrdiff_t>(bounds[r + 1]));
      rs[r].line = fit_alpha_beta(part);
      rs[r].first = bounds[r];
      rs[r].last = bounds[r + 1];
      rs[r].from = sorted[bounds[r]].x;
      rs[r].to = sorted[bounds[r + 1] - 1].x;
    }
    for (int pass = 0; pass < 4 && k > 1; ++pass) {
      for (std::size_t r = k - 1; r-- > 0;) {
        if (rs[r].line.beta < rs[r + 1].line.beta) {
          rs[r].line.beta = rs[r + 1].line.beta;
          rs[r].line.alpha = alpha_given_beta(sorted, rs[r].first, rs[r].last, rs[r].line.beta);
        }
      }
      for (std::size_t r = 1; r < k; ++r) {
        if (rs[r].line.alpha < rs[r - 1].line.alpha) {
          rs[r].line.alpha = rs[r - 1].line.alpha;
          rs[r].line.beta = beta_given_alpha(sorted, rs[r].first, rs[r].last, rs[r].line.alpha);
        }
      }
    }
    double sse = 0;
    for (const Regime& r : rs) sse += relative_sse(sorted, r.line, r.first, r.last);
    const double bic = dn * std::log(std::max(sse, floor) / dn) + (3.0 * static_cast<double>(k) - 1.0) * std::log(dn);
    // Fewer regimes win ties (they are tried first).
    if (bic < best_bic - 1e-9) {
      best_bic = bic;
      best = std::move(rs);
    }
  };
  consider({0, n});
  if (max_regimes >= 2) {
    for (std::size_t c : cuts) {
      if (ok(0, c) && ok(c, n)) consider({0, c, n});
    }
  }
  if (max_regimes >= 3) {
    for (std::size_t i = 0; i < cuts.size(); ++i) {
      if (!ok(0, cuts[i])) continue;
      for (std::size_t j = i + 1; j < cuts.size(); ++j) {
        if (ok(cuts[i], cuts[j]) && ok(cuts[j], n)) consider({0, cuts[i], cuts[j], n});
      }
    }
  }
  return best;
}

const Regime& regime_for(const std::vector<Regime>& rs, double x) {
  for (const Regime& r : rs) {
    if (x <= r.to) return r;
  }
  return rs.back();
}

LmResult levenberg_marquardt(const std::function<void(const Eigen::VectorXd&, Eigen::VectorXd&)>& residuals,
                             Eigen::VectorXd x0, int m, int max_iterations) {
  const Eigen::Index n = x0.size();
  LmResult res;
  res.x = std::move(x0);
  Eigen::VectorXd r(m), rt(m);
  residuals(res.x, r);
  double cost = 0.5 * r.squaredNorm();
  double lambda = 1e-3;
  Eigen::MatrixXd jac(m, n);
  for (int it = 0; it < max_iterations; ++it) {
    res.iterations = it + 1;
    for (Eigen::Index j = 0; j < n; ++j) {
      Eigen::VectorXd xp = res.x;
      const double h = 1e-7 * std::max(1.0, std::fabs(xp(j)));
      xp(j) += h;
      residuals(xp, rt);
      jac.col(j) = (rt - r) / h;
    }
    const Eigen::MatrixXd jtj = jac.transpose() * jac;
    const Eigen::VectorXd g = jac.transpose() * r;
    if (g.lpNorm<Eigen::Infinity>() < 1e-14) {
      res.converged = true;
      break;
    }
    bool improved = false;
    for (int tries = 0; tries < 30 && !improved; ++tries) {
      Eigen::MatrixXd a = jtj;
      for (Eigen::Index j = 0; j < n; ++j) a(j, j) += lambda * std::max(jtj(j, j), 1e-12);
      const Eigen::VectorXd step = a.ldlt().solve(-g);
      const Eigen::VectorXd xn = res.x + step;
      residuals(xn, rt);
      const double cn = 0.5 * rt.squaredNorm();
      if (std::isfinite(cn) && cn < cost) {
        const double rel = (cost - cn) / std::max(cost, 1e-300);
        res.x = xn;
        r = rt;
        cost = cn;
        lambda = std::max(lambda / 10, 1e-12);
        improved = true;
        if (rel < 1e-12 || step.norm() < 1e-12 * (1 + res.x.norm())) res.converged = true;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) {
      res.converged = true;  // no step lowers the cost: a minimum (to the Jacobian's accuracy)
      break;
    }
    if (res.converged) break;
  }
  res.cost = cost;
  return res;
}

double median_abs(std::vector<double> v) {
  if (v.empty()) return 0;
  for (double& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

}  // namespace dtsim::calibrate
