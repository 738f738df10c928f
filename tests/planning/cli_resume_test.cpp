// Ctrl-C in the middle of a sweep, then --resume: the finished rows are kept, nothing is
// recomputed, and the results file ends up byte-identical to an uninterrupted run's. Slow (a few
// seconds of simulations, much longer under the sanitizers).
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace {

using dtsim::testing::Result;
using dtsim::testing::run;
using dtsim::testing::slurp;
using dtsim::testing::temp;

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp(name);
  std::ofstream(path) << text;
  return path;
}
std::size_t lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// Runs dtsim in the background with output to a file; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> argv;
  std::string bin = DTSIM_BINARY;
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn(&pid, DTSIM_BINARY, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

TEST(SweepCli, CtrlCKeepsFinishedPointsAndResumeCompletesIdentically) {
  // 10 points of about a tenth of a second each (seconds under the sanitizers).
  constexpr int kPoints = 10;
  std::string values;
  for (int i = 0; i < kPoints; ++i) values += (i ? ", " : "") + std::to_string(32 + 4 * i);
  const std::string spec = write("cli-resume.yaml",
                                 "base:\n  cluster: {node: dgx-h100, nodes: 1}\n  model: gpt3-13b\n"
                                 "  training: {global_batch: 256, micro_batch: 1, seq_len: 2048, recompute: selective}\n"
                                 "  parallel: {tp: 8, sequence_parallel: true, zero: 1}\n"
                                 "axes:\n  training.global_batch: [" + values + "]\n");
  const std::string whole = temp("cli-whole.jsonl"), part = temp("cli-part.jsonl"), log = temp("cli-part.log");
  ASSERT_EQ(run("sweep " + spec + " -o " + whole + " -j 1").code, 0);
  std::filesystem::remove(part);
  const pid_t pid = spawn({"sweep", spec, "-o", part, "-j", "1"}, log);
  ASSERT_GT(pid, 0);
  // Interrupt once three rows follow the header, however long that takes on this machine (the
  // rows are written as points finish, so the wait is on progress, not on a clock).
  int status = 0;
  bool exited = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (lines(slurp(part)) < 4 && std::chrono::steady_clock::now() < give_up) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(exited) << "the sweep ended before it could be interrupted:\n" << slurp(log);
  kill(pid, SIGINT);
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << slurp(log);
  EXPECT_EQ(WEXITSTATUS(status), 1) << slurp(log);
  EXPECT_NE(slurp(log).find("--resume"), std::string::npos) << slurp(log);
  const std::size_t kept = lines(slurp(part)) - 1;
  EXPECT_GE(kept, 3u);
  EXPECT_LT(kept, static_cast<std::size_t>(kPoints));
  const Result r = run("sweep " + spec + " -o " + part + " --resume -j 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(std::to_string(kept) + " kept from"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(std::to_string(kPoints - kept) + " simulated"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(part), slurp(whole));
}

}  // namespace
