#include "reports/study_report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "planning/journal.hpp"
#include "planning/study.hpp"
#include "reports/html.hpp"
#include "reports/output.hpp"

namespace dtsim::reports {

namespace {

using json = nlohmann::json;

// A member of a JSON object by reference (null when absent): safe to keep pointers into, unlike
// value(), which returns a copy.
const json& member(const json& j, const char* key) {
  static const json empty;
  if (!j.is_object()) return empty;
  const auto it = j.find(key);
  return it == j.end() ? empty : *it;
}

bool is_plan(const json& doc) { return doc.value("dtsim", std::string()) == "plan"; }

double num(const json& j, const char* key, double def = 0) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

std::string html(const std::string& s) { return html_escape(s); }

std::string md(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return fmt::format("{}", v.get<long long>());
  if (v.is_number_unsigned()) return fmt::format("{}", v.get<unsigned long long>());
  if (v.is_number()) return fmt::format("{:.10g}", v.get<double>());
  return v.dump();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string duration(double s) {
  if (s <= 0) return "";
  if (s >= 2 * 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.3g} s", s);
}

std::string money(double v, const std::string& currency) {
  if (v <= 0) return "";
  if (v >= 1e6) return fmt::format("{:.2f}M {}", v / 1e6, currency);
  if (v >= 1e3) return fmt::format("{:.1f}k {}", v / 1e3, currency);
  return fmt::format("{:.0f} {}", v, currency);
}

std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.3g} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.3g} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.3g} k", v / 1e3);
  return fmt::format("{:.3g} ", v);
}

// The rows a report's table shows: every point of a sweep; the simulated candidates of a plan.
std::vector<const json*> table_rows(const json& doc) {
  std::vector<const json*> out;
  for (const json& r : member(doc, "rows")) {
    if (is_plan(doc) && member(r, "summary").value("status", std::string()) == "estimated") continue;
    out.push_back(&r);
  }
  return out;
}

// A table as (header, rows of cells).
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
};

Table results_table(const json& doc) {
  Table t;
  const bool plan = is_plan(doc);
  const auto rows = table_rows(doc);
  bool eff = false, run = false, target = false, measured = false;
  for (const json* r : rows) {
    const json& s = member(*r, "summary");
    eff = eff || s.contains("hardware_efficiency");
    run = run || num(s, "time_to_train_s") > 0 || member(s, "achievable") == json(false);
    target = target || s.contains("time_to_target_s");
    measured = measured || s.contains("measured");
  }
  t.head = {plan ? "candidate" : "point", plan ? "option" : "label", "status", "GPUs", "layout", "step (s)", "throughput", "per GPU", "MFU", "memory / GPU"};
  if (eff) t.head.push_back("efficiency");
  if (run) t.head.insert(t.head.end(), {"time to train", "cost"});
  if (target) t.head.insert(t.head.end(), {"time to target", "stat. eff."});
  if (measured) t.head.push_back("measured (error)");
  if (plan) t.head.push_back("notes");
  for (const json* r : rows) {
    const json& s = member(*r, "summary");
    std::vector<std::string> c;
    c.push_back(text((*r).value("point", json())));
    c.push_back(plan ? s.value("hardware", std::string()) : s.value("label", std::string()));
    std::string status = s.value("status", std::string());
    if (s.contains("error")) status += ": " + text(s["error"]);
    if (s.contains("fits") && !s.value("fits", true)) status += " (does not fit in memory)";
    c.push_back(status);
    const bool ok = num(s, "step_time_s") > 0;
    c.push_back(s.contains("gpus") ? text(s["gpus"]) : "");
    c.push_back(s.value("layout", std::string()));
    c.push_back(ok ? fmt::format("{:.4f}", num(s, "step_time_s")) : "");
    c.push_back(ok ? si(num(s, "throughput")) + s.value("throughput_unit", std::string()) : "");
    c.push_back(ok ? si(num(s, "throughput_per_gpu")) + s.value("throughput_unit", std::string()) : "");
    c.push_back(ok ? fmt::format("{:.1f}%", 100 * num(s, "mfu")) : "");
    c.push_back(s.contains("memory_GiB") ? fmt::format("{:.1f} / {:.0f} GiB", num(s, "memory_GiB"), num(s, "capacity_GiB")) : "");
    if (eff) c.push_back(s.contains("hardware_efficiency") ? fmt::format("{:.1f}%", 100 * num(s, "hardware_efficiency")) : "");
    if (run && s.value("status", std::string()) == "oom") {
      c.push_back("not achievable");  // a run that does not fit has no time to train or cost
      c.push_back("");
    } else if (run) {
      c.push_back(duration(num(s, "time_to_train_s")));
      c.push_back(money(num(s, "cost"), s.value("currency", std::string())));
    }
    if (target) {
      c.push_back(duration(num(s, "time_to_target_s")));
      c.push_back(s.contains("statistical_efficiency") ? fmt::format("{:.1f}%", 100 * num(s, "statistical_efficiency")) : "");
    }
    if (measured) {
      c.push_back(s.contains("measured") ? fmt::format("{:.4g} ({:+.1f}%)", num(s["measured"], "value"), 100 * num(s["measured"], "error")) : "");
    }
    if (plan) {
      std::string n;
      if (s.value("top", false)) n += "recommended; ";
      if (s.value("best_for_option", false)) n += "best for its option; ";
      if (s.value("pareto", false)) n += "Pareto front; ";
      if (!s.value("meets_deadline", true)) n += "misses the deadline; ";
      if (!s.value("meets_budget", true)) n += "over budget; ";
      if (n.size() > 2) n.resize(n.size() - 2);
      c.push_back(n);
    }
    t.rows.push_back(std::move(c));
  }
  return t;
}

