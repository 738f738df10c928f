// `dtsim fit`'s model fitting.
//  - Closed forms: synthetic records whose times come from dtsim's own models with known
//    parameter values (they are test fixtures, never measurements) must give those values back.
//  - Published data: the nccl-tests all-reduce figures of Azure ND A100 v4 and ND H100 v5
//    (data/calibration/published/, reformatted from data/published/) fitted into a profile that
//    predicts them better than dtsim's defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "calibrate/fit.hpp"
#include "calibrate/fit_settings.hpp"
#include "calibrate/published.hpp"
#include "comm/collective.hpp"
#include "config/hardware.hpp"
#include "config/profile.hpp"
#include "hw/topology.hpp"
#include "workloads/compute.hpp"

namespace dtsim::calibrate {
namespace {

using nlohmann::json;

std::string temp(const std::string& name) {
  const auto p = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove(p);
  return p.string();
}

const json kDevice = {{"name", "NVIDIA H100 80GB HBM3"}, {"sms", 132}, {"note", "synthetic test fixture, not a measurement"}};

json record(const std::string& suite, const std::string& point, json params, double time_s) {
  return {{"schema", kCalibrateSchema}, {"suite", suite}, {"point", point}, {"status", "ok"}, {"params", params},
          {"result", {{"time_s", time_s}}}, {"device", kDevice}};
}

hw::GpuSpec h100() {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{"dgx-h100", 1, std::nullopt}, ctx);
  return spec->groups.front().node.gpu;
}

double param(const FitResult& r, const std::string& name) {
  const auto it = r.params.find(name);
  EXPECT_NE(it, r.params.end()) << name;
  if (it == r.params.end()) return NAN;
  return std::stod(it->second);  // "3.000 us" reads as 3.0 (microseconds)
}

// Records written through the harness's ResultLog and read back, as `dtsim fit` reads them.
Dataset through_jsonl(const std::vector<json>& recs, const std::string& name) {
  const std::string path = temp(name);
  {
    auto log = ResultLog::open(path, false);
    EXPECT_TRUE(log.ok());
    for (const auto& r : recs) EXPECT_TRUE(log->append(r).ok());
  }
  auto read = read_records(path);
  EXPECT_TRUE(read.ok()) << read.error().message;
  Dataset d;
  const Status st = add_records(d, *read);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return d;
}

TEST(Fit, RecoversComputeParametersFromClosedForms) {
  // Truth: kernel overhead 3 us, memory efficiency 0.9, bf16 efficiency 0.72, fp8 0.61,
  // k_half 300 on the H100 preset; times are dtsim's own kernel times with these values.
  workloads::ComputeParams truth;
  truth.kernel_overhead = Time::us(3);
  truth.memory_efficiency = 0.9;
  truth.gemm_efficiency[static_cast<std::size_t>(hw::DType::bf16)] = 0.72;
  truth.gemm_efficiency[static_cast<std::size_t>(hw::DType::fp8)] = 0.61;
  truth.k_half = 300;
  const workloads::ComputeModel cm(h100(), truth);
  std::vector<json> recs;
  recs.push_back(record("overhead", "overhead/kernel_gpu", {{"what", "kernel_gpu"}}, 3e-6));
  for (double mb : {1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0}) {
    const double bytes = mb * (1 << 20);
    for (const char* k : {"copy", "triad"}) {
      recs.push_back(record("memory", fmt::format("memory/{}/{}", k, bytes), {{"kernel", k}, {"bytes", bytes}},
                            cm.kernel_time(workloads::memory_op(k, bytes)).seconds()));
    }
  }
  for (hw::DType d : {hw::DType::bf16, hw::DType::fp8}) {
    for (std::int64_t m : {512, 2048, 8192}) {
      for (std::int64_t n : {1024, 4096}) {
        for (std::int64_t k : {64, 256, 1024, 4096, 16384}) {
          const int in = d == hw::DType::fp8 ? 1 : 2;
          const double t = cm.kernel_time(workloads::gemm("g", m, n, k, 1, d, in, 2)).seconds();
          recs.push_back(record("gemm", fmt::format("gemm/{}/{}x{}x{}", hw::to_string(d), m, n, k),
                                {{"dtype", hw::to_string(d)}, {"m", m}, {"n", n}, {"k", k}, {"batch", 1}, {"a_bytes", in}, {"c_bytes", 2}}, t));
        }
      }
    }
  }
  const Dataset d = through_jsonl(recs, "compute.jsonl");
  EXPECT_EQ(d.gemm.size(), 60u);
  EXPECT_EQ(d.device_name, "NVIDIA H100 80GB HBM3");
  auto r = fit_profile(d, FitOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->gpu_preset, "h100-sxm");
  EXPECT_DOUBLE_EQ(param(*r, "compute.kernel_overhead"), 3.0);
  EXPECT_NEAR(param(*r, "compute.memory.efficiency"), 0.9, 1e-4);
  EXPECT_NEAR(param(*r, "compute.gemm.efficiency.bf16"), 0.72, 1e-4);
  EXPECT_NEAR(param(*r, "compute.gemm.efficiency.fp8"), 0.61, 1e-4);
  EXPECT_NEAR(param(*r, "compute.gemm.k_half"), 300.0, 0.1);
  // The held-out residuals of an exact model are (rounding) zero; the defaults are not.
  for (const auto& s : r->residuals) {
    if (s.model == "profile") {
      EXPECT_GT(s.held_out, 0) << s.suite;
      EXPECT_LT(s.worst, 1e-3) << s.suite;
    }
    if (s.model == "defaults" && s.suite == "gemm.bf16") {
      EXPECT_GT(s.median, 0.05);
    }
  }
}

TEST(Fit, RecoversEachMemoryKindsBandwidthAndFixedCost) {
  // Truth: layer norm forward at 0.5 of HBM with 7 us fixed cost, GELU backward at 0.6 with 5 us,
  // dropout+residual bound by 300 operations per element with 2 us; times from dtsim's own model.
  workloads::ComputeParams truth;
  truth.kinds[static_cast<std::size_t>(workloads::MemoryKind::norm)] = {0.5, Time::us(7)};
  truth.kinds[static_cast<std::size_t>(workloads::MemoryKind::activation_bwd)] = {0.6, Time::us(5)};
  truth.kinds[static_cast<std::size_t>(workloads::MemoryKind::dropout)].overhead = Time::us(2);
  truth.dropout_ops = 300;
  const workloads::ComputeModel cm(h100(), truth);
  std::vector<json> recs;
  recs.push_back(record("overhead", "overhead/kernel_gpu", {{"what", "kernel_gpu"}}, 4e-6));
  for (std::int64_t tokens : {2048, 8192, 32768}) {
    for (std::int64_t hidden : {768, 2048, 4096, 8192}) {
      const double act = static_cast<double>(tokens * hidden) * 2;
      const auto ln = workloads::memory_op("ln", 2 * act, hw::DType::bf16, workloads::MemoryKind::norm);
      const auto gb = workloads::memory_op("gelu", 3 * act, hw::DType::bf16, workloads::MemoryKind::activation_bwd);
      auto dr = workloads::memory_op("dr", 3 * act, hw::DType::bf16, workloads::MemoryKind::dropout);
      dr.elements = static_cast<double>(tokens * hidden);
      dr.hash_rng = true;  // the harness's dropout kernels draw from a hash
      const json shape = {{"tokens", tokens}, {"hidden", hidden}};
      auto p = [&](const char* k, double bytes) {
        json j = shape;
        j["kernel"] = k;
        j["bytes"] = bytes;
        return j;
      };
      recs.push_back(record("memory", fmt::format("ln/{}/{}", tokens, hidden), p("layernorm_fwd", 2 * act), cm.kernel_time(ln).seconds()));
      recs.push_back(record("memory", fmt::format("gb/{}/{}", tokens, hidden), p("gelu_bwd", 3 * act), cm.kernel_time(gb).seconds()));
      recs.push_back(record("memory", fmt::format("dr/{}/{}", tokens, hidden), p("dropout_residual", 3 * act), cm.kernel_time(dr).seconds()));
    }
  }
  const Dataset d = through_jsonl(recs, "memory-kinds.jsonl");
  auto r = fit_profile(d, FitOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(param(*r, "compute.memory.norm.efficiency"), 0.5, 1e-3);
  EXPECT_NEAR(param(*r, "compute.memory.norm.overhead"), 7.0, 0.01);
  EXPECT_NEAR(param(*r, "compute.memory.activation_bwd.efficiency"), 0.6, 1e-3);
  EXPECT_NEAR(param(*r, "compute.memory.activation_bwd.overhead"), 5.0, 0.01);
  EXPECT_NEAR(param(*r, "compute.dropout_ops"), 300, 0.5);
  EXPECT_NEAR(param(*r, "compute.memory.dropout.overhead"), 2.0, 0.01);
}

TEST(Fit, RecoversAlphaBetaAndTheSimulatorsCollectiveParameters) {
  // Truth on 8 GPUs of a DGX H100 with NVLS: latency 30 us, efficiency 0.7. Times are dtsim's
  // own NVLS all-reduce times with these values (alone on the node).
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{"dgx-h100", 1, std::nullopt}, ctx);
  auto topo = hw::Topology::build(*spec);
  comm::CommParams truth = comm::CommParams::nccl_defaults();
  truth.nvls_latency = Time::us(30);
  truth.nvls_efficiency = 0.7;
  hw::Router router(*topo);
  comm::Planner planner(*topo, router, truth);
  std::vector<json> recs;
  for (std::int64_t s = 1024; s <= (std::int64_t{1} << 32); s *= 2) {
    comm::CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes(s);
    req.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    req.algo = comm::Algo::nvls;
    const double t = comm::simulate_alone(*topo, *planner.plan(req)).seconds();
    recs.push_back(record("nccl", fmt::format("nccl/allreduce/{}", s),
                          {{"op", "allreduce"}, {"bytes", s}, {"ranks", 8}, {"nodes", 1}, {"in_place", true}, {"algo", "NVLS"}}, t));
    // One rank: t = 4 us + s / 200 GB/s exactly (alpha-beta only; NCCL moves nothing).
    recs.push_back(record("nccl", fmt::format("nccl/allreduce/1rank/{}", s),
                          {{"op", "allreduce"}, {"bytes", s}, {"ranks", 1}, {"nodes", 1}, {"in_place", false}}, 4e-6 + s / 200e9));
  }
  const Dataset d = through_jsonl(recs, "nccl.jsonl");
  auto r = fit_profile(d, FitOptions{});
  ASSERT_TRUE(r.ok()) << r.error().message;
  // NVLS pays one synchronisation per loop and the loops grow with the size (issue 12,
  // docs/model.md), and below 2 MiB only the first of its 16 channels carry data (one 128 KiB
  // block each): at 0.7 of NVLink 4's 369 GB/s that adds 8.6 us at 128 KiB, 4.6 us at 1 MiB
  // over an even split (by hand: 128 KiB x 1.125 x 16 / 258 GB/s = 9.1 us against 0.6). The
  // fit maps an alpha-beta line through the points onto the knobs, and the line takes part of
  // that bump into its intercept: recovered within 3 us (a third of the bump) and 3%.
  EXPECT_NEAR(param(*r, "comm.nvls.latency"), 30.0, 3.0);
  EXPECT_NEAR(param(*r, "comm.nvls.efficiency"), 0.7, 0.021);
  // The NVLS data moves nothing else; the profile picks the fastest fitted pair, not by NCCL's
  // tuner model (comm/params.hpp, choice).
  EXPECT_EQ(r->params.size(), 3u);
  EXPECT_EQ(r->params.at("comm.choice"), "fastest-on-one-node");  // the data is from one node
  ASSERT_EQ(r->fit["nccl"].size(), 2u);
  const json& one = r->fit["nccl"][1];
  EXPECT_EQ(one["ranks"], 1);
  ASSERT_EQ(one["regimes"].size(), 1u);
  EXPECT_NEAR(one["regimes"][0]["alpha_us"].get<double>(), 4.0, 1e-4);
  EXPECT_NEAR(one["regimes"][0]["bandwidth_GBps"].get<double>(), 200.0, 1e-2);
  for (const auto& s : r->residuals) {
    if (s.model != "defaults") {
      // The alpha-beta line misses the loop steps and the channel bump by up to 15%; the fitted
      // simulator keeps their shape, off by the intercept above.
      EXPECT_LT(s.worst, s.model == "alpha-beta" ? 0.15 : 0.08) << s.suite << " " << s.model;
    }
  }
}

// A log that states its NCCL settings in its INFO lines (NCCL_DEBUG=INFO) is fitted under them:
// the algorithm and protocol it allowed, and NCCL_BUFFSIZE, which sets the tree's chunk (one step
// of the buffer) and so its pipeline fill. Truth: 2 DGX H100 nodes, tree/Simple with bandwidth
// factor 0.35 and 20 us per network step, an 8 MiB buffer; the times are dtsim's own with these
// values (test fixtures, not measurements), printed as nccl-tests prints them.
TEST(Fit, FitsALogUnderTheNcclSettingsItsInfoLinesState) {
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{"dgx-h100", 2, std::nullopt}, ctx);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  auto topo = hw::Topology::build(*spec);
  ASSERT_TRUE(topo.ok());
  comm::CommParams truth = comm::CommParams::nccl_defaults();
  truth.tree_simple = 0.35;
  truth.lat(comm::Algo::tree, comm::Protocol::simple).step[static_cast<std::size_t>(comm::Transport::net)] = Time::us(20);
  truth.buffsize = Bytes::MiB(8);
  hw::Router router(*topo);
  comm::Planner planner(*topo, router, truth);
  std::string rows;
  for (std::int64_t s = std::int64_t{1} << 20; s <= (std::int64_t{1} << 32); s *= 4) {
    comm::CollectiveRequest req;
    req.op = CollOp::allreduce;
    req.size = Bytes(s);
    for (int i = 0; i < 16; ++i) req.ranks.push_back(i);
    req.algo = comm::Algo::tree;
    req.protocol = comm::Protocol::simple;
    const double us = comm::simulate_alone(*topo, *planner.plan(req)).seconds() * 1e6;
    const double algbw = s / us / 1e3, busbw = algbw * 30 / 16;
    rows += fmt::format("{:>12} {:>13} float sum -1 {:8.1f} {:7.2f} {:7.2f} 0 {:8.1f} {:7.2f} {:7.2f} 0\n", s, s / 4, us, algbw, busbw, us,
                        algbw, busbw);
  }
  const std::string text =
      "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 4294967296 step: 2(factor) warmup iters: 5 iters: 20\n"
      "host1:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree\n"
      "host1:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
      "host1:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608\n"
      "host1:1:1 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 4\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
      rows;
  auto log = parse_nccl_tests(text, "all_reduce_perf-settings.log");
  ASSERT_TRUE(log.ok()) << log.error().message;
  NcclTestsInput in;
  in.ranks = 16;
  in.nodes = 2;
  Dataset d;
  ASSERT_TRUE(add_nccl_tests(d, *log, in).ok());
  ASSERT_FALSE(d.collectives.empty());
  EXPECT_EQ(d.collectives.front().algo_label, "Tree");
  EXPECT_EQ(d.collectives.front().proto_label, "Simple");
  using Sets = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(d.collectives.front().comm_sets, (Sets{{"buffsize", "8388608"}}));
  auto has_note = [&](const std::string& s) {
    return std::any_of(d.notes.begin(), d.notes.end(), [&](const std::string& n) { return n.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(has_note("NCCL_ALGO=Tree, NCCL_PROTO=Simple, NCCL_BUFFSIZE=8388608"));
  EXPECT_TRUE(has_note("which dtsim does not model: NCCL_MIN_NCHANNELS"));

  FitOptions o;
  o.gpu = "h100-sxm";
  o.node = "dgx-h100";
  auto r = fit_profile(d, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->params.at("comm.buffsize"), "8388608");
  ASSERT_EQ(r->fit["nccl"].size(), 1u);
  EXPECT_EQ(r->fit["nccl"][0]["algorithm"], "tree / Simple");
  EXPECT_EQ(r->fit["nccl"][0]["regimes"].size(), 1u);  // one protocol ran: one regime
  EXPECT_NEAR(param(*r, "comm.tree.Simple.bandwidth_factor"), 0.35, 0.35 * 0.02);
  EXPECT_NEAR(param(*r, "comm.tree.Simple.step_latency.net"), 20.0, 2.0);
  for (const auto& [name, value] : r->params) {
    EXPECT_EQ(name.find("nvls"), std::string::npos) << name;  // nothing the run did not allow
    EXPECT_EQ(name.find("LL"), std::string::npos) << name;
  }
  // The same data fitted under NCCL's default buffer (--set, in place of the log's): the profile
  // says so, and the tree's fill no longer matches the data's.
  o.sets = {{"buffsize", "4M"}};
  auto r4 = fit_profile(d, o);
  ASSERT_TRUE(r4.ok()) << r4.error().message;
  EXPECT_EQ(r4->params.at("comm.buffsize"), "4M");
  auto worst = [](const FitResult& f) {
    for (const auto& res : f.residuals) {
      if (res.model == "profile") return res.worst_all;
    }
    return 1.0;
  };
  EXPECT_LT(worst(*r), 0.01);
  EXPECT_GT(worst(*r4), 2 * worst(*r)) << worst(*r4) << " " << worst(*r);
  // A second log of the same cluster that does not state the buffer (NCCL prints a variable only
  // where it reads it) is taken to have run under it; one that states another value cannot share
  // the profile, and the error names both logs.
  const std::string table =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66      0\n";
  auto plain = parse_nccl_tests(table, "all_reduce_perf-plain.log");
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(add_nccl_tests(d, *plain, in).ok());
  o.sets.clear();
  // (The agreement itself, agreed_comm_sets, rather than a whole fit: fits of 16 GPUs are slow
  // under the sanitizers.)
  auto agreed = agreed_comm_sets(d.collectives, {});
  ASSERT_TRUE(agreed.ok()) << agreed.error().message;
  EXPECT_EQ(*agreed, (Sets{{"buffsize", "8388608"}}));
  auto other = parse_nccl_tests("h:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 4194304\n" + table, "all_reduce_perf-4m.log");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(add_nccl_tests(d, *other, in).ok());
  auto mixed = fit_profile(d, o);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message.find("all_reduce_perf-settings.log"), std::string::npos) << mixed.error().message;
  EXPECT_NE(mixed.error().message.find("all_reduce_perf-4m.log"), std::string::npos) << mixed.error().message;
  EXPECT_NE(mixed.error().message.find("comm.buffsize"), std::string::npos) << mixed.error().message;
  // ... unless the command line gives the parameter for all of them.
  EXPECT_TRUE(agreed_comm_sets(d.collectives, {{"buffsize", "8M"}}).ok());
}

// A log whose NCCL settings dtsim cannot take is refused, naming the log and the variable.
TEST(Fit, RefusesALogWhoseNcclSettingDtsimCannotTake) {
  const std::string table =
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
      "     1048576        262144     float     sum      -1    100.0   10.49   19.66      0    100.0   10.49   19.66      0\n";
  NcclTestsInput in;
  in.ranks = 16;
  in.nodes = 2;
  for (const auto& [line, what] : {std::pair<std::string, std::string>{"NCCL_BUFFSIZE set by environment to 1000", "NCCL_BUFFSIZE=1000"},
                                   {"NCCL_ALGO set by environment to Ring,Bogus", "--algo 'Ring,Bogus'"},
                                   {"NCCL_PROTO set by environment to Fast", "--proto 'Fast'"}}) {
    auto log = parse_nccl_tests("h:1:1 [0] NCCL INFO " + line + "\n" + table, "all_reduce_perf-bad.log");
    ASSERT_TRUE(log.ok()) << log.error().message;
    Dataset d;
    const Status st = add_nccl_tests(d, *log, in);
    ASSERT_FALSE(st.ok()) << line;
    EXPECT_NE(st.error().message.find("all_reduce_perf-bad.log"), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().message.find(what), std::string::npos) << st.error().message;
    // The command line's --proto / --algo takes the place of the log's bad one.
    if (what.rfind("--", 0) == 0) {
      NcclTestsInput over = in;
      const bool algo = what.rfind("--algo", 0) == 0;
      (algo ? over.algo_label : over.proto_label) = algo ? "ring" : "Simple";
      EXPECT_TRUE(add_nccl_tests(d, *log, over).ok()) << line;
    }
  }
}

TEST(Fit, UnknownSuitesAndOtherToolsNameFileAndLine) {
  std::vector<json> recs{record("overhead", "a", {{"what", "kernel_gpu"}}, 1e-6), record("tensor-cores", "b", json::object(), 1e-6)};
  const std::string path = temp("unknown.jsonl");
  {
    std::ofstream f(path);
    for (const auto& r : recs) f << r.dump() << "\n";
  }
  auto read = read_records(path);
  ASSERT_TRUE(read.ok());
  Dataset d;
  const Status st = add_records(d, *read);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(path + ":2: unknown suite 'tensor-cores'"), std::string::npos) << st.error().message;

  Record v;
  v.schema = kValidateSchema;
  v.suite = "train_step";
  v.file = "v.jsonl";
  v.line = 7;
  Dataset d2;
  const Status st2 = add_records(d2, {v});
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.error().message.find("v.jsonl:7"), std::string::npos);

