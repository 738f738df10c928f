#include "planning/scaling.hpp"

#include <fmt/format.h>

namespace dtsim::planning {

Expected<NoiseScaleModel> resolve_noise_scale(const config::NoiseScale& n, std::int64_t seq) {
  NoiseScaleModel m;
  const double s = static_cast<double>(seq);
  if (n.b_noise > 0) {
    m.b_noise = n.b_noise;
  } else if (n.b_noise_tokens > 0) {
    if (seq <= 0) return Error("b_noise_tokens needs a model with a sequence length (give b_noise in samples)", "statistical_efficiency.b_noise_tokens");
    m.b_noise = n.b_noise_tokens / s;
  } else {
    return Error("give b_noise or b_noise_tokens", "statistical_efficiency");
  }
  if (n.s_min > 0) {
    m.s_min = n.s_min;
  } else if (n.e_min > 0) {
    m.s_min = n.e_min / m.b_noise;
  } else if (n.e_min_tokens > 0) {
    if (seq <= 0) return Error("e_min_tokens needs a model with a sequence length (give e_min in samples)", "statistical_efficiency.e_min_tokens");
    m.s_min = n.e_min_tokens / s / m.b_noise;
  } else {
    return Error("give s_min, e_min or e_min_tokens", "statistical_efficiency");
  }
  return m;
}

std::vector<std::string> noise_scale_assumptions(const config::NoiseScale& n) {
  std::vector<std::string> out;
  out.push_back(
      "Large-batch model of McCandlish, Kaplan, Amodei et al. 2018 (\"An Empirical Model of Large-Batch Training\", section 2.2): "
      "to reach a fixed loss, a batch of B samples needs S = S_min (1 + B_noise / B) optimizer steps and E = E_min (1 + B / B_noise) "
      "examples, with E_min = S_min x B_noise; time to the target = S x the simulated step time.");
  out.push_back("B_noise (the gradient noise scale) stands for the critical batch size and is taken as one constant; in practice it grows as "
                "the loss falls, so use a value for the phase of training that matters.");
  out.push_back("The learning rate is assumed tuned for every batch size (the model's premise); the relation was fitted on SGD and Adam "
                "training of image, language and game models.");
  std::string given = "Given: ";
  given += n.b_noise > 0 ? fmt::format("B_noise = {:.4g} samples", n.b_noise) : fmt::format("B_noise = {:.4g} tokens", n.b_noise_tokens);
  if (n.s_min > 0) given += fmt::format(", S_min = {:.4g} steps", n.s_min);
  else if (n.e_min > 0) given += fmt::format(", E_min = {:.4g} samples", n.e_min);
  else given += fmt::format(", E_min = {:.4g} tokens", n.e_min_tokens);
  if (!n.source.empty()) given += " (" + n.source + ")";
  out.push_back(given + ".");
  return out;
}

}  // namespace dtsim::planning