std::vector<std::pair<std::string, std::string>> setup_items(const json& doc) {
  std::vector<std::pair<std::string, std::string>> out;
  const json& setup = doc.value("setup", json::object());
  if (!setup.value("model", json()).is_null()) out.emplace_back("Model", text(setup["model"]));
  if (!setup.value("precision", json()).is_null()) out.emplace_back("Precision", text(setup["precision"]));
  // A PyTorch framework (training.framework) other than megatron, when every row assumes it.
  if (!setup.value("framework", json()).is_null()) out.emplace_back("Framework", text(setup["framework"]));
  std::string hw;
  // Each cluster as nodes, GPUs, fabric kind and NICs: the switch counts (results.csv keeps them)
  // made the line unreadable.
  std::vector<std::string> hws;
  for (const auto& h : member(setup, "hardware")) {
    std::string b = text(h);
    const std::size_t semi = b.find("; ");
    const std::size_t colon = b.find(": ", semi == std::string::npos ? 0 : semi);
    if (colon != std::string::npos) b = b.substr(0, colon);
    if (std::find(hws.begin(), hws.end(), b) == hws.end()) hws.push_back(b);
  }
  for (std::size_t i = 0; i < hws.size(); ++i) {
    // Long lists (one cluster per GPU count): the first two and the last.
    if (hws.size() > 4 && i >= 2 && i + 1 < hws.size()) {
      if (i == 2) hw += " | ...";
      continue;
    }
    hw += (hw.empty() ? "" : " | ") + hws[i];
  }
  if (!hw.empty()) out.emplace_back("Hardware", hw);
  if (is_plan(doc)) {
    if (setup.contains("budget")) {
      const json& b = setup["budget"];
      std::string s = num(b, "tokens") > 0 ? fmt::format("{:.4g} tokens", num(b, "tokens")) : num(b, "samples") > 0 ? fmt::format("{:.4g} samples", num(b, "samples")) : fmt::format("{:g} epochs", num(b, "epochs"));
      if (!doc.value("statistical_efficiency", json()).is_null()) s = "to a target loss (large-batch model)";
      // One global batch, or the list searched; tokens per sample only for models with a sequence.
      const json gb = setup.value("global_batch", json());
      std::string batch;
      if (gb.is_array()) {
        batch = "global batch searched: ";
        for (std::size_t i = 0; i < gb.size(); ++i) batch += (i ? ", " : "") + text(gb[i]);
      } else {
        batch = "global batch " + text(gb);
      }
      if (num(setup, "seq_len") > 0) batch += " x " + text(setup["seq_len"]) + " tokens";
      out.emplace_back("Training", fmt::format("{}, {}", s, batch));
    }
    const json& c = doc.value("constraints", json::object());
    std::string cons = doc.value("objective", std::string()) == "cost" ? "lowest cost" : "shortest time";
    if (num(c, "deadline_s") > 0) cons += ", deadline " + duration(num(c, "deadline_s"));
    if (num(c, "max_cost") > 0) cons += ", budget " + money(num(c, "max_cost"), c.value("currency", std::string()));
    out.emplace_back("Objective", cons);
    const json& s = doc.value("search", json::object());
    out.emplace_back("Search", fmt::format("{} layouts enumerated, {} ranked by closed-form estimate, {} simulated (the best {} per option)",
                                           text(s.value("enumerated", json())), text(s.value("estimated", json())), text(s.value("simulations", json())),
                                           text(s.value("simulate_top", json()))));
  } else {
    std::string axes;
    for (const auto& a : member(doc, "axes")) axes += (axes.empty() ? "" : ", ") + text(a);
    out.emplace_back("Axes", fmt::format("{} ({}); {} points", axes, doc.value("combine", std::string("product")), doc.value("rows", json::array()).size()));
    if (doc.value("scaling", std::string("none")) != "none") out.emplace_back("Scaling", doc.value("scaling", std::string()));
  }
  const json& p = doc.value("parameters", json::object());
  std::string params;
  std::string calibrated;
  for (const auto& n : member(p, "calibrated")) calibrated += (calibrated.empty() ? "" : ", ") + text(n);
  if (!p.value("profile", json()).is_null() && !text(p["profile"]).empty()) {
    params += fmt::format("calibrated from {}: {}. ", text(p["profile"]), calibrated.empty() ? "(none)" : calibrated);
  }
  std::string set;
  for (const auto& n : member(p, "set")) set += (set.empty() ? "" : ", ") + text(n);
  if (!set.empty()) params += "Set in the configuration: " + set + ". ";
  params += params.empty() ? "all of dtsim's defaults, with their sources (dtsim simulate --list-params); none calibrated."
                           : "Every other parameter: dtsim's defaults with their sources (dtsim simulate --list-params).";
  out.emplace_back("Parameters", params);
  return out;
}

