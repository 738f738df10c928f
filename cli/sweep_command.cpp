#include "cli/sweep_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/errors.hpp"
#include "cli/simulate_command.hpp"
#include "config/profile.hpp"
#include "config/sweep_loader.hpp"
#include "hw/topology.hpp"
#include "planning/interrupt.hpp"
#include "planning/mpi.hpp"
#include "planning/pool.hpp"
#include "planning/study.hpp"
#include "planning/sweep.hpp"
#include "reports/output.hpp"
#include "reports/simulate_report.hpp"
#include "reports/study_report.hpp"

namespace dtsim::cli {

namespace {

using json = nlohmann::json;

struct Options {
  std::string spec;
  std::string out;
  bool resume = false;
  std::string json;
  std::string csv;
  std::string report;
  std::string hw_profile;
  int jobs = 0;
  bool no_progress = false;
};

std::string diagnostics_text(const config::Diagnostics& d) {
  std::string s;
  for (const auto& item : d.items()) s += (s.empty() ? "" : "; ") + item.to_string();
  return s;
}

// "field: message", as a row's reason.
std::string reason(const Error& e) { return (e.field.empty() ? "" : e.field + ": ") + e.message; }

// One point: the simulate configuration with the point's assignments, one simulated step, and the
// result as `dtsim simulate --json` writes it. Every failure is a row with its reason.
json evaluate(const config::SweepSpec& spec, std::size_t i, const config::HardwareProfile* profile) {
  const config::SweepPoint& p = spec.points[i];
  json row = {{"point", i}, {"label", p.label}, {"axes", p.axes}};
  config::LoadContext ctx;
  auto cfg = config::load_sweep_point(spec, p, ctx, profile);
  if (!cfg) {
    row["status"] = "error";
    row["error"] = diagnostics_text(ctx.diagnostics);
    return row;
  }
  auto topo = hw::Topology::build(cfg->cluster);
  if (!topo) {
    row["status"] = "error";
    row["error"] = "cluster." + topo.error().field + ": " + topo.error().message;
    return row;
  }
  auto result = workloads::simulate_step(*topo, cfg->inputs);
  if (!result) {
    row["status"] = "error";
    row["error"] = reason(result.error());
    return row;
  }
  auto record = simulate_record(*cfg, *topo, std::move(*result));
  if (!record) {
    row["status"] = "error";
    row["error"] = reason(record.error());
    return row;
  }
  const reports::SimulateReport& rep = *record;
  const bool fits = rep.result.fits;
  const std::string note = rep.result.memory_note;
  json sim = reports::simulate_json(rep);
  row["status"] = fits ? "ok" : "oom";
  if (!fits) row["error"] = note;
  row["config"] = std::move(sim["config"]);
  row["result"] = std::move(sim["result"]);
  return row;
}

// "[#########...........]  12/40 points  3.1/s  ETA 9 s" on a terminal, redrawn at most 10 times
// a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool on) : on_(on), start_(std::chrono::steady_clock::now()) {}
  void update(std::size_t done, std::size_t total) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    if (first_done_ < 0) first_done_ = static_cast<long long>(done);
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double made = static_cast<double>(done) - static_cast<double>(first_done_);
    const double rate = elapsed > 0 ? made / elapsed : 0.0;
    const int width = 30;
    const int filled = total ? static_cast<int>(width * done / total) : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar += std::string(static_cast<std::size_t>(width - filled), '.');
    std::string eta = rate > 0 ? fmt::format("  ETA {:.0f} s", static_cast<double>(total - done) / rate) : std::string();
    std::fprintf(stderr, "\r[%s] %zu/%zu points  %.1f/s%s   ", bar.c_str(), done, total, rate, eta.c_str());
    std::fflush(stderr);
    drawn_ = true;
  }
  void finish() {
    if (on_ && drawn_) std::fputs("\n", stderr);
  }

 private:
  bool on_;
  bool drawn_ = false;
  long long first_done_ = -1;
  std::chrono::steady_clock::time_point start_, last_;
};

