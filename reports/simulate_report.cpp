#include "reports/simulate_report.hpp"

#include <cmath>

#include <fmt/format.h>

namespace dtsim::reports {

namespace {

constexpr double kGiB = 1073741824.0;

double round_to(double v, int decimals) {
  const double k = std::pow(10.0, decimals);
  return std::round(v * k) / k;
}

const char* kind_label(workloads::TimeKind k) {
  switch (k) {
    case workloads::TimeKind::compute: return "compute";
    case workloads::TimeKind::tp: return "tensor-parallel communication";
    case workloads::TimeKind::cp: return "context-parallel communication";
    case workloads::TimeKind::ep: return "expert-parallel communication";
    case workloads::TimeKind::pp: return "pipeline communication";
    case workloads::TimeKind::dp: return "data-parallel communication";
    case workloads::TimeKind::optimizer: return "optimizer step";
    case workloads::TimeKind::bubble: return "pipeline bubble";
    case workloads::TimeKind::host: return "host (single process driving the GPUs)";
    case workloads::TimeKind::input: return "waiting for input data";
    case workloads::TimeKind::count: break;
  }
  return "?";
}

nlohmann::json memory_json(const workloads::MemoryBreakdown& m) {
  nlohmann::json j = {{"stage", m.stage},
          {"params_GiB", round_to(m.params / kGiB, 3)},
          {"grads_GiB", round_to(m.grads / kGiB, 3)},
          {"optimizer_GiB", round_to(m.optimizer / kGiB, 3)},
          {"activations_GiB", round_to(m.activations / kGiB, 3)},
          {"reserved_GiB", round_to(m.reserved / kGiB, 3)},
          {"fragmentation_GiB", round_to(m.fragmentation / kGiB, 3)},
          {"total_GiB", round_to(m.total / kGiB, 3)},
          {"capacity_GiB", round_to(m.capacity / kGiB, 3)},
          {"fits", m.fits}};
  if (m.eager) {
    // As PyTorch's caching allocator sees it: the peak of live tensors (max_memory_allocated),
    // when it happens, and its parts; total_GiB is the device memory a monitor shows.
    j["allocated_GiB"] = round_to(m.allocated / kGiB, 3);
    j["peak_phase"] = m.peak_phase;
    j["cast_weights_GiB"] = round_to(m.cast_weights / kGiB, 3);
    j["loss_GiB"] = round_to(m.loss / kGiB, 3);
    j["workspace_GiB"] = round_to(m.workspace / kGiB, 3);
  }
  return j;
}

nlohmann::json input_json(const workloads::InputReport& in) {
  return {{"dataset", in.dataset},
          {"read_s", round_to(in.read_s, 6)},
          {"decode_s", round_to(in.decode_s, 6)},
          {"h2d_s", round_to(in.h2d_s, 6)},
          {"loader_period_s", round_to(in.period_s, 6)},
          {"gpu_step_s", round_to(in.gpu_step_s, 6)},
          {"bound_by", in.bound_by},
          {"loader_samples_per_s", round_to(in.loader_samples_per_s, 3)},
          {"gpu_samples_per_s", round_to(in.gpu_samples_per_s, 3)}};
}

std::string money(double v, const std::string& currency) { return fmt::format("{:.0f} {}", v, currency); }

}  // namespace

std::string human_duration(double s) {
  if (s >= 2 * 86400) return fmt::format("{:.1f} days", s / 86400);
  if (s >= 2 * 3600) return fmt::format("{:.1f} h", s / 3600);
  if (s >= 120) return fmt::format("{:.0f} min", s / 60);
  return fmt::format("{:.3g} s", s);
}

std::string render_simulate(const SimulateReport& rep) {
  const workloads::StepResult& r = rep.result;
  std::string out;
  out += fmt::format("# dtsim simulate: {} on {}\n", rep.model, rep.cluster);
  out += fmt::format("# layout: {}; {} micro-batch{} per pipeline per step\n", r.layout, r.micro_batches, r.micro_batches == 1 ? "" : "es");
  if (!rep.framework.empty()) {
    out += fmt::format("# framework: {} (its kernels, AMP casts and host launch cost per kernel; dtsim simulate --list-params, "
                       "compute.framework.*)\n",
                       rep.framework);
  }
  if (!r.symmetry_note.empty()) out += "# " + r.symmetry_note + "\n";
  out += "\n";
  if (!r.fits) {
    out += "VERDICT: NOT ACHIEVABLE AS CONFIGURED, it does not fit in GPU memory (" + r.memory_note + ").\n";
    out += "  The step time and throughput below are what it would take if it fitted; it has no time to train or cost.\n";
    if (rep.memory_fixes.empty()) {
      out += "  No change of recomputation, ZeRO stage, micro-batch, pipeline or tensor parallelism tried makes it fit: use more or larger GPUs.\n";
    } else {
      out += "  Smallest changes that make it fit (peak per GPU after the change):\n";
      for (const auto& f : rep.memory_fixes) {
        out += fmt::format("    {:<44} {:.1f} of {:.1f} GiB\n", f.change, f.peak_bytes / kGiB, f.capacity_bytes / kGiB);
      }
    }
    out += "\n";
  }
  if (!rep.notes.empty()) {
    out += "notes\n";
    for (const auto& n : rep.notes) out += "  - " + n + "\n";
    out += "\n";
  }
  out += fmt::format("{:<16} {:.4g} B parameters ({:.4g} B used per token)\n", "model", r.params * 1e-9, r.active_params * 1e-9);
  out += fmt::format("{:<16} {:.4f} s\n", "step time", r.step_time_s);
  if (r.tokens_per_s > 0) {
    out += fmt::format("{:<16} {:.2f} samples/s, {:.0f} tokens/s\n", "throughput", r.samples_per_s, r.tokens_per_s);
  } else {
    out += fmt::format("{:<16} {:.2f} samples/s\n", "throughput", r.samples_per_s);
  }
  out += fmt::format("{:<16} {:.1f} TFLOP/s of model FLOPs; MFU {:.1f}%, HFU {:.1f}% of the {:.0f} TFLOP/s {} peak\n", "per GPU",
                     r.tflops_per_gpu, 100 * r.mfu, 100 * r.hfu, r.peak_flops_per_gpu * 1e-12, rep.precision);
  out += fmt::format("{:<16} {:.4g} model, {:.4g} with recomputation (HFU), {:.4g} by the kernels' own count\n", "FLOPs per step",
                     r.model_flops_per_step, r.hardware_flops_per_step, r.kernel_flops_per_step);
  if (!r.kinds.empty()) {
    out += "\nper GPU kind (every data-parallel replica simulated on its own kind; the slowest bounds the step)\n";
    out += fmt::format("  {:<16} {:>6} {:>12} {:>12} {:>12} {:>7} {:>12}\n", "GPU", "GPUs", "compute (s)", "done at (s)", "utilization", "MFU",
                       "peak TFLOP/s");
    for (const auto& k : r.kinds) {
      out += fmt::format("  {:<16} {:>6} {:>12.4f} {:>12.4f} {:>11.1f}% {:>6.1f}% {:>12.0f}\n", k.gpu, k.gpus, k.compute_s, k.end_s,
                         100 * k.utilization, 100 * k.mfu, k.peak_flops_per_gpu * 1e-12);
    }
    out += "  (MFU and HFU above are against the mean peak of all the GPUs)\n";
  }
  out += "\n";
  int critical = 0;
  for (const auto& s : r.stages) {
    if (s.end_s > r.stages[static_cast<std::size_t>(critical)].end_s) critical = s.stage;
  }
  out += fmt::format("time per step (pipeline stage {}, the last to finish)\n", critical);
  for (int k = 0; k < workloads::kTimeKinds; ++k) {
    const double t = r.breakdown_s[static_cast<std::size_t>(k)];
    if (t <= 0 && k != 0) continue;
    out += fmt::format("  {:<34} {:>10.4f} s {:>6.1f}%\n", kind_label(static_cast<workloads::TimeKind>(k)), t, 100 * t / r.step_time_s);
  }
  if (r.idle_s > 0) out += fmt::format("  {:<34} {:>10.4f} s {:>6.1f}%\n", "idle", r.idle_s, 100 * r.idle_s / r.step_time_s);
  // Eager frameworks: `total` is the device memory a monitor shows (what runs out, so what decides
  // "fits"); the allocator's own peak follows the table.
  out += r.peak_memory.eager ? "\nmemory per GPU (GiB; total = what a monitor such as nvidia-smi shows, which decides fits; the allocator's peak below)\n"
                             : "\nmemory per GPU (GiB)\n";
  out += fmt::format("  {:>5} {:>8} {:>8} {:>9} {:>11} {:>8} {:>8} {:>8}  {}\n", "stage", "params", "grads", "optimizer", "activations",
                     "other", "total", "capacity", "fits");
  for (const auto& s : r.stages) {
    const auto& m = s.memory;
    out += fmt::format("  {:>5} {:>8.2f} {:>8.2f} {:>9.2f} {:>11.2f} {:>8.2f} {:>8.2f} {:>8.2f}  {}\n", s.stage, m.params / kGiB,
                       m.grads / kGiB, m.optimizer / kGiB, m.activations / kGiB, (m.reserved + m.fragmentation) / kGiB, m.total / kGiB,
                       m.capacity / kGiB, m.fits ? "yes" : "NO");
  }
  if (r.peak_memory.eager) {
    const auto& m = r.peak_memory;
    out += fmt::format(
        "  {}allocator peak (max_memory_allocated) {:.2f} GiB at the {}: fp32 parameters {:.2f}, bf16 weight copies {:.2f}, "
        "gradients {:.2f}, optimizer {:.2f}, activations {:.2f} of which loss buffers {:.2f}, cuBLAS workspace {:.2f}; "
        "a monitor shows {:.2f} GiB (allocator reserve and CUDA context)\n",
        r.stages.size() > 1 ? fmt::format("stage {} (the fullest): ", m.stage) : std::string(), m.allocated / kGiB, m.peak_phase, (m.params - m.cast_weights) / kGiB, m.cast_weights / kGiB, m.grads / kGiB, m.optimizer / kGiB,
        m.activations / kGiB, m.loss / kGiB, m.workspace / kGiB, m.total / kGiB);
  }
  if (!r.fits) out += "\n" + r.memory_note + "\n";
  if (r.input.modelled) {
    const auto& in = r.input;
    out += fmt::format("\ninput pipeline ({}), per step\n", in.dataset.empty() ? "training.data" : in.dataset);
    out += fmt::format("  {:<34} {:>10.4f} s\n", "read from storage", in.read_s);
    out += fmt::format("  {:<34} {:>10.4f} s\n", "decode and augment", in.decode_s);
    out += fmt::format("  {:<34} {:>10.4f} s\n", "copy to the GPUs", in.h2d_s);
    out += fmt::format("  {:<34} {:>10.4f} s\n", "the GPUs' step without waiting", in.gpu_step_s);
    if (in.bound_by == "gpus") {
      out += fmt::format("  the GPUs bound throughput: the loader could supply {:.0f} samples/s, the GPUs take {:.0f}\n", in.loader_samples_per_s,
                         in.gpu_samples_per_s);
    } else {
      out += fmt::format("  INPUT-BOUND by {}: {:.0f} samples/s instead of the GPUs' {:.0f}; steps take {:.0f}% longer\n", in.bound_by,
                         in.loader_samples_per_s, in.gpu_samples_per_s, 100.0 * (in.period_s / in.gpu_step_s - 1.0));
    }
  }
  // Monitoring view: what nvidia-smi would show per GPU.
  const auto& run = rep.run;
  out += "\nper GPU, as monitoring would show it\n";
  out += fmt::format("  {:>5} {:>12} {:>9} {:>14}\n", "stage", "utilization", "power", "memory");
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const auto& m = r.stages[i].memory;
    out += fmt::format("  {:>5} {:>11.0f}% {:>7.0f} W {:>6.1f}/{:.0f} GiB\n", r.stages[i].stage,
                       i < run.stage_utilization.size() ? 100 * run.stage_utilization[i] : 0.0,
                       i < run.stage_power_w.size() ? run.stage_power_w[i] : 0.0, m.total / kGiB, m.capacity / kGiB);
  }
  out += fmt::format("  energy per step {:.4g} kWh (GPUs {:.0f}-{:.0f} W idle-max, node overhead {:.0f} W, PUE {:.2f})\n", run.step_energy_kwh,
                     rep.power.gpu_idle_w, rep.power.gpu_max_w, rep.power.node_overhead_w, rep.power.pue);
  if (rep.budget.any()) {
    out += "\ntraining run\n";
    std::string what = rep.budget.tokens > 0    ? fmt::format("{:.4g} tokens", rep.budget.tokens)
                       : rep.budget.samples > 0 ? fmt::format("{:.4g} samples", rep.budget.samples)
                                                : fmt::format("{:g} epochs of {:.0f} samples", rep.budget.epochs, rep.budget.dataset_samples);
    out += fmt::format("  {:<16} {} in {:.0f} steps\n", "budget", what, run.steps);
    if (!run.achievable) {
      out += fmt::format("  {:<16} not achievable as configured: the step does not fit in GPU memory (see the verdict above)\n", "time to train");
      out += fmt::format("  {:<16} none\n", "cost");
    }
  }
  if (rep.budget.any() && rep.run.achievable) {
    out += fmt::format("  {:<16} {} ({:.4g} s)\n", "time to train", human_duration(run.time_to_train_s), run.time_to_train_s);
    out += fmt::format("  {:<16} {:.4g}\n", "GPU-hours", run.gpu_hours);
    out += fmt::format("  {:<16} {:.4g} MWh (facility, PUE included)\n", "energy", run.energy_kwh / 1000);
    if (rep.has_prices) {
      out += fmt::format("  {:<16} {} = {} GPU-hours ({:.2f}/GPU-h) + {} electricity ({:.3f}/kWh)\n", "cost",
                         money(run.cost, rep.prices.currency), money(run.gpu_cost, rep.prices.currency), rep.prices.gpu_hour,
                         money(run.energy_cost, rep.prices.currency), rep.prices.kwh);
    }
  }
  out += fmt::format("\n# {}\n", kFlopsConvention);
  return out;
}

