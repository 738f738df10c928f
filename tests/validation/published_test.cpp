// dtsim's preset defaults against the published 8-GPU nccl-tests all-reduce curves
// (data/published/nccl-allreduce-8gpu-published.csv, Azure ND H100 v5 and ND A100 v4).
// Both curves are in-sample (data/registry.yaml): NVLink 3's efficiency was read from the A100
// curve's 8 GiB point and the NVLS latency from the H100 curve's small sizes. So these tests check
// fit quality and the shape of the model, not prediction accuracy; docs/validation.md has the
// figures (dtsim-compare-published). The tolerances are stated here, not read off the results:
//  - large messages (>= 512 MiB): within 10% (the model's claim for bandwidth-bound all-reduce);
//  - the ramp: relative to its own 8 GiB figure, dtsim's busbw at every size from 1 MiB up is
//    within a factor of 2 of the measured ratio (docs/validation.md: mid sizes are known to be
//    optimistic by up to 60%). A model with a flat bandwidth fails this by a factor of 6-11 at
//    1 MiB.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "calibrate/log_compare.hpp"
#include "calibrate/published.hpp"
#include "config/hardware.hpp"

namespace dtsim {
namespace {

constexpr double kLargeMessageTolerance = 0.10;
constexpr double kRampFactor = 2.0;

std::vector<calibrate::BusbwComparison> compare(const char* system, const char* preset, std::optional<comm::Algo> algo) {
  auto rows = calibrate::read_published_busbw(std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-allreduce-8gpu-published.csv");
  EXPECT_TRUE(rows.ok());
  std::vector<calibrate::PublishedBusbw> mine;
  for (const auto& r : *rows) {
    if (r.system == system) mine.push_back(r);
  }
  EXPECT_EQ(mine.size(), 24u);
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{preset, 1, std::nullopt}, ctx);
  auto topo = hw::Topology::build(*spec);
  return calibrate::predict_allreduce(*topo, comm::CommParams::nccl_defaults(), mine, algo);
}

void expect_large_messages(const std::vector<calibrate::BusbwComparison>& cmp) {
  int checked = 0;
  for (const auto& c : cmp) {
    if (c.bytes < (std::int64_t{512} << 20)) continue;
    EXPECT_LT(std::fabs(c.error()), kLargeMessageTolerance) << c.bytes;
    ++checked;
  }
  EXPECT_EQ(checked, 5);  // 512 MiB .. 8 GiB
}

// busbw(S) / busbw(8 GiB), predicted against measured, for every S >= 1 MiB.
void expect_ramp(const std::vector<calibrate::BusbwComparison>& cmp) {
  ASSERT_FALSE(cmp.empty());
  const auto& top = cmp.back();
  ASSERT_EQ(top.bytes, std::int64_t{8} << 30);
  int checked = 0;
  for (const auto& c : cmp) {
    if (c.bytes < (std::int64_t{1} << 20)) continue;
    const double predicted = c.predicted_GBps / top.predicted_GBps;
    const double measured = c.measured_GBps / top.measured_GBps;
    EXPECT_LT(std::fabs(std::log(predicted / measured)), std::log(kRampFactor))
        << c.bytes << " B: dtsim reaches " << predicted << " of its 8 GiB busbw, the measurement " << measured;
    ++checked;
  }
  EXPECT_EQ(checked, 14);  // 1 MiB .. 8 GiB
}

TEST(PublishedNccl, H100NvlsLargeMessages) { expect_large_messages(compare("azure-nd-h100-v5", "dgx-h100", comm::Algo::nvls)); }

TEST(PublishedNccl, A100DefaultLargeMessages) { expect_large_messages(compare("azure-nd-a100-v4", "dgx-a100-80g", std::nullopt)); }

TEST(PublishedNccl, H100NvlsCurveRampsLikeTheMeasurement) { expect_ramp(compare("azure-nd-h100-v5", "dgx-h100", comm::Algo::nvls)); }

TEST(PublishedNccl, A100DefaultCurveRampsLikeTheMeasurement) { expect_ramp(compare("azure-nd-a100-v4", "dgx-a100-80g", std::nullopt)); }

TEST(PublishedNccl, RingOnH100IsTheLinkRateTimesItsEfficiency) {
  // Not a validation: NVLink 4's efficiency (0.82) was read from the NCCL maintainer's ~370 GB/s
  // for an 8x H100 ring (data/registry.yaml), so agreement with 370 holds by construction. What
  // this checks is the arithmetic: at 8 GiB a ring's busbw is the per-GPU NVLink rate (links x
  // per-link bandwidth, from the preset) times the efficiency, less the latency: Simple's slice
  // handoffs, 22 loops (8 GiB / (24 channels x 8 ranks x 2 MiB)) x 14 steps x 2 slices x 3.4 us,
  // plus the 8.4 us base (docs/model.md, issue 12).
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{"dgx-h100", 1, std::nullopt}, ctx);
  ASSERT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  const auto& node = spec->groups[0].node;
  ASSERT_TRUE(node.nvlink.has_value());
  const double line_GBps = node.nvlink_links_per_gpu * node.nvlink->bandwidth.bytes_per_s() * 1e-9;
  const double expected = line_GBps * node.nvlink->efficiency;
  auto topo = hw::Topology::build(*spec);
  calibrate::PublishedBusbw p{"maintainer", "H100", 8, "", "ring", std::int64_t{8} << 30, 370.0};
  const auto c = calibrate::predict_allreduce(*topo, comm::CommParams::nccl_defaults(), {p}, comm::Algo::ring);
  ASSERT_EQ(c.size(), 1u);
  const double S = 8589934592.0, n = 8;
  const double t = 8.4e-6 + 22 * 14 * 2 * 3.4e-6 + 2 * (n - 1) / n * S / (expected * 1e9);
  EXPECT_LE(c[0].predicted_GBps, expected);
  EXPECT_NEAR(c[0].predicted_GBps, 2 * (n - 1) / n * S / t * 1e-9, 0.002 * expected);
}

// Azure ran nccl-tests with one thread driving all 8 GPUs (-g 8; Benchmarks/NVIDIA/NCCLBandwidth.py
// in the guide), so below 64 KiB an iteration is 8 host launches (comm.launch_overhead, read from
// nccl-tests#123, not from these curves). H100: within 25% (the issue's target); A100: its AMD
// host launches more slowly than the DGX A100 of #123, within 35% (docs/validation.md).
TEST(PublishedNccl, SmallMessagesAreBoundByTheHostsLaunches) {
  auto rows = calibrate::read_published_busbw(std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-allreduce-8gpu-published.csv");
  ASSERT_TRUE(rows.ok());
  for (const auto& [system, preset, algo, bound] :
       {std::tuple{"azure-nd-h100-v5", "dgx-h100", std::optional<comm::Algo>(comm::Algo::nvls), 0.25},
        std::tuple{"azure-nd-a100-v4", "dgx-a100-80g", std::optional<comm::Algo>(), 0.35}}) {
    std::vector<calibrate::PublishedBusbw> mine;
    for (const auto& r : *rows) {
      if (r.system == system && r.bytes < (std::int64_t{64} << 10)) mine.push_back(r);
    }
    ASSERT_FALSE(mine.empty());
    EXPECT_EQ(calibrate::published_gpus_per_thread(mine[0]), 8);
    config::LoadContext ctx;
    auto spec = config::load_cluster(config::ClusterRequest{preset, 1, std::nullopt}, ctx);
    auto topo = hw::Topology::build(*spec);
    for (const auto& c : calibrate::predict_allreduce(*topo, comm::CommParams::nccl_defaults(), mine, algo, 8)) {
      EXPECT_LT(std::fabs(c.error()), bound) << system << " " << c.bytes;
    }
  }
}

// Other published logs (data/published/nccl-tests/): a single H100 node with NCCL's default
// algorithm (NVLS) from 1 GiB, 4 HGX A100 nodes over InfiniBand (with SHARP, which dtsim does not
// model: dtsim is 9-12% optimistic there, docs/validation.md), 2 A3 Mega VMs over TCPXO and a ring
// reduce-scatter on one H100 node (below). `cluster` is a node preset (with `nodes`) or a file.
calibrate::LogComparison compare_log(const char* log, const std::string& cluster, std::optional<int> nodes, std::optional<int> gpus,
                                     const comm::CommParams& params = comm::CommParams::nccl_defaults(), const comm::Selection& choice = {}) {
  auto parsed = calibrate::read_nccl_tests(std::string(DTSIM_SOURCE_DIR) + "/data/published/nccl-tests/" + log);
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.error().message;
    return {};
  }
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{cluster, nodes, std::nullopt}, ctx);
  if (!spec) {
    ADD_FAILURE() << cluster << ": " << ctx.diagnostics.to_string();
    return {};
  }
  auto topo = hw::Topology::build(*spec);
  if (!topo.ok()) {
    ADD_FAILURE() << cluster << ": " << topo.error().message;
    return {};
  }
  calibrate::LogCompareOptions opt;
  opt.gpus = gpus;
  opt.choice = choice;
  auto c = calibrate::compare_log(*topo, params, *parsed, opt);
  if (!c.ok()) {
    ADD_FAILURE() << c.error().message;
    return {};
  }
  return *c;
}

