// The patterns of the power suite (power_suite.cpp), GPU-free so that they are tested without a
// GPU: bursts of a large GEMM alternating with memory-bound copies, sized from the two kernels'
// times measured alone so that the GEMMs fill a chosen share of the time at those rates.
//
// Why: under the 700 W cap an H100's SM clock falls while GEMMs run back to back (a median of 1,350 MHz
// against 1,980 MHz in data/calibration/h100-sxm-2026-11-26/clocks-probe1.csv), and how much of
// that a training step pays depends on how long and how dense its GEMM phases are. Each pattern
// measures the GEMM's time at one share and one burst length (docs/calibration.md, "power").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace dtsim::harness {

struct PowerPattern {
  int gemms = 1;   // GEMMs per burst, back to back
  int copies = 0;  // copies after each burst
  double share = 1;  // the GEMMs' planned share of the time, at the rates measured alone

  // By what was planned, not by the copies (which follow from measured times), so that a resumed
  // run finds the points it has.
  std::string name() const {
    char buf[48];
    std::snprintf(buf, sizeof buf, "share=%.2f/burst=%d", share, gemms);
    return buf;
  }
};

// Bounds for absurd measured times: copies per burst and repetitions per pattern.
inline constexpr double kMaxCopies = 10000;
inline constexpr double kMaxRepetitions = 100000;

// Shares 1, 3/4, 1/2 and 1/4, each with bursts of 1 and 16 GEMMs (one pattern for share 1: the
// burst length does not matter without copies). Copies per burst: round(b t_gemm (1 - s) /
// (s t_copy)), 1 to kMaxCopies below share 1. Empty when either time is not positive.
inline std::vector<PowerPattern> power_patterns(double gemm_s, double copy_s) {
  std::vector<PowerPattern> out;
  if (!(gemm_s > 0) || !(copy_s > 0)) return out;
  out.push_back({16, 0, 1.0});
  for (double share : {0.75, 0.5, 0.25}) {
    for (int burst : {1, 16}) {
      const double copies = std::min(kMaxCopies, burst * gemm_s * (1 - share) / (share * copy_s));
      out.push_back({burst, std::max(1, static_cast<int>(std::lround(copies))), share});
    }
  }
  return out;
}

// Pattern repetitions that fill `seconds` at the rates measured alone (1 to kMaxRepetitions).
inline int power_repetitions(const PowerPattern& p, double gemm_s, double copy_s, double seconds) {
  const double one = p.gemms * gemm_s + p.copies * copy_s;
  if (!(one > 0)) return 1;
  return std::max(1, static_cast<int>(std::min(kMaxRepetitions, std::ceil(seconds / one))));
}

}  // namespace dtsim::harness