std::vector<std::string> assumption_lines(const json& doc) {
  std::vector<std::string> out;
  for (const auto& a : member(doc, "assumptions")) out.push_back(text(a));
  const json& se = doc.value("statistical_efficiency", json());
  if (se.is_object()) {
    for (const auto& a : member(se, "assumptions")) out.push_back(text(a));
  }
  if (const std::size_t missing = doc.value("missing_points", std::size_t{0}); missing > 0) {
    out.push_back(fmt::format("Incomplete: {} of the sweep's {} points are missing from the results file (an interrupted sweep; "
                              "dtsim sweep SPEC -o FILE --resume finishes it).",
                              missing, missing + member(doc, "rows").size()));
  }
  const json& m = doc.value("measured", json());
  if (m.is_object()) {
    const int unpredicted = m.value("without_prediction", 0);
    out.push_back(fmt::format("Measured data: {} ({}), {} of {} lines matched a row{}; error = (predicted - measured) / measured.", text(m["file"]),
                              text(m["metric"]), text(m["matched"]), text(m["lines"]),
                              unpredicted > 0 ? fmt::format(" ({} more matched a point that failed, with no prediction to compare)", unpredicted) : std::string()));
  }
  return out;
}

const json* row_by_point(const json& doc, const json& point) {
  if (point.is_null()) return nullptr;
  for (const json& r : member(doc, "rows")) {
    if (r.value("point", json()) == point) return &r;
  }
  return nullptr;
}

}  // namespace