TEST(PublishedNccl, OtherSystemsLargeMessages) {
  const auto h100 = compare_log("all_reduce_perf-1x-h100-default.log", "dgx-h100", 1, std::nullopt);
  EXPECT_EQ(h100.gpus, 8);
  EXPECT_EQ(h100.gpus_per_thread, 8);
  for (const auto& p : h100.points) {
    if (p.bytes >= (std::int64_t{1} << 30)) {
      EXPECT_LT(std::fabs(p.error()), 0.05) << p.bytes;
    }
  }
  const auto a100 = compare_log("all_reduce_perf-4x-a100-ib-sharp.log", "dgx-a100-80g", 4, 32);
  EXPECT_EQ(a100.points.size(), 5u);
  for (const auto& p : a100.points) EXPECT_LT(std::fabs(p.error()), 0.20) << p.bytes;
}

// Two Google Cloud A3 Mega VMs (16 H100) with 8 x 200 Gb/s GPU NICs each carrying GPUDirect-TCPXO
// (all_reduce_perf-2x-h100-a3mega-tcpxo.log; held out: no constant comes from it), on
// examples/clusters/gcp-a3-mega-2node.yaml, which runs the NICs as 200 Gb/s RoCE (dtsim has no TCPXO
// model), with the run's NCCL settings (Google's TCPXO profile: NCCL_ALGO=Ring,Tree,
// NCCL_PROTO=Simple, NCCL_BUFFSIZE=8388608). From 1 GiB up the run is bandwidth-bound: within 10%
// there, the large-message claim, and dtsim's choice must be the tree (the profile turns NVLS off;
// the measured 299-337 GB/s is beyond any ring here: every byte of a ring's bus bandwidth leaves
// each node once, so a ring is bounded by one node's NICs, 8 x 25 = 200 GB/s; dtsim's ring gives
// 174). Below 1 GiB the run pays TCPXO's per-message costs, which dtsim does not model
// (docs/validation.md), and is not checked.
calibrate::LogComparison a3_mega(const char* buffsize) {
  comm::CommParams params = comm::CommParams::nccl_defaults();
  EXPECT_TRUE(comm::set_comm_param(params, "buffsize", buffsize).ok());
  auto choice = comm::parse_selection("ring,tree", "Simple");
  EXPECT_TRUE(choice.ok());
  return compare_log("all_reduce_perf-2x-h100-a3mega-tcpxo.log", std::string(DTSIM_SOURCE_DIR) + "/examples/clusters/gcp-a3-mega-2node.yaml",
                     std::nullopt, std::nullopt, params, choice.ok() ? *choice : comm::Selection{});
}

