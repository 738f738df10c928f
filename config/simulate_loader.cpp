#include "config/simulate_loader.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/hardware.hpp"
#include "config/model_loader.hpp"
#include "config/presets.hpp"
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

// training.data: a dataset preset name, or a mapping (`dataset:` preset plus overrides, or a dataset
// described in full) with the loader's storage, decoding and copy settings.
void load_data(MapReader& tr, workloads::TrainingSpec& t, workloads::RunBudget& budget, LoadContext& ctx) {
  YAML::Node dn = tr.node("data");
  if (!dn.IsDefined() || dn.IsNull()) return;
  // (yaml-cpp nodes are handles: assigning to one that refers to `dn` would overwrite the tree.)
  YAML::Node shorthand(YAML::NodeType::Map);
  if (dn.IsScalar()) shorthand["dataset"] = dn.Scalar();
  MapReader d(dn.IsScalar() ? shorthand : dn, tr.field("data"), tr.file(), ctx);
  if (!d.ok()) return;
  workloads::InputPipeline ip;
  double samples = 0;
  // A preset provides the dataset's size and sample sizes; the mapping overrides them.
  if (auto name = d.string("dataset")) {
    ip.dataset = *name;
    if (const PresetFile* pf = find_preset("datasets", *name)) {
      auto pre = parse_yaml(std::string(pf->text), std::string(pf->path), ctx);
      if (pre) {
        MapReader pr(*pre, "", std::string(pf->path), ctx);
        pr.string("name");
        pr.string("description");
        if (auto v = pr.number("samples", true, 1, 1e15)) samples = *v;
        if (auto v = pr.bytes("sample_bytes", true)) ip.sample_bytes = *v;
        if (auto v = pr.bytes("input_bytes", true)) ip.input_bytes = *v;
        pr.finish();
      }
    } else if (!d.has("samples")) {
      const auto known = preset_names("datasets");
      const std::string hint = closest(*name, known);
      d.error("dataset", fmt::format("unknown dataset preset '{}'{}; describe it with samples, sample_bytes and input_bytes", *name,
                                     hint.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", hint)));
    }
  }
  if (auto v = d.number("samples", false, 1, 1e15)) samples = *v;
  if (auto v = d.bytes("sample_bytes")) ip.sample_bytes = *v;
  if (auto v = d.bytes("input_bytes")) ip.input_bytes = *v;
  if (samples <= 0 && !d.has("dataset")) d.error_here("a dataset needs its size: samples (or a dataset preset such as imagenet-1k)");
  budget.dataset_samples = samples;
  // The loader: all of its settings, or none (then only the dataset's size is used, for epochs).
  const bool any_loader = d.has("storage") || d.has("read_bandwidth") || d.has("decoder") || d.has("decode_rate") || d.has("cores_per_gpu");
  if (auto v = d.string("storage")) {
    ip.storage_name = *v;
    if (*v == "local-nvme" || *v == "local") ip.storage = workloads::InputPipeline::Storage::local;
    else if (*v == "nfs" || *v == "object-store" || *v == "shared") ip.storage = workloads::InputPipeline::Storage::shared;
    else d.error("storage", fmt::format("unknown storage '{}' (local-nvme: per node; nfs, object-store: shared by all nodes)", *v));
  }
  if (auto v = d.bandwidth("read_bandwidth", any_loader)) ip.read_bandwidth = *v;
  if (auto v = d.string("decoder")) {
    if (*v == "cpu") ip.decoder = workloads::InputPipeline::Decoder::cpu;
    else if (*v == "gpu") ip.decoder = workloads::InputPipeline::Decoder::gpu;
    else d.error("decoder", fmt::format("unknown decoder '{}' (cpu, gpu)", *v));
  }
  if (auto v = d.number("decode_rate", any_loader, 1e-6, 1e12)) ip.decode_rate = *v;
  const bool cpu = ip.decoder == workloads::InputPipeline::Decoder::cpu;
  if (auto v = d.integer("cores_per_gpu", any_loader && cpu, 1, 100000)) ip.cores_per_gpu = static_cast<int>(*v);
  d.finish();
  if (any_loader) {
    if (ip.input_bytes.count() <= 0) d.error("input_bytes", "the loader needs the size of one sample as copied to the GPU");
    if (ip.sample_bytes.count() <= 0) d.error("sample_bytes", "the loader needs the stored size of one sample");
    ip.samples = samples;
    t.data = ip;
  }
}

void load_budget(MapReader& tr, workloads::RunBudget& b) {
  if (auto v = tr.number("tokens", false, 1, 1e18)) b.tokens = *v;
  if (auto v = tr.number("samples", false, 1, 1e18)) b.samples = *v;
  if (auto v = tr.number("epochs", false, 1e-6, 1e9)) b.epochs = *v;
  if (auto v = tr.time("epoch_overhead")) b.per_epoch_overhead = *v;
  const int given = (b.tokens > 0 ? 1 : 0) + (b.samples > 0 ? 1 : 0) + (b.epochs > 0 ? 1 : 0);
  if (given > 1) tr.error_here("give one of tokens, samples or epochs");
}

void load_energy(MapReader& root, const hw::ClusterSpec& cluster, workloads::PowerModel& pm) {
  // Defaults: the GPU's TDP at full load; 10% of it idle (an assumption: replace with your GPUs'
  // idle reading); node overhead not counted; PUE 1 (IT power only).
  const double tdp = cluster.groups.empty() ? 0.0 : cluster.groups.front().node.gpu.tdp_watts;
  pm.gpu_max_w = tdp;
  pm.gpu_idle_w = 0.1 * tdp;
  auto er = root.map("energy");
  if (!er) return;
  if (auto v = er->power("gpu_idle", 0, 1e4, "a GPU's idle power (0 W to 10 kW)")) pm.gpu_idle_w = *v;
  if (auto v = er->power("gpu_max", 1, 1e4, "a GPU's power (1 W to 10 kW)")) pm.gpu_max_w = *v;
  if (auto v = er->number("comm_active", false, 0, 1)) pm.comm_active = *v;
  if (auto v = er->power("node_overhead", 0, 1e6, "a node's power beyond its GPUs (0 W to 1 MW)")) pm.node_overhead_w = *v;
  if (auto v = er->number("pue", false, 1, 10)) pm.pue = *v;
  if (pm.gpu_idle_w > pm.gpu_max_w) er->error("gpu_idle", fmt::format("{} W is above gpu_max ({} W)", pm.gpu_idle_w, pm.gpu_max_w));
  er->finish();
}

void load_prices(MapReader& root, workloads::Prices& p, bool& given) {
  auto pr = root.map("prices");
  if (!pr) return;
  given = true;
  if (auto v = pr->number("gpu_hour", true, 0, 1e6)) p.gpu_hour = *v;
  if (auto v = pr->number("kwh", false, 0, 1e3)) p.kwh = *v;
  if (auto v = pr->string("currency")) p.currency = *v;
  pr->finish();
}

}  // namespace

Status apply_set(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) return Error(fmt::format("'{}' is not key=value (e.g. parallel.tp=4)", assignment), "--set");
  const std::string key = assignment.substr(0, eq);
  // An empty value would read as YAML null, which every field takes as "not given": the default
  // would apply silently. A user who typed `--set x=` meant something else.
  if (assignment.find_first_not_of(" \t", eq + 1) == std::string::npos) {
    return Error(fmt::format("'{}' has no value after '=' (e.g. {}=4); to keep the file's value, leave this --set out", assignment, key),
                 key);
  }
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    return Error(fmt::format("the value of '{}' is not valid YAML: {}", key, e.what()), key);
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
  if (root.IsDefined() && !root.IsNull() && !root.IsMap()) {
    return Error(fmt::format("the file's top level is not a mapping, so '{}' cannot be set in it", key), key);
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
      return Error(fmt::format("'{}' is not a mapping, so '{}' cannot be set inside it", parts[i], key), key);
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
  out.push_back({"memory.cuda_context", to_string(mp.cuda_context),
                 "pytorch-eager/torch-compile: device memory outside PyTorch's allocator, mostly the CUDA context with its "
                 "lazily loaded kernels (assumption: 0.3-0.6 GiB is typical on H100 with CUDA 12+ lazy loading)"});
  out.push_back({"memory.cublas_workspace", to_string(mp.cublas_workspace),
                 "pytorch-eager/torch-compile: cuBLAS workspace PyTorch allocates through its caching allocator, counted in "
                 "max_memory_allocated (PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:8 on Hopper = 8 x 4 MiB; "
                 "aten/src/ATen/cuda/CublasHandlePool.cpp)"});
  return out;
}

namespace {

TraceModel load_trace_model(MapReader& root, const std::string& path, LoadContext& ctx) {
  MapReader mr(root.node("model"), "model", path, ctx);
  TraceModel tm;
  if (auto v = mr.string("trace", true)) tm.file = resolve_path(*v, path);
  tm.where = location_of(root.node("model")["trace"], path);
  if (mr.has("traced_gpu")) {
    HardwareLoader hl(ctx);
    tm.traced_gpu = hl.gpu(mr, "traced_gpu");
  }
  if (auto v = mr.time("profiler_overhead_per_event")) tm.profiler_overhead_per_event = *v;
  if (mr.has("gradients_from")) {
    if (auto m = load_model(mr, "gradients_from", ctx)) {
      tm.gradients_from = workloads::model_name(*m);
      tm.gradient_params = workloads::parameter_count(*m);
    }
  }
  mr.finish();
  return tm;
}

}  // namespace

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
  // A cluster or model that failed to load has been reported: checks that need it are skipped,
  // so that one mistake gives one error, not others about a placeholder (fuzzing, issue 15).
  bool cluster_loaded = false;
  bool model_loaded = false;
  YAML::Node cn = root.node("cluster");
  if (!cn.IsDefined() || cn.IsNull()) {
    root.error("cluster", "is required (a cluster or node preset, a file, or {node: ..., nodes: N, fabric: {...}})");
  } else if (cn.IsScalar()) {
    if (auto c = load_cluster(ClusterRequest{resolve_path(cn.Scalar(), path), std::nullopt, std::nullopt}, ctx, location_of(cn, path))) {
      out.cluster = *c;
      cluster_loaded = true;
    }
  } else {
    MapReader cr(cn, "cluster", path, ctx);
    HardwareLoader hl(ctx);
    if (auto c = hl.cluster(cr)) {
      out.cluster = *c;
      cluster_loaded = true;
    }
  }

  if (YAML::Node mn = root.node("model"); mn.IsMap() && mn["trace"]) {
    out.trace = load_trace_model(root, path, ctx);
  } else if (auto m = load_model(root, "model", ctx)) {
    in.model = *m;
    model_loaded = true;
  }

  // Training.
  workloads::TrainingSpec& t = in.training;
  if (auto tr = root.map("training", !out.trace)) {
    if (auto v = tr->integer("global_batch", true, 1, 100'000'000)) t.global_batch = *v;
    if (auto v = tr->integer("micro_batch", false, 1, 1'000'000)) t.micro_batch = *v;
    if (auto v = tr->integer("seq_len", false, 1, 100'000'000)) {
      t.seq_len = *v;
      // A model with learned position embeddings has none beyond max_seq; rotary or ALiBi-style
      // models run longer sequences (quality is another matter), which is said once.
      if (const auto* tm = std::get_if<workloads::TransformerSpec>(&in.model); model_loaded && tm && t.seq_len > tm->max_seq) {
        if (tm->positions == workloads::Positions::learned) {
          tr->error("seq_len", fmt::format("{} is beyond the {} positions model '{}' has learned embeddings for: use seq_len <= {}, "
                                           "or a model with rotary positions",
                                           t.seq_len, tm->max_seq, tm->name, tm->max_seq));
        } else {
          ctx.notes.push_back(fmt::format("training.seq_len {} is beyond the {} tokens model '{}' was trained with (max_seq); "
                                          "its rotary positions run, but quality there needs long-context training",
                                          t.seq_len, tm->max_seq, tm->name));
        }
      }
    }
    if (auto v = dtype_field(*tr, "precision", hw::DType::bf16)) t.precision = *v;
    if (auto v = dtype_field(*tr, "grad_dtype", hw::DType::fp32)) t.grad_dtype = *v;
    if (auto v = enum_field(*tr, "recompute", workloads::Recompute::none, workloads::parse_recompute, "none, selective, full")) t.recompute = *v;
    if (auto v = enum_field(*tr, "optimizer", workloads::Optimizer::adam, workloads::parse_optimizer, "adam, sgd")) t.optimizer = *v;
    if (auto v = enum_field(*tr, "attention", workloads::Attention::flash, workloads::parse_attention, "flash, flash1, standard")) t.attention = *v;
    if (auto v = enum_field(*tr, "framework", workloads::Framework::megatron, workloads::parse_framework,
                            "megatron, pytorch-eager, torch-compile")) {
      t.framework = *v;
      // The PyTorch frameworks run under torch.autocast (bf16 or fp16) or in fp32: their kernels
      // and memory have no fp8 (Transformer Engine) or fp64 form.
      const bool autocast_dtype = t.precision == hw::DType::bf16 || t.precision == hw::DType::fp16 || t.precision == hw::DType::fp32 ||
                                  t.precision == hw::DType::tf32;
      if (t.framework != workloads::Framework::megatron && !autocast_dtype) {
        tr->error("framework", fmt::format("{} is modelled for precision bf16, fp16 (torch.autocast), fp32 or tf32, not {}; use "
                                           "framework: megatron for {}",
                                           workloads::to_string(t.framework), hw::to_string(t.precision), hw::to_string(t.precision)));
      }
    }
    if (t.attention == workloads::Attention::flash1 && t.framework != workloads::Framework::megatron) {
      ctx.notes.push_back(fmt::format("training.attention flash1 times the megatron program's fused attention kernel; {} runs "
                                      "scaled_dot_product_attention's kernels (compute.framework.sdpa_*), so it acts as flash there",
                                      workloads::to_string(t.framework)));
    }
    if (auto v = tr->number("dropout", false, 0.0, 0.99)) t.dropout = *v;
    if (auto v = tr->string("dropout_rng")) {
      if (*v == "hash") t.dropout_hash_rng = true;
      else if (*v != "philox") tr->error("dropout_rng", fmt::format("'{}' is not one of: philox, hash", *v));
    }
    if (auto v = tr->string("cross_entropy")) {
      if (*v == "unfused") t.cross_entropy_unfused = true;
      else if (*v != "fused") tr->error("cross_entropy", fmt::format("'{}' is not one of: fused, unfused", *v));
      if (t.framework != workloads::Framework::megatron) {
        ctx.notes.push_back(fmt::format("training.cross_entropy {} has no effect: it describes the megatron program's loss (the {} "
                                        "program runs PyTorch's own cross-entropy kernels)",
                                        *v, workloads::to_string(t.framework)));
      }
    }
    if (tr->has("fp8_recipe")) {
      if (auto v = enum_field(*tr, "fp8_recipe", workloads::Fp8Recipe::delayed, workloads::parse_fp8_recipe, "delayed, current")) {
        t.fp8_recipe = *v;
        if (t.precision != hw::DType::fp8) {
          ctx.notes.push_back(fmt::format("training.fp8_recipe {} has no effect: precision is {}, not fp8", workloads::to_string(*v),
                                          hw::to_string(t.precision)));
        }
      }
    }
    if (auto v = tr->string("head_layout")) {
      if (*v == "split") t.head_layout_split = true;
      else if (*v != "permute") tr->error("head_layout", fmt::format("'{}' is not one of: permute, split", *v));
      if (t.attention != workloads::Attention::standard || t.framework != workloads::Framework::megatron) {
        ctx.notes.push_back(fmt::format("training.head_layout {} has no effect: it describes standard attention in the megatron "
                                        "program (attention: standard, framework: megatron)", *v));
      }
    }
    if (auto v = tr->string("dropout_mask")) {
      if (*v == "regenerated") t.dropout_mask_regenerated = true;
      else if (*v != "stored") tr->error("dropout_mask", fmt::format("'{}' is not one of: stored, regenerated", *v));
    }
    load_data(*tr, t, out.budget, ctx);
    load_budget(*tr, out.budget);
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
    if (auto v = enum_field(*pr, "cp_comm", workloads::CpComm::p2p, workloads::parse_cp_comm, "p2p, allgather, a2a")) p.cp_comm = *v;
    if (auto v = enum_field(*pr, "schedule", workloads::PipelineSchedule::one_f_one_b, workloads::parse_pipeline_schedule,
                            "gpipe, 1f1b, interleaved-1f1b")) {
      p.schedule = *v;
    }
    if (auto v = pr->integer("virtual_stages", false, 1, 1'000)) p.virtual_stages = static_cast<int>(*v);
    if (auto v = enum_field(*pr, "pipeline_split", workloads::PipelineSplit::even, workloads::parse_pipeline_split,
                            "even, embedding-loss")) {
      p.split = *v;
    }
    if (auto v = pr->integer("zero", false, 0, 3)) p.zero = static_cast<int>(*v);
    if (auto v = pr->boolean("sequence_parallel")) p.sequence_parallel = *v;
    if (auto v = enum_field(*pr, "tp_overlap", workloads::TpOverlap::backward, workloads::parse_tp_overlap, "none, backward, userbuffers")) {
      p.tp_overlap = *v;
    }
    if (auto v = pr->boolean("overlap_param_gather")) p.overlap_param_gather = *v;
    auto start = enum_field(*pr, "param_gather_start", workloads::ParamGatherStart::automatic, workloads::parse_param_gather_start, "auto, step, first-use, aligned");
    if (start) p.param_gather_start = *start;
    if (auto v = pr->boolean("overlap_p2p")) p.overlap_p2p = *v;
    if (auto v = pr->boolean("separate_gather_group")) p.separate_gather_group = *v;
    if (auto v = enum_field(*pr, "dp_impl", workloads::DpImpl::ddp, workloads::parse_dp_impl,
                            "ddp, horovod, no-overlap, mirrored, dataparallel, parameter-server")) {
      p.dp_impl = *v;
    }
    if (auto dr = pr->map("dataparallel")) {
      if (auto v = dr->time("host_overhead_per_gpu")) p.dataparallel.host_overhead_per_gpu = *v;
      if (auto v = dr->string("transfer")) {
        if (*v == "nccl") p.dataparallel.nccl = true;
        else if (*v == "copies") p.dataparallel.nccl = false;
        else dr->error("transfer", fmt::format("unknown transfer '{}' (nccl, copies)", *v));
      }
      dr->finish();
    }
    if (auto sr = pr->map("parameter_server")) {
      if (auto v = sr->integer("shards", false, 1, 100000)) p.parameter_server.shards = static_cast<int>(*v);
      if (auto v = sr->bandwidth("update_bandwidth")) p.parameter_server.update_bandwidth = *v;
      sr->finish();
    }
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
  // PyTorch DDP's 25 MiB without model parallelism, unless the run is Megatron-Core's distributed
  // optimizer with its overlapped gather (then Megatron's bucket rule, strategies.cpp).
  const bool megatron_buckets = p.overlap_param_gather && std::holds_alternative<workloads::TransformerSpec>(in.model);
  // ZeRO-3 keeps 0: one reduce-scatter per gathered unit (a layer), as FSDP (strategies.cpp).
  if (p.bucket.count() <= 0 && p.tp == 1 && p.pp == 1 && p.cp == 1 && !megatron_buckets && p.zero < 3) p.bucket = Bytes::MiB(25);

  // Micro-batches per pipeline and step: each is simulated, so a huge count is refused up front
  // rather than simulated for minutes (found by the issue-15 mutation run: GPT-2 124M eager at
  // global_batch 8,000,000 and micro_batch 8, a million micro-batches, simulated for 15 s).
  if (!out.trace && cluster_loaded && t.micro_batch > 0 && t.global_batch > 0) {
    long long gpus = 0;
    for (const auto& g : out.cluster.groups) gpus += static_cast<long long>(g.count) * (g.gpus_per_node > 0 ? g.gpus_per_node : g.node.gpus);
    const long long model_parallel = static_cast<long long>(p.tp) * p.pp * p.cp;
    const long long dp = p.dp > 0 ? p.dp : std::max(1LL, gpus / std::max(1LL, model_parallel));
    const long long micro_batches = t.global_batch / (t.micro_batch * dp);
    if (micro_batches > kMaxMicroBatches) {
      const YAML::Node tn = root.node("training");
      ctx.diagnostics.error(location_of(tn.IsMap() && tn["global_batch"] ? tn["global_batch"] : tn, path), "training.global_batch",
                            fmt::format("{} micro-batches per step (global_batch {} / (micro_batch {} x dp {})) is beyond the {} a "
                                        "step may have; raise micro_batch",
                                        micro_batches, t.global_batch, t.micro_batch, dp, kMaxMicroBatches));
    }
  }

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
    // Named link parameters (e.g. the TCP efficiency and latency of an Ethernet type), as in a profile.
    HardwareProfile link_set;
    link_set.links = read_link_overrides(*sr, "links", ctx);
    if (!link_set.links.empty() && cluster_loaded) {
      const auto used = link_type_names(out.cluster);
      for (const auto& [name, o] : link_set.links) {
        if (std::find(used.begin(), used.end(), name) == used.end()) {
          sr->error("links", fmt::format("the cluster has no '{}' links (it uses: {})", name, fmt::join(used, ", ")));
        }
      }
      apply_profile(link_set, out.cluster);
    }
    if (auto params = sr->map("params")) {
      // Pairs copied out first: a lookup through the reader may add to the mapping being iterated.
      std::vector<std::pair<YAML::Node, YAML::Node>> pairs;
      for (const auto& kv : sr->node("params")) pairs.emplace_back(kv.first, kv.second);
      for (const auto& [key, value] : pairs) {
        if (!key.IsScalar()) continue;  // params->finish() reports it
        const std::string name = key.Scalar();
        params->node(name);
        if (!value.IsScalar()) {
          params->error(name, "expected a single value");
          continue;
        }
        if (auto st = set_model_param(in, name, value.Scalar()); !st) params->error(name, st.error().message);
      }
      params->finish();
    }
    sr->finish();
  }
  load_energy(root, out.cluster, out.power);
  load_prices(root, out.prices, out.has_prices);
  root.finish();
  if (ctx.diagnostics.size() != errors) return std::nullopt;

  // The resolved configuration, defaults included.
  nlohmann::json res;
  res["model"] = out.trace ? nlohmann::json{{"trace", out.trace->file}, {"gradients_from", out.trace->gradients_from}}
                           : nlohmann::json(workloads::model_name(in.model));
  res["training"] = {{"global_batch", t.global_batch},
                     {"micro_batch", t.micro_batch},
                     {"seq_len", t.seq_len},
                     {"precision", std::string(hw::to_string(t.precision))},
                     {"grad_dtype", std::string(hw::to_string(t.grad_dtype))},
                     {"recompute", std::string(workloads::to_string(t.recompute))},
                     {"optimizer", std::string(workloads::to_string(t.optimizer))},
                     {"attention", std::string(workloads::to_string(t.attention))},
                     {"framework", std::string(workloads::to_string(t.framework))},
                     {"dropout_mask", t.dropout_mask_regenerated ? "regenerated" : "stored"},
                     {"dropout_rng", t.dropout_hash_rng ? "hash" : "philox"},
                     {"head_layout", t.head_layout_split ? "split" : "permute"},
                     {"cross_entropy", t.cross_entropy_unfused ? "unfused" : "fused"}};
  if (t.precision == hw::DType::fp8) res["training"]["fp8_recipe"] = std::string(workloads::to_string(t.fp8_recipe));
  if (t.dropout) res["training"]["dropout"] = *t.dropout;
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
                     {"bucket", p.bucket.count() > 0 ? to_string(p.bucket)
                               : p.zero >= 3 ? std::string("ZeRO-3 default: one per layer (FSDP unit)")
                                             : std::string("Megatron-Core default: max(40M, 1M x dp) parameters")},
                     {"fusion_buffer", to_string(p.fusion_buffer)},
                     {"fusion_cycle", to_string(p.fusion_cycle)},
                     {"order", p.order},
                     {"dataparallel", {{"host_overhead_per_gpu", to_string(p.dataparallel.host_overhead_per_gpu)},
                                       {"transfer", p.dataparallel.nccl ? "nccl" : "copies"}}},
                     {"parameter_server", {{"shards", p.parameter_server.shards},
                                           {"update_bandwidth", to_string(p.parameter_server.update_bandwidth)}}}};
  if (p.cp > 1 || p.cp_comm != workloads::CpComm::p2p) res["parallel"]["cp_comm"] = std::string(workloads::to_string(p.cp_comm));
  if (p.overlap_param_gather) res["parallel"]["overlap_param_gather"] = true;
  if (p.overlap_p2p) res["parallel"]["overlap_p2p"] = true;
  if (p.separate_gather_group) res["parallel"]["separate_gather_group"] = true;
  if (p.param_gather_start != workloads::ParamGatherStart::automatic) {
    res["parallel"]["param_gather_start"] = std::string(workloads::to_string(p.param_gather_start));
  }
  if (p.tp > 1) res["parallel"]["tp_overlap"] = std::string(workloads::to_string(p.tp_overlap));
  if (p.split != workloads::PipelineSplit::even) res["parallel"]["pipeline_split"] = std::string(workloads::to_string(p.split));
  if (t.data) {
    const auto& d = *t.data;
    res["training"]["data"] = {{"dataset", d.dataset},
                               {"samples", d.samples},
                               {"sample_bytes", to_string(d.sample_bytes)},
                               {"input_bytes", to_string(d.input_bytes)},
                               {"storage", d.storage_name},
                               {"read_bandwidth", to_string(d.read_bandwidth)},
                               {"decoder", d.decoder == workloads::InputPipeline::Decoder::cpu ? "cpu" : "gpu"},
                               {"decode_rate", d.decode_rate},
                               {"cores_per_gpu", d.cores_per_gpu}};
  } else if (out.budget.dataset_samples > 0) {
    res["training"]["data"] = {{"samples", out.budget.dataset_samples}, {"loader", "not modelled"}};
  }
  const auto& b = out.budget;
  if (b.tokens > 0) res["training"]["tokens"] = b.tokens;
  if (b.samples > 0) res["training"]["samples"] = b.samples;
  if (b.epochs > 0) res["training"]["epochs"] = b.epochs;
  if (b.per_epoch_overhead > Time::zero()) res["training"]["epoch_overhead"] = to_string(b.per_epoch_overhead);
  const auto& pw = out.power;
  res["energy"] = {{"gpu_idle_W", pw.gpu_idle_w}, {"gpu_max_W", pw.gpu_max_w}, {"comm_active", pw.comm_active},
                   {"node_overhead_W", pw.node_overhead_w}, {"pue", pw.pue}};
  if (out.has_prices) {
    res["prices"] = {{"gpu_hour", out.prices.gpu_hour}, {"kwh", out.prices.kwh}, {"currency", out.prices.currency}};
  }
  nlohmann::json params;
  for (const auto& [name, value, help] : simulate_param_list()) params[name] = value;
  // The list shows defaults; overwrite with what this run uses.
  for (const auto& info : comm::comm_param_table()) params["comm." + info.name] = info.get(in.comm);
  for (const auto& info : workloads::compute_param_table()) params["compute." + info.name] = info.get(in.compute);
  params["memory.reserved"] = to_string(in.memory.reserved);
  params["memory.fragmentation"] = fmt::format("{:.3g}", in.memory.fragmentation);
  params["memory.cuda_context"] = to_string(in.memory.cuda_context);
  params["memory.cublas_workspace"] = to_string(in.memory.cublas_workspace);
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
  out.notes = ctx.notes;
  return out;
}

}  // namespace dtsim::config
