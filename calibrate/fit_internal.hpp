// Helpers shared by the fit's files (fit.cpp, fit_collectives.cpp, fit_memory.cpp): internal to
// calibrate/, not part of its interface.
#pragma once

#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>
#include <algorithm>

#include <fmt/format.h>

#include "calibrate/fit.hpp"

namespace dtsim::calibrate::detail {

// Indices of `n` items sorted by `less`; every `every`-th (1-based) is held out.
template <class Less>
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split(std::size_t n, int every, Less less) {
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), less);
  std::vector<std::size_t> train, held;
  for (std::size_t i = 0; i < n; ++i) {
    if (every >= 2 && i % static_cast<std::size_t>(every) == static_cast<std::size_t>(every - 1)) held.push_back(idx[i]);
    else train.push_back(idx[i]);
  }
  return {train, held};
}

struct Scored {
  double err = 0;
  std::string where;
  bool held = false;
};

// Residual statistics of one suite under one model: every point, and the held-out ones apart.
SuiteResiduals summarize(const std::string& suite, const std::string& model, const std::vector<Scored>& s);

// GPUs in one node of a node preset (0 when it cannot be loaded).
int preset_gpus(const std::string& node);

inline double round_sig(double x, int digits) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double p = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * p) / p;
}

// Times and fractions as a profile writes them.
inline std::string time_text(double seconds) { return fmt::format("{:.3f} us", seconds * 1e6); }
inline std::string fraction_text(double f) { return fmt::format("{:.4f}", f); }

}  // namespace dtsim::calibrate::detail
