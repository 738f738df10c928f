#include "cli/report_command.hpp"

#include <cstdio>
#include <memory>

#include "cli/errors.hpp"
#include "planning/study.hpp"
#include "reports/study_report.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::string input;
  std::string out;
  std::string measured;
};

int run(const Options& o) {
  if (o.input.empty() || o.out.empty()) {
    print_error("report needs a results file and a folder: dtsim report RESULTS.json -o DIR");
    return kExitBadInput;
  }
  auto doc = reports::read_study(o.input);
  if (!doc) {
    print_error(doc.error().message);
    return kExitBadInput;
  }
  if (!o.measured.empty()) {
    if (doc->value("dtsim", std::string()) != "sweep") {
      print_error("--measured applies to sweep results (rows matched by point or axis values)");
      return kExitBadInput;
    }
    // Rebuild the document with the measured data.
    nlohmann::json header = *doc;
    header.erase("rows");
    header["measured"] = o.measured;
    std::vector<nlohmann::json> rows;
    for (auto& r : (*doc)["rows"]) {
      r.erase("summary");
      rows.push_back(r);
    }
    auto rebuilt = planning::sweep_document(header, rows);
    if (!rebuilt) {
      print_error(rebuilt.error().message);
      return kExitBadInput;
    }
    if (doc->contains("missing_points")) (*rebuilt)["missing_points"] = (*doc)["missing_points"];
    *doc = std::move(*rebuilt);
  }
  if (const std::size_t missing = doc->value("missing_points", std::size_t{0}); missing > 0) {
    std::fprintf(stderr, "dtsim: warning: %zu of the sweep's points are missing from %s (an interrupted sweep: --resume finishes it); the report says so\n",
                 missing, o.input.c_str());
  }
  if (auto st = reports::write_study_report(*doc, o.out); !st) {
    print_error(st.error().message);
    return kExitFailure;
  }
  std::fprintf(stdout, "dtsim: wrote %s/report.html, report.md, results.csv, results.json and the charts (%zu rows)\n", o.out.c_str(),
               (*doc)["rows"].size());
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("report", "Write an HTML/Markdown/CSV/JSON report with gnuplot charts from sweep or plan results");
  cmd->add_option("results", o->input, "results.json (from sweep --json, plan --json or a report), or a sweep's -o results file");
  cmd->add_option("-o,--out", o->out, "Folder for report.html, report.md, results.csv, results.json and the chart SVGs");
  cmd->add_option("--measured", o->measured, "CSV of measurements to compare with (sweeps): key columns point or axis names, and one of "
                                             "step_time_s, tokens_per_s, samples_per_s");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
