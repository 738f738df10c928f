#include "cli/validate_command.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "cli/errors.hpp"
#include "config/profile.hpp"
#include "reports/output.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::vector<std::string> results;
  std::string hw_profile;
  std::string node;
  std::string csv;
  std::string json;
  bool print_config = false;
};

int run(const Options& o) {
  if (o.results.empty()) {
    print_error("give the results of dtsim-validate (JSON Lines)");
    return kExitBadInput;
  }
  std::vector<calibrate::Record> records;
  for (const auto& path : o.results) {
    auto recs = calibrate::read_records(path);
    if (!recs) {
      print_error(recs.error().message);
      return kExitBadInput;
    }
    records.insert(records.end(), recs->begin(), recs->end());
  }
  std::vector<std::string> skipped;
  auto points = calibrate::validation_points(records, skipped);
  if (!points) {
    print_error(points.error().message);
    return kExitBadInput;
  }
  if (points->empty()) {
    print_error("no measured points (every record failed)");
    for (const auto& s : skipped) std::fprintf(stderr, "  %s\n", s.c_str());
    return kExitBadInput;
  }
  std::optional<config::HardwareProfile> profile;
  if (!o.hw_profile.empty()) {
    config::LoadContext ctx;
    profile = config::load_profile(o.hw_profile, ctx);
    if (!profile) {
      print_diagnostics(ctx.diagnostics);
      return kExitBadInput;
    }
  }
  calibrate::ValidationOptions vo;
  vo.node = o.node;
  vo.profile = profile ? &*profile : nullptr;
  auto rows = calibrate::predict_points(*points, vo);
  if (!rows) {
    print_error(rows.error().message);
    return kExitBadInput;
  }
  if (!o.csv.empty()) {
    if (auto st = reports::write_file_atomic(o.csv, calibrate::validation_csv(*rows)); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, calibrate::validation_json(*rows, o.hw_profile).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::printf("dtsim validate: the validation workload measured (dtsim-validate) against dtsim simulate, %s\n",
              profile ? ("hardware profile " + o.hw_profile).c_str() : "default parameters (no --hw-profile)");
  std::fputs(calibrate::validation_table(*rows).c_str(), stdout);
  if (!skipped.empty()) {
    std::printf("not measured (left out):\n");
    for (const auto& s : skipped) std::printf("  %s\n", s.c_str());
  }
  if (o.print_config) {
    for (const auto& r : *rows) std::printf("\n%s", calibrate::simulate_yaml(r.p, r.node).c_str());
  }
  return kExitOk;
}

}  // namespace

void add_validate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("validate", "Compare dtsim's predicted training steps with the validation workload's measurements");
  cmd->add_option("results", o->results, "Result files of dtsim-validate (JSON Lines)");
  cmd->add_option("--hw-profile", o->hw_profile, "A hardware profile (from dtsim fit) for the predictions");
  cmd->add_option("--node", o->node, "Node preset to simulate (default: from the measured GPU, e.g. dgx-h100)");
  cmd->add_option("--csv", o->csv, "Write predicted vs measured per point as CSV");
  cmd->add_option("--json", o->json, "Write predicted vs measured per point, with a summary, as JSON");
  cmd->add_flag("--print-config", o->print_config, "Print the equivalent dtsim simulate configuration of every point");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