std::string study_csv(const json& doc) {
  std::vector<std::string> axes;
  for (const auto& a : member(doc, "axes")) axes.push_back(text(a));
  static const std::vector<std::string> fields = {
      "status", "error", "hardware", "gpus", "nodes", "layout", "global_batch", "micro_batch", "seq_len", "step_time_s", "samples_per_s",
      "tokens_per_s", "throughput_per_gpu", "mfu", "memory_GiB", "capacity_GiB", "fits", "hardware_efficiency", "steps", "time_to_train_s",
      "gpu_hours", "energy_kwh", "cost", "currency", "steps_to_target", "time_to_target_s", "statistical_efficiency"};
  static const std::vector<std::string> plan_fields = {"pareto", "best_for_option", "top", "meets_deadline", "meets_budget"};
  std::set<std::string> bd;
  for (const json& r : member(doc, "rows")) {
    for (auto it = member(member(r, "summary"), "breakdown").begin(); it != member(member(r, "summary"), "breakdown").end(); ++it) {
      bd.insert(it.key());
    }
  }
  std::string out = "point";
  for (const auto& a : axes) out += "," + csv_field(a);
  out += ",label";
  // A summary field named like an axis (gpus) would be a second column of the same name: the
  // axis column stands for it.
  std::vector<std::string> own;
  for (const auto& f : fields) {
    if (std::find(axes.begin(), axes.end(), f) == axes.end()) own.push_back(f);
  }
  for (const auto& f : own) out += "," + f;
  if (is_plan(doc)) {
    for (const auto& f : plan_fields) out += "," + f;
  }
  for (const auto& b : bd) out += ",breakdown." + b;
  out += ",measured,measured_error\n";
  for (const json& r : member(doc, "rows")) {
    const json& s = member(r, "summary");
    out += text(r.value("point", json()));
    for (const auto& a : axes) out += "," + csv_field(text(r.value("axes", json::object()).value(a, json())));
    out += "," + csv_field(s.value("label", std::string()));
    for (const auto& f : own) out += "," + csv_field(text(s.value(f, json())));
    if (is_plan(doc)) {
      for (const auto& f : plan_fields) out += "," + csv_field(text(s.value(f, json())));
    }
    for (const auto& b : bd) out += "," + text(s.value("breakdown", json::object()).value(b, json()));
    if (s.contains("measured")) out += fmt::format(",{},{}", text(s["measured"]["value"]), text(s["measured"]["error"]));
    else out += ",,";
    out += "\n";
  }
  return out;
}

// The notes of the rows (settings without effect, inherited defaults), each once, with the points
// it applies to: "point 0, 2: parallel.zero has no effect with dp = 1 ...".
std::vector<std::string> row_notes(const json& doc) {
  std::vector<std::pair<std::string, std::string>> notes;  // note, points
  for (const json& r : member(doc, "rows")) {
    for (const auto& n : member(member(r, "result"), "notes")) {
      const std::string note = text(n);
      auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& p) { return p.first == note; });
      if (it == notes.end()) notes.emplace_back(note, text(r.value("point", json())));
      else it->second += ", " + text(r.value("point", json()));
    }
  }
  std::vector<std::string> out;
  for (const auto& [note, points] : notes) out.push_back(fmt::format("point {}: {}", points, note));
  return out;
}

