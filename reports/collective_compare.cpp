#include "reports/collective_compare.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "comm/params.hpp"
#include "reports/charts.hpp"
#include "reports/collective_report.hpp"
#include "reports/output.hpp"
#include "sim/units.hpp"

namespace dtsim::reports {

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// A band with no size in it says so: a median over nothing is not 0%.
std::string summary(const calibrate::LogComparison& c) {
  const auto large = std::count_if(c.points.begin(), c.points.end(), [](const calibrate::LogComparePoint& p) { return p.bytes >= kMiB; });
  const std::string from_mib = large == 0 ? std::string("no sizes from 1 MiB up")
                               : large == static_cast<std::ptrdiff_t>(c.points.size())
                                   ? fmt::format("{:.1f}% from 1 MiB up", 100 * calibrate::median_abs_error(c.points, kMiB))
                                   : fmt::format("{:.1f}% over the {} from 1 MiB up", 100 * calibrate::median_abs_error(c.points, kMiB), large);
  return fmt::format("median |error| {:.1f}% over all {} sizes, {}; worst {:.1f}%", 100 * calibrate::median_abs_error(c.points),
                     c.points.size(), from_mib, 100 * calibrate::max_abs_error(c.points));
}

std::string what(const calibrate::LogComparison& c, const std::string& cluster) {
  const std::string where = c.hosts_cut     ? std::string("hosts not counted")
                            : c.nodes == 0 ? std::string("hosts not named")
                                           : fmt::format("{} node{}", c.nodes, c.nodes == 1 ? "" : "s");
  return fmt::format("{} on {} GPUs (from {}; {}), {} column, {} GPU{} per nccl-tests thread; dtsim on {}", to_string(c.op), c.gpus,
                     c.gpus_from, where, c.in_place ? "in-place" : "out-of-place", c.gpus_per_thread, c.gpus_per_thread == 1 ? "" : "s",
                     cluster);
}

// Only printable characters into the gnuplot script (text from a log is data, not commands).
std::string clean(const std::string& s) {
  std::string out;
  for (char ch : s) out += (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f || ch == '\'') ? ' ' : ch;
  return out;
}

}  // namespace

std::string render_comparison(const calibrate::LogComparison& c, const std::string& cluster) {
  std::string out = fmt::format("# dtsim collective --compare {}\n# {}\n", c.log, what(c, cluster));
  out += "# error = (dtsim - measured) / measured bus bandwidth\n#\n";
  out += fmt::format("# {:>12} {:>12} {:>12} {:>10} {:>10} {:>9}  {:<14} {:>4}\n", "size (B)", "measured us", "dtsim us", "meas busbw",
                     "dtsim busbw", "error", "dtsim algo", "ch");
  for (const auto& p : c.points) {
    out += fmt::format("  {:>12} {:>12.2f} {:>12.2f} {:>10.2f} {:>10.2f} {:>+8.1f}%  {:<14} {:>4}\n", p.bytes, p.measured_us, p.simulated_us,
                       p.measured_busbw_GBps, p.simulated_busbw_GBps, 100 * p.error(), p.algo, channels_text(p.channels));
  }
  out += "# " + summary(c) + "\n";
  return out;
}

std::string comparison_csv(const calibrate::LogComparison& c) {
  std::string out = "bytes,measured_us,simulated_us,measured_busbw_GBps,simulated_busbw_GBps,error,algo,channels\n";
  for (const auto& p : c.points) {
    out += fmt::format("{},{:.4f},{:.4f},{:.4f},{:.4f},{:.6f},{},{}\n", p.bytes, p.measured_us, p.simulated_us, p.measured_busbw_GBps,
                       p.simulated_busbw_GBps, p.error(), p.algo, p.channels);
  }
  return out;
}

std::string comparison_markdown(const calibrate::LogComparison& c, const std::string& cluster) {
  std::string out = fmt::format("# dtsim against `{}`\n\n{}.\n\n", c.log, what(c, cluster));
  out += "| size | measured busbw (GB/s) | dtsim busbw (GB/s) | dtsim algo | NCCL channels | error |\n|---:|---:|---:|---|---:|---:|\n";
  for (const auto& p : c.points) {
    out += fmt::format("| {} | {:.2f} | {:.2f} | {} | {} | {:+.1f}% |\n", to_string(Bytes(p.bytes)), p.measured_busbw_GBps, p.simulated_busbw_GBps,
                       p.algo, channels_text(p.channels), 100 * p.error());
  }
  out += "\n" + summary(c) + ".\n\n![bus bandwidth](compare.svg)\n";
  return out;
}

std::string comparison_chart_script(const calibrate::LogComparison& c, const std::string& cluster) {
  std::string data;
  for (const auto& p : c.points) data += fmt::format("{} {:.9g} {:.9g}\n", p.bytes, p.measured_busbw_GBps, p.simulated_busbw_GBps);
  return fmt::format(
      "set terminal svg size 760,440 dynamic noenhanced font 'Helvetica,11' background rgb 'white'\n"
      "set title '{} bus bandwidth: measured vs dtsim ({})'\nset grid ytics lc rgb '#dddddd'\nset border lc rgb '#555555'\n"
      "set key top left Left reverse samplen 2\nset logscale x 2\nset format x '%.0b%B'\nset xlabel 'size (bytes)'\n"
      "set ylabel 'bus bandwidth (GB/s)'\nset yrange [0:*]\n$d << EOD\n{}EOD\n"
      "plot $d using 1:2 with linespoints lw 2 pt 7 lc rgb '#4e79a7' title 'measured', "
      "$d using 1:3 with linespoints lw 2 pt 5 dt 2 lc rgb '#e15759' title 'dtsim'\n",
      to_string(c.op), clean(cluster), data);
}

Status write_comparison_report(const calibrate::LogComparison& c, const std::string& cluster, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(fmt::format("{}: cannot create the folder: {}", dir, ec.message()), "report");
  const std::filesystem::path d(dir);
  if (auto st = write_file_atomic((d / "compare.csv").string(), comparison_csv(c)); !st) return st;
  if (auto st = write_file_atomic((d / "compare.md").string(), comparison_markdown(c, cluster)); !st) return st;
  auto svg = run_gnuplot(comparison_chart_script(c, cluster));
  if (!svg) return Error(fmt::format("{}: compare.csv and compare.md written, the chart not: {}", dir, svg.error().message), "report");
  return write_file_atomic((d / "compare.svg").string(), *svg);
}

}  // namespace dtsim::reports
