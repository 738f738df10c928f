#include "trace/summary.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace dtsim::trace {

namespace {

std::string shapes_text(const CpuOp& c) {
  std::string out;
  for (const auto& d : c.input_dims) {
    if (d.empty()) continue;
    if (!out.empty()) out += ", ";
    out += "[";
    for (std::size_t i = 0; i < d.size(); ++i) out += (i ? "," : "") + std::to_string(d[i]);
    out += "]";
  }
  return out;
}

// A row being summed, with its time per class.
struct Acc {
  TimeRow row;
  std::array<std::int64_t, kKernelClasses> ns{};
};

std::vector<TimeRow> top_rows(std::unordered_map<std::string, Acc>& rows, std::size_t top) {
  std::vector<TimeRow> v;
  v.reserve(rows.size());
  for (auto& [k, a] : rows) {
    const auto most = std::max_element(a.ns.begin(), a.ns.end()) - a.ns.begin();
    a.row.cls = std::string(to_string(static_cast<KernelClass>(most)));
    v.push_back(std::move(a.row));
  }
  std::sort(v.begin(), v.end(), [](const TimeRow& a, const TimeRow& b) { return a.ns != b.ns ? a.ns > b.ns : a.name < b.name; });
  if (v.size() > top) v.resize(top);
  return v;
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e6); }

std::string cut(const std::string& s, std::size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

}  // namespace

Summary summarize(const Trace& t, const StepOps& s, std::size_t top) {
  Summary out;
  out.file = t.file;
  out.device = t.device;
  out.events = static_cast<std::int64_t>(t.events);
  out.cpu_ops = static_cast<std::int64_t>(t.cpu.size());
  out.runtime_calls = static_cast<std::int64_t>(t.runtime.size());
  out.skipped = t.skipped;
  out.skipped_total = t.skipped_total();
  for (int c = 0; c < kKernelClasses; ++c) out.by_class[static_cast<std::size_t>(c)].name = std::string(to_string(static_cast<KernelClass>(c)));
  std::set<std::int64_t> streams;
  std::unordered_map<std::string, Acc> kernels, ops;
  std::int64_t covered_to = s.gpu_begin_ns;
  for (const auto& o : s.ops) {
    const GpuOp& g = *o.op;
    streams.insert(g.stream);
    out.kernels += g.kind == GpuOpKind::kernel;
    out.memcpys += g.kind == GpuOpKind::memcpy;
    out.memsets += g.kind == GpuOpKind::memset;
    out.summed_ns += g.time.dur_ns;
    // Union of intervals (ops are in start order).
    const std::int64_t from = std::max(covered_to, g.time.ts_ns);
    if (g.time.end_ns() > from) out.busy_ns += g.time.end_ns() - from;
    covered_to = std::max(covered_to, g.time.end_ns());
    auto& c = out.by_class[static_cast<std::size_t>(o.cls)];
    ++c.count;
    c.ns += g.time.dur_ns;
    auto add = [&](Acc& a, const std::string& name) {
      if (a.row.count == 0) a.row.name = name;
      ++a.row.count;
      a.row.ns += g.time.dur_ns;
      a.ns[static_cast<std::size_t>(o.cls)] += g.time.dur_ns;
    };
    add(kernels[g.name], g.name);
    const std::string op_name = o.launcher ? o.launcher->name + (o.launcher->input_dims.empty() ? "" : " " + shapes_text(*o.launcher))
                                           : std::string("(no operator) ") + (g.kind == GpuOpKind::kernel ? "kernel" : g.name);
    add(ops[op_name], op_name);
    if (o.gemm) {
      out.gemm_flops += o.gemm->flops();
      out.gemm_ns_with_shape += g.time.dur_ns;
    }
  }
  out.streams = static_cast<std::int64_t>(streams.size());
  out.window_ns = s.gpu_end_ns - s.gpu_begin_ns;
  out.idle_ns = out.window_ns - out.busy_ns;
  out.top_kernels = top_rows(kernels, top);
  out.top_ops = top_rows(ops, top);
  for (const auto& gr : s.gradients) {
    out.gradient_bytes += gr.bytes;
    ++out.gradients;
  }
  return out;
}

