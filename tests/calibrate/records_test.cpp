// JSON Lines results: record parsing, errors with file:line, and the harness's resume logic
// (refusing to overwrite, skipping what is done, repairing a torn last line). The records here
// are synthetic fixtures built by the tests, not measurements.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "calibrate/records.hpp"

namespace dtsim::calibrate {
namespace {

std::string temp(const std::string& name) {
  const auto p = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove(p);
  return p.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json rec(const std::string& point, const std::string& status = "ok") {
  return {{"schema", kCalibrateSchema}, {"suite", "overhead"}, {"point", point}, {"status", status},
          {"params", {{"what", "kernel_gpu"}}}, {"result", {{"time_s", 1e-6}}}};
}

TEST(Records, ParsesAndChecksFields) {
  auto r = parse_record(rec("overhead/kernel_gpu").dump());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->suite, "overhead");
  EXPECT_EQ(r->point, "overhead/kernel_gpu");
  EXPECT_TRUE(r->ok());
  EXPECT_DOUBLE_EQ(r->result["time_s"].get<double>(), 1e-6);

  EXPECT_FALSE(parse_record("{\"schema\": \"dtsim-calibrate/1\", \"suite\": \"gemm\"").ok());  // torn
  EXPECT_NE(parse_record("[1, 2]").error().message.find("object"), std::string::npos);
  EXPECT_NE(parse_record(R"({"schema": "dtsim-calibrate/1", "suite": "gemm"})").error().message.find("point"), std::string::npos);
  EXPECT_NE(parse_record(R"({"schema": "other/9", "suite": "gemm", "point": "x"})").error().message.find("unknown schema"),
            std::string::npos);
  EXPECT_NE(parse_record(R"({"schema": "dtsim-calibrate/1", "suite": "gemm", "point": "x", "status": "maybe"})").error().message.find("status"),
            std::string::npos);
  EXPECT_NE(parse_record(R"({"schema": "dtsim-calibrate/1", "suite": "gemm", "point": "x", "params": 3})").error().message.find("params"),
            std::string::npos);
}

TEST(Records, ReadErrorsNameFileAndLine) {
  const std::string path = temp("bad.jsonl");
  write(path, rec("a").dump() + "\n\n" + rec("b").dump() + "\nnot json at all\n");
  auto r = read_records(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find(path + ":4:"), std::string::npos) << r.error().message;

  const std::string empty = temp("empty.jsonl");
  write(empty, "\n  \n");
  auto e = read_records(empty);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("no records"), std::string::npos);

  EXPECT_FALSE(read_records(temp("missing.jsonl")).ok());
}

TEST(ResultLog, AppendsFlushedLinesAndRefusesToOverwrite) {
  const std::string path = temp("run.jsonl");
  {
    auto log = ResultLog::open(path, false);
    ASSERT_TRUE(log.ok()) << log.error().message;
    ASSERT_TRUE(log->append(rec("p1")).ok());
    // Flushed at once: another reader sees the line while the log is still open.
    EXPECT_EQ(slurp(path), rec("p1").dump() + "\n");
    ASSERT_TRUE(log->append(rec("p2", "error")).ok());
    EXPECT_TRUE(log->done("p1"));
    EXPECT_FALSE(log->done("p3"));
  }
  auto again = ResultLog::open(path, false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("--resume"), std::string::npos);
}

TEST(ResultLog, ResumeSkipsWhatIsDoneAndRetriesErrorsOnRequest) {
  const std::string path = temp("resume.jsonl");
  write(path, rec("done-ok").dump() + "\n" + rec("done-error", "error").dump() + "\n" + rec("done-skipped", "skipped").dump() + "\n");
  auto log = ResultLog::open(path, true);
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_EQ(log->recorded(), 3u);
  EXPECT_FALSE(log->repaired());
  EXPECT_TRUE(log->done("done-ok"));
  EXPECT_TRUE(log->done("done-skipped"));
  EXPECT_TRUE(log->done("done-error"));
  EXPECT_FALSE(log->done("done-error", /*retry_errors=*/true));
  EXPECT_TRUE(log->done("done-ok", true));
  EXPECT_FALSE(log->done("new"));
  ASSERT_TRUE(log->append(rec("new")).ok());
  auto all = read_records(path);
  ASSERT_TRUE(all.ok()) << all.error().message;
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ(all->back().point, "new");
}

TEST(ResultLog, ResumeCutsOffATornLastLine) {
  const std::string path = temp("torn.jsonl");
  const std::string good = rec("complete").dump() + "\n";
  const std::string torn = rec("in-flight").dump().substr(0, 40);  // the crash hit mid-write
  write(path, good + torn);
  auto log = ResultLog::open(path, true);
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_TRUE(log->repaired());
  EXPECT_TRUE(log->done("complete"));
  EXPECT_FALSE(log->done("in-flight"));
  EXPECT_EQ(slurp(path), good);
  ASSERT_TRUE(log->append(rec("in-flight")).ok());
  auto all = read_records(path);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(all->size(), 2u);
}

TEST(ResultLog, ResumeRefusesACorruptMiddleLine) {
  const std::string path = temp("corrupt.jsonl");
  write(path, rec("a").dump() + "\n{broken\n" + rec("b").dump() + "\n");
  auto log = ResultLog::open(path, true);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.error().message.find(path + ":2:"), std::string::npos) << log.error().message;
}

}  // namespace
}  // namespace dtsim::calibrate
