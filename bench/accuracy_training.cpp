// End-to-end training figures (docs/validation.md): Llama 3 405B (Meta) and ResNet-50 (NVIDIA).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bench/accuracy.hpp"
#include "config/simulate_loader.hpp"
#include "hw/topology.hpp"

namespace dtsim::accuracy {

namespace {

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }

Expected<workloads::StepResult> simulate(const std::string& path, const std::vector<std::string>& sets, const std::optional<std::string>& text) {
  config::LoadContext ctx;
  auto cfg = config::load_simulate_config(path, sets, ctx, text);
  if (!cfg) return Error(ctx.diagnostics.to_string());
  auto topo = hw::Topology::build(cfg->cluster);
  if (!topo) return topo.error();
  auto res = workloads::simulate_step(*topo, cfg->inputs);
  if (!res) return res.error();
  return *res;
}

// The defaults a training step's prediction rests on (all of them that came from data).
const std::vector<std::string> kStepConstants = {
    "compute.gemm.efficiency.bf16", "compute.gemm.efficiency.fp16", "compute.gemm.k_half", "compute.kernel_overhead",
    "compute.memory.efficiency",    "links.nvlink3.efficiency",     "links.nvlink4.efficiency"};

// Megatron-LM's own FLOP count per iteration, which includes the recomputed forward pass
// (Narayanan et al. 2021, section 5.1): 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)).
double megatron_flops(double batch, double seq, double layers, double hidden, double vocab) {
  return 96 * batch * seq * layers * hidden * hidden * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden));
}

// Megatron-LM's count since Megatron-Core (num_floating_point_operations, megatron/training/
// training.py), no recomputation, for GPT shapes (ffn 4h, no grouped queries):
// 72 B s l h^2 (1 + s / (6 h) + V / (12 l h)).
double megatron_core_flops(double batch, double seq, double layers, double hidden, double vocab) {
  return 72 * batch * seq * layers * hidden * hidden * (1 + seq / (6 * hidden) + vocab / (12 * layers * hidden));
}