// A 2-node log run on a cluster file: every size from `from` within 10%, run by an algorithm whose
// name starts with `algo`; returns how many sizes were checked.
int expect_two_nodes_within_10_percent(const char* log, const char* cluster_file, std::int64_t from, const std::string& algo) {
  const auto c = compare_log(log, std::string(DTSIM_SOURCE_DIR) + "/examples/clusters/" + cluster_file, std::nullopt, std::nullopt);
  EXPECT_EQ(c.gpus, 16) << log;
  int checked = 0;
  for (const auto& p : c.points) {
    if (p.bytes < from) continue;
    EXPECT_LT(std::fabs(p.error()), 0.10) << log << " " << p.bytes;
    EXPECT_EQ(p.algo.rfind(algo, 0), 0u) << log << " " << p.bytes << " " << p.algo;
    ++checked;
  }
  return checked;
}

TEST(PublishedNccl, TwoA3MegaVmsOverTcpxoLargeMessages) {
  const auto c = a3_mega("8M");
  EXPECT_EQ(c.gpus, 16);
  int checked = 0;
  for (const auto& p : c.points) {
    if (p.bytes < (std::int64_t{1} << 30)) continue;
    EXPECT_LT(std::fabs(p.error()), 0.10) << p.bytes;
    EXPECT_EQ(p.algo, "tree/Simple") << p.bytes;
    ++checked;
  }
  EXPECT_EQ(checked, 4);  // 1, 2, 4 and 8 GiB
}

