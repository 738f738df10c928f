// Chrome trace output against the format's requirements: every event has ph, ts, pid, tid and
// name, complete events a duration, processes and threads are named, and no two events of one
// thread overlap; the timeline spans the simulated step.
#include "reports/trace.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "config/simulate_loader.hpp"

namespace dtsim::reports {
namespace {

using json = nlohmann::json;

struct Step {
  config::SimulateConfig cfg;
  hw::Topology topo;
  workloads::Layout layout;
  workloads::StepResult result;
  TraceSelection sel;
};

Step simulate(const std::string& ranks, const std::string& extra = "") {
  const std::string text =
      "cluster: {node: dgx-h100, nodes: 2}\nmodel: gpt3-125m\ntraining: {global_batch: 16, micro_batch: 1, seq_len: 1024}\n"
      "parallel: {tp: 2, pp: 2, sequence_parallel: true}\n" + extra;
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config("trace.yaml", {}, ctx, text);
  EXPECT_TRUE(cfg) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(cfg->cluster);
  auto lay = workloads::Layout::make(cfg->inputs.parallel, topo->gpus());
  std::vector<int> requested;
  if (!ranks.empty()) requested = *parse_rank_list(ranks, topo->gpus());
  TraceSelection sel = select_trace_ranks(requested, *lay, cfg->inputs.symmetric);
  cfg->inputs.record_timeline = true;
  cfg->inputs.timeline_stages = sel.stages;
  auto r = workloads::simulate_step(*topo, cfg->inputs);
  EXPECT_TRUE(r.ok());
  return Step{std::move(*cfg), std::move(*topo), *lay, std::move(*r), sel};
}

// Checks the format and returns the X events per (pid, tid).
std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> check_format(const json& t) {
  EXPECT_TRUE(t.contains("traceEvents"));
  EXPECT_EQ(t.value("displayTimeUnit", ""), "ns");
  std::set<std::pair<int, int>> named_threads;
  std::set<int> named_processes;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const json& e : t["traceEvents"]) {
    for (const char* k : {"ph", "pid", "tid", "name"}) EXPECT_TRUE(e.contains(k)) << k << " missing in " << e.dump();
    const std::string ph = e["ph"];
    if (ph == "M") {
      const std::string n = e["name"];
      EXPECT_TRUE(n == "process_name" || n == "process_sort_index" || n == "thread_name" || n == "thread_sort_index") << n;
      EXPECT_TRUE(e.contains("args"));
      if (n == "process_name") named_processes.insert(e["pid"].get<int>());
      if (n == "thread_name") named_threads.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    EXPECT_EQ(ph, "X");
    EXPECT_TRUE(e.contains("ts") && e["ts"].is_number());
    EXPECT_TRUE(e.contains("dur") && e["dur"].is_number());
    EXPECT_TRUE(e.contains("cat"));
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    const std::pair<int, int> th{e["pid"].get<int>(), e["tid"].get<int>()};
    EXPECT_TRUE(named_threads.count(th)) << "thread without a name: " << e.dump();
    EXPECT_TRUE(named_processes.count(th.first));
    spans[th].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (auto& [th, v] : spans) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) EXPECT_GE(v[i].first + 1e-6, v[i - 1].second) << "overlap on pid " << th.first << " tid " << th.second;
  }
  return spans;
}

TEST(TraceRanks, ParseAndFormat) {
  auto r = parse_rank_list("0-3,6,2", 8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{0, 1, 2, 3, 6}));
  EXPECT_EQ(format_rank_list(*r), "0-3,6");
  EXPECT_FALSE(parse_rank_list("8", 8).ok());
  EXPECT_FALSE(parse_rank_list("3-1", 8).ok());
  EXPECT_FALSE(parse_rank_list("a", 8).ok());
  EXPECT_FALSE(parse_rank_list("", 8).ok());
  EXPECT_NE(parse_rank_list("0-99", 64).error().message.find("ranks 0-63"), std::string::npos);
}

TEST(Trace, DefaultShowsTheFirstRankOfEachStageAndIsWellFormed) {
  const Step s = simulate("");
  // 16 GPUs, tp 2 x pp 2 x dp 4: stage 0 starts at rank 0, stage 1 at rank 8 (tp-cp-dp-pp order).
  EXPECT_EQ(s.sel.ranks, (std::vector<int>{0, 8}));
  EXPECT_EQ(s.sel.stages, (std::vector<int>{0, 1}));
  const json t = json::parse(chrome_trace(s.result, s.layout, s.topo, s.sel, TraceInfo{"t", s.result.layout, s.result.symmetry_note}));
  const auto spans = check_format(t);
  EXPECT_GE(spans.size(), 4u);  // at least compute and communication tracks of two executors
  double end = 0;
  for (const auto& [th, v] : spans) {
    for (const auto& [a, b] : v) end = std::max(end, b);
  }
  // The trace spans the step (microseconds).
  EXPECT_LE(end, s.result.step_time_s * 1e6 + 1e-3);
  EXPECT_GE(end, 0.9 * s.result.step_time_s * 1e6);
  // Thread names list the ranks an executor stands for (its tensor-parallel pair).
  bool named = false;
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"].get<std::string>().rfind("ranks 0-1 (stage 0)", 0) == 0) named = true;
  }
  EXPECT_TRUE(named);
  EXPECT_NE(t["otherData"]["symmetry"].get<std::string>().find("every data-parallel replica"), std::string::npos);
}

TEST(Trace, TheRankFilterBoundsTheSize) {
  const Step one = simulate("0");
  const Step both = simulate("");
  const std::string a = chrome_trace(one.result, one.layout, one.topo, one.sel, {});
  const std::string b = chrome_trace(both.result, both.layout, both.topo, both.sel, {});
  EXPECT_LT(a.size(), b.size());
  EXPECT_EQ(one.sel.stages, (std::vector<int>{0}));
  // Other replicas of stage 0 show the simulated replica's timeline: the same number of events.
  const Step other = simulate("2");
  const std::string c = chrome_trace(other.result, other.layout, other.topo, other.sel, {});
  EXPECT_EQ(json::parse(a)["traceEvents"].size(), json::parse(c)["traceEvents"].size());
}

TEST(Trace, SelectionsAreCutAtTheExecutorLimit) {
  workloads::ParallelSpec p;
  p.pp = 128;
  auto lay = workloads::Layout::make(p, 128);
  ASSERT_TRUE(lay.ok());
  std::vector<int> all(128);
  for (int i = 0; i < 128; ++i) all[static_cast<std::size_t>(i)] = i;
  const TraceSelection sel = select_trace_ranks(all, *lay, true);
  EXPECT_TRUE(sel.cut);
  EXPECT_EQ(sel.executors, kMaxTraceExecutors);
}

}  // namespace
}  // namespace dtsim::reports