// The rows of one dataset that give the model's shape (Megatron-LM, MosaicML): the published
// figure is Megatron's TFLOP/s (recomputation counted) or tokens/s; both are compared as step times.
Status shaped_rows(const config::Registry& reg, const std::string& dataset, const std::string& section, Results& out) {
  auto rows = read_csv(std::string(DTSIM_SOURCE_DIR) + "/data/published/training-throughput-published.csv");
  if (!rows) return rows.error();
  const std::string fit = fit_of(reg, dataset, kStepConstants);
  const bool tokens = section != "megatron" && section != "megatron-core";
  std::string md = fmt::format("Dataset `{}`: **{}**.\n\n", dataset, fit);
  md += fmt::format("| model | node | GPUs | TP | CP | PP | DP | ZeRO | batch | micro | published {} | dtsim | error | step s (published) | step s (dtsim) | compute | TP comm. | PP comm. | DP comm. | bubble |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                    tokens ? "tokens/s/GPU" : "TFLOP/s/GPU");
  for (const auto& r : *rows) {
    if (field(r, "system") != dataset) continue;
    const int gpus = std::stoi(field(r, "gpus"));
    const double batch = std::stod(field(r, "global_batch")), seq = std::stod(field(r, "seq_len"));
    const std::string convention = field(r, "flops_convention");
    const bool megatron_shape = convention == "megatron-96" || convention == "megatron-core";
    const long long vocab = field(r, "vocab").empty() ? (megatron_shape ? 51200 : 50368) : std::stoll(field(r, "vocab"));
    const std::string tied = field(r, "tied_embeddings").empty() ? std::string("true") : field(r, "tied_embeddings");
    // A preset where the row gives no shape; else Megatron's GPT (learned positions, biases,
    // vocabulary 51,200) or MPT (no biases, ALiBi: no position parameters, vocabulary 50,368).
    const std::string model =
        field(r, "hidden").empty()
            ? field(r, "model")
            : fmt::format("{{name: {}, kind: transformer, hidden: {}, layers: {}, heads: {}, ffn: {}, vocab: {}, max_seq: {}, gated_mlp: false, "
                          "bias: {}, tied_embeddings: {}, positions: {}, norm: layernorm, encoder: false}}",
                          field(r, "model"), field(r, "hidden"), field(r, "layers"), field(r, "heads"), 4 * std::stoll(field(r, "hidden")), vocab,
                          field(r, "seq_len"), megatron_shape ? "true" : "false", tied, megatron_shape ? "learned" : "rotary");
    const std::string yaml = fmt::format(
        "cluster: {{node: {}, nodes: {}, fabric: {{kind: fat-tree, nic: {}, nics_per_node: 8}}}}\n"
        "model: {}\n"
        "training: {{global_batch: {}, micro_batch: {}, seq_len: {}, precision: {}, grad_dtype: {}, recompute: {}, optimizer: adam{}{}{}}}\n"
        "parallel: {{tp: {}, cp: {}, pp: {}, dp: {}, schedule: {}, zero: {}, dp_impl: {}, sequence_parallel: {}{}{}{}{}{}{}{}}}\n",
        field(r, "node"), gpus / 8, field(r, "nic"), model, field(r, "global_batch"), field(r, "micro_batch"), field(r, "seq_len"), field(r, "precision"),
        field(r, "grad_dtype"), field(r, "recompute"), field(r, "attention").empty() ? std::string() : ", attention: " + field(r, "attention"),
        field(r, "cross_entropy").empty() ? std::string() : ", cross_entropy: " + field(r, "cross_entropy"),
        field(r, "fp8_recipe").empty() ? std::string() : ", fp8_recipe: " + field(r, "fp8_recipe"), field(r, "tp"), field(r, "cp"), field(r, "pp"), field(r, "dp"), field(r, "schedule"), field(r, "zero"), field(r, "dp_impl"),
        field(r, "sequence_parallel"), field(r, "virtual_stages").empty() ? std::string() : ", virtual_stages: " + field(r, "virtual_stages"),
        field(r, "bucket").empty() ? std::string() : ", bucket: " + field(r, "bucket"),
        field(r, "overlap_param_gather").empty() ? std::string() : ", overlap_param_gather: " + field(r, "overlap_param_gather"),
        field(r, "tp_overlap").empty() ? std::string() : ", tp_overlap: " + field(r, "tp_overlap"),
        field(r, "pipeline_split").empty() ? std::string() : ", pipeline_split: " + field(r, "pipeline_split"),
        field(r, "overlap_p2p").empty() ? std::string() : ", overlap_p2p: " + field(r, "overlap_p2p"),
        field(r, "param_gather_start").empty() ? std::string() : ", param_gather_start: " + field(r, "param_gather_start"));
    auto res = simulate(field(r, "model") + ".yaml", {}, yaml);
    if (!res) return res.error();
    double pub = 0, sim = 0, pub_step = 0;
    if (tokens) {
      pub = std::stod(field(r, "tokens_per_s")) / gpus;
      pub_step = batch * seq / (pub * gpus);
      sim = batch * seq / res->step_time_s / gpus;
    } else {
      const double layers = std::stod(field(r, "layers")), hidden = std::stod(field(r, "hidden"));
      const double flops = convention == "megatron-core" ? megatron_core_flops(batch, seq, layers, hidden, static_cast<double>(vocab))
                                                         : megatron_flops(batch, seq, layers, hidden, static_cast<double>(vocab));
      pub = std::stod(field(r, "tflops_per_gpu"));
      pub_step = flops / (gpus * pub * 1e12);
      sim = flops / (gpus * res->step_time_s * 1e12);
    }
    const auto& b = res->breakdown_s;
    auto t = [&](workloads::TimeKind k) { return b[static_cast<std::size_t>(k)]; };
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0f} | {:.0f} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
                      field(r, "model"), field(r, "node"), thousands(gpus), field(r, "tp"), field(r, "cp"), field(r, "pp"), field(r, "dp"), field(r, "zero"),
                      field(r, "global_batch"), field(r, "micro_batch"), pub, sim, pct(sim / pub - 1), pub_step, res->step_time_s,
                      t(workloads::TimeKind::compute), t(workloads::TimeKind::tp), t(workloads::TimeKind::pp), t(workloads::TimeKind::dp),
                      t(workloads::TimeKind::bubble));
    out.figures.push_back(Figure{dataset, fmt::format("{} on {} GPUs ({})", field(r, "model"), thousands(gpus), field(r, "node")), pub, sim, fit});
  }
  out.sections.push_back(Section{section, md});
  return {};
}

}  // namespace

