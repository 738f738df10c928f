// The layout search: candidates counted and rejected by reason, the best of every option simulated,
// the Pareto front non-dominated, time to train from the budget (or the large-batch model), the
// explanation present, infeasible plans explained, and the result independent of the threads.
#include "planning/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "reports/plan_report.hpp"

namespace dtsim::planning {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

config::PlanSpec load(const std::string& name, const std::string& text) {
  config::LoadContext ctx;
  auto s = config::load_plan_spec(write_temp(name, text), ctx);
  EXPECT_TRUE(s) << ctx.diagnostics.to_string();
  return std::move(*s);
}

const std::string kSmall =
    "model: gpt3-1.3b\n"
    "training: {global_batch: 16, seq_len: 2048, tokens: 1.0e10}\n"
    "hardware:\n"
    "  - {name: H100, cluster: dgx-h100, gpus: [8, 16], price_per_gpu_hour: 2.5}\n"
    "  - {name: A100, cluster: dgx-a100-80g, gpus: [16], price_per_gpu_hour: 1.5}\n"
    "search: {tp: [1, 2, 16], pp: [1, 2], micro_batch: [1, 2], zero: [0, 1], recompute: [none, selective], schedule: [1f1b], simulate_top: 2}\n";

TEST(Plan, SearchesSimulatesAndRanks) {
  const config::PlanSpec spec = load("small.yaml", kSmall);
  PlanOptions o;
  o.threads = 2;
  auto r = run_plan(spec, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->feasible());
  // 3 targets x 3 tp x 2 pp x 2 mb x 2 zero x 2 recompute = 144 candidates.
  EXPECT_EQ(r->enumerated, 144u);
  // tp 16 spans nodes: a policy rejection on every target (the 8-GPU target also fails divisibility).
  EXPECT_GT(r->rejected[Rejection::policy].count, 0u);
  EXPECT_EQ(r->rejected[Rejection::policy].count + r->rejected[Rejection::layout].count + r->rejected[Rejection::memory].count + r->estimated,
            r->enumerated);
  EXPECT_EQ(r->simulations, 6u);
  const Candidate& top = r->candidates[*r->top];
  EXPECT_TRUE(top.simulated);
  EXPECT_TRUE(top.fits);
  EXPECT_EQ(r->objective, "time");
  // The top choice is the fastest simulated candidate that fits.
  for (const auto& t : r->targets) {
    for (std::size_t i : t.simulated) {
      if (r->candidates[i].fits) {
        EXPECT_GE(r->candidates[i].run.time_to_train_s, top.run.time_to_train_s);
      }
    }
  }
  // Time to train = ceil(tokens / (global batch x seq)) steps x the simulated step time.
  const double steps = std::ceil(1.0e10 / (16.0 * 2048.0));
  EXPECT_DOUBLE_EQ(top.run.steps, steps);
  EXPECT_NEAR(top.run.time_to_train_s, steps * top.result.step_time_s, 1e-6 * top.run.time_to_train_s);
  // Cost = GPU-hours x price (no electricity price given).
  EXPECT_NEAR(top.run.cost, top.run.gpu_hours * r->targets[top.target].price_per_gpu_hour, 1e-6 * top.run.cost);
  // The Pareto front: no simulated candidate is both faster and cheaper than a front point.
  ASSERT_FALSE(r->pareto.empty());
  for (std::size_t p : r->pareto) {
    for (const auto& t : r->targets) {
      for (std::size_t i : t.simulated) {
        const auto& a = r->candidates[i].run;
        const auto& b = r->candidates[p].run;
        EXPECT_FALSE(r->candidates[i].fits && a.time_to_train_s < b.time_to_train_s && a.cost < b.cost);
      }
    }
  }
  EXPECT_FALSE(r->why_top.empty());
  // The closed-form estimate ranks; the simulation decides. They agree within a factor of two here.
  for (const auto& t : r->targets) {
    for (std::size_t i : t.simulated) {
      const Candidate& c = r->candidates[i];
      EXPECT_GT(c.estimate.step_time_s, 0.5 * c.result.step_time_s) << c.describe();
      EXPECT_LT(c.estimate.step_time_s, 2.0 * c.result.step_time_s) << c.describe();
    }
  }
}

TEST(Plan, TheResultDoesNotDependOnTheThreads) {
  const config::PlanSpec spec = load("threads.yaml", kSmall);
  PlanOptions one, two;
  one.threads = 1;
  two.threads = 3;
  auto a = run_plan(spec, one);
  auto b = run_plan(spec, two);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reports::plan_document(spec, *a).dump(), reports::plan_document(spec, *b).dump());
}

TEST(Plan, NoLayoutFitsSaysWhy) {
  const config::PlanSpec spec = load("nofit.yaml",
                                     "model: gpt3-175b\ntraining: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\n"
                                     "hardware:\n  - {name: one node, cluster: dgx-a100-80g, gpus: [8], price_per_gpu_hour: 1}\n"
                                     "search: {tp: [1, 2, 3, 8], pp: [1, 8], zero: [0, 1], micro_batch: [1], recompute: [full]}\n");
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->feasible());
  EXPECT_GT(r->rejected[Rejection::memory].count, 0u);
  EXPECT_GT(r->rejected[Rejection::layout].count, 0u);  // tp 3 divides neither 8 GPUs nor 96 heads
  ASSERT_GE(r->infeasible.size(), 2u);
  EXPECT_NE(r->infeasible[0].find("do not fit in memory"), std::string::npos) << r->infeasible[0];
  EXPECT_NE(r->infeasible[1].find("smallest need"), std::string::npos) << r->infeasible[1];
  EXPECT_GT(r->rejected[Rejection::memory].smallest_need_GiB, 80.0);
}

TEST(Plan, AMissedDeadlineIsExplained) {
  const config::PlanSpec spec = load("deadline.yaml", kSmall + "constraints: {deadline: 1 h}\n");
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->feasible());
  ASSERT_FALSE(r->infeasible.empty());
  EXPECT_NE(r->infeasible[0].find("deadline"), std::string::npos) << r->infeasible[0];
}

TEST(Plan, TheLargeBatchModelSetsTheSteps) {
  const config::PlanSpec spec = load("noise.yaml",
                                     "model: gpt3-1.3b\ntraining: {global_batch: 64, seq_len: 2048}\n"
                                     "hardware:\n  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"
                                     "search: {tp: [1], pp: [1], micro_batch: [1], zero: [1], recompute: [none], global_batch: [64, 256]}\n"
                                     "statistical_efficiency: {b_noise: 128, s_min: 1000}\n");
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->candidates.size(), 2u);
  // S(64) = 1000 (1 + 128 / 64) = 3000 steps; S(256) = 1500.
  EXPECT_DOUBLE_EQ(r->candidates[0].run.steps, 3000);
  EXPECT_DOUBLE_EQ(r->candidates[1].run.steps, 1500);
}

}  // namespace
}  // namespace dtsim::planning
