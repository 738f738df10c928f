#include "planning/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <regex>

#include <fmt/format.h>

#include "planning/pool.hpp"

namespace dtsim::planning {

namespace {

using workloads::TimeKind;
constexpr double kGiB = 1073741824.0;

std::vector<int> powers_of_two_upto(int n) {
  std::vector<int> out;
  for (int v = 1; v <= n; v *= 2) out.push_back(v);
  return out;
}

// "tp (3) must divide the 64 attention heads" -> "tp (N) must divide the N attention heads".
std::string generalize(const std::string& message) {
  static const std::regex digits("[0-9]+(\\.[0-9]+)?");
  return std::regex_replace(message, digits, "N");
}

void count(RejectionStats& s, const std::string& message) {
  ++s.count;
  const std::string g = generalize(message);
  ++s.reasons[g];
  s.example.emplace(g, message);
}

const char* kind_label(TimeKind k) {
  switch (k) {
    case TimeKind::compute: return "compute";
    case TimeKind::tp: return "tensor-parallel communication";
    case TimeKind::cp: return "context-parallel communication";
    case TimeKind::ep: return "expert-parallel communication";
    case TimeKind::pp: return "pipeline transfers";
    case TimeKind::dp: return "data-parallel communication";
    case TimeKind::optimizer: return "optimizer step";
    case TimeKind::bubble: return "pipeline bubble";
    default: return "other";
  }
}

std::string human_time(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.3g} s", s);
}

std::string money(double v, const std::string& currency) {
  if (v >= 1e6) return fmt::format("{:.2f} M{}", v / 1e6, currency.empty() ? "" : " " + currency);
  return fmt::format("{:.0f}{}", v, currency.empty() ? "" : " " + currency);
}

// A difference of money: cents below 10.
std::string money_delta(double v, const std::string& currency) {
  return v < 10 ? fmt::format("{:.2f}{}", v, currency.empty() ? "" : " " + currency) : money(v, currency);
}

std::string gpu_hours(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

double stage_share(const std::array<double, workloads::kTimeKinds>& b, TimeKind k) { return b[static_cast<std::size_t>(k)]; }

}  // namespace

std::string_view to_string(Rejection r) {
  switch (r) {
    case Rejection::layout: return "divisibility";
    case Rejection::policy: return "policy";
    case Rejection::memory: return "memory";
    case Rejection::run: return "time and cost";
  }
  return "?";
}

std::string Candidate::describe() const {
  const workloads::ParallelSpec& p = parallel;
  std::string s = global_batch_searched ? fmt::format("global batch {}, ", training.global_batch) : std::string();
  s += fmt::format("tp {}, pp {}, dp {}, cp {}", p.tp, p.pp, p.dp, p.cp);
  if (p.ep > 1) s += fmt::format(", ep {}", p.ep);
  const char* rc = training.recompute == workloads::Recompute::none        ? "no recompute"
                   : training.recompute == workloads::Recompute::selective ? "selective recompute"
                                                                           : "full recompute";
  s += fmt::format(", mb {}, {}, ZeRO-{}, {}", training.micro_batch, rc, p.zero, workloads::to_string(p.schedule));
  if (p.schedule == workloads::PipelineSchedule::interleaved_1f1b) s += fmt::format(" x{}", p.virtual_stages);
  if (p.tp > 1 && !p.sequence_parallel) s += ", no sequence parallelism";
  return s;
}

std::vector<std::size_t> pareto_front(const std::vector<std::pair<double, double>>& points) {
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return points[a] != points[b] ? points[a] < points[b] : a < b;
  });
  std::vector<std::size_t> front;
  double best_cost = INFINITY;
  for (std::size_t i : order) {
    if (points[i].second < best_cost) {
      front.push_back(i);
      best_cost = points[i].second;
    }
  }
  return front;
}

