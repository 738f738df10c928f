// Runs of dtsim's own harness on real GPUs (data/validation/): the validation workload's measured
// steps against dtsim with its presets and with the H100's fitted profile (fitted from the H100's
// calibration run, a different measurement; carried over for the H200), and the H100's
// per-kernel-family table of two points.
#include <cmath>

#include <fmt/format.h>

#include "bench/accuracy.hpp"
#include "calibrate/kernel_profile.hpp"
#include "calibrate/records.hpp"
#include "calibrate/validate.hpp"
#include "config/profile.hpp"

namespace dtsim::accuracy {

namespace {

const char* kRun = "h100-sxm-2026-11-23";
const char* kH200Run = "h200-sxm-2026-11-27";

Expected<std::vector<calibrate::ValidationRow>> predict(const std::vector<calibrate::ValidationPoint>& pts, const config::HardwareProfile* p) {
  calibrate::ValidationOptions o;
  o.profile = p;
  return calibrate::predict_points(pts, o);
}

// One run of the validation workload: its points predicted with the presets and with the H100's
// fitted profile, as a summary and a per-point table (section `section`); each preset prediction
// is a held-out figure of `<run>-validation`.
struct RunTable {
  const char* run;          // folder under data/validation/ and registry id stem
  const char* file;         // the run's JSONL
  const char* section;
  std::string intro;        // the sentence after "Dataset `...`: "
  const char* presets_label;
  const char* profile_label;
  const char* profile_column;
};

Expected<std::vector<calibrate::ValidationPoint>> points_of(const RunTable& t) {
  auto recs = calibrate::read_records(std::string(DTSIM_SOURCE_DIR) + "/data/validation/" + t.run + "/" + t.file);
  if (!recs) return recs.error();
  std::vector<std::string> skipped;
  return calibrate::validation_points(*recs, skipped);
}

Status run_table(const RunTable& t, const std::vector<calibrate::ValidationPoint>& pts, const config::HardwareProfile& profile, Results& out) {
  auto presets = predict(pts, nullptr);
  if (!presets) return presets.error();
  auto fitted = predict(pts, &profile);
  if (!fitted) return fitted.error();
  const std::string dataset = std::string(t.run) + "-validation";
  std::string md = fmt::format("Dataset `{}`: {}\n\n", dataset, t.intro);
  md += "| predictions | points | MAPE | median abs. error | worst abs. error |\n|---|---:|---:|---:|---:|\n";
  for (const auto& [label, rows] : {std::pair{t.presets_label, &*presets}, std::pair{t.profile_label, &*fitted}}) {
    const auto s = calibrate::summarize(*rows);
    md += fmt::format("| {} | {} | {:.1f}% | {:.1f}% | {:.1f}% |\n", label, s.points, 100 * s.mape, 100 * s.median, 100 * s.worst);
  }
  md += fmt::format("\n| point | measured (ms) | presets (ms) | error | {} (ms) | error |\n|---|---:|---:|---:|---:|---:|\n", t.profile_column);
  for (std::size_t i = 0; i < presets->size(); ++i) {
    const auto& a = (*presets)[i];
    const auto& b = (*fitted)[i];
    md += fmt::format("| {} | {:.2f} | {:.2f} | {:+.1f}% | {:.2f} | {:+.1f}% |\n", a.p.point, a.p.measured_s * 1e3, a.predicted_s * 1e3, 100 * a.error,
                      b.predicted_s * 1e3, 100 * b.error);
    out.figures.push_back(Figure{dataset, a.p.point, a.p.measured_s, a.predicted_s, "held-out"});
  }
  out.sections.push_back(Section{t.section, md});
  return {};
}

}  // namespace

Status measured_runs(const config::Registry& reg, Results& out) {
  (void)reg;
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/data/validation/" + kRun;
  config::LoadContext ctx;
  const auto profile = config::load_profile(kRun, ctx);
  if (!profile) return Error(ctx.diagnostics.to_string());
  const RunTable h100{kRun, "validation-full.jsonl", "h100-validation",
                      fmt::format("**held-out** (no constant was fitted to these steps; the profile `{}` was fitted to the same machine's "
                                  "calibration run only).",
                                  kRun),
                      "presets, no profile (their memory-bound kinds from the H100 calibration runs)", "`--hw-profile h100-sxm-2026-11-23`",
                      "profile"};
  auto pts = points_of(h100);
  if (!pts) return pts.error();
  if (auto st = run_table(h100, *pts, *profile, out); !st) return st;
  // The same workload on one H200 (a GPU no constant of dtsim came from): the hgx-h200 presets, and
  // the H100's fitted profile carried over.
  const RunTable h200{kH200Run, "validation.jsonl", "h200-validation",
                      "**held-out** for the values (no constant's value comes from an H200); the choice of the memory kinds with an SM "
                      "limit was read from the H200's calibration run after these steps' miss.",
                      "`hgx-h200` presets, no profile",
                      "`--hw-profile h100-sxm-2026-11-23` (the H100's fit, carried over)", "H100 profile"};
  auto pts200 = points_of(h200);
  if (!pts200) return pts200.error();
  if (auto st = run_table(h200, *pts200, *profile, out); !st) return st;

  // Per kernel family, the two profiled points, with the profile.
  std::string kmd;
  for (const auto& [file, point] : {std::pair{"kernels-gpt-125m-b8.csv", "gpt-125m/seq1024/mb8/gpus1"},
                                    std::pair{"kernels-gpt-1.3b-b4.csv", "gpt-1.3b/seq1024/mb4/gpus1"}}) {
    auto ks = calibrate::read_kernel_csv(dir + "/kernels/" + file);
    if (!ks) return ks.error();
    const calibrate::ValidationPoint* p = nullptr;
    for (const auto& q : *pts) {
      if (q.point == point) p = &q;
    }
    if (p == nullptr) return Error(fmt::format("{}-validation: no point {}", kRun, point));
    calibrate::ValidationOptions o;
    o.profile = &*profile;
    auto c = calibrate::compare_kernels(*p, *ks, 0, o);
    if (!c) return Error(fmt::format("{}/kernels/{}: {}", dir, file, c.error().message));
    kmd += fmt::format("**{}** (with the profile; per step):\n\n| family | measured (ms) | predicted (ms) | error | share of the step |\n|---|---:|---:|---:|---:|\n",
                       point);
    for (const auto& r : c->rows) {
      kmd += fmt::format("| {} | {:.3f} | {:.3f} | {} | {:.1f}% |\n", r.family, r.measured_s * 1e3, r.predicted_s * 1e3,
                         r.measured_s > 0 ? fmt::format("{:+.1f}%", 100 * r.error()) : std::string("-"),
                         c->measured_s > 0 ? 100 * r.measured_s / c->measured_s : 0.0);
    }
    kmd += fmt::format("| total | {:.3f} | {:.3f} | {:+.1f}% | |\n\n", c->measured_s * 1e3, c->predicted_s * 1e3,
                       100 * (c->predicted_s - c->measured_s) / c->measured_s);
  }
  out.sections.push_back(Section{"h100-kernels", kmd});
  return {};
}

}  // namespace dtsim::accuracy
