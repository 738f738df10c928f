#include "planning/measured.hpp"

#include "config/csv.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace dtsim::planning {

std::vector<std::string> split_csv_line(const std::string& line) { return config::split_csv_line(line); }

Expected<MeasuredTable> read_measured_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)), "measured");
  MeasuredTable t;
  t.path = path;
  std::string line;
  std::vector<std::string> cols;
  int n = 0;
  std::size_t value_col = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    auto f = split_csv_line(line);
    if (cols.empty()) {
      cols = f;
      for (std::size_t i = 0; i < cols.size(); ++i) {
        const auto& m = measured_metrics();
        if (std::find(m.begin(), m.end(), cols[i]) != m.end()) {
          if (!t.metric.empty()) return Error(fmt::format("{}:{}: give one measured column, not both {} and {}", path, n, t.metric, cols[i]), "measured");
          t.metric = cols[i];
          value_col = i;
        } else {
          t.keys.push_back(cols[i]);
        }
      }
      if (t.metric.empty()) return Error(fmt::format("{}:{}: no measured column (step_time_s, tokens_per_s or samples_per_s)", path, n), "measured");
      if (t.keys.empty()) return Error(fmt::format("{}:{}: no key column (point, or axis names such as gpus)", path, n), "measured");
      continue;
    }
    if (f.size() != cols.size()) return Error(fmt::format("{}:{}: {} fields, the header has {}", path, n, f.size(), cols.size()), "measured");
    MeasuredTable::Line l;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      if (i == value_col) {
        std::size_t used = 0;
        double v = 0;
        try {
          v = std::stod(f[i], &used);
        } catch (...) {
          used = 0;
        }
        if (used == 0 || used != f[i].size() || !std::isfinite(v) || v <= 0) {
          return Error(fmt::format("{}:{}: {} '{}' is not a positive number", path, n, cols[i], f[i]), "measured");
        }
        l.value = v;
      } else {
        l.key[cols[i]] = f[i];
      }
    }
    t.lines.push_back(std::move(l));
  }
  if (cols.empty()) return Error(fmt::format("'{}' is empty", path), "measured");
  return t;
}

}  // namespace dtsim::planning