int run(const Options& o) {
  planning::InterruptGuard interrupt;  // before MPI starts its threads, so that they inherit the mask
  planning::MpiSession mpi;
  if (!mpi.error().empty()) {
    print_error(mpi.error());
    return kExitFailure;
  }
  const bool root = mpi.root();
  if (o.spec.empty()) {
    if (root) print_error("sweep needs a specification (dtsim sweep SPEC.yaml); see examples/sweeps/");
    return kExitBadInput;
  }
  if (o.resume && o.out.empty()) {
    if (root) print_error("--resume needs the results file to resume from: -o FILE");
    return kExitBadInput;
  }
  config::LoadContext ctx;
  std::optional<config::HardwareProfile> profile;
  if (!o.hw_profile.empty()) {
    profile = config::load_profile(o.hw_profile, ctx);
    if (!profile) {
      if (root) print_diagnostics(ctx.diagnostics);
      return kExitBadInput;
    }
  }
  auto spec = config::load_sweep_spec(o.spec, ctx, profile ? &*profile : nullptr);
  if (!spec) {
    if (root) print_diagnostics(ctx.diagnostics);
    return kExitBadInput;
  }
  const json header = planning::sweep_header(*spec);
  const config::HardwareProfile* prof = profile ? &*profile : nullptr;
  ProgressBar bar(root && !o.no_progress && ::isatty(STDERR_FILENO) != 0);
  planning::SweepRunOptions opts;
  opts.threads = o.jobs;
  opts.journal = o.out;
  opts.resume = o.resume;
  opts.stop = &interrupt.flag();
  opts.mpi = &mpi;
  opts.progress = [&bar](std::size_t done, std::size_t total) { bar.update(done, total); };
  const auto t0 = std::chrono::steady_clock::now();
  auto run = planning::run_sweep(spec->points.size(), header, [&](std::size_t i) { return evaluate(*spec, i, prof); }, opts);
  bar.finish();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!run) {
    if (root) print_error(run.error().message);
    return run.error().field == "-o" ? kExitBadInput : kExitFailure;
  }
  if (!run->root) return kExitOk;
  const int threads = o.jobs > 0 ? o.jobs : planning::default_threads();
  std::fprintf(stderr, "dtsim: %zu of %zu points done: %zu kept from %s, %zu simulated in %.2f s (%.1f points/s; %d threads x %d process%s)\n",
               run->rows.size(), spec->points.size(), run->reused, o.out.empty() ? "(no results file)" : o.out.c_str(), run->computed, wall,
               wall > 0 ? static_cast<double>(run->computed) / wall : 0.0, threads, mpi.size(), mpi.size() > 1 ? "es" : "");
  if (run->interrupted) {
    print_error(fmt::format("interrupted: {} of {} points are done{}", run->rows.size(), spec->points.size(),
                            o.out.empty() ? " (give -o FILE to keep them)" : fmt::format(" and kept in {}; run the same command with --resume to finish", o.out)));
    return kExitFailure;
  }
  auto doc = planning::sweep_document(header, run->rows);
  if (!doc) {
    print_error((doc.error().field.empty() ? "" : doc.error().field + ": ") + doc.error().message);
    return kExitBadInput;
  }
  std::fputs(reports::render_study_table(*doc).c_str(), stdout);
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, doc->dump(1) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (!o.csv.empty()) {
    if (auto st = reports::write_file_atomic(o.csv, reports::study_csv(*doc)); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (!o.report.empty()) {
    if (auto st = reports::write_study_report(*doc, o.report); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
    std::fprintf(stderr, "dtsim: report in %s/report.html\n", o.report.c_str());
  }
  return kExitOk;
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("sweep", "Run many simulations over axes (GPU count, batch, layouts, hardware): one row per point");
  cmd->add_option("spec", o->spec, "Sweep specification (base configuration and axes); see examples/sweeps/");
  cmd->add_option("-o,--out", o->out, "Results file (JSON Lines): rows are appended as points finish; rewritten in point order at the end");
  cmd->add_flag("--resume", o->resume, "Keep the rows already in the -o file and run only the missing points");
  cmd->add_option("--json", o->json, "Write the results document (what dtsim report reads) to this file");
  cmd->add_option("--csv", o->csv, "Write one CSV row per point to this file");
  cmd->add_option("--report", o->report, "Write report.html, report.md, results.csv, results.json and the charts into this folder");
  cmd->add_option("--hw-profile", o->hw_profile, "A calibrated hardware profile (from dtsim fit) for every point");
  cmd->add_option("-j,--jobs", o->jobs, "Simulations run at once per process (default: the machine's cores)")->check(CLI::Range(1, 4096));
  cmd->add_flag("--no-progress", o->no_progress, "No progress bar (it is shown only when stderr is a terminal)");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