std::string render_summary(const Summary& s) {
  std::string o;
  const double window = static_cast<double>(s.window_ns);
  auto pct = [&](std::int64_t ns) { return window > 0 ? 100.0 * static_cast<double>(ns) / window : 0.0; };
  o += fmt::format("trace     {}\n", s.file);
  o += fmt::format("device    {}\n", s.device.empty() ? "(not recorded)" : s.device);
  o += fmt::format("events    {} ({} CPU operators, {} runtime/driver calls, {} kernels, {} memcpy, {} memset on {} stream{})\n", s.events,
                   s.cpu_ops, s.runtime_calls, s.kernels, s.memcpys, s.memsets, s.streams, s.streams == 1 ? "" : "s");
  o += fmt::format("skipped   {} events", s.skipped_total);
  if (!s.skipped.empty()) {
    std::string parts;
    for (const auto& [cat, n] : s.skipped) parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", cat, n);
    o += " (" + parts + ")";
  }
  o += "\n\n";
  o += fmt::format("GPU step window  {:>10} ms  (first GPU op start to last GPU op end)\n", ms(s.window_ns));
  o += fmt::format("  busy           {:>10} ms  {:5.1f}%\n", ms(s.busy_ns), pct(s.busy_ns));
  o += fmt::format("  idle           {:>10} ms  {:5.1f}%  (waiting for the host)\n", ms(s.idle_ns), pct(s.idle_ns));
  if (s.summed_ns != s.busy_ns) o += fmt::format("  summed op time {:>10} ms  (streams overlap)\n", ms(s.summed_ns));
  if (s.gemm_flops > 0) {
    o += fmt::format("GEMM shapes known for {} ms of GEMM time: {:.3g} TFLOP, {:.0f} TFLOP/s achieved\n", ms(s.gemm_ns_with_shape),
                     s.gemm_flops / 1e12, s.gemm_flops / (static_cast<double>(s.gemm_ns_with_shape) * 1e-9) / 1e12);
  }
  if (s.gradients > 0) o += fmt::format("parameter gradients: {} tensors, {:.1f} MB\n", s.gradients, static_cast<double>(s.gradient_bytes) / 1e6);
  o += fmt::format("\n{:<16} {:>7} {:>11} {:>7}\n", "class", "ops", "time ms", "window");
  for (const auto& c : s.by_class) {
    if (c.count == 0) continue;
    o += fmt::format("{:<16} {:>7} {:>11} {:>6.1f}%\n", c.name, c.count, ms(c.ns), pct(c.ns));
  }
  o += fmt::format("\ntop operators (GPU time of the kernels they launched)\n{:>10} {:>6}  {:<14} {}\n", "ms", "ops", "class", "operator [input shapes]");
  for (const auto& r : s.top_ops) o += fmt::format("{:>10} {:>6}  {:<14} {}\n", ms(r.ns), r.count, r.cls, cut(r.name, 110));
  o += fmt::format("\ntop kernels\n{:>10} {:>6}  {:<14} {}\n", "ms", "count", "class", "kernel");
  for (const auto& r : s.top_kernels) o += fmt::format("{:>10} {:>6}  {:<14} {}\n", ms(r.ns), r.count, r.cls, cut(r.name, 110));
  return o;
}

nlohmann::json summary_json(const Summary& s) {
  auto rows = [](const std::vector<TimeRow>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& r : v) a.push_back({{"name", r.name}, {"class", r.cls}, {"count", r.count}, {"ns", r.ns}});
    return a;
  };
  nlohmann::json classes = nlohmann::json::object();
  for (const auto& c : s.by_class) {
    if (c.count > 0) classes[c.name] = {{"count", c.count}, {"ns", c.ns}};
  }
  return {{"file", s.file},
          {"device", s.device},
          {"events", s.events},
          {"cpu_ops", s.cpu_ops},
          {"runtime_calls", s.runtime_calls},
          {"kernels", s.kernels},
          {"memcpys", s.memcpys},
          {"memsets", s.memsets},
          {"streams", s.streams},
          {"window_ns", s.window_ns},
          {"busy_ns", s.busy_ns},
          {"idle_ns", s.idle_ns},
          {"summed_ns", s.summed_ns},
          {"gemm_flops", s.gemm_flops},
          {"gradient_bytes", s.gradient_bytes},
          {"classes", classes},
          {"top_operators", rows(s.top_ops)},
          {"top_kernels", rows(s.top_kernels)},
          {"skipped", s.skipped},
          {"skipped_total", s.skipped_total}};
}

}  // namespace dtsim::trace
