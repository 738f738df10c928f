// `dtsim validate --report DIR`: predicted against measured training steps as a self-contained HTML
// page (no network): a gnuplot chart of step time against micro-batch per model (measured points,
// predicted lines), the per-point table, and the per-kernel-family table when a kernel profile was
// given. Input: the document `dtsim validate --json` writes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::reports {

// The HTML page of a validation document (charts given as inline SVG, possibly empty).
std::string validation_html(const nlohmann::json& doc, const std::string& chart_svg);

// The gnuplot script of the step-time chart ("" when the document has no rows).
std::string validation_chart_script(const nlohmann::json& doc);

// Writes DIR/report.html (chart drawn by gnuplot) and DIR/validation.json, each atomically.
Status write_validation_report(const std::string& dir, const nlohmann::json& doc);

}  // namespace dtsim::reports
