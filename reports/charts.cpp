#include "reports/charts.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

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

constexpr std::size_t kMaxBars = 48;  // bar charts show at most this many rows

double num(const json& j, const char* key, double def = 0) {
  if (!j.is_object()) return def;
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

// Text from a results file goes into gnuplot's input, which is a script: a newline in a label
// would end a data block and let the rest run as commands. Control characters become spaces.
char printable(char c) { return (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c; }

// A gnuplot single-quoted string (no backquote substitution, no escapes; '' is a quote).
std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else out += printable(c);
  }
  return out + "'";
}
// A datablock label: one line, double quotes and backslashes replaced.
std::string label(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? '\'' : c == '\\' ? '/' : printable(c);
  return out + "\"";
}
std::string g(double v) { return fmt::format("{:.9g}", v); }

std::string header(const std::string& title, int width = 760, int height = 440) {
  return fmt::format(
      "set terminal svg size {},{} dynamic noenhanced font 'Helvetica,11' background rgb 'white'\n"
      "set title {}\nset grid ytics lc rgb '#dddddd'\nset border lc rgb '#555555'\nset key noautotitle\n"
      "set key top left Left reverse samplen 2\n",
      width, height, q(title));
}

std::string block(const std::string& name, const std::string& lines) { return fmt::format("${} << EOD\n{}EOD\n", name, lines); }

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#222222"};
std::string color(std::size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

bool is_plan(const json& doc) { return doc.value("dtsim", std::string()) == "plan"; }

// Rows with a simulated step (plans: the simulated candidates).
std::vector<const json*> simulated_rows(const json& doc) {
  std::vector<const json*> out;
  for (const json& r : member(doc, "rows")) {
    const json& s = r.value("summary", json::object());
    if (num(s, "step_time_s") <= 0) continue;
    if (is_plan(doc) && s.value("status", std::string()) != "simulated") continue;
    if (!is_plan(doc) && s.value("status", std::string()) == "error") continue;
    out.push_back(&r);
  }
  return out;
}

// Rows that fit in memory: the only ones whose time, cost and throughput are real options. Rows
// that do not fit stay in the breakdown and memory charts (which show why).
bool fits(const json& row) {
  const json& s = member(row, "summary");
  return s.value("fits", true) && s.value("status", std::string()) != "oom";
}

std::string short_label(const json& row) {
  const json& s = row.value("summary", json::object());
  const std::string l = s.value("short_label", std::string());
  return l.empty() ? s.value("label", fmt::format("point {}", row.value("point", 0))) : l;
}

// Breakdown columns in a fixed order (the JSON object's own order is alphabetical).
std::vector<std::string> breakdown_keys(const std::vector<const json*>& rows) {
  static const std::vector<std::string> preferred = {"compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "dp_comm_s",
                                                     "optimizer_s", "bubble_s", "host_s", "input_s", "idle_s"};
  std::set<std::string> present;
  for (const json* r : rows) {
    const json& b = member(*r, "summary").value("breakdown", json::object());
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (it->is_number() && it->get<double>() > 0) present.insert(it.key());
    }
  }
  std::vector<std::string> out;
  for (const auto& k : preferred) {
    if (present.count(k)) out.push_back(k);
  }
  for (const auto& k : present) {
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  return out;
}

std::string pretty(const std::string& key) {
  std::string s = key.size() > 2 && key.substr(key.size() - 2) == "_s" ? key.substr(0, key.size() - 2) : key;
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

std::string bar_setup(std::size_t n) {
  return fmt::format("set style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 border rgb '#ffffff'\n"
                     "set boxwidth 0.75\nset xtics rotate by -40 scale 0 font ',9'\nset xrange [-0.6:{}]\nset bmargin 9\n"
                     "set key outside right top vertical Left reverse\n",
                     static_cast<double>(n) - 0.4);
}

Status throughput_charts(const json& doc, std::vector<Chart>& out) {
  // Series of rows that differ only in GPU count.
  std::map<std::string, std::vector<const json*>> series;
  for (const json* r : simulated_rows(doc)) {
    const json& s = member(*r, "summary");
    if (!s.contains("hardware_efficiency") || !fits(*r)) continue;
    series[s.value("series", std::string())].push_back(r);
  }
  if (series.empty()) return {};
  std::string unit;
  std::string data, plot, eff_plot;
  std::size_t i = 0;
  for (auto& [key, rows] : series) {
    std::sort(rows.begin(), rows.end(), [](const json* a, const json* b) { return (*a)["summary"].value("gpus", 0) < (*b)["summary"].value("gpus", 0); });
    const json& ref = (*rows.front())["summary"];
    const double ref_gpus = ref.value("reference_gpus", ref.value("gpus", 1));
    double ref_thr = 0;
    for (const json* r : rows) {
      if (member(*r, "summary").value("gpus", 0) == static_cast<int>(ref_gpus)) ref_thr = num(member(*r, "summary"), "throughput");
    }
    std::string lines, ideal, eff;
    for (const json* r : rows) {
      const json& s = member(*r, "summary");
      unit = s.value("throughput_unit", std::string("samples/s"));
      lines += fmt::format("{} {}\n", s.value("gpus", 0), g(num(s, "throughput")));
      ideal += fmt::format("{} {}\n", s.value("gpus", 0), g(ref_thr * s.value("gpus", 0) / ref_gpus));
      eff += fmt::format("{} {}\n", s.value("gpus", 0), g(100 * num(s, "hardware_efficiency")));
    }
    data += block(fmt::format("t{}", i), lines) + block(fmt::format("i{}", i), ideal) + block(fmt::format("e{}", i), eff);
    const std::string name = key.empty() ? std::string("simulated") : key;
    plot += fmt::format("{}$t{} using 1:2 with linespoints lw 2 pt 7 lc rgb '{}' title {}, $i{} using 1:2 with lines dt 2 lc rgb '{}' title {}",
                        plot.empty() ? "" : ", ", i, color(i), q(name), i, color(i), q("ideal" + (key.empty() ? std::string() : " (" + key + ")")));
    eff_plot += fmt::format("{}$e{} using 1:2 with linespoints lw 2 pt 7 lc rgb '{}' title {}", eff_plot.empty() ? "" : ", ", i, color(i), q(name));
    ++i;
  }
  Chart t;
  t.name = "throughput";
  t.title = "Throughput against GPU count";
  t.caption = "Simulated throughput per series (rows that differ only in GPU count), with the ideal linear line from the smallest run.";
  auto svg = run_gnuplot(header(t.title) + data + fmt::format("set logscale x 2\nset xlabel 'GPUs'\nset ylabel {}\nset yrange [0:*]\nset format y '%.1s%c'\nplot {}\n", q(unit), plot));
  if (!svg) return svg.error();
  t.svg = *svg;
  out.push_back(t);
  Chart e;
  e.name = "efficiency";
  e.title = "Scaling efficiency against GPU count";
  e.caption = "Hardware efficiency: throughput per GPU relative to the smallest run of the series (100% is linear scaling).";
  svg = run_gnuplot(header(e.title) + data +
                    fmt::format("set logscale x 2\nset xlabel 'GPUs'\nset ylabel 'efficiency (%)'\nset yrange [0:115]\n"
                                "plot 100 with lines dt 2 lc rgb '#888888' title 'ideal', {}\n",
                                eff_plot));
  if (!svg) return svg.error();
  e.svg = *svg;
  out.push_back(e);
  return {};
}

}  // namespace

Expected<std::string> run_gnuplot(const std::string& script) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/dtsim-chart-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return Error("cannot create a temporary file for gnuplot");
  ::close(fd);
  const std::string script_path = tmpl;
  const std::string err_path = script_path + ".err";
  {
    std::ofstream s(script_path, std::ios::binary);
    s << script;
  }
  const std::string cmd = fmt::format("gnuplot '{}' 2>'{}'", script_path, err_path);
  std::string svg;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return Error("cannot start gnuplot");
  std::array<char, 65536> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) svg.append(buf.data(), n);
  const int status = pclose(p);
  std::string err;
  {
    std::ifstream e(err_path, std::ios::binary);
    std::ostringstream ss;
    ss << e.rdbuf();
    err = ss.str();
  }
  std::error_code ec;
  fs::remove(script_path, ec);
  fs::remove(err_path, ec);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127) {
    return Error("gnuplot is not installed: the report's charts are drawn by gnuplot (Debian: apt-get install gnuplot-nox; scripts/deps installs it)");
  }
  if (code != 0 || svg.find("<svg") == std::string::npos) {
    return Error(fmt::format("gnuplot failed (exit {}): {}", code, err.substr(0, 2000)));
  }
  return svg;
}