Status training(const config::Registry& reg, Results& out) {
  {
    const std::string dataset = "meta-llama3-405b";
    auto rows = read_csv(std::string(DTSIM_SOURCE_DIR) + "/data/published/training-throughput-published.csv");
    if (!rows) return rows.error();
    const std::string fit = fit_of(reg, dataset, kStepConstants);
    std::string md = fmt::format("Dataset `{}`: **{}**.\n\n", dataset, fit);
    md += "| GPUs | TP | CP | PP | DP | seq | published TFLOP/s/GPU | dtsim | error | fits in 80 GiB (dtsim) |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (const auto& r : *rows) {
      if (field(r, "system") != dataset) continue;
      const int gpus = std::stoi(field(r, "gpus"));
      const std::vector<std::string> sets = {"cluster.nodes=" + std::to_string(gpus / 8), "parallel.tp=" + field(r, "tp"),
                                             "parallel.cp=" + field(r, "cp"),           "parallel.pp=" + field(r, "pp"),
                                             "parallel.dp=" + field(r, "dp"),           "training.seq_len=" + field(r, "seq_len"),
                                             "training.global_batch=" + field(r, "global_batch")};
      auto res = simulate(std::string(DTSIM_SOURCE_DIR) + "/examples/simulate/llama3-405b-16k.yaml", sets, std::nullopt);
      if (!res) return res.error();
      const double pub = std::stod(field(r, "tflops_per_gpu"));
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.0f} | {:.1f} | {} | {} |\n", thousands(gpus), field(r, "tp"), field(r, "cp"),
                        field(r, "pp"), field(r, "dp"), thousands(std::stod(field(r, "seq_len"))), pub, res->tflops_per_gpu,
                        pct(res->tflops_per_gpu / pub - 1), res->fits ? "yes" : "no: " + res->memory_note);
      out.figures.push_back(Figure{dataset, fmt::format("{} GPUs, seq {}", thousands(gpus), field(r, "seq_len")), pub, res->tflops_per_gpu, fit});
    }
    out.sections.push_back(Section{"llama3", md});
  }
  if (auto st = shaped_rows(reg, "nvidia-megatron-selene", "megatron", out); !st) return st;
  if (auto st = shaped_rows(reg, "nvidia-megatron-core-h100", "megatron-core", out); !st) return st;
  if (auto st = shaped_rows(reg, "mosaicml-llm-foundry", "mosaicml", out); !st) return st;
  if (auto st = shaped_rows(reg, "nvidia-nemo-h100", "nemo", out); !st) return st;
  {
    const std::string dataset = "nvidia-resnet50-pytorch";
    auto rows = read_csv(std::string(DTSIM_SOURCE_DIR) + "/data/published/cnn-throughput-published.csv");
    if (!rows) return rows.error();
    std::vector<std::string> used = kStepConstants;
    used.insert(used.end(), {"compute.gemm.efficiency.tf32", "compute.gemm.efficiency.fp32", "links.nvlink2.efficiency"});
    const std::string fit = fit_of(reg, dataset, used);
    std::string md = fmt::format("Dataset `{}`: **{}**.\n\n", dataset, fit);
    md += "| system | GPUs | precision | batch/GPU | published images/s | dtsim | error |\n|---|---:|---|---:|---:|---:|---:|\n";
    for (const auto& r : *rows) {
      const int gpus = std::stoi(field(r, "gpus"));
      const int micro = std::stoi(field(r, "micro_batch"));
      const std::string yaml = "cluster: {node: " + field(r, "node") + ", nodes: 1, gpus_per_node: " + field(r, "gpus") +
                               "}\nmodel: resnet50\ntraining: {global_batch: " + std::to_string(gpus * micro) + ", micro_batch: " +
                               field(r, "micro_batch") + ", precision: " + field(r, "precision") + ", optimizer: sgd}\nparallel: {dp: " +
                               field(r, "gpus") + "}\n";
      auto res = simulate("resnet50.yaml", {}, yaml);
      if (!res) return res.error();
      const double pub = std::stod(field(r, "images_per_s"));
      const std::string prec = field(r, "precision") == "fp16" ? "fp16 (AMP)" : field(r, "precision");
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", field(r, "system"), gpus, prec, micro, thousands(pub), thousands(res->samples_per_s),
                        pct(res->samples_per_s / pub - 1));
      out.figures.push_back(Figure{dataset, fmt::format("{} {} GPU {}", field(r, "system"), gpus, field(r, "precision")), pub, res->samples_per_s, fit});
    }
    out.sections.push_back(Section{"resnet50", md});
  }
  return {};
}

void summary(Results& out) {
  // Per dataset and marking: points, median and worst |error|.
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& f : out.figures) {
    const std::pair<std::string, std::string> k{f.fit, f.dataset};
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  auto table = [&](const std::vector<std::string>& fits) {
    std::string md = "| dataset | figures | points | median abs. error | worst abs. error |\n|---|---|---:|---:|---:|\n";
    for (const std::string& want : fits) {
      for (const auto& [fit, ds] : keys) {
        if (fit != want) continue;
        std::vector<double> e;
        for (const auto& f : out.figures) {
          if (f.fit == fit && f.dataset == ds) e.push_back(std::fabs(f.error()));
        }
        md += fmt::format("| `{}` | {} | {} | {:.1f}% | {:.1f}% |\n", ds, fit, e.size(), 100 * median(e), 100 * *std::max_element(e.begin(), e.end()));
      }
    }
    return md;
  };
  // README.md quotes only figures with no in-sample constant in them.
  out.sections.push_back(Section{"summary-held-out", table({"held-out", "leave-one-source-out"})});
  out.sections.push_back(Section{"summary-accuracy", table({"held-out", "leave-one-source-out", "leave-one-source-out for k_half and kernel_overhead (efficiency in-sample)"})});
  out.sections.push_back(Section{"summary-fit", table({"in-sample"})});
}

}  // namespace dtsim::accuracy
