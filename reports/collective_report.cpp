#include "reports/collective_report.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace dtsim::reports {

namespace {
// Rounds to a fixed number of decimals so that JSON output is stable and readable.
double round_to(double v, int decimals) {
  const double k = std::pow(10.0, decimals);
  return std::round(v * k) / k;
}
}  // namespace

std::string channels_text(int channels) { return channels > 0 ? std::to_string(channels) : std::string("-"); }

std::string render_table(const CollectiveReport& r) {
  std::string out;
  for (const auto& h : r.header) out += "# " + h + "\n";
  out += "#\n";
  out += fmt::format("#{:>14} {:>13} {:>9} {:>6} {:>6} {:>11} {:>8} {:>8}  {:<14} {:>4}\n", "size", "count", "type", "redop",
                     "root", "time", "algbw", "busbw", "algo/proto", "ch");
  out += fmt::format("#{:>14} {:>13} {:>9} {:>6} {:>6} {:>11} {:>8} {:>8}\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
                     "(GB/s)");
  for (const auto& row : r.rows) {
    out += fmt::format(" {:>14} {:>13} {:>9} {:>6} {:>6} {:>11.2f} {:>8.2f} {:>8.2f}  {:<14} {:>4}\n", row.bytes, row.count,
                       row.type, row.redop, row.root, row.time_us, row.algbw_GBps, row.busbw_GBps,
                       row.algo + "/" + row.protocol, channels_text(row.channels));
  }
  return out;
}

nlohmann::json to_json(const CollectiveReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    rows.push_back({{"op", std::string(to_string(row.op))},
                    {"algo", row.algo},
                    {"protocol", row.protocol},
                    {"channels", row.channels},
                    {"bytes", row.bytes},
                    {"count", row.count},
                    {"type", row.type},
                    {"time_us", round_to(row.time_us, 4)},
                    {"algbw_GBps", round_to(row.algbw_GBps, 4)},
                    {"busbw_GBps", round_to(row.busbw_GBps, 4)},
                    {"estimate_us", round_to(row.estimate_us, 4)}});
  }
  return {{"config", r.config}, {"rows", rows}};
}

}  // namespace dtsim::reports