std::string render_study_table(const json& doc) {
  Table t = results_table(doc);
  // A cell too long for the table (an error message) keeps its first clause and points to a note
  // below the table that gives it whole, so that no message is cut mid-sentence.
  std::vector<std::string> long_cells;
  for (auto& row : t.rows) {
    for (auto& c : row) {
      if (c.size() <= 70) continue;
      long_cells.push_back(c);
      const std::size_t colon = c.find(": ");
      const std::string ref = fmt::format("(see [{}] below)", long_cells.size());
      c = colon != std::string::npos && colon < 50 ? c.substr(0, colon) + " " + ref : ref;
    }
  }
  std::vector<std::size_t> width(t.head.size(), 0);
  auto cell = [](const std::string& s) { return s; };
  for (std::size_t i = 0; i < t.head.size(); ++i) width[i] = t.head[i].size();
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], cell(row[i]).size());
  }
  std::string out;
  if (!doc.value("question", std::string()).empty()) out += "# " + doc["question"].get<std::string>() + "\n";
  for (const auto& [k, v] : setup_items(doc)) out += fmt::format("# {}: {}\n", k, v);
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (std::size_t i = 0; i < cells.size(); ++i) l += fmt::format("{:<{}}  ", cell(cells[i]), width[i]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    return l + "\n";
  };
  out += "\n" + line(t.head);
  for (const auto& row : t.rows) out += line(row);
  if (!long_cells.empty()) out += "\n";
  for (std::size_t i = 0; i < long_cells.size(); ++i) out += fmt::format("[{}] {}\n", i + 1, long_cells[i]);
  const auto notes = row_notes(doc);
  if (!notes.empty()) out += "\nnotes\n";
  for (const auto& n : notes) out += "  - " + n + "\n";
  return out;
}

std::string study_markdown(const json& doc, const std::vector<Chart>& charts) {
  std::string out;
  const bool plan = is_plan(doc);
  out += fmt::format("# dtsim {} report\n\n", plan ? "plan" : "sweep");
  if (!doc.value("question", std::string()).empty()) out += fmt::format("**Question:** {}\n\n", doc["question"].get<std::string>());
  for (const auto& [k, v] : setup_items(doc)) out += fmt::format("- **{}:** {}\n", k, v);
  out += "\n";
  if (plan) {
    if (const json* top = row_by_point(doc, doc.value("top", json()))) {
      out += fmt::format("## Recommendation\n\n**{}**\n\n", member(*top, "summary").value("label", std::string()));
      for (const auto& w : member(doc, "why_top")) out += "- " + text(w) + "\n";
      out += "\n";
      if (!doc.value("near_misses", json::array()).empty()) {
        out += "### Near misses\n\n";
        for (const auto& n : doc["near_misses"]) {
          const json* r = row_by_point(doc, n["point"]);
          out += fmt::format("- {}: {}\n", r ? member(*r, "summary").value("label", std::string()) : text(n["point"]), text(n["why"]));
        }
        out += "\n";
      }
    } else {
      out += "## No feasible layout\n\n";
      for (const auto& w : member(doc, "infeasible")) out += "- " + text(w) + "\n";
      out += "\n";
    }
    out += "### Rejected layouts\n\n";
    for (auto it = member(doc, "rejected").begin(); it != member(doc, "rejected").end(); ++it) {
      out += fmt::format("- {}: {}", it.key(), text((*it)["count"]));
      if (it->contains("smallest_need_GiB")) out += fmt::format(" (smallest need {:.1f} GiB per GPU, capacity {:.0f} GiB)", num(*it, "smallest_need_GiB"), num(*it, "capacity_GiB"));
      out += "\n";
    }
    out += "\n";
  }
  out += "## Charts\n\n";
  for (const Chart& c : charts) out += fmt::format("![{}]({}.svg)\n\n*{}*\n\n", c.title, c.name, c.caption);
  const Table t = results_table(doc);
  out += plan ? "## Simulated layouts\n\n" : "## Results\n\n";
  out += "|";
  for (const auto& h : t.head) out += " " + md(h) + " |";
  out += "\n|";
  for (std::size_t i = 0; i < t.head.size(); ++i) out += " --- |";
  out += "\n";
  for (const auto& row : t.rows) {
    out += "|";
    for (const auto& c : row) out += " " + md(c) + " |";
    out += "\n";
  }
  if (const auto notes = row_notes(doc); !notes.empty()) {
    out += "\n## Notes\n\n";
    for (const auto& n : notes) out += "- " + md(n) + "\n";
  }
  out += "\n## Assumptions\n\n";
  for (const auto& a : assumption_lines(doc)) out += "- " + a + "\n";
  out += "\n*Generated by dtsim; results.csv and results.json hold every row.*\n";
  return out;
}

