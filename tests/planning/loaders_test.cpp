// Sweep and plan specifications: points in the documented order, derived axes, and every kind of
// bad input reported with its file, line and field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/plan_loader.hpp"
#include "config/sweep_loader.hpp"

namespace dtsim::config {
namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path) << text;
  return path;
}

const std::string kBase =
    "base:\n"
    "  cluster: {node: dgx-h100, nodes: 1}\n"
    "  model: gpt3-1.3b\n"
    "  training: {global_batch: 64, micro_batch: 1, seq_len: 2048}\n";

bool has_error(const LoadContext& ctx, int line, const std::string& text) {
  for (const auto& d : ctx.diagnostics.items()) {
    if ((line == 0 || d.where.line == line) && d.to_string().find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(SweepSpec, ProductVariesTheLastAxisFastest) {
  const auto path = write_temp("product.yaml", kBase + "axes:\n  gpus: [8, 16]\n  parallel.tp: [1, 2]\n");
  LoadContext ctx;
  auto s = load_sweep_spec(path, ctx);
  ASSERT_TRUE(s) << ctx.diagnostics.to_string();
  ASSERT_EQ(s->points.size(), 4u);
  EXPECT_EQ(s->points[0].label, "gpus=8, parallel.tp=1");
  EXPECT_EQ(s->points[1].label, "gpus=8, parallel.tp=2");
  EXPECT_EQ(s->points[2].label, "gpus=16, parallel.tp=1");
  EXPECT_EQ(s->points[3].axes["gpus"], 16);
  EXPECT_EQ(s->scaling, Scaling::strong);  // a gpus axis scales strongly unless told
  EXPECT_EQ(s->base_gpus, 8);
  // 8 GPUs: one node of 8; 16: two nodes; dp follows.
  const auto& a = s->points[0].sets;
  EXPECT_NE(std::find(a.begin(), a.end(), "cluster.nodes=1"), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "cluster.gpus_per_node=8"), a.end());
  const auto& c = s->points[2].sets;
  EXPECT_NE(std::find(c.begin(), c.end(), "cluster.nodes=2"), c.end());
  EXPECT_NE(std::find(c.begin(), c.end(), "parallel.tp=1"), c.end());
  // Every point loads as a configuration with its GPU count.
  LoadContext pc;
  auto cfg = load_sweep_point(*s, s->points[3], pc);
  ASSERT_TRUE(cfg) << pc.diagnostics.to_string();
  EXPECT_EQ(cfg->cluster.groups.front().count, 2);
  EXPECT_EQ(cfg->inputs.parallel.tp, 2);
}

TEST(SweepSpec, ZipPairsValuesAndNeedsEqualLengths) {
  LoadContext ok;
  auto s = load_sweep_spec(write_temp("zip.yaml", kBase + "axes:\n  parallel.tp: [1, 2, 4]\n  training.micro_batch: [1, 2, 4]\ncombine: zip\n"), ok);
  ASSERT_TRUE(s) << ok.diagnostics.to_string();
  ASSERT_EQ(s->points.size(), 3u);
  EXPECT_EQ(s->points[2].label, "parallel.tp=4, training.micro_batch=4");
  LoadContext bad;
  EXPECT_FALSE(load_sweep_spec(write_temp("zip-bad.yaml", kBase + "axes:\n  parallel.tp: [1, 2, 4]\n  training.micro_batch: [1, 2]\ncombine: zip\n"), bad));
  EXPECT_TRUE(has_error(bad, 7, "zip needs axes of one length")) << bad.diagnostics.to_string();
}

TEST(SweepSpec, WeakScalingKeepsTheBatchPerGpu) {
  LoadContext ctx;
  auto s = load_sweep_spec(write_temp("weak.yaml", kBase + "axes:\n  gpus: [8, 32]\nscaling: weak\n"), ctx);
  ASSERT_TRUE(s) << ctx.diagnostics.to_string();
  const auto& b = s->points[1].sets;
  EXPECT_NE(std::find(b.begin(), b.end(), "training.global_batch=256"), b.end());  // 64 / 8 x 32
  // 60 sequences on 8 GPUs is 7.5 per GPU: one GPU cannot keep it.
  LoadContext frac;
  EXPECT_FALSE(load_sweep_spec(write_temp("weak-bad.yaml", "base:\n  cluster: {node: dgx-h100, nodes: 1}\n  model: gpt3-1.3b\n"
                                                           "  training: {global_batch: 60}\naxes:\n  gpus: [8, 1]\nscaling: weak\n"),
                               frac));
  EXPECT_TRUE(has_error(frac, 6, "fractional global batch")) << frac.diagnostics.to_string();
}

TEST(SweepSpec, UnknownAxisIsAnErrorAtItsLine) {
  LoadContext ctx;
  EXPECT_FALSE(load_sweep_spec(write_temp("unknown.yaml", kBase + "axes:\n  parallel.tpp: [1, 2]\n"), ctx));
  EXPECT_TRUE(has_error(ctx, 6, "unknown axis 'parallel.tpp'")) << ctx.diagnostics.to_string();
  EXPECT_TRUE(has_error(ctx, 6, "unknown field (did you mean")) << ctx.diagnostics.to_string();
  LoadContext top;
  EXPECT_FALSE(load_sweep_spec(write_temp("unknown2.yaml", kBase + "axes:\n  trainin.global_batch: [8]\n"), top));
  EXPECT_TRUE(has_error(top, 6, "unknown axis")) << top.diagnostics.to_string();
}

TEST(SweepSpec, EmptySweepsAreErrors) {
  LoadContext none;
  EXPECT_FALSE(load_sweep_spec(write_temp("empty1.yaml", kBase + "axes: {}\n"), none));
  EXPECT_TRUE(has_error(none, 0, "the sweep is empty")) << none.diagnostics.to_string();
  LoadContext novalues;
  EXPECT_FALSE(load_sweep_spec(write_temp("empty2.yaml", kBase + "axes:\n  parallel.tp: []\n"), novalues));
  EXPECT_TRUE(has_error(novalues, 6, "the axis has no values")) << novalues.diagnostics.to_string();
  LoadContext noaxes;
  EXPECT_FALSE(load_sweep_spec(write_temp("empty3.yaml", kBase), noaxes));
  EXPECT_TRUE(has_error(noaxes, 0, "axes: is required")) << noaxes.diagnostics.to_string();
}

TEST(SweepSpec, ErrorsInAnInlineBaseKeepTheSpecsLines) {
  LoadContext ctx;
  const std::string text =
      "question: q\n"
      "base:\n"
      "  cluster: {node: dgx-h100, nodes: 1}\n"
      "  model: gpt3-1.3b\n"
      "  training: {global_batch: 64, micro_batch: 1, seq_len: 2048, precision: bf17}\n"
      "axes:\n  parallel.tp: [1]\n";
  const auto path = write_temp("inline-bad.yaml", text);
  EXPECT_FALSE(load_sweep_spec(path, ctx));
  ASSERT_FALSE(ctx.diagnostics.empty());
  const auto& d = ctx.diagnostics.items().front();
  EXPECT_EQ(d.where.file, path);
  EXPECT_EQ(d.where.line, 5);
  EXPECT_EQ(d.field, "training.precision");
}

TEST(SweepSpec, BaseFileIsRelativeToTheSpec) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "sweep-base";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "base.yaml") << "cluster: {node: dgx-h100, nodes: 1}\nmodel: gpt3-1.3b\ntraining: {global_batch: 64}\n";
  std::ofstream(dir / "spec.yaml") << "base: base.yaml\naxes:\n  training.micro_batch: [1, 2]\n";
  LoadContext ctx;
  auto s = load_sweep_spec((dir / "spec.yaml").string(), ctx);
  ASSERT_TRUE(s) << ctx.diagnostics.to_string();
  EXPECT_EQ(s->base_path, (dir / "base.yaml").string());
  EXPECT_EQ(s->points.size(), 2u);
}

