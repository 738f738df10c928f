// The layout search: candidates counted and rejected by reason, the best of every option simulated,
// the Pareto front non-dominated, time to train from the budget (or the large-batch model), the
// explanation present, infeasible plans explained, and the result independent of the threads.
#include "planning/search.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
  EXPECT_EQ(r->rejected[Rejection::policy].count + r->rejected[Rejection::layout].count + r->rejected[Rejection::memory].count +
                r->rejected[Rejection::run].count + r->estimated,
            r->enumerated);
  EXPECT_EQ(r->rejected[Rejection::run].count, 0u);
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

// A budget that gives no number of steps for the model (tokens for a CNN; epochs without a
// dataset) is refused when the plan is read, at the line of the budget, as `dtsim simulate` does.
TEST(Plan, ABudgetThatCannotApplyToTheModelIsRefusedWithItsLine) {
  config::LoadContext ctx;
  const std::string tokens = write_temp("cnn-tokens.yaml",
                                        "model: resnet50\n"
                                        "training: {global_batch: 256, tokens: 1e9}\n"
                                        "hardware:\n  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n");
  EXPECT_FALSE(config::load_plan_spec(tokens, ctx));
  // "tokens" starts in column 31 of line 2.
  EXPECT_NE(ctx.diagnostics.to_string().find(tokens + ":2:31: training.tokens: a token budget needs a model with a sequence length"), std::string::npos)
      << ctx.diagnostics.to_string();
  config::LoadContext ctx2;
  const std::string epochs = write_temp("epochs-no-data.yaml",
                                        "model: gpt3-1.3b\n"
                                        "training: {global_batch: 64, seq_len: 2048, epochs: 3}\n"
                                        "hardware:\n  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n");
  EXPECT_FALSE(config::load_plan_spec(epochs, ctx2));
  EXPECT_NE(ctx2.diagnostics.to_string().find(epochs + ":2:"), std::string::npos) << ctx2.diagnostics.to_string();
  EXPECT_NE(ctx2.diagnostics.to_string().find("epochs need a dataset"), std::string::npos) << ctx2.diagnostics.to_string();
}

// Should a candidate's time and cost still fail (a spec not from the loader), it is rejected with the
// reason and never ranked: no "0 min, 0 USD" recommendation.
TEST(Plan, ACandidateWithoutTimeAndCostIsRejectedNeverRanked) {
  const std::string text =
      "model: resnet50\n"
      "training: {global_batch: 256, samples: 1.0e6}\n"
      "hardware:\n"
      "  - {name: broken, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"
      "  - {name: fine, cluster: dgx-h100, gpus: [16], price_per_gpu_hour: 2.5}\n"
      "search: {micro_batch: [4, 8], zero: [0, 1]}\n";
  config::PlanSpec spec = load("cnn-run.yaml", text);
  ASSERT_EQ(spec.targets.size(), 2u);
  // A token budget for a CNN on the first target only.
  spec.targets[0].base.budget.samples = 0;
  spec.targets[0].base.budget.tokens = 1e9;
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // A CNN searches tp 1, pp 1, no recomputation: 2 micro-batches x 2 ZeRO stages per target.
  EXPECT_EQ(r->enumerated, 8u);
  EXPECT_EQ(r->targets[0].rejected[Rejection::run].count, 4u);
  EXPECT_NE(r->targets[0].rejected[Rejection::run].example.begin()->second.find("training.tokens: a token budget needs a model with a sequence length"),
            std::string::npos);
  for (const Candidate& c : r->candidates) EXPECT_EQ(c.target, 1u) << c.describe();
  ASSERT_TRUE(r->feasible());
  const Candidate& top = r->candidates[*r->top];
  EXPECT_EQ(top.target, 1u);
  // 1e6 samples / 256 per step = 3906.25: 3907 steps.
  EXPECT_DOUBLE_EQ(top.run.steps, 3907);
  EXPECT_GT(top.run.time_to_train_s, 0);
  EXPECT_GT(top.run.cost, 0);

  // Every target broken: no recommendation, and the reason.
  spec.targets[1].base.budget = spec.targets[0].base.budget;
  auto none = run_plan(spec);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->feasible());
  EXPECT_TRUE(none->candidates.empty());
  EXPECT_EQ(none->rejected[Rejection::run].count, 8u);
  ASSERT_GE(none->infeasible.size(), 2u);
  EXPECT_NE(none->infeasible[0].find("8 have no time to train or cost"), std::string::npos) << none->infeasible[0];
  EXPECT_NE(none->infeasible[1].find("a token budget needs a model with a sequence length"), std::string::npos) << none->infeasible[1];
}

