// `dtsim plan`: search parallel layouts on every hardware option, rank them by time to train and
// cost, and explain the choice.
//
// What is simulated and what is estimated:
//  1. Enumerate candidates per hardware option and GPU count (a "target"): global batch x tp x cp
//     x pp x ep x micro-batch x recomputation x ZeRO stage x schedule (x virtual stages).
//  2. Reject, with the reason counted: layouts that do not divide (tp x pp x cp must divide the
//     GPUs; heads, MLP, batch, sequence and stages as the engine checks them), tensor parallelism
//     across nodes when tp_within_node (policy), and layouts whose memory per GPU (the engine's own
//     memory model, computed without simulating) exceeds the GPU.
//  3. Estimate the step time of every survivor in closed form (estimate.hpp) and rank them.
//  4. Simulate the best `simulate_top` of each target with the full step engine; their simulated
//     step times replace the estimates. Every figure reported for a best layout, the Pareto front
//     and the explanations comes from a simulation; estimated-only candidates are marked so.
//  5. Time to train = steps x step time (steps from the token/sample/epoch budget, or from the
//     large-batch model when a critical batch is given); cost = GPU-hours x price + energy.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/plan_loader.hpp"
#include "planning/estimate.hpp"
#include "planning/scaling.hpp"
#include "workloads/run.hpp"
#include "workloads/step.hpp"

namespace dtsim::planning {

// layout: divisibility; policy: search.tp_within_node; memory: does not fit; run: the budget gives
// no time to train or cost for the layout (workloads::estimate_run failed; never ranked).
enum class Rejection { layout, policy, memory, run };
std::string_view to_string(Rejection r);

struct Candidate {
  std::size_t target = 0;                // index into PlanSpec::targets
  workloads::TrainingSpec training;      // global and micro batch, recomputation
  workloads::ParallelSpec parallel;      // tp, pp, dp, cp, ep, ZeRO, schedule
  // Phase 1.
  StepEstimate estimate;
  // Phase 2 (when simulated).
  bool simulated = false;
  std::string simulation_error;          // the simulation failed (kept, not ranked)
  workloads::StepResult result;
  // Time and money (from the simulation when simulated, else from the estimate).
  double step_time_s = 0;
  workloads::RunEstimate run;
  std::string run_error;                 // time and cost could not be estimated (kept, never ranked)
  bool global_batch_searched = false;    // search.global_batch has several values: describe() names it
  bool meets_deadline = true, meets_budget = true;
  bool fits = true;                      // simulated memory (equals the estimate's)
  // "tp 8, pp 4, dp 32, cp 1, mb 1, selective recompute, ZeRO-1, 1f1b", led by "global batch 512, "
  // when the global batch is searched.
  std::string describe() const;
};

struct RejectionStats {
  std::size_t count = 0;
  std::map<std::string, std::size_t> reasons;   // message (numbers generalized) -> count
  std::map<std::string, std::string> example;   // message (numbers generalized) -> the first one as it was
  double smallest_need_GiB = 0;                 // memory: the smallest need among rejected layouts
  double capacity_GiB = 0;
};

struct TargetResult {
  std::size_t target = 0;
  std::string name;                      // "H100 x 512"
  std::string hardware;                  // the topology's summary
  int gpus = 0, nodes = 0;
  double price_per_gpu_hour = 0;
  std::string error;                     // the hardware could not be built
  std::size_t enumerated = 0;
  std::map<Rejection, RejectionStats> rejected;
  std::vector<std::size_t> ranked;       // candidates (indices into PlanResult::candidates), best first
  std::vector<std::size_t> simulated;    // those simulated, best first
  std::optional<std::size_t> best;       // the best simulated candidate that fits
};

struct PlanOptions {
  int threads = 0;                        // 0: default_threads()
  const std::atomic<bool>* stop = nullptr;
};

struct PlanResult {
  std::vector<Candidate> candidates;      // every candidate that passed the checks (estimated)
  std::vector<TargetResult> targets;
  std::vector<std::size_t> pareto;        // simulated candidates on the time/cost front, by time
  std::optional<std::size_t> top;         // the recommended candidate
  std::string objective;                  // "time" or "cost": what the top choice minimizes
  std::vector<std::string> why_top;       // why the top choice wins
  std::vector<std::pair<std::size_t, std::string>> near_misses;  // candidate, why it loses
  std::vector<std::string> infeasible;    // why there is no top choice (when there is none)
  std::size_t enumerated = 0, estimated = 0, simulations = 0;
  double estimate_wall_s = 0, simulate_wall_s = 0;
  std::map<Rejection, RejectionStats> rejected;  // all targets together
  std::optional<NoiseScaleModel> noise;   // resolved (samples)
  std::vector<std::string> assumptions;
  bool feasible() const { return top.has_value(); }
};

// Runs the search. An error only for problems of the spec as a whole (the large-batch model without
// a sequence length, say); "no feasible layout" is a result (feasible() false) with the reasons.
Expected<PlanResult> run_plan(const config::PlanSpec& spec, const PlanOptions& o = {});

// The non-dominated points of (time, cost), both minimized: indices into `points`, by time.
std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points);

}  // namespace dtsim::planning
