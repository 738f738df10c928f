#include "reports/validation_report.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "reports/charts.hpp"
#include "reports/html.hpp"
#include "reports/output.hpp"

namespace dtsim::reports {

namespace {

using json = nlohmann::json;

std::string esc(const std::string& s) { return html_escape(s); }

// gnuplot text: single-quoted, control characters dropped.
std::string gq(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) out += c;
  }
  return out + "'";
}

double num(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string model_of(const json& row) {
  const auto m = row.find("model");
  return m != row.end() && m->is_object() ? str(*m, "name") : std::string("?");
}

double micro_batch_of(const json& row) {
  const auto t = row.find("training");
  return t != row.end() && t->is_object() ? num(*t, "micro_batch") : 0.0;
}

const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#9c755f", "#76b7b2", "#edc948"};

}  // namespace

std::string validation_chart_script(const json& doc) {
  const auto rows = doc.find("rows");
  if (rows == doc.end() || !rows->is_array() || rows->empty()) return "";
  // Models in order of first appearance, each with its points sorted by micro-batch.
  std::vector<std::string> order;
  std::map<std::string, std::map<double, std::pair<double, double>>> by;
  for (const auto& r : *rows) {
    const std::string m = model_of(r);
    if (!by.count(m)) order.push_back(m);
    by[m][micro_batch_of(r)] = {num(r, "measured_step_s") * 1e3, num(r, "predicted_step_s") * 1e3};
  }
  std::string s =
      "set terminal svg size 860,480 dynamic noenhanced font 'Helvetica,11' background rgb 'white'\n"
      "set title 'Step time against micro-batch: measured (points) and predicted (lines)'\n"
      "set grid lc rgb '#dddddd'\nset border lc rgb '#555555'\nset key top left Left reverse samplen 2\n"
      "set xlabel 'micro-batch (sequences)'\nset ylabel 'step time (ms)'\nset logscale xy 2\nset format y '%g'\n";
  for (std::size_t i = 0; i < order.size(); ++i) {
    s += fmt::format("$m{} << EOD\n", i);
    for (const auto& [mb, t] : by[order[i]]) s += fmt::format("{:.9g} {:.9g} {:.9g}\n", mb, t.first, t.second);
    s += "EOD\n";
  }
  s += "plot ";
  for (std::size_t i = 0; i < order.size(); ++i) {
    const char* c = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    if (i) s += ", \\\n     ";
    s += fmt::format("$m{0} using 1:2 with points pt 7 ps 0.8 lc rgb '{1}' title {2}, $m{0} using 1:3 with lines lw 2 lc rgb '{1}' title {3}", i,
                     c, gq(order[i] + " measured"), gq(order[i] + " predicted"));
  }
  return s + "\n";
}