TEST(SweepSpec, GpusAxisNeedsANodeCluster) {
  LoadContext ctx;
  EXPECT_FALSE(load_sweep_spec(
      write_temp("gpus-preset.yaml", "base:\n  cluster: dgx-h100-superpod-su\n  model: gpt3-1.3b\n  training: {global_batch: 64}\naxes:\n  gpus: [8]\n"), ctx));
  EXPECT_TRUE(has_error(ctx, 6, "needs a base cluster of one node kind")) << ctx.diagnostics.to_string();
}

TEST(SweepSpec, TheFingerprintFollowsThePoints) {
  LoadContext a, b, c;
  auto s1 = load_sweep_spec(write_temp("fp1.yaml", kBase + "axes:\n  parallel.tp: [1, 2]\n"), a);
  auto s2 = load_sweep_spec(write_temp("fp2.yaml", kBase + "axes:\n  parallel.tp: [1, 2]\n"), b);
  auto s3 = load_sweep_spec(write_temp("fp3.yaml", kBase + "axes:\n  parallel.tp: [1, 4]\n"), c);
  ASSERT_TRUE(s1 && s2 && s3);
  EXPECT_EQ(s1->fingerprint, s2->fingerprint);
  EXPECT_NE(s1->fingerprint, s3->fingerprint);
}