std::string inline_svg(const std::string& svg, const std::string& prefix) {
  std::string s = svg;
  const auto start = s.find("<svg");
  if (start != std::string::npos) s = s.substr(start);
  static const std::regex id_re("id=['\"]([^'\"]+)['\"]");
  std::set<std::string> ids;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), id_re); it != std::sregex_iterator(); ++it) ids.insert((*it)[1].str());
  // Longest first, so that "gpPt10" is not rewritten as "gpPt1" + "0".
  std::vector<std::string> sorted(ids.begin(), ids.end());
  std::sort(sorted.begin(), sorted.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& id : sorted) {
    for (const char* pre : {"id='", "id=\"", "#"}) {
      for (const char* post : {"'", "\"", ")"}) {
        const std::string from = pre + id + post;
        const std::string to = std::string(pre) + prefix + id + post;
        for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) s.replace(pos, from.size(), to);
      }
    }
  }
  return s;
}

Expected<std::vector<Chart>> study_charts(const json& doc) {
  std::vector<Chart> out;
  // Fail early and clearly when gnuplot is missing.
  if (auto probe = run_gnuplot("set terminal svg size 10,10\nset output\nplot 1 notitle\n"); !probe) return probe.error();
  if (auto st = throughput_charts(doc, out); !st) return st.error();
  const auto rows_all = simulated_rows(doc);
  std::vector<const json*> rows(rows_all.begin(), rows_all.begin() + static_cast<std::ptrdiff_t>(std::min(kMaxBars, rows_all.size())));
  const std::string more = rows_all.size() > rows.size() ? fmt::format(" (the first {} of {} rows)", rows.size(), rows_all.size()) : "";

  // Step-time breakdown.
  if (!rows.empty()) {
    const auto keys = breakdown_keys(rows);
    if (!keys.empty()) {
      std::string lines;
      for (const json* r : rows) {
        lines += label(short_label(*r));
        for (const auto& k : keys) lines += " " + g(num(member(*r, "summary").value("breakdown", json::object()), k.c_str()));
        lines += "\n";
      }
      std::string plot;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        plot += fmt::format("{}$d using {}{} lc rgb '{}' title {}", i ? ", " : "", i + 2, i == 0 ? ":xtic(1)" : "", color(i), q(pretty(keys[i])));
      }
      Chart c;
      c.name = "breakdown";
      c.title = "Step time breakdown";
      c.caption = "Where the step time goes (the pipeline stage that ends last): compute, exposed communication by kind, optimizer, bubble" + more + ".";
      auto svg = run_gnuplot(header(c.title, 860, 480) + block("d", lines) + bar_setup(rows.size()) + "set ylabel 'seconds per step'\nplot " + plot + "\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
      // The same as shares of each point's step, so that a short step (many GPUs in strong
      // scaling) is as readable as a long one.
      std::string shares;
      for (const json* r : rows) {
        const json& b = member(*r, "summary").value("breakdown", json::object());
        double total = 0;
        for (const auto& k : keys) total += num(b, k.c_str());
        shares += label(short_label(*r));
        for (const auto& k : keys) shares += " " + g(total > 0 ? 100.0 * num(b, k.c_str()) / total : 0.0);
        shares += "\n";
      }
      Chart sc;
      sc.name = "breakdown-share";
      sc.title = "Step time breakdown, shares";
      sc.caption = "The same breakdown as shares of each point's own step time, so that short steps read as well as long ones" + more + ".";
      auto ssvg = run_gnuplot(header(sc.title, 860, 480) + block("d", shares) + bar_setup(rows.size()) +
                              "set ylabel 'share of the step (%)'\nset yrange [0:100]\nplot " + plot + "\n");
      if (!ssvg) return ssvg.error();
      sc.svg = *ssvg;
      out.push_back(sc);
    }
    // Memory per GPU against capacity.
    std::string lines, cap;
    bool any = false;
    for (const json* r : rows) {
      const json& s = member(*r, "summary");
      if (!s.contains("memory_parts_GiB")) continue;
      any = true;
      const json& m = s["memory_parts_GiB"];
      lines += fmt::format("{} {} {} {} {} {}\n", label(short_label(*r)), g(num(m, "params")), g(num(m, "grads")), g(num(m, "optimizer")),
                           g(num(m, "activations")), g(num(m, "other")));
      cap += fmt::format("{}\n", g(num(s, "capacity_GiB")));
    }
    if (any) {
      Chart c;
      c.name = "memory";
      c.title = "Memory per GPU against capacity";
      c.caption = "Memory of the fullest GPU, by category, against the GPU's capacity" + more + ".";
      std::string plot;
      const char* parts[] = {"parameters", "gradients", "optimizer states", "activations", "framework + fragmentation"};
      for (int i = 0; i < 5; ++i) plot += fmt::format("{}$m using {}{} lc rgb '{}' title '{}'", i ? ", " : "", i + 2, i == 0 ? ":xtic(1)" : "", color(static_cast<std::size_t>(i)), parts[i]);
      plot += ", $c using 0:1 with linespoints lw 2 pt 5 lc rgb '#d62728' title 'capacity'";
      auto svg = run_gnuplot(header(c.title, 860, 480) + block("m", lines) + block("c", cap) + bar_setup(rows.size()) +
                             "set ylabel 'GiB per GPU'\nset yrange [0:*]\nplot " + plot + "\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
    }
    // Time to train and cost.
    lines.clear();
    bool cost = false;
    std::size_t oom = 0;
    for (const json* r : rows) {
      const json& s = member(*r, "summary");
      // A row that does not fit has no time to train (not achievable): left out, and counted.
      if (!fits(*r)) {
        ++oom;
        continue;
      }
      if (num(s, "time_to_train_s") <= 0) continue;
      cost = cost || num(s, "cost") > 0;
      lines += fmt::format("{} {} {}\n", label(short_label(*r)), g(num(s, "time_to_train_s") / 86400), g(num(s, "cost")));
    }
    if (!lines.empty()) {
      Chart c;
      c.name = "time_cost";
      c.title = cost ? "Time to train and cost" : "Time to train";
      c.caption = "Days to train the budget (bars)" + std::string(cost ? " and its cost (points, right axis)" : "") + more +
                  (oom ? fmt::format("; {} left out (not fitting in memory)", oom == 1 ? std::string("1 row") : fmt::format("{} rows", oom)) : std::string()) + ".";
      std::string plot = "$t using 0:2:xtic(1) with boxes lc rgb '#4e79a7' title 'days'";
      std::string extra = "set style fill solid 0.85 border rgb '#ffffff'\nset boxwidth 0.7\nset xtics rotate by -40 scale 0 font ',9'\nset bmargin 9\nset ylabel 'days'\nset yrange [0:*]\n";
      if (cost) {
        const std::string cur = rows.front()->at("summary").value("currency", std::string());
        plot += ", $t using 0:3 axes x1y2 with points pt 7 ps 1.2 lc rgb '#e15759' title 'cost'";
        extra += fmt::format("set y2tics\nset y2label {}\nset y2range [0:*]\nset ytics nomirror\n", q("cost" + (cur.empty() ? "" : " (" + cur + ")")));
      }
      auto svg = run_gnuplot(header(c.title, 860, 480) + block("t", lines) + extra + fmt::format("set xrange [-0.6:{}]\n", static_cast<double>(rows.size()) - 0.4) +
                             "plot " + plot + "\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
    }
  }

  // Pareto front (time against cost).
  {
    std::string all, front, top;
    std::size_t points = 0;
    for (const json* r : rows_all) {
      const json& s = member(*r, "summary");
      if (num(s, "time_to_train_s") <= 0 || num(s, "cost") <= 0 || !fits(*r)) continue;
      const std::string line = fmt::format("{} {}\n", g(num(s, "time_to_train_s") / 86400), g(num(s, "cost")));
      all += line;
      ++points;
      if (s.value("pareto", false)) front += line;
      if (s.value("top", false)) top += line;
    }
    if (!front.empty() || (!is_plan(doc) && points >= 2)) {
      Chart c;
      c.name = "pareto";
      c.title = "Time to train against cost";
      c.caption = "Every simulated layout that fits in memory; the Pareto front (no other layout is both faster and cheaper) is joined" +
                  std::string(top.empty() ? "" : "; the square is the recommended layout") + ".";
      if (front.empty()) {
        // Sweeps: the front of the rows themselves.
        std::vector<std::pair<double, double>> pts;
        std::istringstream in(all);
        double a = 0, b = 0;
        while (in >> a >> b) pts.emplace_back(a, b);
        std::sort(pts.begin(), pts.end());
        double best = 1e300;
        for (auto [t, k] : pts) {
          if (k < best) {
            front += fmt::format("{} {}\n", g(t), g(k));
            best = k;
          }
        }
      }
      std::string plot = "$a using 1:2 with points pt 7 ps 0.8 lc rgb '#9aa7b8' title 'simulated', $f using 1:2 with linespoints lw 2 pt 7 lc rgb '#f28e2b' title 'Pareto front'";
      std::string data = block("a", all) + block("f", front);
      if (!top.empty()) {
        data += block("p", top);
        plot += ", $p using 1:2 with points pt 5 ps 2 lc rgb '#e15759' title 'recommended'";
      }
      auto svg = run_gnuplot(header(c.title) + data + "set xlabel 'days to train'\nset ylabel 'cost'\nset format y '%.1s%c'\nplot " + plot + "\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
    }
  }

  // Predicted against measured.
  {
    std::string lines, metric;
    double hi = 0;
    for (const json* r : rows_all) {
      const json& s = member(*r, "summary");
      if (!s.contains("measured")) continue;
      const json& m = s["measured"];
      metric = m.value("metric", std::string());
      lines += fmt::format("{} {} {}\n", g(num(m, "value")), g(num(m, "predicted")), label(short_label(*r)));
      hi = std::max({hi, num(m, "value"), num(m, "predicted")});
    }
    if (!lines.empty()) {
      Chart c;
      c.name = "measured";
      c.title = "Predicted against measured";
      c.caption = "Each point is a row with a measurement (" + metric + "); on the dashed line the prediction equals the measurement.";
      auto svg = run_gnuplot(header(c.title) + block("m", lines) +
                             fmt::format("set xlabel {}\nset ylabel {}\nset xrange [0:{}]\nset yrange [0:{}]\nset size ratio -1\n", q("measured " + metric),
                                         q("predicted " + metric), g(hi * 1.1), g(hi * 1.1)) +
                             "plot x with lines dt 2 lc rgb '#888888' title 'predicted = measured', $m using 1:2 with points pt 7 ps 1.2 lc rgb '#4e79a7' title 'rows'\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
    }
  }

  // Time to a target loss against global batch (large-batch model).
  {
    std::map<double, std::pair<double, double>> by_batch;  // batch -> (best time to target, steps)
    for (const json* r : rows_all) {
      const json& s = member(*r, "summary");
      if (num(s, "time_to_target_s") <= 0 || !fits(*r)) continue;
      const double b = num(s, "global_batch");
      auto it = by_batch.find(b);
      if (it == by_batch.end() || num(s, "time_to_target_s") < it->second.first) by_batch[b] = {num(s, "time_to_target_s"), num(s, "steps_to_target")};
    }
    if (by_batch.size() >= 2) {
      std::string lines;
      for (const auto& [b, v] : by_batch) lines += fmt::format("{} {} {}\n", g(b), g(v.first / 3600), g(v.second));
      Chart c;
      c.name = "batch";
      c.title = "Time to target against global batch";
      c.caption = "Hours to reach the target loss (S(B) x step time, McCandlish et al. 2018) and the steps it takes, per global batch (the fastest row of each that fits in memory).";
      auto svg = run_gnuplot(header(c.title) + block("b", lines) +
                             "set logscale x 2\nset xlabel 'global batch (samples)'\nset ylabel 'hours to target'\nset y2label 'steps to target'\n"
                             "set y2tics\nset ytics nomirror\nset yrange [0:*]\nset y2range [0:*]\n"
                             "plot $b using 1:2 with linespoints lw 2 pt 7 lc rgb '#4e79a7' title 'time to target', "
                             "$b using 1:3 axes x1y2 with linespoints dt 2 pt 6 lc rgb '#f28e2b' title 'steps to target'\n");
      if (!svg) return svg.error();
      c.svg = *svg;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace dtsim::reports