std::string validation_html(const json& doc, const std::string& chart_svg) {
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>dtsim validate: predicted against measured</title>\n";
  out += "<style>\nbody{font-family:Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222;line-height:1.45}\n"
         "h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}figure{margin:1.2em 0;border:1px solid #e3e3e3;padding:.5em}"
         "figure svg{width:100%;height:auto;display:block}figcaption{font-size:.9em;color:#555}\n"
         "table{border-collapse:collapse;font-size:.85em}th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right}"
         "th{background:#f3f3f3}td.l,th.l{text-align:left}.bad{color:#b30000}.sum{font-size:1.1em}\n</style>\n</head>\n<body>\n";
  out += "<h1>Predicted against measured training steps</h1>\n";
  const json summary = doc.contains("summary") ? doc["summary"] : json::object();
  const std::string profile = doc.contains("hw_profile") && doc["hw_profile"].is_string() ? doc["hw_profile"].get<std::string>() : "";
  out += fmt::format("<p class=\"sum\">{} points: mean |error| (MAPE) <strong>{:.1f}%</strong>, median {:.1f}%, worst {:.1f}%; {}.</p>\n",
                     static_cast<int>(num(summary, "points")), 100 * num(summary, "mape"), 100 * num(summary, "median_abs_error"),
                     100 * num(summary, "worst_abs_error"),
                     profile.empty() ? std::string("dtsim's preset parameters (no hardware profile)") : "hardware profile " + esc(profile));
  if (!chart_svg.empty()) {
    out += "<figure>\n" + inline_svg(chart_svg, "v-") +
           "\n<figcaption>Each model's measured step times (points) and dtsim's predictions (lines) across micro-batches, log-log.</figcaption>\n"
           "</figure>\n";
  }
  out += "<h2>Per point</h2>\n<table>\n<tr><th class=\"l\">point</th><th>measured (ms)</th><th>predicted (ms)</th><th>error</th>"
         "<th>measured spread (ms)</th><th class=\"l\">device</th></tr>\n";
  if (doc.contains("rows") && doc["rows"].is_array()) {
    for (const auto& r : doc["rows"]) {
      const double e = num(r, "error");
      out += fmt::format("<tr><td class=\"l\">{}</td><td>{:.2f}</td><td>{:.2f}</td><td class=\"{}\">{:+.1f}%</td><td>{:.2f} to {:.2f}</td><td class=\"l\">{}</td></tr>\n",
                         esc(str(r, "point")), num(r, "measured_step_s") * 1e3, num(r, "predicted_step_s") * 1e3, std::fabs(e) > 0.10 ? "bad" : "",
                         100 * e, num(r, "measured_min_s") * 1e3, num(r, "measured_max_s") * 1e3, esc(str(r, "device")));
    }
  }
  out += "</table>\n";
  if (doc.contains("kernels") && doc["kernels"].is_object()) {
    const json& k = doc["kernels"];
    out += fmt::format("<h2>Kernels of one step of {}</h2>\n<p>Measured: the kernel profile's durations (serialised by the profiler), summed "
                       "per step over {} steps; predicted: dtsim's kernels of the same step. Largest first.</p>\n",
                       esc(str(k, "point")), static_cast<int>(num(k, "steps")));
    out += "<table>\n<tr><th class=\"l\">family</th><th>measured (ms)</th><th>predicted (ms)</th><th>error</th><th>kernels measured</th>"
           "<th>kernels predicted</th></tr>\n";
    if (k.contains("families") && k["families"].is_array()) {
      for (const auto& f : k["families"]) {
        const bool has_err = f.contains("error") && f["error"].is_number();
        const double e = has_err ? f["error"].get<double>() : 0.0;
        out += fmt::format("<tr><td class=\"l\">{}</td><td>{:.3f}</td><td>{:.3f}</td><td class=\"{}\">{}</td><td>{:.0f}</td><td>{:.0f}</td></tr>\n",
                           esc(str(f, "family")), num(f, "measured_s") * 1e3, num(f, "predicted_s") * 1e3, std::fabs(e) > 0.25 ? "bad" : "",
                           has_err ? fmt::format("{:+.1f}%", 100 * e) : std::string("-"), num(f, "measured_kernels"), num(f, "predicted_kernels"));
      }
    }
    out += fmt::format("<tr><th class=\"l\">total</th><th>{:.3f}</th><th>{:.3f}</th><th></th><th></th><th></th></tr>\n</table>\n",
                       num(k, "measured_s") * 1e3, num(k, "predicted_s") * 1e3);
  }
  out += "<p><small>Generated by dtsim validate. validation.json beside this file holds every number.</small></p>\n</body>\n</html>\n";
  return out;
}

Status write_validation_report(const std::string& dir, const json& doc) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(fmt::format("{}: cannot create the report folder: {}", dir, ec.message()));
  std::string svg;
  const std::string script = validation_chart_script(doc);
  if (!script.empty()) {
    auto r = run_gnuplot(script);
    if (!r) return r.error();
    svg = *r;
  }
  const std::filesystem::path d(dir);
  if (auto st = write_file_atomic((d / "validation.json").string(), doc.dump(2) + "\n"); !st) return st;
  return write_file_atomic((d / "report.html").string(), validation_html(doc, svg));
}

}  // namespace dtsim::reports
