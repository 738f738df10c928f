#include "sim/simulator.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dtsim {
namespace {

TEST(Simulator, RunsEventsInTimeOrder) {
  Simulator sim;
  std::vector<int> order;
  sim.schedule_at(Time::ns(30), [&] { order.push_back(3); });
  sim.schedule_at(Time::ns(10), [&] { order.push_back(1); });
  sim.schedule_at(Time::ns(20), [&] { order.push_back(2); });
  sim.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(sim.now(), Time::ns(30));
  EXPECT_EQ(sim.events_executed(), 3u);
}

TEST(Simulator, EqualTimeEventsRunInSchedulingOrder) {
  Simulator sim;
  std::string trace;
  for (char c : std::string("abcdefghij")) sim.schedule_at(Time::us(1), [&trace, c] { trace += c; });
  // An event scheduled at the current time from inside an event runs after those already queued.
  sim.schedule_at(Time::zero(), [&] { sim.schedule_in(Time::us(1), [&] { trace += '!'; }); });
  sim.run();
  EXPECT_EQ(trace, "abcdefghij!");
}

TEST(Simulator, CancelPreventsTheEventAndStaleHandlesAreHarmless) {
  Simulator sim;
  int ran = 0;
  EventId a = sim.schedule_at(Time::ns(5), [&] { ran += 1; });
  EventId b = sim.schedule_at(Time::ns(6), [&] { ran += 10; });
  EXPECT_TRUE(sim.cancel(a));
  EXPECT_FALSE(sim.cancel(a));  // already cancelled
  EXPECT_EQ(sim.pending(), 1u);
  sim.run();
  EXPECT_EQ(ran, 10);
  EXPECT_FALSE(sim.cancel(b));  // already ran
  // New events reuse the freed slots; the old handles must not cancel them.
  EventId c = sim.schedule_in(Time::ns(1), [&] { ran += 100; });
  EventId d = sim.schedule_in(Time::ns(1), [&] { ran += 100; });
  EXPECT_TRUE((c.slot == a.slot || c.slot == b.slot) && (d.slot == a.slot || d.slot == b.slot));
  EXPECT_FALSE(sim.cancel(a));
  EXPECT_FALSE(sim.cancel(b));
  sim.run();
  EXPECT_EQ(ran, 210);
}

TEST(Simulator, RunUntilStopsAtTheLimitAndAdvancesTheClock) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(Time::us(1), [&] { ++ran; });
  sim.schedule_at(Time::us(3), [&] { ++ran; });
  sim.run_until(Time::us(2));
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(sim.now(), Time::us(2));
  sim.run_until(Time::us(3));  // events at exactly the limit run
  EXPECT_EQ(ran, 2);
}

TEST(Simulator, StopEndsTheRunAfterTheCurrentEvent) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(Time::ns(1), [&] { ++ran; sim.stop(); });
  sim.schedule_at(Time::ns(2), [&] { ++ran; });
  sim.run();
  EXPECT_EQ(ran, 1);
  sim.run();
  EXPECT_EQ(ran, 2);
}

TEST(Simulator, IndependentSimulatorsDoNotShareState) {
  Simulator a, b;
  a.schedule_at(Time::ns(1), [] {});
  EXPECT_EQ(a.pending(), 1u);
  EXPECT_EQ(b.pending(), 0u);
}

}  // namespace
}  // namespace dtsim