  Record g;
  g.schema = kCalibrateSchema;
  g.suite = "gemm";
  g.point = "gemm/x";
  g.status = "ok";
  g.file = "g.jsonl";
  g.line = 3;
  g.result = {{"time_s", 1e-3}};
  Dataset d3;
  const Status st3 = add_records(d3, {g});
  ASSERT_FALSE(st3.ok());
  EXPECT_NE(st3.error().message.find("g.jsonl:3"), std::string::npos);
  EXPECT_NE(st3.error().message.find("params.dtype"), std::string::npos);

  EXPECT_FALSE(fit_profile(Dataset{}, FitOptions{}).ok());
}

// The power suite's records (GEMM time against its share of the time) are read and counted, and
// nothing is fitted to them: the profile from GEMM records alone is the same with them.
TEST(Fit, PowerSuiteRecordsAreCountedNotFitted) {
  std::vector<json> recs;
  for (std::int64_t s : {1024, 2048, 4096, 8192}) {
    recs.push_back(record("gemm", "gemm/bf16/NT/" + std::to_string(s), {{"dtype", "bf16"}, {"m", s}, {"n", s}, {"k", s}},
                          2.0 * s * s * s / 600e12));
  }
  const std::string path = temp("gemm-only.jsonl"), with = temp("gemm-power.jsonl");
  {
    std::ofstream f(path), g(with);
    for (const auto& r : recs) f << r.dump() << "\n", g << r.dump() << "\n";
    g << record("power", "power/bf16/NT/8192x8192x8192/share=0.50/burst=1", {{"dtype", "bf16"}, {"gemms", 1}, {"copies", 8}}, 1.4e-3).dump()
      << "\n";
    // A skipped power point (a GPU without bf16) is a failure left out, not a point read.
    json skipped = record("power", "power/bf16", {{"dtype", "bf16"}}, 1e-3);
    skipped["status"] = "skipped";
    skipped["error"] = "bf16 needs compute capability 8.0 (Ampere) or newer";
    skipped.erase("result");
    g << skipped.dump() << "\n";
  }
  Dataset alone, both;
  ASSERT_TRUE(add_records(alone, *read_records(path)).ok());
  ASSERT_TRUE(add_records(both, *read_records(with)).ok());
  EXPECT_EQ(both.power_points, 1);
  EXPECT_EQ(both.failed_points, 1);
  EXPECT_EQ(both.gemm.size(), alone.gemm.size());
  auto a = fit_profile(alone, FitOptions{});
  auto b = fit_profile(both, FitOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->params, b->params);
}

