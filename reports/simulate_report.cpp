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
    case workloads::TimeKind::count: break;
  }
  return "?";
}

nlohmann::json memory_json(const workloads::MemoryBreakdown& m) {
  return {{"stage", m.stage},
          {"params_GiB", round_to(m.params / kGiB, 3)},
          {"grads_GiB", round_to(m.grads / kGiB, 3)},
          {"optimizer_GiB", round_to(m.optimizer / kGiB, 3)},
          {"activations_GiB", round_to(m.activations / kGiB, 3)},
          {"reserved_GiB", round_to(m.reserved / kGiB, 3)},
          {"fragmentation_GiB", round_to(m.fragmentation / kGiB, 3)},
          {"total_GiB", round_to(m.total / kGiB, 3)},
          {"capacity_GiB", round_to(m.capacity / kGiB, 3)},
          {"fits", m.fits}};
}

}  // namespace

std::string render_simulate(const SimulateReport& rep) {
  const workloads::StepResult& r = rep.result;
  std::string out;
  out += fmt::format("# dtsim simulate: {} on {}\n", rep.model, rep.cluster);
  out += fmt::format("# layout: {}; {} micro-batches per pipeline per step\n", r.layout, r.micro_batches);
  if (!r.symmetry_note.empty()) out += "# " + r.symmetry_note + "\n";
  out += "\n";
  out += fmt::format("{:<16} {:.4g} B parameters ({:.4g} B used per token)\n", "model", r.params * 1e-9, r.active_params * 1e-9);
  out += fmt::format("{:<16} {:.4f} s\n", "step time", r.step_time_s);
  if (r.tokens_per_s > 0) {
    out += fmt::format("{:<16} {:.2f} samples/s, {:.0f} tokens/s\n", "throughput", r.samples_per_s, r.tokens_per_s);
  } else {
    out += fmt::format("{:<16} {:.2f} samples/s\n", "throughput", r.samples_per_s);
  }
  out += fmt::format("{:<16} {:.1f} TFLOP/s of model FLOPs; MFU {:.1f}%, HFU {:.1f}% of the {:.0f} TFLOP/s {} peak\n", "per GPU",
                     r.tflops_per_gpu, 100 * r.mfu, 100 * r.hfu, r.peak_flops_per_gpu * 1e-12, rep.precision);
  out += fmt::format("{:<16} {:.4g} model, {:.4g} executed\n", "FLOPs per step", r.model_flops_per_step, r.hardware_flops_per_step);
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
  out += "\nmemory per GPU (GiB)\n";
  out += fmt::format("  {:>5} {:>8} {:>8} {:>9} {:>11} {:>8} {:>8} {:>8}  {}\n", "stage", "params", "grads", "optimizer", "activations",
                     "other", "total", "capacity", "fits");
  for (const auto& s : r.stages) {
    const auto& m = s.memory;
    out += fmt::format("  {:>5} {:>8.2f} {:>8.2f} {:>9.2f} {:>11.2f} {:>8.2f} {:>8.2f} {:>8.2f}  {}\n", s.stage, m.params / kGiB,
                       m.grads / kGiB, m.optimizer / kGiB, m.activations / kGiB, (m.reserved + m.fragmentation) / kGiB, m.total / kGiB,
                       m.capacity / kGiB, m.fits ? "yes" : "NO");
  }
  if (!r.fits) out += "\n" + r.memory_note + "\n";
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
    stages.push_back(st);
  }
  nlohmann::json result = {
      {"model", {{"name", rep.model}, {"params", r.params}, {"active_params", r.active_params}, {"flops_per_step", r.model_flops_per_step},
                 {"executed_flops_per_step", r.hardware_flops_per_step}, {"flops_convention", kFlopsConvention}}},
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
      {"symmetric", r.symmetric},
      {"symmetry_note", r.symmetry_note},
      {"simulation", {{"events", r.events}, {"collectives", r.collectives}}}};
  return {{"config", rep.config}, {"result", result}};
}

}  // namespace dtsim::reports
