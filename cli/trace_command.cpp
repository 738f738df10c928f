#include "cli/trace_command.hpp"

#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "cli/errors.hpp"
#include "config/hardware.hpp"
#include "reports/output.hpp"
#include "reports/trace.hpp"
#include "trace/replay.hpp"
#include "trace/summary.hpp"
#include "workloads/graph_build.hpp"
#include "workloads/graph_json.hpp"

namespace dtsim::cli {

namespace {

struct SummaryOptions {
  std::string file;
  std::string json;
  std::size_t top = 10;
};

int run_summary(const SummaryOptions& o) {
  auto t = trace::read_trace(o.file);
  if (!t) {
    print_error(t.error().message);
    return kExitBadInput;
  }
  const trace::StepOps ops = trace::link_step(*t);
  const trace::Summary s = trace::summarize(*t, ops, o.top);
  if (!o.json.empty()) {
    if (auto st = reports::write_file_atomic(o.json, trace::summary_json(s).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::fputs(trace::render_summary(s).c_str(), stdout);
  return kExitOk;
}

std::string ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

std::string render_replay(const trace::ReplayResult& r, const std::string& file, const std::string& cluster) {
  std::string o;
  o += fmt::format("trace        {}\n", file);
  o += fmt::format("traced on    {}; simulated on {}{} ({} GPU{}{})\n", r.traced_gpu, r.target_gpu, r.mixed ? " and the cluster's other GPU kinds" : "",
                   r.gpus, r.gpus == 1 ? "" : r.fsdp ? "s, FSDP" : r.zero > 0 ? fmt::format("s, ZeRO-{}", r.zero) : "s, DDP",
                   r.retimed ? ", kernels re-timed by class" : ", measured kernel times");
  o += fmt::format("cluster      {}\n\n", cluster);
  o += fmt::format("step time          {:>10} ms   (profiled GPU window {} ms)\n", ms(r.step_s), ms(r.traced_window_s));
  o += fmt::format("  GPU busy         {:>10} ms\n", ms(r.gpu_busy_s));
  o += fmt::format("  waiting for host {:>10} ms\n", ms(r.host_wait_s));
  o += fmt::format("  waiting for DP   {:>10} ms\n", ms(r.dp_wait_s));
  o += fmt::format("  launch and inter-kernel delays (measured, kept) {} ms\n", ms(r.gpu_delay_s));
  if (r.side_stream_s > 0) o += fmt::format("  on other streams, beside the compute stream {} ms\n", ms(r.side_stream_s));
  if (r.gpus > 1 && r.zero == 0) {
    o += fmt::format("gradients          {:.1f} MB from the {}, {} bucket{}, all-reduce {} ms in all, {} ms exposed\n",
                     static_cast<double>(r.gradient_bytes) / 1e6, r.gradient_source, r.buckets, r.buckets == 1 ? "" : "s", ms(r.allreduce_s),
                     ms(r.exposed_allreduce_s));
  }
  if (r.zero == 1 || r.zero == 2) {
    o += fmt::format("gradients          {:.1f} MB from the {}, {} bucket{}, reduce-scatter {} ms in all; optimizer on a 1/{} shard\n",
                     static_cast<double>(r.gradient_bytes) / 1e6, r.gradient_source, r.buckets, r.buckets == 1 ? "" : "s", ms(r.allreduce_s),
                     r.gpus);
    o += fmt::format("parameters         updated shards all-gathered after the optimizer: {} ms; waited for reductions and the gather {} ms\n",
                     ms(r.gather_s), ms(r.dp_wait_s));
  }
  if (r.fsdp) {
    o += fmt::format("FSDP units         {} of {} parameter tensors (a repeated block) + the root's {:.1f} MB; optimizer on a 1/{} shard\n",
                     r.fsdp_units, r.fsdp_unit_tensors, static_cast<double>(r.fsdp_root_bytes) / 1e6, r.gpus);
    o += fmt::format("gradients          {:.1f} MB from the {}, reduce-scatter per unit ({}): {} ms in all\n",
                     static_cast<double>(r.gradient_bytes) / 1e6, r.gradient_source, r.buckets, ms(r.allreduce_s));
    o += fmt::format("parameters         {} all-gathers (forward and backward): {} ms in all; waited for gathers and reductions {} ms\n",
                     r.gathers, ms(r.gather_s), ms(r.dp_wait_s));
  }
  if (r.removed_comm_ops > 0) o += fmt::format("traced NCCL kernels left out: {} (data parallelism is simulated)\n", r.removed_comm_ops);
  o += fmt::format("\n{:<16} {:>7} {:>12} {:>12} {:>7}\n", "class", "ops", "traced ms", "simulated ms", "ratio");
  for (int c = 0; c < trace::kKernelClasses; ++c) {
    const auto& ct = r.classes[static_cast<std::size_t>(c)];
    if (ct.count == 0) continue;
    o += fmt::format("{:<16} {:>7} {:>12} {:>12} {:>7.3f}\n", trace::to_string(static_cast<trace::KernelClass>(c)), ct.count,
                     ms(static_cast<double>(ct.traced_ns) * 1e-9), ms(static_cast<double>(ct.replay_ns) * 1e-9),
                     ct.traced_ns > 0 ? static_cast<double>(ct.replay_ns) / static_cast<double>(ct.traced_ns) : 0.0);
  }
  return o;
}

nlohmann::json replay_json(const trace::ReplayResult& r, const config::SimulateConfig& cfg) {
  nlohmann::json classes = nlohmann::json::object();
  for (int c = 0; c < trace::kKernelClasses; ++c) {
    const auto& ct = r.classes[static_cast<std::size_t>(c)];
    if (ct.count > 0) classes[std::string(trace::to_string(static_cast<trace::KernelClass>(c)))] = {
        {"count", ct.count}, {"traced_ns", ct.traced_ns}, {"simulated_ns", ct.replay_ns}};
  }
  return {{"config", cfg.resolved},
          {"result",
           {{"traced_gpu", r.traced_gpu},
            {"target_gpu", r.target_gpu},
            {"gpus", r.gpus},
            {"step_time_s", r.step_s},
            {"gpu_busy_s", r.gpu_busy_s},
            {"host_wait_s", r.host_wait_s},
            {"dp_wait_s", r.dp_wait_s},
            {"gpu_delay_s", r.gpu_delay_s},
            {"side_stream_s", r.side_stream_s},
            {"traced_window_s", r.traced_window_s},
            {"gradient_bytes", r.gradient_bytes},
            {"gradient_source", r.gradient_source},
            {"buckets", r.buckets},
            {"allreduce_s", r.allreduce_s},
            {"zero", r.zero},
            {"fsdp", r.fsdp},
            {"fsdp_units", r.fsdp_units},
            {"fsdp_unit_tensors", r.fsdp_unit_tensors},
            {"fsdp_root_bytes", r.fsdp_root_bytes},
            {"gathers", r.gathers},
            {"gather_s", r.gather_s},
            {"exposed_allreduce_s", r.exposed_allreduce_s},
            {"removed_comm_ops", r.removed_comm_ops},
            {"classes", classes}}}};
}

}  // namespace

int simulate_trace(const config::SimulateConfig& cfg, const hw::Topology& topo, const TraceRunOutputs& out) {
  const config::TraceModel& tm = *cfg.trace;
  // Errors name the configuration (at its model.trace line), as the loader's do.
  const auto at_config = [&](const std::string& field, const std::string& message) {
    print_error(config::Diagnostic{tm.where, field, message}.to_string());
  };
  auto t = trace::read_trace(tm.file);
  if (!t) {
    at_config("model.trace", t.error().message);
    return kExitBadInput;
  }
  const auto& par = cfg.inputs.parallel;
  if (par.tp != 1 || par.pp != 1 || par.cp != 1 || par.ep != 1) {
    at_config("parallel", "a traced step is simulated with data parallelism (DDP, ZeRO-1/2, or FSDP with zero: 3) only: tp, pp, cp, ep must be 1");
    return kExitBadInput;
  }
  if (par.overlap_param_gather) {
    at_config("parallel.overlap_param_gather", "a traced step replays PyTorch's data parallelism (DDP, ZeRO-1/2 gathering after the step, "
                                               "FSDP), not Megatron-Core's distributed optimizer; leave it out");
    return kExitBadInput;
  }
  if (cfg.inputs.training.framework != workloads::Framework::megatron) {
    at_config("training.framework", fmt::format("{} has no meaning for a traced step, which replays the trace's own kernels and host gaps "
                            "(whichever framework ran them); leave it out",
                            workloads::to_string(cfg.inputs.training.framework)));
    return kExitBadInput;
  }
  std::optional<hw::GpuSpec> traced = tm.traced_gpu;
  if (!traced) {
    const std::string preset = trace::gpu_preset_for_device(t->device);
    if (preset.empty()) {
      at_config("model.traced_gpu", fmt::format("the trace's device '{}' is not a known GPU; name the GPU it was taken on "
                              "(model: {{trace: FILE, traced_gpu: h100-sxm}})",
                              t->device));
      return kExitBadInput;
    }
    config::LoadContext ctx;
    YAML::Node n;
    n["traced_gpu"] = preset;
    config::MapReader r(n, "model", tm.file, ctx);
    config::HardwareLoader hl(ctx);
    traced = hl.gpu(r, "traced_gpu");
    if (!traced) {
      print_diagnostics(ctx.diagnostics);
      return kExitBadInput;
    }
  }
  const trace::StepOps ops = trace::link_step(*t);
  trace::ReplayInputs in;
  in.ops = &ops;
  in.traced_gpu = *traced;
  in.compute = cfg.inputs.compute;
  in.comm = cfg.inputs.comm;
  in.dp = par.dp > 1 ? par.dp : topo.gpus();
  in.zero = par.zero;
  if (tm.gradient_params) in.gradient_bytes = *tm.gradient_params * hw::dtype_bytes(cfg.inputs.training.grad_dtype);
  if (par.bucket.count() > 0) in.params.bucket = par.bucket;
  if (tm.profiler_overhead_per_event) in.params.profiler_overhead_per_event = *tm.profiler_overhead_per_event;
  const auto t0 = std::chrono::steady_clock::now();
  in.sharing = cfg.inputs.sharing;
  // --trace: the ranks shown (validated before the run).
  reports::TraceSelection shown;
  std::optional<workloads::Layout> shown_layout;
  if (!out.trace.empty()) {
    workloads::ParallelSpec p;
    p.dp = in.dp;
    auto lay = workloads::Layout::make(p, in.dp);
    if (!lay) {
      at_config("parallel.dp", lay.error().message);
      return kExitBadInput;
    }
    std::vector<int> requested;
    if (!out.trace_ranks.empty()) {
      auto ranks = reports::parse_rank_list(out.trace_ranks, in.dp);
      if (!ranks) {
        print_error(ranks.error().field + ": " + ranks.error().message);
        return kExitBadInput;
      }
      requested = *ranks;
    }
    auto kinds = workloads::gpu_kinds(topo, *lay);
    shown = reports::select_trace_ranks(requested, *lay, !kinds || !kinds->mixed());
    shown_layout = *lay;
    in.timeline = true;
  }
  const std::string& dump_graph = out.dump_graph;
  const std::string& json = out.json;
  if (!dump_graph.empty()) {
    auto g = trace::trace_step_graph(topo, in);
    if (!g) {
      at_config(g.error().field.empty() ? "model.trace" : g.error().field, g.error().message);
      return kExitBadInput;
    }
    if (auto st = workloads::write_graph_file(dump_graph, g->graph); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  auto r = trace::replay_step(topo, in);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    at_config(r.error().field.empty() ? "model.trace" : r.error().field, r.error().message);
    return kExitBadInput;
  }
  if (!json.empty()) {
    if (auto st = reports::write_file_atomic(json, replay_json(*r, cfg).dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  if (shown_layout) {
    workloads::StepResult step;
    step.step_time_s = r->step_s;
    step.timeline = std::move(r->timeline);
    const reports::TraceInfo info{fmt::format("trace {} on {}", tm.file, topo.summary()), fmt::format("dp {}", r->gpus),
                                  ""};
    if (auto st = reports::write_file_atomic(out.trace, reports::chrome_trace(step, *shown_layout, topo, shown, info)); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::fputs(render_replay(*r, tm.file, topo.summary()).c_str(), stdout);
  std::fprintf(stderr, "dtsim: simulated in %.2f s\n", wall);
  return kExitOk;
}

void add_trace_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("trace", "Read PyTorch profiler traces (Chrome-trace JSON, .json or .json.gz)");
  cmd->require_subcommand(1);
  auto o = std::make_shared<SummaryOptions>();
  CLI::App* sum = cmd->add_subcommand("summary", "GPU busy and idle time, time per kernel class, top operators and kernels of one step");
  sum->add_option("file", o->file, "The trace (.json or .json.gz)")->required();
  sum->add_option("--json", o->json, "Also write the summary as JSON to this file");
  sum->add_option("--top", o->top, "Rows of the top operators and kernels tables (default 10)");
  sum->callback([o, &exit_code] { exit_code = run_summary(*o); });
}

}  // namespace dtsim::cli
