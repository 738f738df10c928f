// Renderings of `dtsim collective --compare LOG` (calibrate::LogComparison): a text table with the
// error per size, CSV, Markdown, and a gnuplot chart of both bus-bandwidth curves. Renderers never
// compute; the comparison fills the record.
#pragma once

#include <string>

#include "calibrate/log_compare.hpp"
#include "sim/expected.hpp"

namespace dtsim::reports {

std::string render_comparison(const calibrate::LogComparison& c, const std::string& cluster);
std::string comparison_csv(const calibrate::LogComparison& c);
std::string comparison_markdown(const calibrate::LogComparison& c, const std::string& cluster);
// A gnuplot script drawing measured and simulated bus bandwidth against size (log scale) as SVG.
std::string comparison_chart_script(const calibrate::LogComparison& c, const std::string& cluster);

// Writes compare.csv, compare.md and (when gnuplot runs) compare.svg into `dir`, creating it.
// Errors: the folder cannot be written, or gnuplot is missing or fails.
Status write_comparison_report(const calibrate::LogComparison& c, const std::string& cluster, const std::string& dir);

}  // namespace dtsim::reports
