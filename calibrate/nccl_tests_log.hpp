// Reading the text output of NVIDIA's nccl-tests (all_reduce_perf and friends), which many users
// already have for their clusters, into collective samples for `dtsim fit`.
//
// The format (nccl-tests src/common.cu): comment lines start with '#': the run's settings
// ("# nThread 1 nGpus 1 minBytes 8 maxBytes ... iters: 20 ..."), one "#  Rank  N Group G Pid P on
// HOST device D [BUS] NAME" line per rank, the column titles, and the trailer ("# Out of bounds
// values : 0 OK", "# Avg bus bandwidth : 66.6"). Data rows are
//   size count type redop root  time algbw busbw #wrong  time algbw busbw #wrong
// with the out-of-place figures first and the in-place ones second (older versions lack the
// root column; the column titles say which). "N/A" stands for a value that was not measured.
// Other lines (NCCL INFO/WARN output, launcher messages) are skipped and counted. A launcher's
// per-line rank label is read past: Open MPI's --tag-output "[1,0]<stdout>:", Slurm's srun
// --label "0: ", MPICH's and Intel MPI's -prepend-rank "[0] ".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/metrics.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

struct NcclTestsFigures {
  std::optional<double> time_us, algbw_GBps, busbw_GBps;
  std::optional<std::int64_t> wrong;
};

struct NcclTestsRow {
  int line = 0;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  NcclTestsFigures out_of_place, in_place;
};

struct NcclTestsRank {
  int rank = 0;
  std::string host;
  int device = 0;
  std::string gpu;  // e.g. "NVIDIA H100 80GB HBM3"
};

// One table of a log (a log may hold several, one per collective test).
struct NcclTestsTable {
  std::optional<CollOp> op;  // from "# Collective test starting: X", or the file name
  int first_line = 0;
  std::vector<NcclTestsRow> rows;
  std::optional<double> avg_busbw_GBps;
};

struct NcclTestsLog {
  std::string path;
  std::vector<NcclTestsRank> ranks;  // from the "#  Rank" lines
  int nthread = 0, ngpus = 0;        // from the settings line (0 when absent)
  std::string version_line;          // "# nccl-tests version ..." when present
  std::vector<NcclTestsTable> tables;
  int skipped_lines = 0;             // non-comment lines that are not data rows
  // Every "NCCL_X set by environment to V" line of NCCL's INFO output (NCCL_DEBUG=INFO; misc/param.cc
  // and tuning.cc print them), the first of each name, in the order met; a trailing '.' dropped.
  std::vector<std::pair<std::string, std::string>> nccl_env;
  int ranks_count() const { return static_cast<int>(ranks.size()); }
  std::string algo_env() const;      // NCCL_ALGO's value in nccl_env, empty when not set
  int nodes_count() const;           // distinct hosts (1 when unknown)
};

// The collective named by an nccl-tests binary or log name: "all_reduce_perf.log" -> allreduce.
std::optional<CollOp> op_from_name(const std::string& name);

// The rank count a table's bus and algorithm bandwidths imply, for a log without '#  Rank' lines
// (a pasted table, or an MPI run whose settings line counts one process's GPUs only). nccl-tests
// (doc/PERFORMANCE.md) reports busbw = algbw x 2(n-1)/n for all-reduce and algbw x (n-1)/n for
// all-gather, reduce-scatter and all-to-all. Nullopt for collectives whose ratio does not depend
// on n (broadcast, reduce, send/receive) and when n is not within 2% of a whole number.
std::optional<int> ranks_from_bandwidths(const NcclTestsTable& t, CollOp op);

// Whether a table's figures fit `n` ranks: nccl-tests prints algbw and busbw = algbw x f(n) to two
// decimals, so every row has |busbw - algbw f(n)| <= 0.005 (1 + f(n)). Collectives whose f does
// not depend on n (broadcast, reduce, send/receive) fit any n.
bool bandwidths_fit_ranks(const NcclTestsTable& t, CollOp op, int n);

// The rank count of a log whose '#  Rank' lines (`listed` of them) were cut when it was quoted
// ("..." in place of most): when the printed bandwidths do not fit `listed` ranks, the count
// nearest ranks_from_bandwidths' that they do fit, if it is larger (within a quarter of it, and
// 4,096; the ratio's rounding leaves several counts possible among thousands of ranks). Nullopt when the
// lines fit, or nothing larger does.
std::optional<int> ranks_beyond_listed(const NcclTestsTable& t, CollOp op, int listed);

// Parses a log's text; `name` is used in errors ("name:line: ...") and to guess the collective.
// Errors: a data row that cannot be read, or no data rows at all.
Expected<NcclTestsLog> parse_nccl_tests(const std::string& text, const std::string& name);
Expected<NcclTestsLog> read_nccl_tests(const std::string& path);

}  // namespace dtsim::calibrate