std::string study_html(const json& doc, const std::vector<Chart>& charts) {
  const bool plan = is_plan(doc);
  const std::string title = fmt::format("dtsim {} report", plan ? "plan" : "sweep");
  std::string out;
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // No network: nothing but inline styles and data: images may load.
  out += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += fmt::format("<title>{}</title>\n", html(title + (doc.value("question", std::string()).empty() ? "" : ": " + doc["question"].get<std::string>())));
  out += "<style>\n"
         "body{font-family:Helvetica,Arial,sans-serif;margin:2em auto;max-width:1180px;padding:0 1em;color:#222;line-height:1.45}\n"
         "h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}\n"
         ".question{font-size:1.15em;color:#333}dl{display:grid;grid-template-columns:max-content auto;gap:.3em 1em}dt{font-weight:bold}dd{margin:0}\n"
         "figure{margin:1.2em 0;border:1px solid #e3e3e3;padding:.5em;background:#fff}figure svg{width:100%;height:auto;display:block}\n"
         "figcaption{font-size:.9em;color:#555;margin-top:.3em}table{border-collapse:collapse;font-size:.85em;width:100%}\n"
         "th,td{border:1px solid #ddd;padding:.25em .45em;text-align:left;vertical-align:top}th{background:#f3f3f3}tr.top td{background:#fff4d6}\n"
         ".recommend{background:#f6faf2;border-left:4px solid #59a14f;padding:.6em 1em}.none{background:#fdf2f2;border-left:4px solid #e15759;padding:.6em 1em}\n"
         "</style>\n</head>\n<body>\n";
  out += fmt::format("<h1>{}</h1>\n", html(title));
  if (!doc.value("question", std::string()).empty()) out += fmt::format("<p class=\"question\">{}</p>\n", html(doc["question"].get<std::string>()));
  out += "<h2>Setup</h2>\n<dl>\n";
  for (const auto& [k, v] : setup_items(doc)) out += fmt::format("<dt>{}</dt><dd>{}</dd>\n", html(k), html(v));
  out += "</dl>\n";
  if (plan) {
    if (const json* top = row_by_point(doc, doc.value("top", json()))) {
      out += fmt::format("<h2>Recommendation</h2>\n<div class=\"recommend\"><p><strong>{}</strong></p>\n<ul>\n", html(member(*top, "summary").value("label", std::string())));
      for (const auto& w : member(doc, "why_top")) out += "<li>" + html(text(w)) + "</li>\n";
      out += "</ul></div>\n";
      if (!doc.value("near_misses", json::array()).empty()) {
        out += "<h3>Near misses</h3>\n<ul>\n";
        for (const auto& n : doc["near_misses"]) {
          const json* r = row_by_point(doc, n["point"]);
          out += fmt::format("<li><strong>{}</strong>: {}</li>\n", html(r ? member(*r, "summary").value("label", std::string()) : text(n["point"])), html(text(n["why"])));
        }
        out += "</ul>\n";
      }
    } else {
      out += "<h2>No feasible layout</h2>\n<div class=\"none\"><ul>\n";
      for (const auto& w : member(doc, "infeasible")) out += "<li>" + html(text(w)) + "</li>\n";
      out += "</ul></div>\n";
    }
    out += "<h3>Rejected layouts</h3>\n<ul>\n";
    for (auto it = member(doc, "rejected").begin(); it != member(doc, "rejected").end(); ++it) {
      std::string line = fmt::format("{}: {}", it.key(), text((*it)["count"]));
      if (it->contains("smallest_need_GiB")) line += fmt::format(" (smallest need {:.1f} GiB per GPU, capacity {:.0f} GiB)", num(*it, "smallest_need_GiB"), num(*it, "capacity_GiB"));
      std::string ex;
      for (const auto& r : member(*it, "reasons")) {
        if (ex.size() > 400) break;
        ex += fmt::format("{}{} x e.g. \"{}\"", ex.empty() ? "" : "; ", text(r["count"]), text(r["example"]));
      }
      if (!ex.empty() && it.key() != "memory") line += " - " + ex;
      out += "<li>" + html(line) + "</li>\n";
    }
    out += "</ul>\n";
  }
  out += "<h2>Charts</h2>\n";
  for (std::size_t i = 0; i < charts.size(); ++i) {
    out += fmt::format("<figure id=\"{}\">\n{}\n<figcaption><strong>{}.</strong> {}</figcaption>\n</figure>\n", charts[i].name,
                       inline_svg(charts[i].svg, fmt::format("c{}-", i)), html(charts[i].title), html(charts[i].caption));
  }
  const Table t = results_table(doc);
  out += plan ? "<h2>Simulated layouts</h2>\n" : "<h2>Results</h2>\n";
  out += "<table>\n<thead><tr>";
  for (const auto& h : t.head) out += "<th>" + html(h) + "</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const bool top = plan && t.rows[i].back().find("recommended") != std::string::npos;
    out += top ? "<tr class=\"top\">" : "<tr>";
    for (const auto& c : t.rows[i]) out += "<td>" + html(c) + "</td>";
    out += "</tr>\n";
  }
  out += "</tbody>\n</table>\n";
  if (const auto notes = row_notes(doc); !notes.empty()) {
    out += "<h2>Notes</h2>\n<ul>\n";
    for (const auto& n : notes) out += "<li>" + html(n) + "</li>\n";
    out += "</ul>\n";
  }
  out += "<h2>Assumptions</h2>\n<ul>\n";
  for (const auto& a : assumption_lines(doc)) out += "<li>" + html(a) + "</li>\n";
  out += "</ul>\n<p><small>Generated by dtsim. results.csv and results.json beside this file hold every row.</small></p>\n</body>\n</html>\n";
  return out;
}

