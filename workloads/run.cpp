#include "workloads/run.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dtsim::workloads {

Expected<double> steps_for(const RunBudget& b, std::int64_t global_batch, std::int64_t seq) {
  const int set = (b.tokens > 0 ? 1 : 0) + (b.samples > 0 ? 1 : 0) + (b.epochs > 0 ? 1 : 0);
  if (set != 1) return Error("give exactly one of tokens, samples or epochs", "training");
  if (global_batch < 1) return Error("must be at least 1", "training.global_batch");
  const double batch = static_cast<double>(global_batch);
  if (b.tokens > 0) {
    if (seq <= 0) return Error("a token budget needs a model with a sequence length (use samples or epochs)", "training.tokens");
    return std::ceil(b.tokens / (batch * static_cast<double>(seq)));
  }
  if (b.samples > 0) return std::ceil(b.samples / batch);
  if (b.dataset_samples <= 0) return Error("epochs need a dataset with its number of samples", "training.data");
  // Each epoch is a whole number of steps (the last partial batch is kept, as PyTorch's
  // DataLoader does with drop_last=False).
  return b.epochs * std::ceil(b.dataset_samples / batch);
}

Expected<RunEstimate> estimate_run(const StepResult& step, std::int64_t global_batch, const RunBudget& budget, const PowerModel& power,
                                   const Prices& prices, int nodes) {
  RunEstimate e;
  if (step.step_time_s <= 0) return Error("the step has no time", "step");
  if (power.pue < 1.0) return Error(fmt::format("PUE must be at least 1, got {}", power.pue), "energy.pue");
  if (power.gpu_idle_w < 0 || power.gpu_max_w < power.gpu_idle_w) {
    return Error(fmt::format("GPU power must satisfy 0 <= idle ({} W) <= max ({} W)", power.gpu_idle_w, power.gpu_max_w), "energy.gpu");
  }
  if (power.comm_active < 0 || power.comm_active > 1) return Error("must be within [0, 1]", "energy.comm_active");
  if (prices.gpu_hour < 0 || prices.kwh < 0) return Error("prices cannot be negative", "prices");
  // Utilization and power per stage (every stage holds the same number of GPUs), then their mean.
  // A GPU computes for its compute and optimizer time, runs only communication kernels while it
  // waits for exposed communication, and idles in pipeline bubbles, host time, input waits and at
  // the end of the step.
  const double t = step.step_time_s;
  const double span = power.gpu_max_w - power.gpu_idle_w;
  double util_sum = 0, power_sum = 0;
  for (const StageReport& s : step.stages) {
    const auto at = [&](TimeKind k) { return s.time_s[static_cast<std::size_t>(k)]; };
    const double busy = std::min(1.0, (at(TimeKind::compute) + at(TimeKind::optimizer)) / t);
    const double comm = std::min(1.0 - busy, (at(TimeKind::tp) + at(TimeKind::cp) + at(TimeKind::ep) + at(TimeKind::pp) + at(TimeKind::dp)) / t);
    const double watts = power.gpu_idle_w + span * (busy + power.comm_active * comm);
    e.stage_utilization.push_back(busy);
    e.stage_power_w.push_back(watts);
    util_sum += busy;
    power_sum += watts;
  }
  const double n_stages = std::max<double>(1.0, static_cast<double>(step.stages.size()));
  e.utilization = util_sum / n_stages;
  e.gpu_power_w = step.stages.empty() ? power.gpu_idle_w : power_sum / n_stages;
  const double it_power_w = e.gpu_power_w * step.gpus + power.node_overhead_w * nodes;
  e.step_energy_kwh = it_power_w * power.pue * t / 3.6e6;
  if (budget.any()) {
    auto steps = steps_for(budget, global_batch, step.seq);
    if (!steps) return steps.error();
    e.steps = *steps;
    if (!step.fits) {
      e.achievable = false;
      return e;
    }
    const double epochs = budget.epochs > 0 ? budget.epochs
                          : budget.dataset_samples > 0 ? e.steps * static_cast<double>(global_batch) / budget.dataset_samples
                                                       : 0.0;
    const double overhead_s = budget.per_epoch_overhead.seconds() * std::ceil(epochs - 1e-9);
    e.time_to_train_s = e.steps * t + overhead_s;
    e.gpu_hours = e.time_to_train_s * step.gpus / 3600.0;
    // During per-epoch overheads the GPUs are counted busy at the step's mean power.
    e.energy_kwh = it_power_w * power.pue * e.time_to_train_s / 3.6e6;
    e.gpu_cost = e.gpu_hours * prices.gpu_hour;
    e.energy_cost = e.energy_kwh * prices.kwh;
    e.cost = e.gpu_cost + e.energy_cost;
  }
  return e;
}

}  // namespace dtsim::workloads