// The same run's shape from 4 to 32 MiB, where each of the tree's 16 channels holds at most one
// chunk and the chunk crosses every hop up and down before the next size's data starts to
// stream: the measured time grows 1.58x from 4 to 8 MiB and 1.69x from 8 to 16 MiB, then only
// 1.11x from 16 to 32 MiB. So 16 MiB is one loop of the 16 channels: a chunk of 1 MiB, one step of
// the profile's 8 MiB buffer (NCCL_BUFFSIZE / NCCL_STEPS 8; enqueue.cc computeColl). dtsim must put
// the bend in the same octave with the run's buffer, and with NCCL's default 4 MiB buffer it puts
// it one octave early (8 MiB). Each hop of the fill and drain runs on half the steady load (the
// reduce going up and the broadcast coming down share the links only in between): with the whole
// load, the 8-16 MiB octave took 83 us per MiB against 48.5 measured; now 42.
TEST(PublishedNccl, TheTreesBendFollowsNcclsBufferSize) {
  auto time_at = [](const calibrate::LogComparison& c, std::int64_t mib, bool measured) {
    for (const auto& p : c.points) {
      if (p.bytes == (mib << 20)) return measured ? p.measured_us : p.simulated_us;
    }
    ADD_FAILURE() << mib << " MiB not in the log";
    return 1.0;
  };
  const auto run = a3_mega("8M");
  // The premise, from the log.
  EXPECT_GT(time_at(run, 16, true) / time_at(run, 8, true), 1.5);
  EXPECT_LT(time_at(run, 32, true) / time_at(run, 16, true), 1.25);
  EXPECT_GT(time_at(run, 8, true) / time_at(run, 4, true), 1.5);
  // dtsim with the run's buffer: the same shape.
  EXPECT_GT(time_at(run, 16, false) / time_at(run, 8, false), 1.5);
  EXPECT_LT(time_at(run, 32, false) / time_at(run, 16, false), 1.25);
  EXPECT_GT(time_at(run, 8, false) / time_at(run, 4, false), 1.5);
  // The fill's slope, 8 to 16 MiB, within 20% of the measured one.
  const double slope_measured = (time_at(run, 16, true) - time_at(run, 8, true)) / 8;
  const double slope = (time_at(run, 16, false) - time_at(run, 8, false)) / 8;
  EXPECT_LT(std::fabs(slope / slope_measured - 1), 0.20) << slope << " us/MiB against " << slope_measured;
  // NCCL's default buffer bends at 8 MiB.
  const auto default_buffer = a3_mega("4M");
  EXPECT_LT(time_at(default_buffer, 16, false) / time_at(default_buffer, 8, false), 1.25);
}

// Healthy H100 clusters with 8 x 400 Gb/s InfiniBand per node (nccl-tests#309 and dstack's Nebius
// example; held out: no constant comes from them). From 256 MiB up the runs are bandwidth-bound:
// within 10% there, the large-message claim, on the 2-node runs and the 4 VMs (the 4- and 8-node
// runs of the other cluster are 7-12% below dtsim's ring at 1-8 GiB, docs/validation.md).
TEST(PublishedNccl, HealthyH100InfinibandLargeMessages) {
  const std::tuple<const char*, int, int> logs[] = {
      {"all_reduce_perf-2x-h100-ndr-xe9680.log", 2, 7},   // 256 MiB .. 16 GiB
      {"all_reduce_perf-4x-h100-ndr-vm.log", 4, 7},       // the same
      {"all_reduce_perf-2x-h100-ib400-default.log", 2, 6},  // 256 MiB .. 8 GiB
      {"all_reduce_perf-2x-h100-nebius.log", 2, 6},       // the same
  };
  for (const auto& [log, nodes, points] : logs) {
    const auto c = compare_log(log, "dgx-h100", nodes, std::nullopt);
    EXPECT_EQ(c.gpus, 8 * nodes) << log;
    int checked = 0;
    for (const auto& p : c.points) {
      if (p.bytes < (std::int64_t{256} << 20)) continue;
      EXPECT_LT(std::fabs(p.error()), 0.10) << log << " " << p.bytes;
      ++checked;
    }
    EXPECT_EQ(checked, points) << log;
  }
}

// The same claim on RoCE (held out): 2 Oracle Cloud BM.GPU.H100.8 on OCI's RoCE v2 cluster network,
// NCCL 2.21.5, its default (the NVLS tree), 1-16 GiB, 445-465 GB/s measured.
TEST(PublishedNccl, HealthyH100RoceLargeMessages) {
  // 1, 2, 4, 8 and 16 GiB
  EXPECT_EQ(expect_two_nodes_within_10_percent("all_reduce_perf-2x-h100-oci-roce.log", "oci-h100-roce-2node.yaml", 0, "nvls/Simple"), 5);
}

