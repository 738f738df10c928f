// The sweep runner: rows in point order whatever the threads, a results file appended as points
// finish, and resumption that recomputes nothing and leaves the same bytes as an uninterrupted run.
#include "planning/sweep.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "planning/journal.hpp"

namespace dtsim::planning {
namespace {

using json = nlohmann::json;

std::string temp(const std::string& name) { return (std::filesystem::path(::testing::TempDir()) / name).string(); }
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json header(std::size_t points, const std::string& fp = "abc") { return {{"dtsim", "sweep"}, {"fingerprint", fp}, {"points", points}}; }
json row(std::size_t i) { return {{"point", i}, {"status", "ok"}, {"value", static_cast<double>(i * i)}}; }

TEST(SweepRunner, RowsComeOutInPointOrderWithAnyThreads) {
  for (int threads : {1, 2, 7}) {
    SweepRunOptions o;
    o.threads = threads;
    auto r = run_sweep(50, header(50), [](std::size_t i) { return row(i); }, o);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->rows.size(), 50u);
    for (std::size_t i = 0; i < 50; ++i) EXPECT_EQ(r->rows[i]["point"], i);
    EXPECT_EQ(r->computed, 50u);
    EXPECT_FALSE(r->interrupted);
  }
}

TEST(SweepRunner, InterruptedThenResumedEqualsAnUninterruptedRun) {
  const std::string whole = temp("whole.jsonl"), parts = temp("parts.jsonl");
  SweepRunOptions o;
  o.threads = 3;
  o.journal = whole;
  ASSERT_TRUE(run_sweep(40, header(40), [](std::size_t i) { return row(i); }, o).ok());

  // Stop after 15 rows: the finished rows are in the file already.
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  SweepRunOptions first = o;
  first.journal = parts;
  first.stop = &stop;
  auto r1 = run_sweep(40, header(40), [&](std::size_t i) {
    if (++done >= 15) stop = true;
    return row(i);
  }, first);
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(r1->interrupted);
  auto partial = read_journal(parts);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->rows.size(), r1->rows.size());
  EXPECT_GE(partial->rows.size(), 15u);
  EXPECT_LT(partial->rows.size(), 40u);

  // Resume: only the missing points are evaluated.
  std::atomic<int> evaluated{0};
  SweepRunOptions second = o;
  second.journal = parts;
  second.resume = true;
  auto r2 = run_sweep(40, header(40), [&](std::size_t i) {
    ++evaluated;
    EXPECT_EQ(partial->rows.count(i), 0u) << "point " << i << " was recomputed";
    return row(i);
  }, second);
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->interrupted);
  EXPECT_EQ(static_cast<std::size_t>(evaluated.load()) + partial->rows.size(), 40u);
  EXPECT_EQ(r2->reused, partial->rows.size());
  EXPECT_EQ(slurp(parts), slurp(whole));
}

TEST(SweepRunner, ACutLastLineIsDroppedOnResume) {
  const std::string path = temp("cut.jsonl");
  std::ofstream(path) << header(3).dump() << "\n" << row(0).dump() << "\n" << "{\"point\": 1, \"stat";
  auto c = read_journal(path);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rows.size(), 1u);
  EXPECT_EQ(c->dropped, 1u);
  SweepRunOptions o;
  o.journal = path;
  o.resume = true;
  auto r = run_sweep(3, header(3), [](std::size_t i) { return row(i); }, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->reused, 1u);
  EXPECT_EQ(r->computed, 2u);
  EXPECT_EQ(slurp(path), journal_text(header(3), {row(0), row(1), row(2)}));
}

TEST(SweepRunner, ResumingAnotherSweepsFileIsAnError) {
  const std::string path = temp("other.jsonl");
  SweepRunOptions o;
  o.journal = path;
  ASSERT_TRUE(run_sweep(2, header(2, "one"), [](std::size_t i) { return row(i); }, o).ok());
  o.resume = true;
  auto r = run_sweep(2, header(2, "two"), [](std::size_t i) { return row(i); }, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("different sweep"), std::string::npos);
  EXPECT_EQ(r.error().field, "-o");
}

TEST(SweepRunner, AnEvaluatorThatThrowsGivesAnErrorRowNotALostRow) {
  SweepRunOptions o;
  o.threads = 2;
  auto r = run_sweep(4, header(4), [](std::size_t i) -> json {
    if (i == 2) throw std::runtime_error("boom");
    return row(i);
  }, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->rows.size(), 4u);
  EXPECT_EQ(r->rows[2]["status"], "error");
  EXPECT_NE(r->rows[2]["error"].get<std::string>().find("boom"), std::string::npos);
}

}  // namespace
}  // namespace dtsim::planning
