// Reports of a study: the results document of a sweep (planning/study.hpp) or a plan
// (plan_report.hpp) rendered as
//  - report.html: one self-contained file (inline CSS and gnuplot SVG charts, a Content-Security-
//    Policy that forbids every network request): the question, the hardware and model, results,
//    charts, the assumptions, and which parameters were calibrated and which are defaults;
//  - report.md: the same for pasting into a design document (charts as the SVG files beside it);
//  - results.csv: one row per point or candidate; results.json: the document itself;
//  - <chart>.svg: every chart.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/charts.hpp"
#include "sim/expected.hpp"

namespace dtsim::reports {

std::string study_csv(const nlohmann::json& doc);
// The results as an aligned text table (the console output of dtsim sweep).
std::string render_study_table(const nlohmann::json& doc);
std::string study_markdown(const nlohmann::json& doc, const std::vector<Chart>& charts);
std::string study_html(const nlohmann::json& doc, const std::vector<Chart>& charts);

// Writes every file into `dir` (created when missing), each atomically. Fails (nothing half
// written) when gnuplot is missing or a file cannot be written.
Status write_study_report(const nlohmann::json& doc, const std::string& dir);

// Reads a results document (results.json from sweep, plan or report) or a sweep's JSON Lines
// results file (then the document is rebuilt from its header and rows).
Expected<nlohmann::json> read_study(const std::string& path);

}  // namespace dtsim::reports
