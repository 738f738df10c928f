// Results of `dtsim plan`: the console summary (best layout per hardware option, the Pareto front,
// the recommendation and why, near misses, rejected layouts by reason) and the JSON document that
// `dtsim report` renders.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "config/plan_loader.hpp"
#include "planning/search.hpp"

namespace dtsim::reports {

std::string render_plan(const config::PlanSpec& spec, const planning::PlanResult& r);

// {"dtsim": "plan", question, setup, constraints, objective, targets, rejected, top, why_top,
//  near_misses, infeasible, pareto, assumptions, parameters, rows: [{point, summary, config?,
//  result?}]}; simulated rows carry their configuration and simulated result as `dtsim simulate
//  --json` writes them. Deterministic (no wall-clock figures).
nlohmann::json plan_document(const config::PlanSpec& spec, const planning::PlanResult& r);

}  // namespace dtsim::reports
