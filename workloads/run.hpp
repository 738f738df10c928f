// A whole training run from one simulated step: how many steps a token, sample or epoch budget
// takes, how long, how much energy (GPU power as a function of utilization, node overhead, the
// data centre's PUE) and how much money (GPU-hours and electricity).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/expected.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

// How much training. Exactly one of tokens, samples or epochs is set (> 0); epochs need the
// dataset's size in samples.
struct RunBudget {
  double tokens = 0;            // transformers: tokens seen (global batch x sequence length per step)
  double samples = 0;           // sequences or images
  double epochs = 0;            // passes over the dataset
  double dataset_samples = 0;   // samples per epoch (ImageNet-1k: 1,281,167)
  Time per_epoch_overhead;      // stated per-epoch extras (evaluation, checkpointing), added once per epoch
  bool any() const { return tokens > 0 || samples > 0 || epochs > 0; }
};

// Power drawn while training (named parameters; defaults from the GPU's preset).
struct PowerModel {
  double gpu_idle_w = 0;         // a GPU with nothing running
  double gpu_max_w = 0;          // a GPU busy with compute (its TDP)
  double comm_active = 0.3;      // fraction of (max - idle) drawn while only communication kernels run
  double node_overhead_w = 0;    // per node, beyond its GPUs: CPUs, memory, NICs, fans
  double pue = 1.0;              // data centre power usage effectiveness
};

struct Prices {
  double gpu_hour = 0;          // price of one GPU-hour (cloud or amortized), in `currency`
  double kwh = 0;               // price of electricity per kWh (charged on facility energy, PUE included)
  std::string currency = "USD";
};

struct RunEstimate {
  double steps = 0;                 // whole steps (rounded up)
  double time_to_train_s = 0;       // steps x step time + epochs x per-epoch overhead
  double gpu_hours = 0;
  double utilization = 0;           // mean fraction of the step a GPU computes (nvidia-smi style "busy")
  double gpu_power_w = 0;           // mean power per GPU over a step
  std::vector<double> stage_utilization;  // per pipeline stage (its GPUs are alike)
  std::vector<double> stage_power_w;
  double step_energy_kwh = 0;       // facility energy of one step (GPUs + node overhead) x PUE
  double energy_kwh = 0;            // of the whole run
  double gpu_cost = 0;
  double energy_cost = 0;
  double cost = 0;                  // gpu_cost + energy_cost
  // False when the step does not fit in GPU memory: the run cannot happen as configured, so it has
  // no time to train, energy or cost (those stay 0); steps are still counted.
  bool achievable = true;
};

// The number of steps a budget takes with `global_batch` samples of `seq` tokens per step
// (seq = 0 for models without tokens: tokens are then an error).
Expected<double> steps_for(const RunBudget& b, std::int64_t global_batch, std::int64_t seq);

// The run's time, energy and cost from a simulated step. `nodes` is the node count of the cluster.
Expected<RunEstimate> estimate_run(const StepResult& step, std::int64_t global_batch, const RunBudget& budget, const PowerModel& power,
                                   const Prices& prices, int nodes);

}  // namespace dtsim::workloads
