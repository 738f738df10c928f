#include "config/simulate_loader.hpp"

#include <charconv>

#include <fmt/format.h>

#include "config/hardware.hpp"
#include "config/model_loader.hpp"
#include "config/profile.hpp"

namespace dtsim::config {

namespace {

std::optional<hw::DType> dtype_field(MapReader& r, const std::string& key, hw::DType def) {
  auto s = r.string(key);
  if (!s) return def;
  auto d = hw::parse_dtype(*s);
  if (!d) {
    r.error(key, fmt::format("unknown type '{}' (fp32, tf32, bf16, fp16, fp8)", *s));
    return std::nullopt;
  }
  return *d;
}

template <class T, class Parse>
std::optional<T> enum_field(MapReader& r, const std::string& key, T def, Parse parse, const char* options) {
  auto s = r.string(key);
  if (!s) return def;
  auto v = parse(*s);
  if (!v) {
    r.error(key, fmt::format("unknown value '{}' ({})", *s, options));
    return std::nullopt;
  }
  return *v;
}

}  // namespace

Status apply_set(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) return Error(fmt::format("'{}' is not key=value (e.g. parallel.tp=4)", assignment), "--set");
  const std::string key = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return Error(fmt::format("the value of '{}' is not valid YAML: {}", key, e.what()), "--set " + key);
  }
  // Walk (and create) the mappings down to the last key. yaml-cpp nodes are handles: assigning
  // through them edits the tree.
  std::vector<std::string> parts;
  std::size_t start = 0;
  // Parameter names contain dots themselves: everything after simulation.params. is one key.
  const std::string params_prefix = "simulation.params.";
  const std::size_t stop = key.rfind(params_prefix, 0) == 0 ? params_prefix.size() : std::string::npos;
  while (true) {
    const auto d = key.find('.', start);
    if (d == std::string::npos || (stop != std::string::npos && start >= stop)) {
      parts.push_back(key.substr(start));
      break;
    }
    parts.push_back(key.substr(start, d - start));
    start = d + 1;
  }
  std::vector<YAML::Node> chain{root};
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node cur = chain.back();
    if (parts[i].empty()) return Error(fmt::format("'{}' has an empty key", key), "--set");
    YAML::Node next = cur[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = cur[parts[i]];
    } else if (!next.IsMap()) {
      return Error(fmt::format("'{}' is not a mapping, so '{}' cannot be set inside it", parts[i], key), "--set " + key);
    }
    chain.push_back(next);
  }
  YAML::Node last = chain.back();
  last[parts.back()] = value;
  return {};
}

std::vector<std::array<std::string, 3>> simulate_param_list() {
  std::vector<std::array<std::string, 3>> out;
  const comm::CommParams cp = comm::CommParams::nccl_defaults();
  for (const auto& p : comm::comm_param_table()) out.push_back({"comm." + p.name, p.get(cp), p.help + " (" + p.source + ")"});
  const workloads::ComputeParams wp;
  for (const auto& p : workloads::compute_param_table()) out.push_back({"compute." + p.name, p.get(wp), p.help + " (" + p.source + ")"});
  const workloads::MemoryParams mp;
  out.push_back({"memory.reserved", to_string(mp.reserved),
                 "framework allowance per GPU: CUDA context, library workspaces, NCCL buffers (assumption)"});
  out.push_back({"memory.fragmentation", fmt::format("{:.3g}", mp.fragmentation), "allocator slack as a fraction of the tensors (assumption)"});
  return out;
}