const std::string kPlan =
    "model: gpt3-1.3b\n"
    "training: {global_batch: 64, seq_len: 2048, tokens: 1.0e9}\n"
    "hardware:\n"
    "  - {name: H100, cluster: {node: dgx-h100}, gpus: [8, 16], price_per_gpu_hour: 2.5}\n";

TEST(PlanSpec, TargetsAreHardwareTimesGpuCounts) {
  LoadContext ctx;
  auto s = load_plan_spec(write_temp("plan.yaml", kPlan + "  - {name: A100, cluster: dgx-a100-80g, gpus: [4], price_per_gpu_hour: 1.5}\n"
                                                          "constraints: {deadline: 3 days}\n"),
                          ctx);
  ASSERT_TRUE(s) << ctx.diagnostics.to_string();
  ASSERT_EQ(s->targets.size(), 3u);
  EXPECT_EQ(s->targets[1].gpus, 16);
  EXPECT_EQ(s->targets[1].base.cluster.groups.front().count, 2);
  EXPECT_EQ(s->targets[2].base.cluster.groups.front().gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(s->targets[2].base.prices.gpu_hour, 1.5);
  EXPECT_DOUBLE_EQ(s->targets[0].base.budget.tokens, 1.0e9);
  EXPECT_DOUBLE_EQ(s->constraints.deadline_s, 3 * 86400.0);
}

TEST(PlanSpec, MissingPriceIsAnErrorNamingTheOption) {
  LoadContext ctx;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-noprice.yaml", kPlan + "  - {name: A100, cluster: dgx-a100-80g, gpus: [8]}\n"), ctx));
  EXPECT_TRUE(has_error(ctx, 5, "hardware option 'A100' has no price")) << ctx.diagnostics.to_string();
}

TEST(PlanSpec, BadInputNamesTheLine) {
  LoadContext nodes;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-nodes.yaml", kPlan + "  - {name: X, cluster: {node: dgx-h100, nodes: 4}, gpus: [8], price_per_gpu_hour: 1}\n"), nodes));
  EXPECT_TRUE(has_error(nodes, 5, "follows from gpus")) << nodes.diagnostics.to_string();
  LoadContext searched;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-tp.yaml", kPlan + "parallel: {tp: 4}\n"), searched));
  EXPECT_TRUE(has_error(searched, 5, "is chosen by the search")) << searched.diagnostics.to_string();
  LoadContext whole;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-gpus.yaml", kPlan + "  - {name: Y, cluster: dgx-h100, gpus: [12], price_per_gpu_hour: 1}\n"), whole));
  EXPECT_TRUE(has_error(whole, 5, "not a whole number of 8-GPU nodes")) << whole.diagnostics.to_string();
  LoadContext deadline;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-deadline.yaml", kPlan + "constraints: {deadline: soon}\n"), deadline));
  EXPECT_TRUE(has_error(deadline, 5, "not a duration")) << deadline.diagnostics.to_string();
  LoadContext budget;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-budget.yaml", "model: gpt3-1.3b\ntraining: {global_batch: 64}\nhardware:\n"
                                                             "  - {name: H100, cluster: dgx-h100, gpus: [8], price_per_gpu_hour: 2.5}\n"),
                              budget));
  EXPECT_TRUE(has_error(budget, 0, "needs the amount of training")) << budget.diagnostics.to_string();
  LoadContext unknown;
  EXPECT_FALSE(load_plan_spec(write_temp("plan-unknown.yaml", kPlan + "serch: {tp: [1]}\n"), unknown));
  EXPECT_TRUE(has_error(unknown, 5, "unknown field (did you mean 'search'?)")) << unknown.diagnostics.to_string();
}

TEST(PlanSpec, Durations) {
  EXPECT_DOUBLE_EQ(*parse_duration_s("60 days"), 60 * 86400.0);
  EXPECT_DOUBLE_EQ(*parse_duration_s("36 h"), 36 * 3600.0);
  EXPECT_DOUBLE_EQ(*parse_duration_s("2 weeks"), 14 * 86400.0);
  EXPECT_FALSE(parse_duration_s("soon"));
  EXPECT_FALSE(parse_duration_s("3 fortnights"));
}

}  // namespace
}  // namespace dtsim::config
