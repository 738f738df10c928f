// Measured data to compare predictions with: a CSV file whose header names the columns. Key
// columns (`point`, or sweep axis names such as `gpus` and `parallel.tp`) say which row a line is;
// one value column holds the measurement: step_time_s, tokens_per_s or samples_per_s.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "sim/expected.hpp"

namespace dtsim::planning {

struct MeasuredTable {
  std::string path;
  std::vector<std::string> keys;      // key columns, in file order
  std::string metric;                 // the value column
  struct Line {
    std::map<std::string, std::string> key;  // column -> text
    double value = 0;
  };
  std::vector<Line> lines;
};

inline const std::vector<std::string>& measured_metrics() {
  static const std::vector<std::string> m = {"step_time_s", "tokens_per_s", "samples_per_s"};
  return m;
}

// Reads and checks the file (errors name the line).
Expected<MeasuredTable> read_measured_csv(const std::string& path);

// Splits one CSV line (double quotes protect commas; "" is a quote).
std::vector<std::string> split_csv_line(const std::string& line);

}  // namespace dtsim::planning