std::optional<SimulateConfig> load_simulate_config(const std::string& path, const std::vector<std::string>& sets, LoadContext& ctx,
                                                   const std::optional<std::string>& yaml_text, const HardwareProfile* profile) {
  auto doc = yaml_text ? parse_yaml(*yaml_text, path, ctx) : load_yaml_file(path, ctx);
  if (!doc) return std::nullopt;
  const std::size_t errors = ctx.diagnostics.size();
  for (const auto& s : sets) {
    if (auto st = apply_set(*doc, s); !st) ctx.diagnostics.error(Location{"--set", 0, 0}, st.error().field, st.error().message);
  }
  if (ctx.diagnostics.size() != errors) return std::nullopt;

  SimulateConfig out;
  workloads::StepInputs& in = out.inputs;
  MapReader root(*doc, "", path, ctx);

  // Cluster: a preset or file name, or a mapping.
  YAML::Node cn = root.node("cluster");
  if (!cn.IsDefined() || cn.IsNull()) {
    root.error("cluster", "is required (a cluster or node preset, a file, or {node: ..., nodes: N, fabric: {...}})");
  } else if (cn.IsScalar()) {
    if (auto c = load_cluster(ClusterRequest{resolve_path(cn.Scalar(), path), std::nullopt, std::nullopt}, ctx)) out.cluster = *c;
  } else {
    MapReader cr(cn, "cluster", path, ctx);
    HardwareLoader hl(ctx);
    if (auto c = hl.cluster(cr)) out.cluster = *c;
  }

  if (auto m = load_model(root, "model", ctx)) in.model = *m;

  // Training.
  workloads::TrainingSpec& t = in.training;
  if (auto tr = root.map("training", true)) {
    if (auto v = tr->integer("global_batch", true, 1, 100'000'000)) t.global_batch = *v;
    if (auto v = tr->integer("micro_batch", false, 1, 1'000'000)) t.micro_batch = *v;
    if (auto v = tr->integer("seq_len", false, 1, 100'000'000)) t.seq_len = *v;
    if (auto v = dtype_field(*tr, "precision", hw::DType::bf16)) t.precision = *v;
    if (auto v = dtype_field(*tr, "grad_dtype", hw::DType::fp32)) t.grad_dtype = *v;
    if (auto v = enum_field(*tr, "recompute", workloads::Recompute::none, workloads::parse_recompute, "none, selective, full")) t.recompute = *v;
    if (auto v = enum_field(*tr, "optimizer", workloads::Optimizer::adam, workloads::parse_optimizer, "adam, sgd")) t.optimizer = *v;
    if (auto v = enum_field(*tr, "attention", workloads::Attention::flash, workloads::parse_attention, "flash, standard")) t.attention = *v;
    tr->finish();
  }
  if (const auto* tm = std::get_if<workloads::TransformerSpec>(&in.model); tm && t.seq_len == 0) t.seq_len = tm->max_seq;

  // Parallel layout.
  workloads::ParallelSpec& p = in.parallel;
  p.bucket = Bytes(0);  // resolved by the engine unless given
  if (auto pr = root.map("parallel")) {
    if (auto v = pr->integer("tp", false, 1, 1'000'000)) p.tp = static_cast<int>(*v);
    if (auto v = pr->integer("pp", false, 1, 1'000'000)) p.pp = static_cast<int>(*v);
    if (auto v = pr->integer("dp", false, 1, 10'000'000)) p.dp = static_cast<int>(*v);
    if (auto v = pr->integer("cp", false, 1, 1'000'000)) p.cp = static_cast<int>(*v);
    if (auto v = pr->integer("ep", false, 1, 1'000'000)) p.ep = static_cast<int>(*v);
    if (auto v = enum_field(*pr, "schedule", workloads::PipelineSchedule::one_f_one_b, workloads::parse_pipeline_schedule,
                            "gpipe, 1f1b, interleaved-1f1b")) {
      p.schedule = *v;
    }
    if (auto v = pr->integer("virtual_stages", false, 1, 1'000)) p.virtual_stages = static_cast<int>(*v);
    if (auto v = pr->integer("zero", false, 0, 3)) p.zero = static_cast<int>(*v);
    if (auto v = pr->boolean("sequence_parallel")) p.sequence_parallel = *v;
    if (auto v = enum_field(*pr, "dp_impl", workloads::DpImpl::ddp, workloads::parse_dp_impl, "ddp, horovod, no-overlap")) p.dp_impl = *v;
    if (auto v = pr->bytes("bucket")) {
      if (v->count() <= 0) pr->error("bucket", "must be positive");
      p.bucket = *v;
    }
    if (auto v = pr->bytes("fusion_buffer")) {
      if (v->count() <= 0) pr->error("fusion_buffer", "must be positive");
      p.fusion_buffer = *v;
    }
    if (auto v = pr->time("fusion_cycle")) {
      if (*v <= Time::zero()) pr->error("fusion_cycle", "must be positive");
      p.fusion_cycle = *v;
    }
    if (auto v = pr->string("order")) p.order = *v;
    pr->finish();
  }
  if (p.schedule == workloads::PipelineSchedule::interleaved_1f1b && p.virtual_stages == 1) {
    root.error("parallel", "schedule interleaved-1f1b needs virtual_stages >= 2");
  }
  if (p.bucket.count() <= 0 && p.tp == 1 && p.pp == 1 && p.cp == 1) p.bucket = Bytes(25'000'000);  // PyTorch DDP

  // A calibrated profile first; the file's own parameters and --set override it.
  if (profile != nullptr) {
    apply_profile(*profile, out.cluster);
    if (auto st = apply_profile(*profile, in); !st) ctx.diagnostics.error(Location{profile->path, 0, 0}, st.error().field, st.error().message);
  }
  // Simulation settings and parameter overrides.
  if (auto sr = root.map("simulation")) {
    if (auto v = sr->string("sharing")) {
      if (!make_sharing_model(*v)) sr->error("sharing", fmt::format("unknown sharing model '{}' (max-min, constant)", *v));
      in.sharing = *v;
    }
    if (auto v = sr->boolean("symmetric")) in.symmetric = *v;
    if (auto v = sr->boolean("free_communication")) in.free_communication = *v;
    if (auto params = sr->map("params")) {
      YAML::Node pn = sr->node("params");
      for (auto it = pn.begin(); it != pn.end(); ++it) {
        const std::string name = it->first.as<std::string>("");
        params->node(name);
        if (!it->second.IsScalar()) {
          params->error(name, "expected a single value");
          continue;
        }
        if (auto st = set_model_param(in, name, it->second.Scalar()); !st) params->error(name, st.error().message);
      }
      params->finish();
    }
    sr->finish();
  }
  root.finish();
  if (ctx.diagnostics.size() != errors) return std::nullopt;

  // The resolved configuration, defaults included.
  nlohmann::json res;
  res["model"] = workloads::model_name(in.model);
  res["training"] = {{"global_batch", t.global_batch},
                     {"micro_batch", t.micro_batch},
                     {"seq_len", t.seq_len},
                     {"precision", std::string(hw::to_string(t.precision))},
                     {"grad_dtype", std::string(hw::to_string(t.grad_dtype))},
                     {"recompute", std::string(workloads::to_string(t.recompute))},
                     {"optimizer", std::string(workloads::to_string(t.optimizer))},
                     {"attention", std::string(workloads::to_string(t.attention))}};
  res["parallel"] = {{"tp", p.tp},
                     {"pp", p.pp},
                     {"dp", p.dp},
                     {"cp", p.cp},
                     {"ep", p.ep},
                     {"schedule", std::string(workloads::to_string(p.schedule))},
                     {"virtual_stages", p.virtual_stages},
                     {"zero", p.zero},
                     {"sequence_parallel", p.sequence_parallel},
                     {"dp_impl", std::string(workloads::to_string(p.dp_impl))},
                     {"bucket", p.bucket.count() > 0 ? to_string(p.bucket) : std::string("Megatron-Core default: max(40M, 1M x dp) parameters")},
                     {"fusion_buffer", to_string(p.fusion_buffer)},
                     {"fusion_cycle", to_string(p.fusion_cycle)},
                     {"order", p.order}};
  nlohmann::json params;
  for (const auto& [name, value, help] : simulate_param_list()) params[name] = value;
  // The list shows defaults; overwrite with what this run uses.
  for (const auto& info : comm::comm_param_table()) params["comm." + info.name] = info.get(in.comm);
  for (const auto& info : workloads::compute_param_table()) params["compute." + info.name] = info.get(in.compute);
  params["memory.reserved"] = to_string(in.memory.reserved);
  params["memory.fragmentation"] = fmt::format("{:.3g}", in.memory.fragmentation);
  res["simulation"] = {{"sharing", in.sharing}, {"symmetric", in.symmetric}, {"free_communication", in.free_communication}, {"params", params}};
  // Which parameters come from a calibrated profile (the rest are defaults or set by the file).
  nlohmann::json calibrated = nlohmann::json::array();
  if (profile != nullptr) {
    for (const auto& [name, value] : profile->params) calibrated.push_back(name);
    for (const auto& [name, o] : profile->links) calibrated.push_back("links." + name);
    res["hw_profile"] = {{"path", profile->path}, {"description", profile->description}, {"calibrated", calibrated}};
  } else {
    res["hw_profile"] = nullptr;
  }
  out.resolved = res;
  return out;
}

}  // namespace dtsim::config
