#include "reports/plan_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "planning/study.hpp"
#include "reports/simulate_report.hpp"
#include "workloads/program.hpp"

namespace dtsim::reports {

namespace {

using json = nlohmann::json;
using planning::Candidate;
using planning::PlanResult;
constexpr double kGiB = 1073741824.0;

double round_to(double v, int decimals) {
  const double k = std::pow(10.0, decimals);
  return std::round(v * k) / k;
}

std::string days(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.0f} min", s / 60);
}

std::string money(double v, const std::string& currency) {
  if (v >= 1e6) return fmt::format("{:.2f}M {}", v / 1e6, currency);
  if (v >= 1e3) return fmt::format("{:.1f}k {}", v / 1e3, currency);
  return fmt::format("{:.0f} {}", v, currency);
}

std::string short_label(const config::PlanSpec& spec, const Candidate& c) {
  const auto& p = c.parallel;
  const char* rc = c.training.recompute == workloads::Recompute::none ? "norc" : c.training.recompute == workloads::Recompute::selective ? "sel" : "full";
  std::string s = fmt::format("{} x{}: ", spec.hardware[spec.targets[c.target].hardware].name, spec.targets[c.target].gpus);
  if (c.global_batch_searched) s += fmt::format("gb{} ", c.training.global_batch);
  s += fmt::format("tp{} pp{} dp{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) s += fmt::format(" cp{}", p.cp);
  if (p.ep > 1) s += fmt::format(" ep{}", p.ep);
  s += fmt::format(" mb{} {} Z{}", c.training.micro_batch, rc, p.zero);
  if (p.schedule == workloads::PipelineSchedule::interleaved_1f1b) s += fmt::format(" i{}", p.virtual_stages);
  if (p.schedule == workloads::PipelineSchedule::gpipe) s += " gpipe";
  return s;
}

// The global batches the search tries, in the order given, each once (the training's when
// search.global_batch is not given).
std::vector<std::int64_t> global_batches(const config::PlanSpec& spec) {
  std::vector<std::int64_t> out;
  for (std::int64_t b : spec.search.global_batch) {
    if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
  }
  if (out.empty() && !spec.targets.empty()) out.push_back(spec.targets.front().base.inputs.training.global_batch);
  return out;
}

const workloads::MemoryBreakdown& peak_memory(const Candidate& c) { return c.simulated ? c.result.peak_memory : c.estimate.memory.peak; }

json summary(const config::PlanSpec& spec, const PlanResult& R, std::size_t i) {
  const Candidate& c = R.candidates[i];
  const config::PlanTarget& pt = spec.targets[c.target];
  const planning::TargetResult& tr = R.targets[c.target];
  const workloads::StepInputs& base = pt.base.inputs;
  json s;
  s["label"] = tr.name + " | " + c.describe();
  s["short_label"] = short_label(spec, c);
  s["status"] = !c.run_error.empty() ? "no time to train" : c.simulated ? "simulated" : !c.simulation_error.empty() ? "simulation failed" : "estimated";
  if (!c.simulation_error.empty()) s["error"] = c.simulation_error;
  if (!c.run_error.empty()) s["error"] = c.run_error;
  s["hardware"] = tr.name;
  s["gpus"] = pt.gpus;
  s["nodes"] = tr.nodes;
  s["layout"] = c.describe();
  s["global_batch"] = c.training.global_batch;
  s["micro_batch"] = c.training.micro_batch;
  s["seq_len"] = c.training.seq_len;
  const double step = c.step_time_s;
  s["step_time_s"] = round_to(step, 6);
  s["estimated_step_time_s"] = round_to(c.estimate.step_time_s, 6);  // the closed form that ranked it
  const bool tokens = std::holds_alternative<workloads::TransformerSpec>(base.model);
  const double samples_per_s = step > 0 ? static_cast<double>(c.training.global_batch) / step : 0.0;
  const double tokens_per_s = tokens ? samples_per_s * static_cast<double>(c.training.seq_len) : 0.0;
  s["samples_per_s"] = round_to(samples_per_s, 4);
  s["tokens_per_s"] = round_to(tokens_per_s, 2);
  s["throughput"] = round_to(tokens ? tokens_per_s : samples_per_s, 4);
  s["throughput_unit"] = tokens ? "tokens/s" : "samples/s";
  s["throughput_per_gpu"] = round_to((tokens ? tokens_per_s : samples_per_s) / pt.gpus, 4);
  double mfu = c.simulated ? c.result.mfu : 0.0;
  if (!c.simulated && step > 0) {
    const hw::GpuSpec& gpu = pt.base.cluster.groups.front().node.gpu;
    const auto pk = gpu.peak.find(c.training.precision);
    if (pk != gpu.peak.end()) {
      const double flops = workloads::model_flops_per_sample(base.model, c.training.seq_len) * static_cast<double>(c.training.global_batch);
      mfu = flops / (step * pt.gpus * pk->second.flops_per_s());
    }
  }
  s["mfu"] = round_to(mfu, 5);
  const workloads::MemoryBreakdown& m = peak_memory(c);
  s["memory_GiB"] = round_to(m.total / kGiB, 3);
  s["capacity_GiB"] = round_to(m.capacity / kGiB, 3);
  s["fits"] = c.fits;
  s["memory_parts_GiB"] = {{"params", round_to(m.params / kGiB, 3)},
                           {"grads", round_to(m.grads / kGiB, 3)},
                           {"optimizer", round_to(m.optimizer / kGiB, 3)},
                           {"activations", round_to(m.activations / kGiB, 3)},
                           {"other", round_to((m.reserved + m.fragmentation) / kGiB, 3)}};
  const auto& bd = c.simulated ? c.result.breakdown_s : c.estimate.breakdown_s;
  json b = json::object();
  for (int k = 0; k < workloads::kTimeKinds; ++k) {
    b[std::string(workloads::to_string(static_cast<workloads::TimeKind>(k))) + "_s"] = round_to(bd[static_cast<std::size_t>(k)], 6);
  }
  if (c.simulated) b["idle_s"] = round_to(c.result.idle_s, 6);
  s["breakdown"] = b;
  s["steps"] = c.run.steps;
  s["time_to_train_s"] = round_to(c.run.time_to_train_s, 3);
  s["gpu_hours"] = round_to(c.run.gpu_hours, 3);
  s["energy_kwh"] = round_to(c.run.energy_kwh, 3);
  s["cost"] = round_to(c.run.cost, 2);
  s["currency"] = spec.currency;
  s["price_per_gpu_hour"] = tr.price_per_gpu_hour;
  s["meets_deadline"] = c.meets_deadline;
  s["meets_budget"] = c.meets_budget;
  s["pareto"] = std::find(R.pareto.begin(), R.pareto.end(), i) != R.pareto.end();
  s["best_for_option"] = tr.best && *tr.best == i;
  s["top"] = R.top && *R.top == i;
  if (R.noise) s["statistical_efficiency"] = round_to(R.noise->statistical_efficiency(static_cast<double>(c.training.global_batch)), 6);
  return s;
}

json simulated_config(const config::PlanSpec& spec, const PlanResult& R, const Candidate& c) {
  const config::PlanTarget& pt = spec.targets[c.target];
  json cfg = pt.base.resolved;
  const auto& p = c.parallel;
  cfg["parallel"]["tp"] = p.tp;
  cfg["parallel"]["pp"] = p.pp;
  cfg["parallel"]["dp"] = p.dp;
  cfg["parallel"]["cp"] = p.cp;
  cfg["parallel"]["ep"] = p.ep;
  cfg["parallel"]["zero"] = p.zero;
  cfg["parallel"]["schedule"] = std::string(workloads::to_string(p.schedule));
  cfg["parallel"]["virtual_stages"] = p.virtual_stages;
  cfg["parallel"]["sequence_parallel"] = p.sequence_parallel;
  cfg["parallel"]["bucket"] = p.bucket.count() > 0 ? to_string(p.bucket) : std::string("Megatron-Core default: max(40M, 1M x dp) parameters");
  cfg["training"]["global_batch"] = c.training.global_batch;
  cfg["training"]["micro_batch"] = c.training.micro_batch;
  cfg["training"]["recompute"] = std::string(workloads::to_string(c.training.recompute));
  cfg["cluster"] = {{"summary", R.targets[c.target].hardware}, {"gpus", pt.gpus}, {"nodes", R.targets[c.target].nodes}};
  return cfg;
}

json rejection_json(const planning::RejectionStats& s) {
  json reasons = json::array();
  std::vector<std::pair<std::size_t, std::string>> by_count;
  for (const auto& [msg, n] : s.reasons) by_count.emplace_back(n, msg);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (const auto& [n, msg] : by_count) reasons.push_back({{"reason", msg}, {"count", n}, {"example", s.example.at(msg)}});
  json j = {{"count", s.count}, {"reasons", reasons}};
  if (s.smallest_need_GiB > 0) {
    j["smallest_need_GiB"] = round_to(s.smallest_need_GiB, 2);
    j["capacity_GiB"] = round_to(s.capacity_GiB, 2);
  }
  return j;
}

}  // namespace

json plan_document(const config::PlanSpec& spec, const PlanResult& R) {
  json doc;
  doc["dtsim"] = "plan";
  doc["version"] = 1;
  doc["spec"] = spec.path;
  doc["question"] = spec.question;
  doc["objective"] = R.objective;
  doc["constraints"] = {{"deadline_s", spec.constraints.deadline_s}, {"max_cost", spec.constraints.max_cost}, {"currency", spec.currency}};
  json setup = {{"model", nullptr}, {"hardware", json::array()}, {"precision", nullptr}};
  if (!spec.targets.empty()) {
    const auto& in = spec.targets.front().base.inputs;
    setup["model"] = workloads::model_name(in.model);
    setup["precision"] = std::string(hw::to_string(in.training.precision));
    if (in.training.framework != workloads::Framework::megatron) setup["framework"] = std::string(workloads::to_string(in.training.framework));
    // The global batch, or the values searched (a list) when search.global_batch has several.
    const std::vector<std::int64_t> batches = global_batches(spec);
    setup["global_batch"] = batches.size() == 1 ? json(batches.front()) : json(batches);
    setup["seq_len"] = in.training.seq_len;
    const auto& b = spec.targets.front().base.budget;
    setup["budget"] = {{"tokens", b.tokens}, {"samples", b.samples}, {"epochs", b.epochs}};
    doc["parameters"] = planning::parameter_sources(spec.targets.front().base.resolved);
  }
  for (const auto& h : spec.hardware) {
    setup["hardware"].push_back(fmt::format("{}: {} ({} GPUs per node), {} GPUs, {}", h.name, h.cluster.groups.front().node.name, h.gpus_per_node,
                                            fmt::join(h.gpus, "/"),
                                            h.price_per_gpu_hour >= 0 ? fmt::format("{:.2f} {} per GPU-hour", h.price_per_gpu_hour, spec.currency)
                                                                      : std::string("the plan's prices.gpu_hour")));
  }
  doc["setup"] = setup;
  doc["search"] = {{"enumerated", R.enumerated}, {"estimated", R.estimated}, {"simulations", R.simulations},
                   {"simulate_top", spec.search.simulate_top}, {"tp_within_node", spec.search.tp_within_node}};
  json rejected = json::object();
  for (const auto& [kind, stats] : R.rejected) rejected[std::string(planning::to_string(kind))] = rejection_json(stats);
  doc["rejected"] = rejected;
  json targets = json::array();
  for (const auto& t : R.targets) {
    json j = {{"name", t.name}, {"hardware", t.hardware}, {"gpus", t.gpus}, {"nodes", t.nodes}, {"price_per_gpu_hour", t.price_per_gpu_hour},
              {"enumerated", t.enumerated}, {"ranked", t.ranked.size()}, {"simulated", t.simulated.size()}};
    json rej = json::object();
    for (const auto& [kind, stats] : t.rejected) rej[std::string(planning::to_string(kind))] = stats.count;
    j["rejected"] = rej;
    j["best"] = t.best ? json(*t.best) : json(nullptr);
    if (!t.error.empty()) j["error"] = t.error;
    targets.push_back(j);
  }
  doc["targets"] = targets;
  doc["top"] = R.top ? json(*R.top) : json(nullptr);
  doc["why_top"] = R.why_top;
  json near = json::array();
  for (const auto& [i, why] : R.near_misses) near.push_back({{"point", i}, {"why", why}});
  doc["near_misses"] = near;
  doc["infeasible"] = R.infeasible;
  doc["pareto"] = R.pareto;
  doc["statistical_efficiency"] = nullptr;
  if (spec.noise && R.noise) {
    doc["statistical_efficiency"] = {{"b_noise_samples", R.noise->b_noise}, {"s_min", R.noise->s_min},
                                     {"assumptions", planning::noise_scale_assumptions(*spec.noise)}};
  }
  doc["assumptions"] = R.assumptions;
  json rows = json::array();
  for (std::size_t i = 0; i < R.candidates.size(); ++i) {
    const Candidate& c = R.candidates[i];
    json row = {{"point", i}, {"label", R.targets[c.target].name + " | " + c.describe()}, {"summary", summary(spec, R, i)}};
    if (c.simulated) {
      SimulateReport rep;
      rep.model = workloads::model_name(spec.targets[c.target].base.inputs.model);
      rep.cluster = R.targets[c.target].hardware;
      rep.precision = std::string(hw::to_string(c.training.precision));
      rep.config = simulated_config(spec, R, c);
      rep.result = c.result;
      rep.run = c.run;
      rep.budget = spec.targets[c.target].base.budget;
      if (R.noise) {  // the large-batch model sets the steps
        rep.budget = workloads::RunBudget{};
        rep.budget.samples = c.run.steps * static_cast<double>(c.training.global_batch);
      }
      rep.power = spec.targets[c.target].base.power;
      rep.prices = spec.targets[c.target].base.prices;
      rep.has_prices = true;
      json sim = simulate_json(rep);
      row["config"] = sim["config"];
      row["result"] = sim["result"];
    }
    rows.push_back(row);
  }
  doc["rows"] = rows;
  return doc;
}

std::string render_plan(const config::PlanSpec& spec, const PlanResult& R) {
  std::string out;
  const std::string& cur = spec.currency;
  out += fmt::format("# dtsim plan{}\n", spec.question.empty() ? std::string() : ": " + spec.question);
  if (!spec.targets.empty()) {
    const auto& in = spec.targets.front().base.inputs;
    const auto& b = spec.targets.front().base.budget;
    std::string budget = b.tokens > 0 ? fmt::format("{:.3g} tokens", b.tokens) : b.samples > 0 ? fmt::format("{:.3g} samples", b.samples)
                                                                                               : fmt::format("{:g} epochs", b.epochs);
    if (R.noise) budget = fmt::format("to the target loss (B_noise {:.4g} samples, S_min {:.4g} steps)", R.noise->b_noise, R.noise->s_min);
    const std::vector<std::int64_t> batches = global_batches(spec);
    std::string batch = batches.size() == 1 ? fmt::format("global batch {}", batches.front())
                                            : fmt::format("global batch searched: {}", fmt::join(batches, ", "));
    if (std::holds_alternative<workloads::TransformerSpec>(in.model)) batch += fmt::format(" x {} tokens", in.training.seq_len);
    const std::string framework =
        in.training.framework == workloads::Framework::megatron ? std::string() : ", framework " + std::string(workloads::to_string(in.training.framework));
    out += fmt::format("# {} on {}; {}, {}{}\n", workloads::model_name(in.model), budget, batch, hw::to_string(in.training.precision), framework);
  }
  std::string cons;
  if (spec.constraints.deadline_s > 0) cons += fmt::format("deadline {}", days(spec.constraints.deadline_s));
  if (spec.constraints.max_cost > 0) cons += fmt::format("{}budget {}", cons.empty() ? "" : ", ", money(spec.constraints.max_cost, cur));
  out += fmt::format("# objective: {}{}\n", R.objective == "cost" ? "lowest cost" : "shortest time", cons.empty() ? "" : " (" + cons + ")");
  out += fmt::format("# searched {} layouts on {} hardware options: {} ranked by closed-form estimate, {} simulated\n\n", R.enumerated, R.targets.size(),
                     R.estimated, R.simulations);

  out += "best layout per hardware option (simulated)\n";
  out += fmt::format("  {:<14} {:<76} {:>8} {:>6} {:>13} {:>11} {:>12}\n", "option", "layout", "step s", "MFU", "memory/GPU", "time", "cost");
  for (const auto& t : R.targets) {
    if (!t.error.empty()) {
      out += fmt::format("  {:<14} hardware error: {}\n", t.name, t.error);
      continue;
    }
    if (!t.best) {
      std::size_t mem = 0, lay = 0, run = 0;
      if (t.rejected.count(planning::Rejection::memory)) mem = t.rejected.at(planning::Rejection::memory).count;
      if (t.rejected.count(planning::Rejection::layout)) lay = t.rejected.at(planning::Rejection::layout).count;
      if (t.rejected.count(planning::Rejection::run)) run = t.rejected.at(planning::Rejection::run).count;
      out += fmt::format("  {:<14} no feasible layout ({} of {} do not fit in memory, {} fail divisibility{})\n", t.name, mem, t.enumerated, lay,
                         run > 0 ? fmt::format(", {} have no time to train or cost", run) : std::string());
      continue;
    }
    const Candidate& c = R.candidates[*t.best];
    const auto& m = c.result.peak_memory;
    out += fmt::format("  {:<14} {:<76} {:>8.3f} {:>5.1f}% {:>6.1f}/{:<3.0f}GiB {:>11} {:>12}{}{}\n", t.name, c.describe(), c.step_time_s, 100 * c.result.mfu,
                       m.total / kGiB, m.capacity / kGiB, days(c.run.time_to_train_s), money(c.run.cost, cur),
                       R.top && *R.top == *t.best ? "  <- recommended" : "", !c.meets_deadline || !c.meets_budget ? "  (misses a constraint)" : "");
  }
  out += "\nPareto front: time to train against cost (no other layout is both faster and cheaper)\n";
  for (std::size_t i : R.pareto) {
    const Candidate& c = R.candidates[i];
    out += fmt::format("  {:>11} {:>12}  {} | {}\n", days(c.run.time_to_train_s), money(c.run.cost, cur), R.targets[c.target].name, c.describe());
  }
  if (R.top) {
    const Candidate& w = R.candidates[*R.top];
    out += fmt::format("\nrecommended: {} | {}\n", R.targets[w.target].name, w.describe());
    for (const auto& line : R.why_top) out += "  - " + line + "\n";
    if (!R.near_misses.empty()) {
      out += "near misses\n";
      for (const auto& [i, why] : R.near_misses) out += fmt::format("  - {} | {}: {}\n", R.targets[R.candidates[i].target].name, R.candidates[i].describe(), why);
    }
  } else {
    out += "\nno feasible layout\n";
    for (const auto& line : R.infeasible) out += "  - " + line + "\n";
  }
  out += "\nrejected layouts\n";
  for (const auto& [kind, s] : R.rejected) {
    out += fmt::format("  {:<13} {:>7}", planning::to_string(kind), s.count);
    if (kind == planning::Rejection::memory && s.count > 0) {
      out += fmt::format("  (the smallest need is {:.1f} GiB per GPU; the GPUs have {:.0f} GiB)", s.smallest_need_GiB, s.capacity_GiB);
    }
    out += "\n";
    if (kind == planning::Rejection::memory) continue;
    std::vector<std::pair<std::size_t, std::string>> by_count;
    for (const auto& [msg, n] : s.reasons) by_count.emplace_back(n, msg);
    std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (std::size_t k = 0; k < by_count.size() && k < 4; ++k) out += fmt::format("  {:>21}  e.g. {}\n", by_count[k].first, s.example.at(by_count[k].second));
  }
  out += "\nassumptions\n";
  for (const auto& a : R.assumptions) out += "  - " + a + "\n";
  return out;
}

}  // namespace dtsim::reports
