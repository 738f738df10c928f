#include "calibrate/nccl_tests_log.hpp"
#include "sim/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

namespace dtsim::calibrate {

namespace {

std::vector<std::string> tokens(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream ss(s);
  std::string t;
  while (ss >> t) out.push_back(t);
  return out;
}

// "... NCCL INFO NCCL_BUFFSIZE set by environment to 8388608." -> ("NCCL_BUFFSIZE", "8388608").
void read_env_line(const std::string& line, NcclTestsLog& log) {
  static constexpr std::string_view kSet = " set by environment to ";
  const auto at = line.find(kSet);
  if (at == std::string::npos) return;
  const auto names = tokens(line.substr(0, at));
  const auto values = tokens(line.substr(at + kSet.size()));
  if (names.empty() || values.empty() || names.back().rfind("NCCL_", 0) != 0) return;
  std::string value = values.front();
  if (value.size() > 1 && value.back() == '.') value.pop_back();
  const std::string& name = names.back();
  for (const auto& [n, v] : log.nccl_env) {
    if (n == name) return;
  }
  log.nccl_env.emplace_back(name, value);
}

std::optional<std::int64_t> to_int(const std::string& s) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// A finite number: from_chars also reads "inf" and "nan", which nccl-tests never prints and which
// the fit cannot use (an "inf" time crashed `dtsim fit --nccl-tests`: found by the issue-15
// mutation run).
std::optional<double> to_double(const std::string& s) {
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Column layout of the data rows, from the column titles.
struct Columns {
  int size = 0, count = 1, type = 2, redop = 3, root = 4;
  int oop = 5, ip = 9;  // first of (time, algbw, busbw, wrong)
  int width = 13;
};

// "#       size         count      type   redop    root     time   algbw   busbw #wrong ..."
std::optional<Columns> columns_from_titles(const std::vector<std::string>& t) {
  // t excludes the leading '#'.
  if (t.size() < 8 || t[0] != "size" || t[1] != "count") return std::nullopt;
  Columns c;
  c.redop = c.root = -1;
  int times = 0;
  for (int i = 2; i < static_cast<int>(t.size()); ++i) {
    const std::string& n = t[static_cast<std::size_t>(i)];
    if (n == "type") c.type = i;
    else if (n == "redop") c.redop = i;
    else if (n == "root") c.root = i;
    else if (n == "time") (times++ == 0 ? c.oop : c.ip) = i;
  }
  if (times != 2) return std::nullopt;
  c.width = static_cast<int>(t.size());
  return c;
}

std::optional<double> figure(const std::string& s, bool& bad) {
  if (s == "N/A" || s == "n/a" || s == "-") return std::nullopt;
  auto v = to_double(s);
  if (!v || *v < 0) bad = true;
  return v;
}

// Launchers can put the rank that printed a line in front of it: Open MPI's --tag-output
// "[1,0]<stdout>:", Slurm's srun --label "  0: ", MPICH's and Intel MPI's -prepend-rank "[0] ".
// Returns the line without such a prefix; any other line unchanged. nccl-tests itself never
// starts a line with '[' or with digits followed by ':'.
std::string without_launcher_prefix(const std::string& s) {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::size_t j = s.find_first_not_of(" \t");
  if (j == std::string::npos) return s;
  auto digits = [&] {
    const std::size_t from = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    return j > from;
  };
  if (s[j] == '[') {
    ++j;
    if (!digits()) return s;
    const bool job_rank = j < s.size() && s[j] == ',';  // Open MPI's [job,rank]
    if (job_rank) {
      ++j;
      if (!digits()) return s;
    }
    if (j >= s.size() || s[j] != ']') return s;
    ++j;
    if (!job_rank) return s.substr(j);
    for (const std::string_view tag : {std::string_view("<stdout>:"), std::string_view("<stderr>:"), std::string_view("<stddiag>:")}) {
      if (s.compare(j, tag.size(), tag) == 0) return s.substr(j + tag.size());
    }
    return s;
  }
  if (digits() && j < s.size() && s[j] == ':') return s.substr(j + 1);
  return s;
}

}  // namespace

std::optional<int> ranks_from_bandwidths(const NcclTestsTable& t, CollOp op) {
  // n = 2 / (2 - r) or 1 / (1 - r) with r = busbw / algbw, the median over the rows (the figures
  // are rounded).
  double k = 0;  // r = k (n - 1) / n
  if (op == CollOp::allreduce) k = 2;
  else if (op == CollOp::allgather || op == CollOp::reducescatter || op == CollOp::alltoall) k = 1;
  else return std::nullopt;
  std::vector<double> ratios;
  for (const auto& row : t.rows) {
    for (const auto* f : {&row.out_of_place, &row.in_place}) {
      // Small sizes print bandwidths with two decimals only: use rows where both are large.
      if (f->algbw_GBps && f->busbw_GBps && *f->algbw_GBps >= 1.0) ratios.push_back(*f->busbw_GBps / *f->algbw_GBps);
    }
  }
  if (ratios.empty()) return std::nullopt;
  std::sort(ratios.begin(), ratios.end());
  const double r = ratios[ratios.size() / 2];
  if (r >= k - 1e-9) return std::nullopt;
  const double n = k / (k - r);
  const double whole = std::round(n);
  if (whole < 1 || std::abs(n - whole) > 0.02 * whole) return std::nullopt;
  return static_cast<int>(whole);
}

bool bandwidths_fit_ranks(const NcclTestsTable& t, CollOp op, int n) {
  const double f = bus_bandwidth_factor(op, n);
  for (const auto& row : t.rows) {
    for (const auto* fig : {&row.out_of_place, &row.in_place}) {
      if (!fig->algbw_GBps || !fig->busbw_GBps) continue;
      if (std::fabs(*fig->busbw_GBps - *fig->algbw_GBps * f) > 0.005 * (1 + f) + 1e-9) return false;
    }
  }
  return true;
}

std::optional<int> ranks_beyond_listed(const NcclTestsTable& t, CollOp op, int listed) {
  if (listed <= 0 || bandwidths_fit_ranks(t, op, listed)) return std::nullopt;
  const auto inferred = ranks_from_bandwidths(t, op);
  if (!inferred || *inferred <= listed) return std::nullopt;
  // At most 4,096 counts either side: a crafted log's ratio may imply billions of ranks.
  const std::int64_t centre = *inferred, reach = std::clamp<std::int64_t>(centre / 4, 1, 4096);
  for (std::int64_t d = 0; d <= reach; ++d) {
    for (const std::int64_t n : {centre - d, centre + d}) {
      if (n > listed && n <= std::numeric_limits<int>::max() && bandwidths_fit_ranks(t, op, static_cast<int>(n))) return static_cast<int>(n);
    }
  }
  return std::nullopt;
}

std::string NcclTestsLog::algo_env() const {
  for (const auto& [name, value] : nccl_env) {
    if (name == "NCCL_ALGO") return value;
  }
  return "";
}

int NcclTestsLog::nodes_count() const {
  std::set<std::string> hosts;
  for (const auto& r : ranks) hosts.insert(r.host);
  return hosts.empty() ? 1 : static_cast<int>(hosts.size());
}

std::optional<CollOp> op_from_name(const std::string& name) {
  std::string n = ascii_lower(name);
  const auto slash = n.find_last_of('/');
  if (slash != std::string::npos) n = n.substr(slash + 1);
  // Longest names first: "reduce_scatter" before "reduce", "all_reduce" before "reduce".
  static const std::pair<const char*, CollOp> names[] = {
      {"reduce_scatter", CollOp::reducescatter}, {"reducescatter", CollOp::reducescatter},
      {"all_reduce", CollOp::allreduce},         {"allreduce", CollOp::allreduce},
      {"all_gather", CollOp::allgather},         {"allgather", CollOp::allgather},
      {"alltoall", CollOp::alltoall},            {"all_to_all", CollOp::alltoall},
      {"sendrecv", CollOp::sendrecv},            {"send_recv", CollOp::sendrecv},
      {"broadcast", CollOp::broadcast},          {"reduce", CollOp::reduce},
  };
  for (const auto& [key, op] : names) {
    if (n.find(key) != std::string::npos) return op;
  }
  return std::nullopt;
}

Expected<NcclTestsLog> parse_nccl_tests(const std::string& text, const std::string& name) {
  NcclTestsLog log;
  log.path = name;
  const std::optional<CollOp> file_op = op_from_name(name);
  bool start_new = false;            // the next row opens a new table
  std::optional<CollOp> next_op;     // from a "Collective test starting" line, for that table
  Columns cols;
  bool titles_seen = false;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto current = [&]() -> NcclTestsTable& {
    if (log.tables.empty() || start_new) {
      NcclTestsTable t;
      t.op = next_op ? next_op : (log.tables.empty() ? file_op : log.tables.back().op);
      t.first_line = lineno;
      log.tables.push_back(t);
      start_new = false;
      next_op.reset();
    }
    return log.tables.back();
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    line = without_launcher_prefix(line);
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    if (line[first] == '#') {
      const std::string body = line.substr(first + 1);
      const auto t = tokens(body);
      if (t.empty()) continue;
      if (t[0] == "Rank" && t.size() >= 2) {
        NcclTestsRank r;
        r.rank = static_cast<int>(to_int(t[1]).value_or(0));
        for (std::size_t i = 2; i + 1 < t.size(); ++i) {
          if (t[i] == "on") r.host = t[i + 1];
          if (t[i] == "device") {
            r.device = static_cast<int>(to_int(t[i + 1]).value_or(0));
            // The GPU's name follows the bus id "[0x..]".
            std::size_t j = i + 2;
            if (j < t.size() && !t[j].empty() && t[j][0] == '[') ++j;
            for (; j < t.size(); ++j) r.gpu += (r.gpu.empty() ? "" : " ") + t[j];
            break;
          }
        }
        log.ranks.push_back(r);
        continue;
      }
      if (t[0] == "nThread" || t[0] == "nGpus") {
        // Threads and GPUs of one nccl-tests process: a handful each. A count beyond 4,096 is not
        // one (a 2^32 "nThread" wrapped to an int overflowed nThread x nGpus: fuzz_nccl_tests).
        constexpr std::int64_t kMaxCount = 4096;
        for (std::size_t i = 0; i + 1 < t.size(); ++i) {
          if (t[i] != "nThread" && t[i] != "nGpus") continue;
          const std::int64_t v = to_int(t[i + 1]).value_or(0);
          if (v < 0 || v > kMaxCount) {
            return Error(fmt::format("{}:{}: {} {} is not a count of threads or GPUs of one nccl-tests process (0 to {})", name, lineno, t[i],
                                     t[i + 1], kMaxCount));
          }
          (t[i] == "nThread" ? log.nthread : log.ngpus) = static_cast<int>(v);
        }
        continue;
      }
      if (t.size() >= 3 && t[0] == "nccl-tests" && t[1] == "version") {
        log.version_line = body;
        continue;
      }
      if (body.find("Collective test starting") != std::string::npos) {
        const auto colon = body.find(':');
        if (colon != std::string::npos) next_op = op_from_name(body.substr(colon + 1));
        start_new = true;
        continue;
      }
      if (auto c = columns_from_titles(t)) {
        cols = *c;
        titles_seen = true;
        // New column titles after rows start a new table (several tests in one log).
        if (!log.tables.empty() && !log.tables.back().rows.empty()) start_new = true;
        continue;
      }
      if (body.find("Avg bus bandwidth") != std::string::npos) {
        const auto colon = body.find(':');
        if (colon != std::string::npos && !log.tables.empty()) {
          const auto v = tokens(body.substr(colon + 1));
          if (!v.empty()) log.tables.back().avg_busbw_GBps = to_double(v[0]);
        }
      }
      continue;
    }
    const auto t = tokens(line);
    // A data row starts with the size in bytes; anything else is foreign output.
    if (t.empty() || !to_int(t[0])) {
      ++log.skipped_lines;
      read_env_line(line, log);
      continue;
    }
    if (!titles_seen) cols = Columns{};
    auto bad_row = [&](const std::string& why) {
      return Error(fmt::format("{}:{}: cannot read this nccl-tests row ({}): {}", name, lineno, why, line.substr(first)));
    };
    if (static_cast<int>(t.size()) != cols.width) {
      return bad_row(fmt::format("expected {} columns, found {}", cols.width, t.size()));
    }
    // Column titles can name fewer columns than their indices reach (a cut or foreign title line):
    // every index used below must be inside the row.
    const int last = std::max({cols.size, cols.count, cols.type, cols.redop, cols.root, cols.oop + 3, cols.ip + 3});
    if (last >= static_cast<int>(t.size()) || cols.size < 0 || cols.count < 0 || cols.type < 0 || cols.oop < 0 || cols.ip < 0) {
      return bad_row(fmt::format("the column titles do not describe a row of {} columns", t.size()));
    }
    NcclTestsRow row;
    row.line = lineno;
    row.bytes = *to_int(t[static_cast<std::size_t>(cols.size)]);
    const auto count = to_int(t[static_cast<std::size_t>(cols.count)]);
    if (!count || *count < 0 || row.bytes < 0) return bad_row("size and count must be non-negative integers");
    row.count = *count;
    row.type = t[static_cast<std::size_t>(cols.type)];
    if (cols.redop >= 0) row.redop = t[static_cast<std::size_t>(cols.redop)];
    if (cols.root >= 0) {
      const auto root = to_int(t[static_cast<std::size_t>(cols.root)]);
      if (!root) return bad_row("root is not an integer");
      row.root = static_cast<int>(*root);
    }
    bool bad = false;
    auto read = [&](int at, NcclTestsFigures& f) {
      const auto i = static_cast<std::size_t>(at);
      f.time_us = figure(t[i], bad);
      f.algbw_GBps = figure(t[i + 1], bad);
      f.busbw_GBps = figure(t[i + 2], bad);
      if (t[i + 3] != "N/A" && t[i + 3] != "n/a") {
        // #wrong is a count; older versions print the largest error instead ("error", 2e-07).
        if (const auto w = to_int(t[i + 3])) {
          if (*w < 0) bad = true;
          f.wrong = w;
        } else if (!to_double(t[i + 3])) {
          bad = true;
        }
      }
    };
    read(cols.oop, row.out_of_place);
    read(cols.ip, row.in_place);
    if (bad) return bad_row("time, algbw, busbw and #wrong must be finite non-negative numbers or N/A");
    current().rows.push_back(row);
  }
  std::size_t rows = 0;
  for (const auto& tb : log.tables) rows += tb.rows.size();
  if (rows == 0) {
    return Error(fmt::format("{}: no nccl-tests data rows (lines of the form 'size count type redop root time algbw busbw #wrong "
                             "time algbw busbw #wrong'); is this an nccl-tests log?",
                             name));
  }
  return log;
}

Expected<NcclTestsLog> read_nccl_tests(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("{}: cannot open the file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_nccl_tests(ss.str(), path);
}

}  // namespace dtsim::calibrate