Status write_study_report(const json& doc, const std::string& dir) {
  auto charts = study_charts(doc);
  if (!charts) return charts.error();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error(fmt::format("cannot create '{}': {}", dir, ec.message()));
  const std::filesystem::path d(dir);
  for (const Chart& c : *charts) {
    if (auto st = write_file_atomic((d / (c.name + ".svg")).string(), c.svg); !st) return st;
  }
  if (auto st = write_file_atomic((d / "results.json").string(), doc.dump(1) + "\n"); !st) return st;
  if (auto st = write_file_atomic((d / "results.csv").string(), study_csv(doc)); !st) return st;
  if (auto st = write_file_atomic((d / "report.md").string(), study_markdown(doc, *charts)); !st) return st;
  return write_file_atomic((d / "report.html").string(), study_html(doc, *charts));
}

Expected<json> read_study(const std::string& given) {
  // A report folder holds its results document.
  std::string path = given;
  if (std::filesystem::is_directory(path)) {
    path = (std::filesystem::path(given) / "results.json").string();
    if (!std::filesystem::exists(path)) return Error(fmt::format("'{}' is a folder without results.json (give a results document or a sweep's -o file)", given));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string textual = ss.str();
  json doc = json::parse(textual, nullptr, false);
  const bool header_only = !doc.is_discarded() && doc.is_object() && doc.contains("fingerprint") && !doc.contains("rows");
  if (!doc.is_discarded() && !header_only) {
    if (!doc.is_object() || !doc.contains("dtsim") || !doc.contains("rows")) {
      return Error(fmt::format("'{}' is not a dtsim results document (from dtsim sweep, plan or report)", path));
    }
    return doc;
  }
  // A sweep's JSON Lines file.
  auto j = planning::read_journal(path);
  if (!j) return Error(fmt::format("'{}' is neither a results document (JSON) nor a sweep results file (JSON Lines): {}", path, j.error().message));
  if (j->header.value("dtsim", std::string()) != "sweep") return Error(fmt::format("'{}' is not a sweep results file", path));
  std::vector<json> rows;
  for (auto& [i, r] : j->rows) rows.push_back(r);
  auto d = planning::sweep_document(j->header, rows);
  if (!d) return d;
  // An interrupted sweep: say how much is missing, in the report and on the way.
  const std::size_t points = j->header.value("points", std::size_t{0});
  if (points > rows.size()) (*d)["missing_points"] = points - rows.size();
  return d;
}

}  // namespace dtsim::reports