nlohmann::json simulate_json(const SimulateReport& rep) {
  const workloads::StepResult& r = rep.result;
  nlohmann::json breakdown;
  for (int k = 0; k < workloads::kTimeKinds; ++k) {
    breakdown[std::string(workloads::to_string(static_cast<workloads::TimeKind>(k))) + "_s"] = round_to(r.breakdown_s[static_cast<std::size_t>(k)], 6);
  }
  breakdown["idle_s"] = round_to(r.idle_s, 6);
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json st = {{"stage", s.stage}, {"layers", s.layers}, {"end_s", round_to(s.end_s, 6)}, {"in_flight_microbatches", s.in_flight},
                         {"idle_s", round_to(s.idle_s, 6)}, {"memory", memory_json(s.memory)}};
    for (int k = 0; k < workloads::kTimeKinds; ++k) {
      st[std::string(workloads::to_string(static_cast<workloads::TimeKind>(k))) + "_s"] = round_to(s.time_s[static_cast<std::size_t>(k)], 6);
    }
    const auto i = static_cast<std::size_t>(s.stage);
    if (i < rep.run.stage_utilization.size()) {
      st["utilization"] = round_to(rep.run.stage_utilization[i], 4);
      st["power_W"] = round_to(rep.run.stage_power_w[i], 1);
    }
    stages.push_back(st);
  }
  nlohmann::json result = {
      {"model", {{"name", rep.model}, {"params", r.params}, {"active_params", r.active_params}, {"flops_per_step", r.model_flops_per_step},
                 {"executed_flops_per_step", r.hardware_flops_per_step},
                 {"kernel_flops_per_step", r.kernel_flops_per_step}, {"flops_convention", kFlopsConvention}}},
      {"cluster", rep.cluster},
      {"layout", r.layout},
      {"gpus", r.gpus},
      {"micro_batches_per_step", r.micro_batches},
      {"step_time_s", round_to(r.step_time_s, 6)},
      {"throughput", {{"samples_per_s", round_to(r.samples_per_s, 4)}, {"tokens_per_s", round_to(r.tokens_per_s, 2)}}},
      {"tflops_per_gpu", round_to(r.tflops_per_gpu, 3)},
      {"mfu", round_to(r.mfu, 5)},
      {"hfu", round_to(r.hfu, 5)},
      {"peak_tflops_per_gpu", round_to(r.peak_flops_per_gpu * 1e-12, 3)},
      {"breakdown", breakdown},
      {"memory", {{"peak", memory_json(r.peak_memory)}, {"fits", r.fits}, {"note", r.memory_note}}},
      {"stages", stages},
      {"energy", {{"step_kwh", round_to(rep.run.step_energy_kwh, 9)}, {"gpu_power_W", round_to(rep.run.gpu_power_w, 1)},
                  {"utilization", round_to(rep.run.utilization, 4)}}},
      {"symmetric", r.symmetric},
      {"symmetry_note", r.symmetry_note},
      {"simulation", {{"events", r.events}, {"collectives", r.collectives}}}};
  if (r.input.modelled) result["input"] = input_json(r.input);
  if (!rep.framework.empty()) result["framework"] = rep.framework;
  if (!r.kinds.empty()) {
    nlohmann::json kinds = nlohmann::json::array();
    for (const auto& k : r.kinds) {
      kinds.push_back({{"gpu", k.gpu}, {"gpus", k.gpus}, {"compute_s", round_to(k.compute_s, 6)}, {"end_s", round_to(k.end_s, 6)},
                       {"utilization", round_to(k.utilization, 4)}, {"mfu", round_to(k.mfu, 5)},
                       {"peak_tflops_per_gpu", round_to(k.peak_flops_per_gpu * 1e-12, 3)}});
    }
    result["gpu_kinds"] = kinds;
  }
  if (!r.fits) {
    nlohmann::json fixes = nlohmann::json::array();
    for (const auto& f : rep.memory_fixes) {
      fixes.push_back({{"change", f.change}, {"peak_GiB", round_to(f.peak_bytes / kGiB, 3)}, {"capacity_GiB", round_to(f.capacity_bytes / kGiB, 3)}});
    }
    result["verdict"] = {{"achievable", false}, {"reason", r.memory_note}, {"changes_that_fit", fixes}};
  } else {
    result["verdict"] = {{"achievable", true}};
  }
  result["notes"] = rep.notes;
  if (rep.budget.any() && !rep.run.achievable) {
    result["run"] = {{"steps", rep.run.steps}, {"achievable", false}, {"reason", "does not fit in GPU memory: " + r.memory_note}};
  } else if (rep.budget.any()) {
    const auto& run = rep.run;
    nlohmann::json j = {{"steps", run.steps}, {"achievable", true},
                        {"time_to_train_s", round_to(run.time_to_train_s, 3)},
                        {"time_to_train", human_duration(run.time_to_train_s)},
                        {"gpu_hours", round_to(run.gpu_hours, 3)},
                        {"energy_kwh", round_to(run.energy_kwh, 3)}};
    if (rep.has_prices) {
      j["cost"] = {{"total", round_to(run.cost, 2)}, {"gpu", round_to(run.gpu_cost, 2)}, {"electricity", round_to(run.energy_cost, 2)},
                   {"currency", rep.prices.currency}};
    }
    result["run"] = j;
  }
  return {{"config", rep.config}, {"result", result}};
}

}  // namespace dtsim::reports