Expected<PlanResult> run_plan(const config::PlanSpec& spec, const PlanOptions& o) {
  using Clock = std::chrono::steady_clock;
  PlanResult R;
  const int threads = o.threads > 0 ? o.threads : default_threads();
  const std::size_t T = spec.targets.size();

  // The large-batch model, resolved for the plan's sequence length.
  if (spec.noise && T > 0) {
    auto m = resolve_noise_scale(*spec.noise, spec.targets.front().base.inputs.training.seq_len);
    if (!m) return m.error();
    R.noise = *m;
  }

  // Topologies, one per target (read-only afterwards; shared by the threads).
  std::vector<std::unique_ptr<hw::Topology>> topos(T);
  R.targets.resize(T);
  parallel_for(T, threads, [&](std::size_t t) {
    auto topo = hw::Topology::build(spec.targets[t].base.cluster);
    if (topo) topos[t] = std::make_unique<hw::Topology>(std::move(*topo));
    else R.targets[t].error = topo.error().message;
  });
  for (std::size_t t = 0; t < T; ++t) {
    const config::PlanTarget& pt = spec.targets[t];
    TargetResult& tr = R.targets[t];
    tr.target = t;
    tr.gpus = pt.gpus;
    tr.name = fmt::format("{} x {}", spec.hardware[pt.hardware].name, pt.gpus);
    tr.price_per_gpu_hour = pt.base.prices.gpu_hour;
    if (topos[t]) {
      tr.hardware = topos[t]->summary();
      tr.nodes = topos[t]->nodes();
    }
  }

  // 1. Enumerate.
  std::vector<Candidate> all;
  for (std::size_t t = 0; t < T; ++t) {
    if (!topos[t]) continue;
    const config::PlanTarget& pt = spec.targets[t];
    const config::HardwareOption& opt = spec.hardware[pt.hardware];
    const config::SearchSpace& ss = spec.search;
    const workloads::StepInputs& base = pt.base.inputs;
    TargetResult& tr = R.targets[t];
    const int gpus = pt.gpus;
    const int per_node = std::min(opt.gpus_per_node, gpus);
    int layers = 1;
    std::int64_t experts = 0;
    const auto* tm = std::get_if<workloads::TransformerSpec>(&base.model);
    if (tm) {
      layers = static_cast<int>(tm->layers);
      experts = tm->experts;
    }
    std::vector<int> pp_default;
    for (int v : powers_of_two_upto(std::min(layers, 32))) pp_default.push_back(v);
    std::vector<int> ep_default{1};
    if (experts > 0) {
      ep_default.clear();
      for (int v : powers_of_two_upto(static_cast<int>(std::min<std::int64_t>(experts, 8)))) {
        if (experts % v == 0) ep_default.push_back(v);
      }
    }
    const auto tps = ss.tp.empty() ? (tm ? powers_of_two_upto(per_node) : std::vector<int>{1}) : ss.tp;
    const auto pps = ss.pp.empty() ? (tm ? pp_default : std::vector<int>{1}) : ss.pp;
    const auto cps = ss.cp.empty() ? std::vector<int>{1} : ss.cp;
    const auto eps = ss.ep.empty() ? ep_default : ss.ep;
    const auto mbs = ss.micro_batch.empty() ? std::vector<int>{1, 2, 4} : ss.micro_batch;
    const auto zeros = ss.zero.empty() ? std::vector<int>{0, 1, 2, 3} : ss.zero;
    const auto vss = ss.virtual_stages.empty() ? std::vector<int>{2} : ss.virtual_stages;
    const auto gbs = ss.global_batch.empty() ? std::vector<std::int64_t>{base.training.global_batch} : ss.global_batch;
    const bool gb_searched = std::any_of(gbs.begin(), gbs.end(), [&](std::int64_t b) { return b != gbs.front(); });
    const auto rcs = ss.recompute.empty() ? (tm ? std::vector<workloads::Recompute>{workloads::Recompute::none, workloads::Recompute::selective,
                                                                                     workloads::Recompute::full}
                                                : std::vector<workloads::Recompute>{workloads::Recompute::none})
                                          : ss.recompute;
    const auto scheds = ss.schedule.empty() ? std::vector<workloads::PipelineSchedule>{workloads::PipelineSchedule::one_f_one_b,
                                                                                       workloads::PipelineSchedule::interleaved_1f1b}
                                            : ss.schedule;
    for (std::int64_t gb : gbs) {
      for (int tp : tps) {
        for (int cp : cps) {
          for (int pp : pps) {
            for (int ep : eps) {
              for (int zero : zeros) {
                for (auto sched : scheds) {
                  const bool interleaved = sched == workloads::PipelineSchedule::interleaved_1f1b;
                  if (pp == 1) {
                    // Without pipelining every schedule is the same: keep the first one listed.
                    if (interleaved) continue;
                    const auto first = std::find_if(scheds.begin(), scheds.end(),
                                                    [](auto x) { return x != workloads::PipelineSchedule::interleaved_1f1b; });
                    if (sched != *first) continue;
                  }
                  for (int vs : interleaved ? vss : std::vector<int>{1}) {
                    std::vector<bool> sps = ss.sequence_parallel.empty() ? std::vector<bool>{tp > 1} : ss.sequence_parallel;
                    if (tp == 1) sps = {false};
                    for (bool sp : sps) {
                      for (int mb : mbs) {
                        for (auto rc : rcs) {
                          ++tr.enumerated;
                          const std::int64_t mp = static_cast<std::int64_t>(tp) * pp * cp;
                          if (gpus % mp != 0) {
                            count(tr.rejected[Rejection::layout],
                                  fmt::format("tp x pp x cp = {} x {} x {} does not divide {} GPUs", tp, pp, cp, gpus));
                            continue;
                          }
                          if (ss.tp_within_node && tp > per_node) {
                            count(tr.rejected[Rejection::policy],
                                  fmt::format("tensor parallelism across nodes (tp {} > {} GPUs per node; search.tp_within_node)", tp, per_node));
                            continue;
                          }
                          const int dp = static_cast<int>(gpus / mp);
                          if (dp % ep != 0) {
                            count(tr.rejected[Rejection::layout], fmt::format("ep {} does not divide dp {}", ep, dp));
                            continue;
                          }
                          Candidate c;
                          c.target = t;
                          c.training = base.training;
                          c.training.global_batch = gb;
                          c.global_batch_searched = gb_searched;
                          c.training.micro_batch = mb;
                          c.training.recompute = rc;
                          c.parallel = base.parallel;
                          c.parallel.tp = tp;
                          c.parallel.pp = pp;
                          c.parallel.cp = cp;
                          c.parallel.dp = dp;
                          c.parallel.ep = ep;
                          c.parallel.zero = zero;
                          c.parallel.schedule = sched;
                          c.parallel.virtual_stages = vs;
                          c.parallel.sequence_parallel = sp;
                          if (!spec.bucket_given) c.parallel.bucket = Bytes(tp == 1 && pp == 1 && cp == 1 && zero < 3 ? Bytes::MiB(25).count() : 0);
                          all.push_back(std::move(c));
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }

  // 2-3. Memory and closed-form estimates, in parallel (each thread its own estimator per target).
  const auto t0 = Clock::now();
  std::vector<std::optional<Error>> errors(all.size());
  std::vector<char> kept(all.size(), 0);
  {
    std::vector<std::vector<std::size_t>> by_target(T);
    for (std::size_t i = 0; i < all.size(); ++i) by_target[all[i].target].push_back(i);
    struct Work {
      std::size_t target, slice;
    };
    std::vector<Work> work;
    for (std::size_t t = 0; t < T; ++t) {
      for (int s = 0; s < threads; ++s) {
        if (static_cast<std::size_t>(s) < by_target[t].size()) work.push_back({t, static_cast<std::size_t>(s)});
      }
    }
    parallel_for(
        work.size(), threads,
        [&](std::size_t w) {
          const std::size_t t = work[w].target;
          const workloads::StepInputs& base = spec.targets[t].base.inputs;
          StepEstimator est(*topos[t], base.compute, base.comm);
          const auto& ids = by_target[t];
          for (std::size_t k = work[w].slice; k < ids.size(); k += static_cast<std::size_t>(threads)) {
            if (o.stop != nullptr && o.stop->load()) return;
            Candidate& c = all[ids[k]];
            workloads::StepInputs in = base;
            in.training = c.training;
            in.parallel = c.parallel;
            auto e = est.estimate(in, false);
            if (!e) {
              errors[ids[k]] = e.error();
              continue;
            }
            if (!e->memory.fits) {
              c.estimate = std::move(*e);
              continue;
            }
            auto full = est.estimate(in, true);
            if (!full) {
              errors[ids[k]] = full.error();
              continue;
            }
            c.estimate = std::move(*full);
            kept[ids[k]] = 1;
          }
        },
        o.stop);
  }
  R.estimate_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // Keep the survivors (in enumeration order, so that the result does not depend on the threads).
  // Time and cost from a step; false (with c.run_error) when the budget gives none: such a
  // candidate is never ranked.
  auto run_of = [&](Candidate& c, const workloads::StepResult& step) {
    const config::PlanTarget& pt = spec.targets[c.target];
    workloads::RunBudget budget = pt.base.budget;
    if (R.noise) {
      budget = workloads::RunBudget{};
      budget.samples = R.noise->steps(static_cast<double>(c.training.global_batch)) * static_cast<double>(c.training.global_batch);
    }
    auto run = workloads::estimate_run(step, c.training.global_batch, budget, pt.base.power, pt.base.prices, R.targets[c.target].nodes);
    if (!run) {
      c.run = workloads::RunEstimate{};
      c.run_error = run.error().field.empty() ? run.error().message : run.error().field + ": " + run.error().message;
      c.meets_deadline = c.meets_budget = false;
      return false;
    }
    if (!run->achievable) {  // does not fit in memory: no time to train or cost to rank
      c.run = workloads::RunEstimate{};
      c.run_error = step.memory_note.empty() ? "does not fit in memory" : step.memory_note;
      c.meets_deadline = c.meets_budget = false;
      return false;
    }
    c.run = *run;
    c.run_error.clear();
    c.meets_deadline = spec.constraints.deadline_s <= 0 || c.run.time_to_train_s <= spec.constraints.deadline_s;
    c.meets_budget = spec.constraints.max_cost <= 0 || c.run.cost <= spec.constraints.max_cost;
    return true;
  };
  for (std::size_t i = 0; i < all.size(); ++i) {
    Candidate& c = all[i];
    TargetResult& tr = R.targets[c.target];
    if (errors[i]) {
      count(tr.rejected[Rejection::layout], errors[i]->field.empty() ? errors[i]->message : errors[i]->field + ": " + errors[i]->message);
      continue;
    }
    if (!kept[i]) {
      if (c.estimate.memory.stages.empty()) continue;  // interrupted
      RejectionStats& s = tr.rejected[Rejection::memory];
      const double need = c.estimate.memory.peak.total / kGiB;
      if (s.count == 0 || need < s.smallest_need_GiB) s.smallest_need_GiB = need;
      s.capacity_GiB = c.estimate.memory.peak.capacity / kGiB;
      count(s, "needs more memory per GPU than the GPU has");
      continue;
    }
    c.step_time_s = c.estimate.step_time_s;
    c.fits = true;
    workloads::StepResult synthetic;
    synthetic.step_time_s = c.estimate.step_time_s;
    synthetic.gpus = spec.targets[c.target].gpus;
    synthetic.seq = std::holds_alternative<workloads::TransformerSpec>(spec.targets[c.target].base.inputs.model) ? c.training.seq_len : 0;
    for (std::size_t s = 0; s < c.estimate.stage_time_s.size(); ++s) {
      workloads::StageReport st;
      st.stage = static_cast<int>(s);
      st.time_s = c.estimate.stage_time_s[s];
      synthetic.stages.push_back(st);
    }
    if (!run_of(c, synthetic)) {
      count(tr.rejected[Rejection::run], c.run_error);
      continue;
    }
    R.candidates.push_back(std::move(c));
  }
  all.clear();
  R.estimated = R.candidates.size();
  auto by_time = [&](std::size_t a, std::size_t b) {
    const Candidate& x = R.candidates[a];
    const Candidate& y = R.candidates[b];
    if (x.run.time_to_train_s != y.run.time_to_train_s) return x.run.time_to_train_s < y.run.time_to_train_s;
    if (x.run.cost != y.run.cost) return x.run.cost < y.run.cost;
    return a < b;
  };
  for (std::size_t i = 0; i < R.candidates.size(); ++i) R.targets[R.candidates[i].target].ranked.push_back(i);
  for (auto& tr : R.targets) std::sort(tr.ranked.begin(), tr.ranked.end(), by_time);

  // 4. Simulate the best few of every target.
  std::vector<std::size_t> to_simulate;
  for (auto& tr : R.targets) {
    for (std::size_t k = 0; k < tr.ranked.size() && k < static_cast<std::size_t>(spec.search.simulate_top); ++k) to_simulate.push_back(tr.ranked[k]);
  }
  const auto t1 = Clock::now();
  parallel_for(
      to_simulate.size(), threads,
      [&](std::size_t k) {
        Candidate& c = R.candidates[to_simulate[k]];
        workloads::StepInputs in = spec.targets[c.target].base.inputs;
        in.training = c.training;
        in.parallel = c.parallel;
        auto r = workloads::simulate_step(*topos[c.target], in);
        if (!r) {
          c.simulation_error = r.error().message;
          return;
        }
        c.result = std::move(*r);
        c.simulated = true;
      },
      o.stop);
  R.simulate_wall_s = std::chrono::duration<double>(Clock::now() - t1).count();
  R.simulations = to_simulate.size();
  for (std::size_t i : to_simulate) {
    Candidate& c = R.candidates[i];
    if (!c.simulated) continue;
    c.step_time_s = c.result.step_time_s;
    c.fits = c.result.fits;
    run_of(c, c.result);  // a failure leaves c.run_error: the row says so and it is not ranked
  }
  for (auto& tr : R.targets) {
    for (std::size_t i : tr.ranked) {
      if (R.candidates[i].simulated && R.candidates[i].run_error.empty()) tr.simulated.push_back(i);
    }
    std::sort(tr.simulated.begin(), tr.simulated.end(), by_time);
    for (std::size_t i : tr.simulated) {
      if (R.candidates[i].fits) {
        tr.best = i;
        break;
      }
    }
    for (const auto& [kind, stats] : tr.rejected) {
      RejectionStats& all_stats = R.rejected[kind];
      all_stats.count += stats.count;
      for (const auto& [msg, n] : stats.reasons) all_stats.reasons[msg] += n;
      for (const auto& [msg, ex] : stats.example) all_stats.example.emplace(msg, ex);
      if (kind == Rejection::memory && (all_stats.smallest_need_GiB == 0 || stats.smallest_need_GiB < all_stats.smallest_need_GiB)) {
        all_stats.smallest_need_GiB = stats.smallest_need_GiB;
        all_stats.capacity_GiB = stats.capacity_GiB;
      }
    }
    R.enumerated += tr.enumerated;
  }

  // 5. Pareto front of the simulated candidates; the top choice.
  std::vector<std::size_t> sims;
  for (const auto& tr : R.targets) {
    for (std::size_t i : tr.simulated) {
      if (R.candidates[i].fits) sims.push_back(i);
    }
  }
  std::sort(sims.begin(), sims.end());
  std::vector<std::pair<double, double>> pts;
  for (std::size_t i : sims) pts.emplace_back(R.candidates[i].run.time_to_train_s, R.candidates[i].run.cost);
  for (std::size_t k : pareto_front(pts)) R.pareto.push_back(sims[k]);

  const config::PlanConstraints& cons = spec.constraints;
  R.objective = !cons.objective.empty() ? cons.objective : (cons.deadline_s > 0 && cons.max_cost <= 0 ? "cost" : "time");
  const bool by_cost = R.objective == "cost";
  auto better = [&](std::size_t a, std::size_t b) {
    const Candidate& x = R.candidates[a];
    const Candidate& y = R.candidates[b];
    const double xa = by_cost ? x.run.cost : x.run.time_to_train_s, ya = by_cost ? y.run.cost : y.run.time_to_train_s;
    const double xb = by_cost ? x.run.time_to_train_s : x.run.cost, yb = by_cost ? y.run.time_to_train_s : y.run.cost;
    if (xa != ya) return xa < ya;
    if (xb != yb) return xb < yb;
    return a < b;
  };
  std::vector<std::size_t> ranked = sims;
  std::sort(ranked.begin(), ranked.end(), better);
  for (std::size_t i : ranked) {
    if (R.candidates[i].meets_deadline && R.candidates[i].meets_budget) {
      R.top = i;
      break;
    }
  }
  const std::string currency = spec.currency;

  // Why: the top choice's step, and how the others compare.
  auto delta = [&](const Candidate& loser, const Candidate& winner) {
    // Where the loser's extra time to train goes, by kind (steps x per-step time of the critical stage).
    const auto& lb = loser.simulated ? loser.result.breakdown_s : loser.estimate.breakdown_s;
    const auto& wb = winner.simulated ? winner.result.breakdown_s : winner.estimate.breakdown_s;
    std::vector<std::pair<double, std::string>> d;
    for (int kk = 0; kk < workloads::kTimeKinds; ++kk) {
      const auto kind = static_cast<TimeKind>(kk);
      const double x = loser.run.steps * stage_share(lb, kind) - winner.run.steps * stage_share(wb, kind);
      if (x > 0) d.emplace_back(x, kind_label(kind));
    }
    std::sort(d.begin(), d.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string s;
    for (std::size_t i = 0; i < d.size() && i < 2; ++i) s += fmt::format("{}+{} of {}", i ? ", " : "", human_time(d[i].first), d[i].second);
    return s;
  };
  auto time_tied = [](const Candidate& c, const Candidate& w) {
    return std::abs(c.run.time_to_train_s - w.run.time_to_train_s) < 0.005 * w.run.time_to_train_s;
  };
  auto cost_tied = [](const Candidate& c, const Candidate& w) { return std::abs(c.run.cost - w.run.cost) < 0.005 * std::max(1.0, w.run.cost); };
  // c against w in time: "2.2 days faster (-48.0%)", "3.1 h slower (+12.0%): +3.1 h of pipeline bubble".
  auto time_versus = [&](const Candidate& c, const Candidate& w) {
    if (time_tied(c, w)) return std::string("as fast (within 0.5%)");
    const double dt = c.run.time_to_train_s - w.run.time_to_train_s;
    const double pct = 100 * dt / w.run.time_to_train_s;
    if (dt < 0) return fmt::format("{} faster ({:+.1f}%)", human_time(-dt), pct);
    std::string s = fmt::format("{} slower ({:+.1f}%)", human_time(dt), pct);
    if (const std::string d = delta(c, w); !d.empty()) s += ": " + d;
    return s;
  };
  // c against w in money: "costs 123 USD more (+2.8%; 1843 vs 1784 GPU-hours at 2.50 vs 1.40 per GPU-hour)".
  auto cost_versus = [&](const Candidate& c, const Candidate& w) {
    if (cost_tied(c, w)) return std::string("costs the same (within 0.5%)");
    const double dc = c.run.cost - w.run.cost;
    std::string s = fmt::format("costs {} {} ({:+.1f}%; {} vs {} GPU-hours", money_delta(std::abs(dc), currency), dc > 0 ? "more" : "less",
                                w.run.cost > 0 ? 100 * dc / w.run.cost : 0.0, gpu_hours(c.run.gpu_hours), gpu_hours(w.run.gpu_hours));
    const double pc = R.targets[c.target].price_per_gpu_hour, pw = R.targets[w.target].price_per_gpu_hour;
    if (pc != pw) s += fmt::format(" at {:.2f} vs {:.2f} per GPU-hour", pc, pw);
    return s + ")";
  };
  // Why c loses to w: the difference on the objective first, then the other one.
  auto versus = [&](const Candidate& c, const Candidate& w) {
    return by_cost ? cost_versus(c, w) + "; " + time_versus(c, w) : time_versus(c, w) + "; " + cost_versus(c, w);
  };
  if (R.top) {
    const Candidate& w = R.candidates[*R.top];
    const TargetResult& wt = R.targets[w.target];
    R.why_top.push_back(fmt::format("{} on {}: {} to train for {} (step {:.3f} s, MFU {:.1f}%), {} GPU-hours.", w.describe(), wt.name,
                                    human_time(w.run.time_to_train_s), money(w.run.cost, currency), w.step_time_s, 100 * w.result.mfu,
                                    gpu_hours(w.run.gpu_hours)));
    std::vector<std::pair<double, std::string>> parts;
    for (int kk = 0; kk < workloads::kTimeKinds; ++kk) {
      const double t = w.result.breakdown_s[static_cast<std::size_t>(kk)];
      if (t > 0) parts.emplace_back(t, kind_label(static_cast<TimeKind>(kk)));
    }
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string bd;
    for (std::size_t i = 0; i < parts.size() && i < 4; ++i) bd += fmt::format("{}{} {:.1f}%", i ? ", " : "", parts[i].second, 100 * parts[i].first / w.step_time_s);
    R.why_top.push_back("Its step: " + bd + ".");
    R.why_top.push_back(fmt::format("Memory: {:.1f} of {:.0f} GiB per GPU at the fullest stage.", w.result.peak_memory.total / kGiB,
                                    w.result.peak_memory.capacity / kGiB));
    if (by_cost) {
      R.why_top.push_back(fmt::format("Chosen as the cheapest layout{}.", cons.deadline_s > 0 ? fmt::format(" that meets the deadline ({})", human_time(cons.deadline_s)) : ""));
    } else {
      R.why_top.push_back(fmt::format("Chosen as the fastest layout{}.", cons.max_cost > 0 ? fmt::format(" within the budget ({})", money(cons.max_cost, currency)) : ""));
    }
    // Two layouts that differ only in selective against no recomputation are one configuration
    // under flash attention (it stores no attention scores, all selective recomputation drops).
    auto no_effect = [&](const Candidate& a, const Candidate& b) {
      auto plain = [](std::string d) {
        const std::string sel = "selective recompute", none = "no recompute";
        if (auto at = d.find(sel); at != std::string::npos) d.replace(at, sel.size(), none);
        return d;
      };
      const bool flash = workloads::fused(a.training.attention) && workloads::fused(b.training.attention);
      return flash && a.target == b.target && a.training.recompute != b.training.recompute &&
             a.training.recompute != workloads::Recompute::full && b.training.recompute != workloads::Recompute::full &&
             plain(a.describe()) == plain(b.describe());
    };
    const std::string same = " (the same configuration: selective recomputation has no effect with flash attention)";
    // Same hardware: the runner-up on the objective.
    for (std::size_t i : ranked) {
      if (i == *R.top || R.candidates[i].target != w.target) continue;
      const Candidate& r = R.candidates[i];
      if (by_cost && cost_tied(r, w)) {
        R.why_top.push_back(fmt::format("On the same hardware {} is as cheap ({}, within 0.5%) and {}: a tie.", r.describe(),
                                        money(r.run.cost, currency), time_versus(r, w)));
      } else if (!by_cost && time_tied(r, w)) {
        R.why_top.push_back(fmt::format("On the same hardware {} is as fast ({}, within 0.5%): a tie, broken by cost and then by search order{}.",
                                        r.describe(), human_time(r.run.time_to_train_s), no_effect(r, w) ? same : ""));
      } else if (by_cost) {
        R.why_top.push_back(fmt::format("On the same hardware it beats {} ({} vs {}): {}.", r.describe(), money(r.run.cost, currency),
                                        money(w.run.cost, currency), versus(r, w)));
      } else {
        R.why_top.push_back(fmt::format("On the same hardware it beats {} ({} vs {}): {}.", r.describe(), human_time(r.run.time_to_train_s),
                                        human_time(w.run.time_to_train_s), versus(r, w)));
      }
      break;
    }
    // The best of every other option.
    for (const auto& tr : R.targets) {
      if (tr.target == w.target || !tr.best) continue;
      const Candidate& b = R.candidates[*tr.best];
      const std::string takes = fmt::format("takes {} ({:+.0f}%)", human_time(b.run.time_to_train_s), 100 * (b.run.time_to_train_s / w.run.time_to_train_s - 1));
      const std::string costs = fmt::format("costs {} ({:+.0f}%)", money(b.run.cost, currency), w.run.cost > 0 ? 100 * (b.run.cost / w.run.cost - 1) : 0.0);
      R.why_top.push_back(fmt::format("{}: best {} {} and {}; MFU {:.1f}% vs {:.1f}%, {:.2f} vs {:.2f} per GPU-hour.", tr.name, b.describe(),
                                      by_cost ? costs : takes, by_cost ? takes : costs, 100 * b.result.mfu, 100 * w.result.mfu,
                                      tr.price_per_gpu_hour, wt.price_per_gpu_hour));
    }
    // Near misses: the best layout that beats the top choice on the objective but breaks a
    // constraint, then the next ones that meet the constraints.
    std::vector<std::size_t> near;
    for (std::size_t i : ranked) {
      if (i == *R.top) break;
      near.push_back(i);
      break;
    }
    bool after = false;
    for (std::size_t i : ranked) {
      if (i == *R.top) {
        after = true;
        continue;
      }
      if (after && near.size() < 4 && R.candidates[i].meets_deadline && R.candidates[i].meets_budget) near.push_back(i);
    }
    for (std::size_t i : near) {
      const Candidate& c = R.candidates[i];
      std::string why;
      if (!c.meets_deadline) {
        why = fmt::format("{} but misses the deadline ({} > {})", money(c.run.cost, currency), human_time(c.run.time_to_train_s), human_time(cons.deadline_s));
      } else if (!c.meets_budget) {
        why = fmt::format("{} but over budget ({} > {})", human_time(c.run.time_to_train_s), money(c.run.cost, currency), money(cons.max_cost, currency));
      } else {
        why = by_cost ? fmt::format("{} and {}", money(c.run.cost, currency), human_time(c.run.time_to_train_s))
                      : fmt::format("{} and {}", human_time(c.run.time_to_train_s), money(c.run.cost, currency));
        if (R.targets[c.target].gpus != wt.gpus) why += fmt::format(" ({} GPUs instead of {})", R.targets[c.target].gpus, wt.gpus);
        if (time_tied(c, w) && cost_tied(c, w)) {
          why += ": a tie with the recommendation (within 0.5%)" + std::string(no_effect(c, w) ? same : "");
        } else {
          why += ": " + versus(c, w);
        }
      }
      R.near_misses.emplace_back(i, why);
    }
  } else {
    // Why nothing qualifies.
    if (sims.empty()) {
      if (R.candidates.empty()) {
        const auto run_it = R.rejected.find(Rejection::run);
        const bool no_run = run_it != R.rejected.end() && run_it->second.count > 0;
        R.infeasible.push_back(fmt::format("no layout passes the checks: of {} candidates, {} do not fit in memory, {} fail divisibility, {} break a policy{}",
                                           R.enumerated, R.rejected[Rejection::memory].count, R.rejected[Rejection::layout].count,
                                           R.rejected[Rejection::policy].count,
                                           no_run ? fmt::format(", {} have no time to train or cost", run_it->second.count) : std::string()));
        if (R.rejected[Rejection::memory].count > 0) {
          R.infeasible.push_back(fmt::format("memory: the smallest need is {:.1f} GiB per GPU, the GPUs have {:.0f} GiB "
                                             "(try more GPUs, more pipeline or tensor parallelism, ZeRO-3 or full recomputation)",
                                             R.rejected[Rejection::memory].smallest_need_GiB, R.rejected[Rejection::memory].capacity_GiB));
        }
        if (no_run) R.infeasible.push_back(fmt::format("time and cost: {}", run_it->second.example.begin()->second));
      } else {
        R.infeasible.push_back("no simulated layout fits in memory (the estimate and the simulation disagree; see the rows)");
      }
    } else {
      const Candidate& f = R.candidates[*std::min_element(sims.begin(), sims.end(), [&](std::size_t a, std::size_t b) {
        return R.candidates[a].run.time_to_train_s < R.candidates[b].run.time_to_train_s;
      })];
      const Candidate& ch = R.candidates[*std::min_element(sims.begin(), sims.end(), [&](std::size_t a, std::size_t b) {
        return R.candidates[a].run.cost < R.candidates[b].run.cost;
      })];
      if (cons.deadline_s > 0 && f.run.time_to_train_s > cons.deadline_s) {
        R.infeasible.push_back(fmt::format("deadline: the fastest layout ({} on {}) takes {}, more than the {} allowed", f.describe(),
                                           R.targets[f.target].name, human_time(f.run.time_to_train_s), human_time(cons.deadline_s)));
      }
      if (cons.max_cost > 0 && ch.run.cost > cons.max_cost) {
        R.infeasible.push_back(fmt::format("budget: the cheapest layout ({} on {}) costs {}, more than the {} allowed", ch.describe(),
                                           R.targets[ch.target].name, money(ch.run.cost, currency), money(cons.max_cost, currency)));
      }
      if (R.infeasible.empty()) R.infeasible.push_back("no layout meets the deadline and the budget together");
    }
  }

  R.assumptions.push_back(fmt::format(
      "Search: {} candidates enumerated; {} passed the divisibility, policy and memory checks and were ranked by a closed-form step time; "
      "the best {} per hardware option and GPU count were simulated ({} simulations). Figures of best layouts come from simulations.",
      R.enumerated, R.estimated, spec.search.simulate_top, R.simulations));
  const bool eager = !spec.targets.empty() && spec.targets.front().base.inputs.training.framework != workloads::Framework::megatron;
  if (eager) {
    R.assumptions.push_back(fmt::format(
        "Memory per GPU: as {} allocates it (fp32 parameters and their bf16 copies, optimizer states per ZeRO stage, the tensors the "
        "model's code saves for backward times the micro-batches in flight, the fp32 loss buffers), as a monitor shows it (allocator "
        "slack and the CUDA context), computed without simulating.",
        workloads::to_string(spec.targets.front().base.inputs.training.framework)));
  } else {
    R.assumptions.push_back("Memory per GPU: the simulator's memory model (parameters, gradients and optimizer states per ZeRO stage, activations "
                            "per Korthikanti et al. 2022 times the micro-batches in flight, a framework allowance), computed without simulating.");
  }
  if (R.noise) {
    for (const auto& a : noise_scale_assumptions(*spec.noise)) R.assumptions.push_back(a);
  } else {
    R.assumptions.push_back("Time to train = steps x step time, steps = the token (or sample, epoch) budget / the global batch.");
  }
  R.assumptions.push_back("Cost = GPU-hours x the option's price per GPU-hour + facility energy x the price per kWh (the prices are inputs).");
  return R;
}

}  // namespace dtsim::planning
