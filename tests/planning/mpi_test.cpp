// A sweep under mpirun (2 processes; points dealt between them, rank 0 merging) writes the same
// bytes as one process. Skipped when dtsim is built without MPI or mpirun is missing.
#include <gtest/gtest.h>

#include "tests/support/cli_run.hpp"

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

using dtsim::testing::slurp;
using dtsim::testing::temp;
using dtsim::testing::sh;

TEST(MpiSweep, TwoProcessesGiveTheSameRowsAsOne) {
#ifndef DTSIM_HAVE_MPI
  GTEST_SKIP() << "dtsim is built without MPI (DTSIM_ENABLE_MPI)";
#else
  if (sh("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun is not installed";
  const std::string spec = std::string(DTSIM_SOURCE_DIR) + "/examples/sweeps/gpt3-13b-strong-scaling-h100.yaml";
  const std::string one = temp("mpi-one.jsonl"), two = temp("mpi-two.jsonl"), log = temp("mpi.log");
  ASSERT_EQ(sh(std::string(DTSIM_BINARY) + " sweep " + spec + " -o " + one + " -j 1 > " + log + " 2>&1"), 0) << slurp(log);
  ASSERT_EQ(sh("mpirun --oversubscribe --allow-run-as-root -n 2 " + std::string(DTSIM_BINARY) + " sweep " + spec + " -o " + two + " -j 1 > " + log +
               " 2>&1"),
            0)
      << slurp(log);
  EXPECT_NE(slurp(log).find("x 2 processes"), std::string::npos) << slurp(log);
  EXPECT_EQ(slurp(two), slurp(one));
#endif
}

}  // namespace
