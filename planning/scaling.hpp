// Scaling efficiency, two ways:
//  - hardware efficiency: throughput per GPU relative to the smallest run of the same series
//    (every other axis equal): 1.0 is perfect linear scaling;
//  - statistical efficiency, when a critical batch size is given: McCandlish, Kaplan, Amodei et al.
//    2018, "An Empirical Model of Large-Batch Training" (section 2.2): reaching a given loss takes
//    S(B) = S_min (1 + B_noise / B) steps and E(B) = E_min (1 + B / B_noise) examples at batch B,
//    with E_min = S_min B_noise; time to the target is S(B) x step time(B).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/plan_loader.hpp"
#include "sim/expected.hpp"

namespace dtsim::planning {

// The large-batch model with B_noise in samples (sequences or images).
struct NoiseScaleModel {
  double b_noise = 0;   // samples
  double s_min = 0;     // steps
  double e_min() const { return s_min * b_noise; }
  double steps(double batch) const { return s_min * (1.0 + b_noise / batch); }
  double examples(double batch) const { return e_min() * (1.0 + batch / b_noise); }
  // E_min / E(B): the fraction of the examples that a tiny batch would need.
  double statistical_efficiency(double batch) const { return 1.0 / (1.0 + batch / b_noise); }
  // S_min / S(B): the fraction of the steps that an infinite batch would need.
  double step_efficiency(double batch) const { return 1.0 / (1.0 + b_noise / batch); }
};

// Converts a configured model (tokens or samples) for sequences of `seq` tokens (0: no tokens).
Expected<NoiseScaleModel> resolve_noise_scale(const config::NoiseScale& n, std::int64_t seq);

// What the model is and assumes, for reports (one sentence per item).
std::vector<std::string> noise_scale_assumptions(const config::NoiseScale& n);

// Per-GPU throughput of each run relative to the reference run (same units): 1.0 is linear.
inline double hardware_efficiency(double throughput, int gpus, double ref_throughput, int ref_gpus) {
  if (ref_throughput <= 0 || gpus <= 0 || ref_gpus <= 0) return 0;
  return (throughput / gpus) / (ref_throughput / ref_gpus);
}

}  // namespace dtsim::planning
