#include "cli/validate_command.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "calibrate/kernel_profile.hpp"
#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "cli/errors.hpp"
#include "config/profile.hpp"
#include "reports/output.hpp"
#include "reports/validation_report.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::vector<std::string> results;
  std::string hw_profile;
  std::string node;
  std::string csv;
  std::string json;
  std::string kernels;  // a kernel profile (Nsight Compute CSV) of one point
  std::string point;    // which point it profiles
  int steps = 0;        // steps the kernel profile holds (0: count optimizer kernels)
  std::string report;   // HTML report folder
  bool print_config = false;
};

// The point a kernel profile belongs to: --point, or the only point there is.
const calibrate::ValidationPoint* find_point(const std::vector<calibrate::ValidationRow>& rows, const std::string& name) {
  if (name.empty()) return rows.size() == 1 ? &rows.front().p : nullptr;
  for (const auto& r : rows) {
    if (r.p.point == name) return &r.p;
  }
  return nullptr;
}

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
  std::optional<calibrate::KernelComparison> kc;
  if (!o.kernels.empty()) {
    const calibrate::ValidationPoint* p = find_point(*rows, o.point);
    if (p == nullptr) {
      print_error(o.point.empty() ? std::string("--kernels: the results hold several points; name the profiled one with --point")
                                  : fmt::format("--point '{}': no measured point of that name in the results", o.point));
      return kExitBadInput;
    }
    auto ks = calibrate::read_kernel_csv(o.kernels);
    if (!ks) {
      print_error(ks.error().message);
      return kExitBadInput;
    }
    auto c = calibrate::compare_kernels(*p, *ks, o.steps, vo);
    if (!c) {
      print_error(fmt::format("{}: {}", o.kernels, c.error().message));
      return kExitBadInput;
    }
    kc = std::move(*c);
  }
  if (!o.csv.empty()) {
    if (auto st = reports::write_file_atomic(o.csv, calibrate::validation_csv(*rows)); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  nlohmann::json doc = calibrate::validation_json(*rows, o.hw_profile);
  if (kc) doc["kernels"] = calibrate::kernel_json(*kc);
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, doc.dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (!o.report.empty()) {
    if (auto st = reports::write_validation_report(o.report, doc); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::printf("dtsim validate: the validation workload measured (dtsim-validate) against dtsim simulate, %s\n",
              profile ? ("hardware profile " + o.hw_profile).c_str() : "default parameters (no --hw-profile)");
  std::fputs(calibrate::validation_table(*rows).c_str(), stdout);
  if (kc) std::printf("\n%s", calibrate::kernel_table(*kc).c_str());
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
  cmd->add_option("--kernels", o->kernels,
                  "A kernel profile of one point (Nsight Compute CSV: id,kernel,grid,block,duration_ns): time per kernel family, "
                  "measured against predicted");
  cmd->add_option("--point", o->point, "The point the kernel profile measures (e.g. gpt-125m/seq1024/mb8/gpus1)");
  cmd->add_option("--steps", o->steps, "Training steps the kernel profile holds (default: one per optimizer kernel)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--report", o->report, "Write an HTML report (chart, per-point and per-kernel tables) into this folder");
  cmd->add_flag("--print-config", o->print_config, "Print the equivalent dtsim simulate configuration of every point");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
