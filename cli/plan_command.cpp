#include "cli/plan_command.hpp"

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/errors.hpp"
#include "config/plan_loader.hpp"
#include "config/profile.hpp"
#include "planning/interrupt.hpp"
#include "planning/pool.hpp"
#include "planning/search.hpp"
#include "reports/output.hpp"
#include "reports/plan_report.hpp"
#include "reports/study_report.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::string spec;
  std::string report;
  std::string json;
  std::string hw_profile;
  int jobs = 0;
  int top = 0;
};

int run(const Options& o) {
  planning::InterruptGuard interrupt;
  if (o.spec.empty()) {
    print_error("plan needs a specification (dtsim plan PLAN.yaml); see examples/plans/");
    return kExitBadInput;
  }
  config::LoadContext ctx;
  std::optional<config::HardwareProfile> profile;
  if (!o.hw_profile.empty()) {
    profile = config::load_profile(o.hw_profile, ctx);
    if (!profile) {
      print_diagnostics(ctx.diagnostics);
      return kExitBadInput;
    }
  }
  auto spec = config::load_plan_spec(o.spec, ctx, profile ? &*profile : nullptr);
  if (!spec) {
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (o.top > 0) spec->search.simulate_top = o.top;
  planning::PlanOptions opts;
  opts.threads = o.jobs;
  opts.stop = &interrupt.flag();
  const auto t0 = std::chrono::steady_clock::now();
  auto result = planning::run_plan(*spec, opts);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result) {
    ctx.report(result.error());
    print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  if (interrupt.interrupted()) {
    print_error("interrupted: the search did not finish");
    return kExitFailure;
  }
  std::fputs(reports::render_plan(*spec, *result).c_str(), stdout);
  std::fprintf(stderr, "dtsim: plan searched %zu layouts in %.2f s on %d threads: %zu estimated in %.2f s, %zu simulated in %.2f s\n",
               result->enumerated, wall, o.jobs > 0 ? o.jobs : planning::default_threads(), result->estimated, result->estimate_wall_s,
               result->simulations, result->simulate_wall_s);
  if (!result->feasible()) {
    print_error(o.spec + ": no feasible layout: " + (result->infeasible.empty() ? std::string("see above") : result->infeasible.front()));
    return kExitBadInput;
  }
  const nlohmann::json doc = reports::plan_document(*spec, *result);
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, doc.dump(1) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (!o.report.empty()) {
    if (auto st = reports::write_study_report(doc, o.report); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
    std::fprintf(stderr, "dtsim: report in %s/report.html\n", o.report.c_str());
  }
  return kExitOk;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("plan", "Search parallel layouts on candidate hardware; rank by time to train and cost; explain the choice");
  cmd->add_option("spec", o->spec, "Plan specification (model, budget, hardware options with prices, search space); see examples/plans/");
  cmd->add_option("--report", o->report, "Write report.html, report.md, results.csv, results.json and the charts into this folder");
  cmd->add_option("--json", o->json, "Write the results document (what dtsim report reads) to this file");
  cmd->add_option("--hw-profile", o->hw_profile, "A calibrated hardware profile (from dtsim fit) for every candidate");
  cmd->add_option("-j,--jobs", o->jobs, "Threads (default: the machine's cores)")->check(CLI::Range(1, 4096));
  cmd->add_option("--top", o->top, "Simulate this many of the best estimated layouts per hardware option (default: search.simulate_top)")
      ->check(CLI::Range(1, 1000));
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