// When search.global_batch has several values, every description names the candidate's global
// batch, and the header says what was searched.
TEST(Plan, ASearchedGlobalBatchIsNamed) {
  const config::PlanSpec spec = load("gb.yaml",
                                     "model: gpt3-1.3b\ntraining: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\n"
                                     "hardware:\n  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"
                                     "search: {tp: [1], pp: [1], micro_batch: [1], zero: [1], recompute: [none], global_batch: [32, 128]}\n");
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->candidates.size(), 2u);
  EXPECT_EQ(r->candidates[0].describe(), "global batch 32, tp 1, pp 1, dp 8, cp 1, mb 1, no recompute, ZeRO-1, 1f1b");
  EXPECT_EQ(r->candidates[1].describe(), "global batch 128, tp 1, pp 1, dp 8, cp 1, mb 1, no recompute, ZeRO-1, 1f1b");
  const auto doc = reports::plan_document(spec, *r);
  EXPECT_EQ(doc["rows"][0]["summary"]["short_label"], "H100 x8: gb32 tp1 pp1 dp8 mb1 norc Z1");
  EXPECT_EQ(doc["rows"][1]["summary"]["short_label"], "H100 x8: gb128 tp1 pp1 dp8 mb1 norc Z1");
  EXPECT_EQ(doc["setup"]["global_batch"], nlohmann::json::array({32, 128}));
  const std::string text = reports::render_plan(spec, *r);
  EXPECT_NE(text.find("global batch searched: 32, 128 x 2048 tokens"), std::string::npos) << text;
  EXPECT_EQ(text.find("global batch 64"), std::string::npos) << text;

  // One value: the layout alone, and the header gives that value (not the training's).
  const config::PlanSpec one = load("gb1.yaml",
                                    "model: gpt3-1.3b\ntraining: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\n"
                                    "hardware:\n  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"
                                    "search: {tp: [1], pp: [1], micro_batch: [1], zero: [1], recompute: [none], global_batch: [128]}\n");
  auto r1 = run_plan(one);
  ASSERT_TRUE(r1.ok());
  ASSERT_EQ(r1->candidates.size(), 1u);
  EXPECT_EQ(r1->candidates[0].describe(), "tp 1, pp 1, dp 8, cp 1, mb 1, no recompute, ZeRO-1, 1f1b");
  EXPECT_NE(reports::render_plan(one, *r1).find("; global batch 128 x 2048 tokens"), std::string::npos);
}

std::size_t at(const std::string& s, const std::string& what) {
  const std::size_t p = s.find(what);
  EXPECT_NE(p, std::string::npos) << "'" << what << "' not in: " << s;
  return p;
}

// Near misses are explained on the objective first: with the cost objective, by how much more they
// cost, then how much faster or slower they are; with the time objective the other way round.
TEST(Plan, NearMissesLeadWithTheObjective) {
  const config::PlanSpec spec = load("cost.yaml", kSmall + "constraints: {objective: cost}\n");
  auto r = run_plan(spec);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->feasible());
  ASSERT_EQ(r->objective, "cost");
  const Candidate& w = r->candidates[*r->top];
  bool faster_seen = false;
  ASSERT_FALSE(r->near_misses.empty());
  for (const auto& [i, why] : r->near_misses) {
    const Candidate& c = r->candidates[i];
    // Ranked by cost after the top choice: never cheaper.
    ASSERT_GE(c.run.cost, w.run.cost);
    const double dc = c.run.cost - w.run.cost, dt = c.run.time_to_train_s - w.run.time_to_train_s;
    if (dc < 0.005 * w.run.cost) continue;  // a tie on cost
    char money[64];
    std::snprintf(money, sizeof money, dc < 10 ? "costs %.2f USD more" : "costs %.0f USD more", dc);
    const std::size_t cost_at = at(why, money);
    if (dt < -0.005 * w.run.time_to_train_s) {
      faster_seen = true;
      EXPECT_GT(at(why, "faster"), cost_at) << why;
      // Faster: no "+X of <kind of time>" as if it were slower.
      for (const char* kind : {"of compute", "of data-parallel", "of tensor-parallel", "of pipeline", "of optimizer"}) {
        EXPECT_EQ(why.find(kind), std::string::npos) << why;
      }
    } else if (dt > 0.005 * w.run.time_to_train_s) {
      EXPECT_GT(at(why, "slower"), cost_at) << why;
    }
  }
  EXPECT_TRUE(faster_seen) << "a near miss that is faster but costs more";
  // The runner-up on the same hardware is compared on cost too.
  bool runner_up = false;
  for (const auto& line : r->why_top) {
    if (line.rfind("On the same hardware", 0) == 0) {
      runner_up = true;
      EXPECT_NE(line.find("USD"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(runner_up);

  // The time objective: the time difference first.
  const config::PlanSpec tspec = load("time.yaml", kSmall);
  auto t = run_plan(tspec);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->feasible());
  const Candidate& tw = t->candidates[*t->top];
  ASSERT_FALSE(t->near_misses.empty());
  for (const auto& [i, why] : t->near_misses) {
    const Candidate& c = t->candidates[i];
    ASSERT_GE(c.run.time_to_train_s, tw.run.time_to_train_s);
    if (c.run.time_to_train_s - tw.run.time_to_train_s < 0.005 * tw.run.time_to_train_s) continue;
    EXPECT_LT(at(why, "slower"), at(why, "costs")) << why;
  }
}

}  // namespace
}  // namespace dtsim::planning
