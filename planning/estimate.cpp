#include "planning/estimate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "workloads/flows.hpp"
#include "workloads/program.hpp"
#include "workloads/strategies.hpp"

namespace dtsim::planning {

namespace {

using workloads::TimeKind;
constexpr std::size_t k(TimeKind t) { return static_cast<std::size_t>(t); }

std::string ranks_key(const std::vector<int>& r) {
  if (r.size() < 2) return fmt::format("{}", r.empty() ? -1 : r.front());
  const int stride = r[1] - r[0];
  bool ap = true;
  for (std::size_t i = 2; i < r.size() && ap; ++i) ap = r[i] - r[i - 1] == stride;
  if (ap) return fmt::format("{}+{}x{}", r.front(), stride, r.size());
  std::string s;
  for (int x : r) s += fmt::format("{},", x);
  return s;
}

int element_bytes(hw::DType d) { return d == hw::DType::fp32 || d == hw::DType::tf32 ? 4 : 2; }

}  // namespace

double pipeline_makespan(const std::vector<double>& stage_times, int micro_batches, int chunks) {
  if (stage_times.empty()) return 0;
  double sum = 0, mx = 0;
  for (double t : stage_times) {
    sum += t;
    mx = std::max(mx, t);
  }
  return micro_batches * mx + (sum - mx) / std::max(1, chunks);
}

StepEstimator::StepEstimator(const hw::Topology& topo, const workloads::ComputeParams& compute, const comm::CommParams& comm)
    : topo_(topo), router_(topo), planner_(topo, router_, comm), cm_(topo.node_template(0).spec().gpu, compute), comm_(comm) {}

double StepEstimator::collective_s(CollOp op, const std::vector<int>& ranks, double bytes) {
  if (ranks.size() < 2 || bytes <= 0) return 0;
  const auto b = static_cast<std::int64_t>(bytes);
  const std::string key = fmt::format("{}|{}|{}", static_cast<int>(op), ranks_key(ranks), b);
  const auto it = collectives_.find(key);
  if (it != collectives_.end()) return it->second;
  comm::CollectiveRequest req;
  req.op = op;
  req.size = Bytes(b);
  req.ranks = ranks;
  auto plan = planner_.plan(req);
  const double t = plan ? plan->estimate.seconds() : 0.0;
  collectives_.emplace(key, t);
  return t;
}

double StepEstimator::p2p_s(int from, int to, double bytes, Bandwidth cap) {
  const std::string key = fmt::format("p2p|{}|{}|{}|{}", from, to, static_cast<std::int64_t>(bytes), cap.bytes_per_s());
  const auto it = collectives_.find(key);
  if (it != collectives_.end()) return it->second;
  const hw::Path path = router_.route(from, to, static_cast<std::uint64_t>(from) * 7919 + static_cast<std::uint64_t>(to));
  double bw = router_.bottleneck(path).bytes_per_s();
  if (!cap.is_zero()) bw = std::min(bw, cap.bytes_per_s());
  const double t = router_.latency(path).seconds() + (bw > 0 ? bytes / bw : 0.0);
  collectives_.emplace(key, t);
  return t;
}

StepEstimator::PassTimes StepEstimator::pass_times(const workloads::LayerProgram& lp, const workloads::Layout& lay) {
  PassTimes out;
  out.params = static_cast<double>(lp.params + lp.expert_params);
  const workloads::Coords origin{0, 0, 0, 0};
  auto run = [&](const workloads::Pass& pass, double& time, double& exposed) {
    for (const workloads::Segment& seg : pass.segments) {
      double kt = 0;
      for (const workloads::Kernel& kn : seg.kernels) kt += cm_.kernel_time(kn).seconds();
      double ct = 0;
      TimeKind kind = TimeKind::tp;
      if (seg.comm) {
        std::vector<int> group;
        switch (seg.comm->group) {
          case workloads::CommGroup::tp: group = lay.group(workloads::Dim::tp, origin); kind = TimeKind::tp; break;
          case workloads::CommGroup::cp: group = lay.group(workloads::Dim::cp, origin); kind = TimeKind::cp; break;
          case workloads::CommGroup::ep: group = lay.ep_group(origin); kind = TimeKind::ep; break;
        }
        ct = collective_s(seg.comm->op, group, seg.comm->bytes.as_double());
      }
      const double shown = seg.comm && seg.comm_overlaps ? std::max(0.0, ct - kt) : ct;
      time += kt + shown;
      exposed += shown;
      out.comm_by_kind[k(kind)] += shown;
    }
  };
  run(lp.forward, out.fwd, out.fwd_comm);
  run(lp.recompute, out.bwd, out.bwd_comm);
  run(lp.backward, out.bwd, out.bwd_comm);
  return out;
}

const StepEstimator::Layers& StepEstimator::layers(const workloads::TransformerSpec& m, const workloads::StepInputs& in,
                                                   const workloads::Layout& lay) {
  // The same shape the simulator builds its programs from (workloads::program_shape), so that the
  // ranking and the simulation time the same kernels.
  const workloads::ProgramShape sh = workloads::program_shape(m, in.training, in.parallel, lay);
  const LayersKey key{m.name, sh, in.parallel.order};
  auto it = layers_.find(key);
  if (it != layers_.end()) return it->second;
  Layers L;
  L.emb = pass_times(workloads::transformer_embedding(m, sh), lay);
  L.block = pass_times(workloads::transformer_block(m, sh), lay);
  L.head = pass_times(workloads::transformer_head(m, sh), lay);
  return layers_.emplace(key, L).first->second;
}

Expected<StepEstimate> StepEstimator::estimate(const workloads::StepInputs& in, bool time) {
  auto mem = workloads::estimate_memory(topo_, in);
  if (!mem) return mem.error();
  StepEstimate out;
  out.memory = std::move(*mem);
  if (!time) return out;
  auto lay = workloads::Layout::make(in.parallel, topo_.gpus());
  if (!lay) return lay.error();
  const workloads::TrainingSpec& tr = in.training;
  const workloads::ParallelSpec& par = in.parallel;
  const int p = lay->pp();
  const int v = par.schedule == workloads::PipelineSchedule::interleaved_1f1b ? par.virtual_stages : 1;
  const int m = out.memory.micro_batches;
  const std::size_t stages = out.memory.stages.size();

  // Per stage and micro-batch: forward and backward time, and the exposed collectives in them.
  std::vector<double> fwd(stages, 0), bwd(stages, 0);
  std::vector<std::array<double, workloads::kTimeKinds>> comm(stages);
  std::vector<std::vector<std::pair<double, std::array<double, 2>>>> zero3_layers(stages);  // (params, {fwd, bwd}) per layer
  double act_bytes = 0;
  if (const auto* tm = std::get_if<workloads::TransformerSpec>(&in.model)) {
    const Layers& L = layers(*tm, in, *lay);
    for (std::size_t s = 0; s < stages; ++s) {
      const workloads::StageFootprint& f = out.memory.stages[s];
      auto add = [&](const PassTimes& pt, double count) {
        fwd[s] += count * pt.fwd;
        bwd[s] += count * pt.bwd;
        for (std::size_t i = 0; i < comm[s].size(); ++i) comm[s][i] += count * pt.comm_by_kind[i];
        if (par.zero >= 3) {
          for (int c = 0; c < static_cast<int>(count); ++c) zero3_layers[s].push_back({pt.params, {pt.fwd, pt.bwd}});
        }
      };
      add(L.block, f.layers);
      if (f.has_embedding) add(L.emb, 1);
      if (f.has_head) add(L.head, 1);
    }
    const std::int64_t seq = tr.seq_len > 0 ? tr.seq_len : tm->max_seq;
    act_bytes = static_cast<double>(tr.micro_batch * (seq / lay->cp()) * tm->hidden * element_bytes(tr.precision)) / lay->tp();
  } else {
    const auto& cnn = std::get<workloads::CnnSpec>(in.model);
    workloads::ProgramShape sh;
    sh.micro_batch = tr.micro_batch;
    sh.precision = tr.precision;
    sh.recompute = tr.recompute;
    for (const auto& lp : workloads::cnn_program(cnn, sh)) {
      const PassTimes pt = pass_times(lp, *lay);
      fwd[0] += pt.fwd;
      bwd[0] += pt.bwd;
      if (par.zero >= 3) zero3_layers[0].push_back({pt.params, {pt.fwd, pt.bwd}});
    }
  }

  std::vector<double> per_mb(stages);
  for (std::size_t s = 0; s < stages; ++s) per_mb[s] = fwd[s] + bwd[s];
  const double makespan = pipeline_makespan(per_mb, m, v);
  double pp_s = 0;
  if (p > 1) {
    const int a = lay->rank({0, 0, 0, 0}), b = lay->rank({0, 0, 0, 1});
    const Bytes act(static_cast<std::int64_t>(act_bytes));
    pp_s = 2.0 * (p - 1) * p2p_s(a, b, act_bytes, workloads::pipeline_send_cap(topo_, *lay, comm_, par.overlap_p2p, a, b, act));
  }

  // Data parallelism and the optimizer, per stage.
  const double grad_bytes = hw::dtype_bytes(tr.grad_dtype);
  const bool mixed = tr.precision != hw::DType::fp32 && tr.precision != hw::DType::tf32;
  const double param_bytes = mixed ? 2.0 : 4.0;
  const int dp = lay->grad_dp();  // gradients reduced, optimizer sharded, over dp x cp
  std::vector<double> dp_s(stages, 0), opt_s(stages, 0);
  const workloads::ParamGatherStart gather_start = workloads::param_gather_start(par);
  const bool gathers_overlap = workloads::overlaps_param_gather(in, *lay);
  double fill = 0;  // the first chunk's forward passes of the stages before s
  for (std::size_t s = 0; s < stages; ++s) {
    if (s > 0) fill += fwd[s - 1] / v;
    const workloads::StageFootprint& f = out.memory.stages[s];
    const workloads::Coords first{0, 0, 0, static_cast<int>(s)};
    const std::vector<int> group = lay->grad_group(first);
    // Concurrent data-parallel groups of this stage that share the first group's node (and its NICs).
    double share = 1;
    if (dp > 1) {
      const int node = topo_.node_of(group.front());
      const auto on_node = [&](int r) { return topo_.node_of(r) == node; };
      const auto in_group = static_cast<double>(std::count_if(group.begin(), group.end(), on_node));
      if (in_group < static_cast<double>(group.size())) {
        int lo = group.front(), hi = group.front();
        while (lo > 0 && on_node(lo - 1)) --lo;
        while (hi + 1 < topo_.gpus() && on_node(hi + 1)) ++hi;
        int of_stage = 0;
        for (int r = lo; r <= hi; ++r) of_stage += lay->coords(r).pp == static_cast<int>(s) ? 1 : 0;
        share = std::max(1.0, of_stage / in_group);
      }
    }
    if (dp > 1) {
      const CollOp op = par.zero >= 1 ? CollOp::reducescatter : CollOp::allreduce;
      double t = collective_s(op, group, f.dense_params * grad_bytes) * share;
      if (f.expert_params > 0 && lay->expert_grad_dp() > 1) t += collective_s(op, lay->expert_grad_group(first), f.expert_params * grad_bytes) * share;
      const double bucket = par.bucket.count() > 0 ? par.bucket.as_double() : std::max(40e6, 1e6 * dp) * grad_bytes;
      // ZeRO-3 with no bucket given: one reduce-scatter per layer (FSDP's units, strategies.cpp).
      const double buckets = par.zero >= 3 && par.bucket.count() <= 0
                                 ? std::max(1.0, static_cast<double>(f.layers))
                                 : std::max(1.0, std::ceil((f.dense_params + f.expert_params) * grad_bytes / bucket));
      const bool overlap = par.dp_impl == workloads::DpImpl::ddp || par.dp_impl == workloads::DpImpl::horovod;
      dp_s[s] = overlap ? std::max(t / buckets, t - bwd[s]) : t;
      // ZeRO-3 on the data-parallel group's one stream (below): each layer's reduce-scatter runs
      // between the backward pass's gathers, every micro-batch; only the last one is left after it.
      if (par.zero >= 3 && !par.separate_gather_group && par.dp_impl == workloads::DpImpl::ddp && par.bucket.count() <= 0) dp_s[s] = t / buckets;
      if (par.zero >= 1 && par.zero < 3) {
        // After the optimizer step; with overlap_param_gather under the next first forward pass,
        // which hides all but a bucket's worth (docs/model.md). A rough bound, stage by stage: the
        // simulation also passes a first-use wait down the pipeline (1F1B), and Megatron buckets
        // only the first stage's first chunk. A later stage's one bucket, dispatched as the step
        // starts (param_gather_start step or aligned), runs while its first activation comes
        // through the stages before it.
        const double g = collective_s(CollOp::allgather, group, f.dense_params * param_bytes) * share;
        const double gather_buckets = s == 0 ? std::max(1.0, std::ceil(f.dense_params * grad_bytes / bucket)) : 1.0;
        if (!gathers_overlap) {
          dp_s[s] += g;
        } else if (s > 0 && gather_start != workloads::ParamGatherStart::first_use) {
          dp_s[s] += std::max(0.0, g - fill);
        } else {
          dp_s[s] += std::max(g / gather_buckets, g - fwd[s]);
        }
      }
      if (par.zero >= 3) {
        // One stream for the gathers and the reduce-scatters (unless separate_gather_group): in
        // the backward pass a layer's compute hides the next gather and its own reduce-scatter
        // together, as FSDP issues them in that order to one process group (docs/model.md).
        const bool shared = !par.separate_gather_group && par.bucket.count() <= 0 && par.dp_impl == workloads::DpImpl::ddp;
        for (const auto& [params, times] : zero3_layers[s]) {
          const double g = collective_s(CollOp::allgather, group, params * param_bytes) * share;
          const double r = shared ? collective_s(CollOp::reducescatter, group, params * grad_bytes) * share : 0.0;
          dp_s[s] += m * (std::max(0.0, g - times[0]) + std::max(0.0, g + r - times[1]));
        }
      }
    }
    const double shard = par.zero >= 1 ? static_cast<double>(dp) : 1.0;
    const double expert_shard = par.zero >= 1 ? static_cast<double>(lay->expert_grad_dp()) : 1.0;
    opt_s[s] = (cm_.kernel_time(workloads::optimizer_update(in.training, f.dense_params / shard + f.expert_params / expert_shard)) +
                cm_.kernel_time(workloads::gradient_zeroing(in.training, f.dense_params + f.expert_params)))
                   .seconds();
  }

  std::size_t critical = 0;
  double step = 0;
  out.stage_time_s.resize(stages);
  for (std::size_t s = 0; s < stages; ++s) {
    auto& t = out.stage_time_s[s];
    double exposed = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = m * comm[s][i];
      exposed += t[i];
    }
    t[k(TimeKind::compute)] = m * per_mb[s] - exposed;
    t[k(TimeKind::bubble)] = std::max(0.0, makespan - m * per_mb[s]);
    t[k(TimeKind::pp)] = pp_s;
    t[k(TimeKind::dp)] = dp_s[s];
    t[k(TimeKind::optimizer)] = opt_s[s];
    const double end = makespan + pp_s + dp_s[s] + opt_s[s];
    if (end > step) {
      step = end;
      critical = s;
    }
  }
  out.step_time_s = step;
  out.breakdown_s = out.stage_time_s[critical];
  return out;
}

}  // namespace dtsim::planning
