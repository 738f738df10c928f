#include "sim/flow_network.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace dtsim {
namespace {

struct Net {
  Simulator sim;
  FlowNetwork net{sim, std::make_unique<MaxMinSharing>()};
};

TEST(FlowNetwork, SingleFlowTakesLatencyPlusSizeOverBandwidth) {
  Net n;
  LinkId a = n.net.add_link(Bandwidth::GBps(100), Time::us(1));
  LinkId b = n.net.add_link(Bandwidth::GBps(50), Time::us(2));
  Time done;
  std::vector<LinkId> path{a, b};
  n.net.start_path(path, Bytes(1'000'000'000), [&] { done = n.sim.now(); });
  n.sim.run();
  // Latency 1 + 2 us, paid once; bottleneck 50 GB/s: 1 GB takes 20 ms.
  EXPECT_EQ(done, Time::us(3) + Time::ms(20));
  EXPECT_EQ(n.net.active_flows(), 0u);
}

TEST(FlowNetwork, FlowsStartingTogetherShareTheLink) {
  Net n;
  LinkId l = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  std::vector<Time> done(2);
  std::vector<LinkId> path{l};
  n.net.start_path(path, Bytes(1'000'000'000), [&] { done[0] = n.sim.now(); });
  n.net.start_path(path, Bytes(1'000'000'000), [&] { done[1] = n.sim.now(); });
  n.sim.run();
  EXPECT_EQ(done[0], Time::ms(200));
  EXPECT_EQ(done[1], Time::ms(200));
  EXPECT_NEAR(n.net.carried_bytes(l), 2e9, 1.0);
}

TEST(FlowNetwork, RatesChangeWhenFlowsArriveAndLeave) {
  // A: 10 GB on a 10 GB/s link from t=0. B: 2.5 GB from t=0.5 s. By hand: A has 5 GB left at
  // 0.5 s; both run at 5 GB/s; B ends at 1.0 s; A has 2.5 GB left and ends at 1.25 s.
  Net n;
  LinkId l = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  std::vector<LinkId> path{l};
  Time done_a, done_b;
  n.net.start_path(path, Bytes(10'000'000'000), [&] { done_a = n.sim.now(); });
  n.sim.schedule_at(Time::ms(500), [&] {
    n.net.start_path(path, Bytes(2'500'000'000), [&] { done_b = n.sim.now(); });
  });
  n.sim.run();
  EXPECT_EQ(done_b, Time::ms(1000));
  EXPECT_EQ(done_a, Time::ms(1250));
}

TEST(FlowNetwork, BottleneckElsewhereLetsTheOtherFlowUseTheRest) {
  Net n;
  LinkId shared = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  LinkId narrow = n.net.add_link(Bandwidth::GBps(4), Time::zero());
  std::vector<LinkId> pa{shared, narrow}, pb{shared};
  FlowId a = n.net.start_path(pa, Bytes(4'000'000'000), [] {});
  FlowId b = n.net.start_path(pb, Bytes(6'000'000'000), [] {});
  n.sim.run_until(Time::ms(1));
  EXPECT_DOUBLE_EQ(n.net.rate(a).GBps(), 4);
  EXPECT_DOUBLE_EQ(n.net.rate(b).GBps(), 6);
  n.sim.run();
  EXPECT_EQ(n.sim.now(), Time::s(1));  // both finish at 1 s
}

TEST(FlowNetwork, CoupledFlowPaysForEachUse) {
  Net n;
  LinkId l = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  FlowSpec spec;
  spec.uses = {LinkUse{l, 2}};
  spec.bytes = Bytes(1'000'000'000);
  spec.latency = Time::us(7);
  Time done;
  spec.on_complete = [&] { done = n.sim.now(); };
  n.net.start(std::move(spec));
  n.sim.run();
  EXPECT_EQ(done, Time::us(7) + Time::ms(200));  // 2 x 1 GB over 10 GB/s
}

TEST(FlowNetwork, RateCapLimitsAFlow) {
  Net n;
  LinkId l = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  FlowSpec spec;
  spec.uses = {LinkUse{l, 1}};
  spec.bytes = Bytes(1'000'000'000);
  spec.cap = Bandwidth::GBps(2);
  n.net.start(std::move(spec));
  n.sim.run();
  EXPECT_EQ(n.sim.now(), Time::ms(500));
}

TEST(FlowNetwork, EmptyRouteAndZeroBytesCompleteAfterTheLatencyOnly) {
  Net n;
  LinkId l = n.net.add_link(Bandwidth::GBps(10), Time::us(3));
  int done = 0;
  n.net.start_path({}, Bytes(1000), [&] { ++done; });
  std::vector<LinkId> path{l};
  n.net.start_path(path, Bytes(0), [&] { ++done; EXPECT_EQ(n.sim.now(), Time::us(3)); });
  n.sim.run();
  EXPECT_EQ(done, 2);
}

TEST(FlowNetwork, DisjointComponentsAreSolvedSeparately) {
  Net n;
  LinkId a = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  LinkId b = n.net.add_link(Bandwidth::GBps(10), Time::zero());
  std::vector<LinkId> pa{a}, pb{b};
  FlowId fa = n.net.start_path(pa, Bytes(10'000'000'000), [] {});
  n.sim.run_until(Time::ms(1));
  const auto solves = n.net.solves();
  n.net.start_path(pb, Bytes(1'000'000'000), [] {});
  n.sim.run_until(Time::ms(2));
  EXPECT_EQ(n.net.solves(), solves + 1);
  EXPECT_EQ(n.net.last_component_flows(), 1u);  // only the new flow's component
  EXPECT_DOUBLE_EQ(n.net.rate(fa).GBps(), 10);
}

TEST(FlowNetwork, ConstantRateModelIgnoresContention) {
  Simulator sim;
  FlowNetwork net(sim, std::make_unique<ConstantRateSharing>());
  LinkId l = net.add_link(Bandwidth::GBps(10), Time::zero());
  std::vector<LinkId> path{l};
  net.start_path(path, Bytes(1'000'000'000), [] {});
  net.start_path(path, Bytes(1'000'000'000), [] {});
  sim.run();
  EXPECT_EQ(sim.now(), Time::ms(100));
}

// Runs a random workload and returns every completion (flow index, time).
std::vector<std::pair<int, std::int64_t>> random_run(unsigned seed) {
  Simulator sim;
  FlowNetwork net(sim, std::make_unique<MaxMinSharing>());
  std::mt19937_64 rng(seed);
  std::vector<LinkId> links;
  for (int i = 0; i < 20; ++i) {
    links.push_back(net.add_link(Bandwidth::GBps(1 + static_cast<double>(rng() % 100)), Time::ns(rng() % 1000)));
  }
  std::vector<std::pair<int, std::int64_t>> out;
  for (int i = 0; i < 300; ++i) {
    std::vector<LinkId> path;
    const int hops = 1 + static_cast<int>(rng() % 4);
    for (int h = 0; h < hops; ++h) path.push_back(links[rng() % links.size()]);
    const Bytes size(static_cast<std::int64_t>(1 + rng() % 100'000'000));
    const Time at = Time::ns(static_cast<std::int64_t>(rng() % 10'000'000));
    sim.schedule_at(at, [&net, &sim, &out, path, size, i] {
      net.start_path(path, size, [&out, &sim, i] { out.emplace_back(i, sim.now().picoseconds()); });
    });
  }
  sim.run();
  return out;
}

TEST(FlowNetwork, SameInputGivesIdenticalResults) {
  const auto a = random_run(42);
  const auto b = random_run(42);
  ASSERT_EQ(a.size(), 300u);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace dtsim