TEST(Fit, FailedPointsAreLeftOutAndNoted) {
  json bad = record("gemm", "gemm/fp8/odd", {{"dtype", "fp8"}, {"m", 7}, {"n", 7}, {"k", 7}}, 1e-3);
  bad["status"] = "error";
  bad["error"] = "gemm.cu:120: no cuBLASLt algorithm";
  const Dataset d = through_jsonl({bad, record("overhead", "o", {{"what", "kernel_gpu"}}, 2e-6)}, "failed.jsonl");
  EXPECT_EQ(d.failed_points, 1);
  EXPECT_TRUE(d.gemm.empty());
  ASSERT_FALSE(d.notes.empty());
  EXPECT_NE(d.notes[0].find("no cuBLASLt algorithm"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Published data

struct Errors {
  double median = 0, worst = 0;
};

Errors errors_of(const std::vector<BusbwComparison>& cs) {
  std::vector<double> e;
  for (const auto& c : cs) e.push_back(c.error());
  return {median_abs(e), max_abs(e)};
}

// The published all-reduce curve predicted with the defaults and with the fitted profile (read
// back from its YAML, links applied to the cluster as --hw-profile does).
std::pair<Errors, Errors> published_fit(const std::string& system, const std::string& log, const std::string& node,
                                        std::optional<comm::Algo> algo) {
  auto parsed = read_nccl_tests(std::string(DTSIM_SOURCE_DIR) + "/data/calibration/published/" + log);
  EXPECT_TRUE(parsed.ok());
  Dataset d;
  NcclTestsInput in;
  in.algo_label = algo ? std::string(comm::to_string(*algo)) : "";
  EXPECT_TRUE(add_nccl_tests(d, *parsed, in).ok());
  FitOptions o;
  o.algo = in.algo_label;
  auto fit = fit_profile(d, o);
  EXPECT_TRUE(fit.ok()) << fit.error().message;
  const std::string path = temp(system + ".yaml");
  {
    std::ofstream f(path);
    f << profile_yaml(*fit, "test");
  }
  config::LoadContext ctx;
  auto profile = config::load_profile(path, ctx);
  EXPECT_TRUE(profile.has_value()) << ctx.diagnostics.to_string();
  auto rows = read_published_busbw(std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-allreduce-8gpu-published.csv");
  std::vector<PublishedBusbw> mine;
  for (const auto& r : *rows) {
    if (r.system == system) mine.push_back(r);
  }
  auto spec = config::load_cluster(config::ClusterRequest{node, 1, std::nullopt}, ctx);
  auto topo = hw::Topology::build(*spec);
  const Errors before = errors_of(predict_allreduce(*topo, comm::CommParams::nccl_defaults(), mine, algo));
  comm::CommParams params = comm::CommParams::nccl_defaults();
  EXPECT_TRUE(config::apply_profile(*profile, params).ok());
  config::apply_profile(*profile, *spec);
  auto fitted_topo = hw::Topology::build(*spec);
  const Errors after = errors_of(predict_allreduce(*fitted_topo, params, mine, algo));
  // The fit reports held-out residuals for the suite, with the profile and the defaults.
  bool held = false;
  for (const auto& s : fit->residuals) held = held || (s.suite == "nccl.allreduce.8x1" && s.model == "profile" && s.held_out == 6);
  EXPECT_TRUE(held);
  return {before, after};
}

TEST(FitPublished, A100DefaultAlgorithmIsPredictedBetterThanByTheDefaults) {
  const auto [before, after] = published_fit("azure-nd-a100-v4", "all_reduce_perf-a100.log", "dgx-a100-80g", std::nullopt);
  // Fitted: a few percent. (The defaults were 57% median before the channel counts of issue 12;
  // docs/validation.md has their figures now.) The worst point is 1 MiB, where the fitted
  // latencies make tree LL the choice and NCCL's 32 KiB tree LL pieces fill 16 of 24 channels
  // (comm/split.hpp), a step the fitted lines do not follow: under 20%.
  EXPECT_LT(after.median, before.median);
  EXPECT_LT(after.median, 0.05);
  EXPECT_LT(after.worst, 0.20);
  EXPECT_LT(after.worst, before.worst);
}

TEST(FitPublished, H100NvlsFitTiesTheDefaults) {
  const auto [before, after] = published_fit("azure-nd-h100-v5", "all_reduce_perf-h100-nvls.log", "dgx-h100", comm::Algo::nvls);
  // The defaults' NVLS latency was read from this curve's small sizes, and the defaults now follow
  // its ramp (loops, channel pieces, the pipeline's fill and drain: 2.7% median over the 24
  // points, issue 12), so the fit can at best tie them: within a point of their median and under
  // 5%. The worst points of both are the smallest sizes, set by nccl-tests' 8 host launches (not a
  // knob the fit moves), where the fitted latency, a compromise over 1 KiB to 8 GiB, gives up up
  // to 6 points.
  EXPECT_LT(after.median, before.median + 0.01);
  EXPECT_LT(after.worst, before.worst + 0.06);
  EXPECT_LT(after.median, 0.05);
}

}  // namespace
}  // namespace dtsim::calibrate