// The same servers as 4 VMs (nccl-tests#309, qoofyk, NCCL 2.26.2): the measured time jumps from 82
// to 132 us between 1 and 2 MiB, where NCCL's tuner leaves the tree (LL128) for the NVLS tree. Its
// model charges the tree's bandwidth its treeCorrectionFactor (.6 at 1-2 MiB with LL128) and the
// NVLS tree 25 + 2 log2i(4) x 14 = 81 us; dtsim's choice (choice: nccl) must switch at the same
// size, and the sizes the NVLS tree runs (2-32 MiB) must then be within 10%. Without NCCL's
// tuner model (choice: fastest) dtsim kept the tree to 8 MiB, 45-55% too fast at 2-8 MiB.
TEST(PublishedNccl, FourVmsSwitchToTheNvlsTreeWhereNcclsTunerDoes) {
  const auto c = compare_log("all_reduce_perf-4x-h100-ndr-vm.log", "dgx-h100", 4, std::nullopt);
  int checked = 0;
  for (const auto& p : c.points) {
    if (p.bytes == (std::int64_t{1} << 20)) {
      EXPECT_EQ(p.algo, "tree/LL128");
      EXPECT_LT(p.measured_us, 100.0);  // the premise: the measured jump comes after 1 MiB
    }
    if (p.bytes >= (std::int64_t{2} << 20) && p.bytes <= (std::int64_t{32} << 20)) {
      EXPECT_EQ(p.algo, "nvls/Simple") << p.bytes;
      EXPECT_LT(std::fabs(p.error()), 0.10) << p.bytes;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5);
}

// Small messages across nodes run tree LL on few channels (2 at 8 KiB). LL's ceiling across
// nodes (llMaxBws, 20.4 GB/s of busbw on 3+ Intel-hosted nodes) bounds all channels together,
// and a channel alone moves at most one thread block's LL rate: when each channel took its 1/32
// share of the ceiling instead, the 4 VMs' 4-32 KiB ran 48-58% slow (99 us against 41-47
// measured) and the bare-metal pair's 15-25%. Held out (nccl-tests#309): within 15% now.
TEST(PublishedNccl, SmallMessagesAcrossNodesAreNotHeldToAShareOfLlsCeiling) {
  int checked = 0;
  for (const auto& [log, nodes] : {std::pair{"all_reduce_perf-4x-h100-ndr-vm.log", 4}, std::pair{"all_reduce_perf-2x-h100-ndr-xe9680.log", 2}}) {
    const auto c = compare_log(log, "dgx-h100", nodes, std::nullopt);
    for (const auto& p : c.points) {
      if (p.bytes < 4096 || p.bytes > 32768) continue;
      EXPECT_EQ(p.algo, "tree/LL") << log << " " << p.bytes;
      EXPECT_LT(std::fabs(p.error()), 0.15) << log << " " << p.bytes;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
}

// At 64 and 128 KiB tree LL fills 16 and all 32 channels of 4 H100 nodes and LL's ceiling binds
// them together; the pipeline's fill (4 network hops of a 4 KiB chunk) still runs at one thread
// block's LL rate per channel. At each channel's 1/32 share of the ceiling the fill alone took
// 51 us at 128 KiB: the 4 VMs' 64 and 128 KiB ran 29% and 45% slow (67 and 99 us against 47.6
// and 55.1 measured). Held out (nccl-tests#309): within 10% on the 4 VMs, 15% on the bare-metal
// pair (whose fill is half as long and whose ceiling twice as high).
TEST(PublishedNccl, TreeLlFillsAtOneBlocksRateWhereTheCeilingBindsAllChannels) {
  int checked = 0;
  for (const auto& [log, nodes, bound] : {std::tuple{"all_reduce_perf-4x-h100-ndr-vm.log", 4, 0.10},
                                          std::tuple{"all_reduce_perf-2x-h100-ndr-xe9680.log", 2, 0.15}}) {
    const auto c = compare_log(log, "dgx-h100", nodes, std::nullopt);
    for (const auto& p : c.points) {
      if (p.bytes != 65536 && p.bytes != 131072) continue;
      EXPECT_EQ(p.algo, "tree/LL") << log << " " << p.bytes;
      EXPECT_LT(std::fabs(p.error()), bound) << log << " " << p.bytes;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);
}

// One cluster's 8 GiB all-reduce on 2, 4 and 8 of its nodes (nccl-tests#309, gj-aion): over 400 GB/s
// of busbw on 2 nodes, about 320 on 4 and 8. Each node's 8 NICs carry 8 x 400 Gb/s = 400 GB/s a
// way. A ring's busbw leaves each node once, so no ring passes 400; the tree across 2 nodes (NCCL's
// NVLS tree) sends each byte out of a node once for an all-reduce's 2(n-1)/n, so it can. On more
// nodes a node inside a tree takes the halves of two children through its NICs, which halves the
// tree's network rate (NCCL's tuner says the same: v2.26.2 tuning.cc, bwInter / 2 beyond 2 nodes),
// and a ring wins. dtsim must land on the same side of the line rate as the measurement at each
// count.
TEST(PublishedNccl, OnlyTwoNodesPassTheNicsLineRate) {
  constexpr double kLineRateGBps = 8 * 400 / 8.0;
  const std::pair<const char*, int> logs[] = {{"all_reduce_perf-2x-h100-ib400-default.log", 2},
                                              {"all_reduce_perf-4x-h100-ib400-default.log", 4},
                                              {"all_reduce_perf-8x-h100-ib400-default.log", 8}};
  for (const auto& [log, nodes] : logs) {
    const auto c = compare_log(log, "dgx-h100", nodes, std::nullopt);
    ASSERT_FALSE(c.points.empty()) << log;
    const auto& top = c.points.back();
    ASSERT_EQ(top.bytes, std::int64_t{8} << 30) << log;
    EXPECT_EQ(top.measured_busbw_GBps > kLineRateGBps, nodes == 2) << log << " measured " << top.measured_busbw_GBps;
    EXPECT_EQ(top.simulated_busbw_GBps > kLineRateGBps, nodes == 2) << log << " dtsim " << top.simulated_busbw_GBps;
    if (nodes > 2) {
      EXPECT_EQ(top.algo.rfind("ring/", 0), 0u) << log << " " << top.algo;
    }
  }
}

// Reduce-scatter on one H100 node with NCCL's ring, 128 MiB-4 GiB (NVIDIA/nccl#1047; held out: no
// constant comes from it, though NVLink 4's efficiency came from the maintainer's 370 GB/s for an
// 8-H100 node's ring all-reduce, nccl-tests#212, so the large sizes largely re-check that figure).
// Held to 5% at every size, the bound the one-node (NVLS) all-reduce log above is held to from
// 1 GiB; and dtsim's own choice must be the ring: NCCL's maintainer explains in nccl#1083 that NVLS
// reduce-scatter sends S and receives S/N per GPU, more in one direction than the ring's (N-1) S/N,
// so NVLS loses at these sizes.
TEST(PublishedNccl, ReduceScatterOnOneH100Node) {
  const auto rs = compare_log("reduce_scatter_perf-1x-h100-ring.log", "dgx-h100", 1, std::nullopt);
  EXPECT_EQ(rs.op, CollOp::reducescatter);
  EXPECT_EQ(rs.gpus, 8);  // from busbw / algbw = 7/8: the log lists one rank line
  ASSERT_EQ(rs.points.size(), 6u);
  for (const auto& p : rs.points) {
    EXPECT_LT(std::fabs(p.error()), 0.05) << p.bytes;
    EXPECT_EQ(p.algo.rfind("ring/", 0), 0u) << p.bytes << " " << p.algo;
  }
}

// Send/recv on one A100 node, 128 MiB-1 GiB, one process for all 8 GPUs (li-plus/playground; held
// out, though NCCL's peer-to-peer channels were modelled after it was seen: comm/p2p.hpp). By NCCL
// v2.18.5's rule (enqueue.cc scheduleP2pTasksToPlan) 8 ranks send 128 MiB on 8 channels and 256 MiB
// or more on 16, each channel at most perChMaxTreeBws' Ampere 24 GB/s / 2 each way: 96 and 192
// GB/s, below the links' 230. The measured rate rises 1.7-fold from 128 to 256 MiB and then stays;
// dtsim must show the step and the plateau.
TEST(PublishedNccl, SendRecvOnOneA100NodeRunsOnNcclsPeerChannels) {
  const auto c = compare_log("sendrecv_perf-1x-a100-g8.log", "dgx-a100-80g", 1, 8);
  EXPECT_EQ(c.op, CollOp::sendrecv);
  ASSERT_EQ(c.points.size(), 4u);
  const int channels[] = {8, 16, 16, 16};
  for (std::size_t i = 0; i < c.points.size(); ++i) {
    const auto& p = c.points[i];
    EXPECT_EQ(p.channels, channels[i]) << p.bytes;
    EXPECT_EQ(p.algo, "direct/Simple") << p.bytes;
    EXPECT_LT(std::fabs(p.error()), i == 0 ? 0.15 : 0.05) << p.bytes;
  }
  EXPECT_GT(c.points[1].measured_busbw_GBps / c.points[0].measured_busbw_GBps, 1.5);
  EXPECT_GT(c.points[1].simulated_busbw_GBps / c.points[0].simulated_busbw_GBps, 1.5);
}

// The rows of a file of quoted multi-node figures (data/published/nccl-*-multinode-points.csv),
// split at commas, comments and the header left out.
std::vector<std::vector<std::string>> quoted_rows(const std::string& file) {
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/data/published/" + file);
  EXPECT_TRUE(in.good()) << file;
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("source,", 0) == 0) continue;
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    EXPECT_EQ(f.size(), 11u) << line;
    if (f.size() == 11u) rows.push_back(std::move(f));
  }
  return rows;
}

// A quoted row's cluster (node preset, node count, NIC preset and NICs per node in columns 3-6)
// on a rail-optimized fabric.
std::optional<hw::Topology> quoted_cluster(const std::vector<std::string>& f, const std::string& name) {
  const std::string yaml = ::testing::TempDir() + "/" + name + ".yaml";
  std::ofstream(yaml) << "name: quoted\nnode: " << f[3] << "\nnodes: " << f[2] << "\nfabric: {kind: rail-optimized, nic: " << f[4]
                      << ", nics_per_node: " << f[5] << ", radix: 64}\n";
  config::LoadContext ctx;
  auto spec = config::load_cluster(config::ClusterRequest{yaml, std::nullopt, std::nullopt}, ctx);
  EXPECT_TRUE(spec.has_value()) << ctx.diagnostics.to_string();
  if (!spec) return std::nullopt;
  auto topo = hw::Topology::build(*spec);
  EXPECT_TRUE(topo.ok());
  if (!topo.ok()) return std::nullopt;
  return std::move(topo).value();
}

// Large-message all-reduce across 2 and 4 nodes of 8 H100 on 8 x 400 Gb/s RoCE, as quoted in
// NVIDIA/nccl#1221 (at 4 and 8 GiB), and on 8 x 400 Gb/s InfiniBand, as quoted in
// NVIDIA/nccl-tests#309 (the maxima of sweeps to 16 GiB: checked at 8 and 16 GiB), and across 2
// HGX A100 with 4 x 200 Gb/s InfiniBand each, as quoted in NVIDIA/nccl-tests#100 (1-8 GiB)
// (data/published/nccl-allreduce-multinode-points.csv, held out: no constant comes from them),
// within 10% (the figures are rounded or quoted by their reporters, so no tighter claim is made):
//  - NCCL_NVLS_ENABLE=1 on 2 nodes: dtsim's automatic choice must be the NVLS tree;
//  - 4 nodes, NVLS on or off (the same figure): the automatic choice must be the ring, as NCCL's
//    was (NVLS made no difference);
//  - NVLS off on 2 nodes: compared with dtsim's ring, which NCCL runs on nodes of 8 NICs (its
//    maintainer in nccl-tests#196: "if you have 8 NICs, Tree will struggle to get better
//    performance than ring without using 32 SMs (which we disallow)"). Without NVLS dtsim's tree
//    must lose to its ring there too: NCCL's per-channel cap (8 graph channels x 41.4 GB/s on 2
//    Hopper nodes, tuning.cc perChMaxTreeBws) holds the tree to 331 GB/s of NCCL's bus bandwidth,
//    half of it algorithm bandwidth;
//  - the A100 nodes (no NVLS): the ring.
TEST(PublishedNccl, MultiNodeAllReduceQuotedInNcclIssues) {
  int rows = 0;
  for (const auto& f : quoted_rows("nccl-allreduce-multinode-points.csv")) {
    const std::string line = f[0] + ", " + f[2] + " nodes, " + f[7];
    const int gpus = std::stoi(f[1]), nodes = std::stoi(f[2]);
    const bool nvls_off = f[7] == "NCCL_NVLS_ENABLE=0";
    const bool nvls_on = f[7] == "NCCL_NVLS_ENABLE=1";
    const double measured = std::stod(f[10]);
    auto topo = quoted_cluster(f, "multinode-" + std::to_string(rows));
    ASSERT_TRUE(topo.has_value());
    hw::Router router(*topo);
    comm::Planner planner(*topo, router, comm::CommParams::nccl_defaults());
    for (const std::int64_t bytes : {std::stoll(f[8]), std::stoll(f[9])}) {
      comm::CollectiveRequest req;
      req.op = CollOp::allreduce;
      req.size = Bytes(bytes);
      for (int r = 0; r < gpus; ++r) req.ranks.push_back(r);
      if (nvls_off) req.algo = comm::Algo::ring;
      auto p = planner.plan(req);
      ASSERT_TRUE(p.ok()) << p.error().message;
      EXPECT_EQ(p->algo, nvls_on && nodes == 2 ? comm::Algo::nvls : comm::Algo::ring) << line;
      const double t = comm::simulate_alone(*topo, *p).seconds();
      if (nvls_off) {
        req.algo = comm::Algo::tree;
        auto tree = planner.plan(req);
        ASSERT_TRUE(tree.ok()) << tree.error().message;
        // Hopper nodes: 0.5 x 8 graph channels x 41.4 GB/s of algorithm bandwidth on 2 nodes, x 36.0
        // on more, within the flow model's rounding, for the message's own bytes (the pipeline's
        // fill left out: tuner_bytes_fraction).
        const double cap = 0.5 * 8 * (nodes == 2 ? 41.4 : 36.0) * 1e9;
        EXPECT_NEAR(static_cast<double>(bytes) / ((tree->estimate - tree->phases.front().groups.front().latency).seconds() * tree->tuner_bytes_fraction),
                    cap, 0.002 * cap);
        EXPECT_GT(tree->estimate, p->estimate) << line << " at " << bytes;
      }
      const double busbw = busbw_GBps(CollOp::allreduce, gpus, static_cast<double>(bytes), t);
      EXPECT_NEAR(busbw, measured, 0.10 * measured) << line << " at " << bytes;
    }
    ++rows;
  }
  EXPECT_EQ(rows, 7);
}

// All-to-all across nodes as quoted (data/published/nccl-alltoall-multinode-points.csv, held out;
// NVIDIA/nccl#1138: 2 nodes of 8 A100 with 4 x 200 Gb/s RoCE NICs each, NCCL 2.18.6, 4 GiB:
// 19.83 GB/s), within the 10% such a quoted figure allows. And under the line-rate bound worked out
// from the row: each GPU sends (nodes - 1) / nodes of its buffer across the network, through its
// share (NICs / GPUs per node) of one NIC's line rate, so algbw <= share x rate x nodes / (nodes - 1)
// and busbw = algbw x (n - 1) / n (#1138: 12.5 GB/s x 2 = 25 GB/s, x 15/16 = 23.4 GB/s).
TEST(PublishedNccl, AllToAllAcrossNodesQuotedInNcclIssue) {
  int rows = 0;
  for (const auto& f : quoted_rows("nccl-alltoall-multinode-points.csv")) {
    const std::string line = f[0] + ", " + f[2] + " nodes, " + f[7];
    const int gpus = std::stoi(f[1]);
    const double measured = std::stod(f[10]);
    auto topo = quoted_cluster(f, "alltoall-" + std::to_string(rows));
    ASSERT_TRUE(topo.has_value());
    hw::Router router(*topo);
    comm::Planner planner(*topo, router, comm::CommParams::nccl_defaults());
    comm::CollectiveRequest req;
    req.op = CollOp::alltoall;
    req.size = Bytes(std::stoll(f[9]));
    for (int r = 0; r < gpus; ++r) req.ranks.push_back(r);
    auto p = planner.plan(req);
    ASSERT_TRUE(p.ok()) << p.error().message;
    const double busbw = busbw_GBps(CollOp::alltoall, gpus, req.size.as_double(), comm::simulate_alone(*topo, *p).seconds());
    EXPECT_NEAR(busbw, measured, 0.10 * measured) << line;
    const hw::NodeSpec& node = topo->spec().groups.front().node;
    ASSERT_TRUE(topo->spec().fabric.nic || node.nic) << "the row's cluster has no NIC to bound the all-to-all: " << line;
    const hw::LinkType& nic = topo->spec().fabric.nic ? *topo->spec().fabric.nic : *node.nic;
    const int nodes = std::stoi(f[2]), per_node = gpus / nodes, nics = std::stoi(f[5]);
    const double share_GBps = nic.bandwidth.bytes_per_s() * 1e-9 * nics / per_node;
    const double bound = share_GBps * nodes / (nodes - 1.0) * (gpus - 1.0) / gpus;
    EXPECT_LT(busbw, bound) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 1);
}

TEST(PublishedNccl, CsvErrorsNameFileAndLine) {
  const std::string path = ::testing::TempDir() + "/bad.csv";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("# comment\nsystem,gpu,gpus,nccl,algorithm,bytes,busbw_GBps\nx,y,8,2,ring,lots,1\n", f);
  std::fclose(f);
  auto r = calibrate::read_published_busbw(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(path + ":3:"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace dtsim
