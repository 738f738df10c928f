// Charts of a study (sweep or plan results) drawn by gnuplot as SVG: throughput and scaling
// efficiency against GPU count with the ideal line, step-time breakdown as stacked bars, memory per
// GPU against capacity, time to train and cost, the Pareto front of time against cost, predicted
// against measured, and time to a target loss against batch size. Each chart is made only when the
// data supports it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"

namespace dtsim::reports {

struct Chart {
  std::string name;     // file stem: "throughput" -> throughput.svg
  std::string title;
  std::string caption;  // what it shows, one sentence
  std::string svg;      // the SVG document gnuplot wrote
};

// Runs a gnuplot script whose output is one SVG on stdout. Errors: gnuplot is not installed (the
// message says how to install it) or the script failed (gnuplot's message).
Expected<std::string> run_gnuplot(const std::string& script);

// The charts the document's data supports.
Expected<std::vector<Chart>> study_charts(const nlohmann::json& doc);

// An SVG made fit to sit inline in HTML next to others: no XML prologue or doctype, every id
// (and reference to it) prefixed with `prefix` so that charts do not share ids.
std::string inline_svg(const std::string& svg, const std::string& prefix);

}  // namespace dtsim::reports
