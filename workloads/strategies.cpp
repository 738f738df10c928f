#include "workloads/strategies.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "workloads/framework_program.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads {

namespace {
using I = std::int64_t;

void add_transfer(StageWriter& w, Transfer t) {
  w.g.transfers.push_back(std::move(t));
  w.push(OpKind::transfer, static_cast<int>(w.g.transfers.size() - 1));
}
}  // namespace

Status check_dp_impl(const ParallelSpec& par, const Layout& lay, const hw::Topology& topo) {
  const DpImpl d = par.dp_impl;
  if (d != DpImpl::mirrored && d != DpImpl::dataparallel && d != DpImpl::parameter_server) return {};
  const std::string name(to_string(d));
  if (lay.tp() != 1 || lay.pp() != 1 || lay.cp() != 1 || lay.ep() != 1) {
    return Error(fmt::format("dp_impl {} is data parallelism only: it needs tp = pp = cp = ep = 1", name), "parallel.dp_impl");
  }
  if (par.zero != 0) return Error(fmt::format("dp_impl {} does not shard optimizer state: zero must be 0", name), "parallel.zero");
  if ((d == DpImpl::mirrored || d == DpImpl::dataparallel) && topo.nodes() > 1) {
    return Error(fmt::format("dp_impl {} runs in one process on one node, but the cluster has {} nodes (use ddp or horovod across nodes)",
                             name, topo.nodes()),
                 "parallel.dp_impl");
  }
  if (d == DpImpl::parameter_server) {
    const int shards = par.parameter_server.shards;
    if (shards < 1) return Error("must be at least 1", "parallel.parameter_server.shards");
    int sockets = 0;
    for (int n = 0; n < topo.nodes(); ++n) sockets += topo.node_template(n).spec().cpus;
    if (shards > sockets) {
      return Error(fmt::format("{} shards, but the cluster's nodes have {} CPU sockets to host them (one shard per socket)", shards, sockets),
                   "parallel.parameter_server.shards");
    }
  }
  return {};
}

// Per forward call: the single process's host work, the batch copied to GPU 0 and scattered to the
// others, and the module replicated from GPU 0 (its fp32 parameters, as autocast keeps them).
void dataparallel_before_forward(StageWriter& w, const StepInputs& in, const Layout& lay, double input_bytes_per_sample, double params) {
  const int n = lay.dp();
  const double mb = static_cast<double>(in.training.micro_batch);
  const Time host = in.parallel.dataparallel.host_overhead_per_gpu;
  if (host > Time::zero()) add_transfer(w, Transfer{Transfer::Kind::host, 0, host * n, "host: replicate modules, launch per-GPU threads"});
  add_transfer(w, Transfer{Transfer::Kind::h2d, mb * n * input_bytes_per_sample, Time::zero(), "copy the batch to GPU 0"});
  if (n < 2) return;
  add_transfer(w, Transfer{Transfer::Kind::scatter, mb * input_bytes_per_sample, Time::zero(), "scatter inputs from GPU 0"});
  add_transfer(w, Transfer{Transfer::Kind::replicate, params * 4.0, Time::zero(), "replicate the model from GPU 0"});
}

void dataparallel_after_forward(StageWriter& w, const StepInputs& in, const Layout& lay, double output_bytes_per_sample) {
  if (lay.dp() < 2) return;
  const double b = static_cast<double>(in.training.micro_batch) * output_bytes_per_sample;
  add_transfer(w, Transfer{Transfer::Kind::gather, b, Time::zero(), "gather outputs on GPU 0"});
  add_transfer(w, Transfer{Transfer::Kind::scatter, b, Time::zero(), "scatter output gradients from GPU 0"});
}

void dataparallel_after_backward(StageWriter& w, const StepInputs& in, const Layout& lay, double params) {
  if (lay.dp() < 2) return;
  add_transfer(w, Transfer{Transfer::Kind::reduce, params * hw::dtype_bytes(in.training.grad_dtype), Time::zero(), "reduce gradients onto GPU 0"});
}

void zero3_gather(StageWriter& w, const StepInputs& in, const Layout& lay, double params) {
  if (in.parallel.zero >= 3 && lay.grad_dp() > 1 && params > 0) {
    w.g.gathers.push_back(params);
    w.push(OpKind::gather_wait, static_cast<int>(w.g.gathers.size() - 1));
  }
}

bool overlaps_param_gather(const StepInputs& in, const Layout& lay) {
  // Megatron-LM asserts --overlap-grad-reduce with it (arguments.py): dp_impl ddp here.
  return in.parallel.overlap_param_gather && (in.parallel.zero == 1 || in.parallel.zero == 2) && lay.grad_dp() > 1 &&
         in.parallel.dp_impl == DpImpl::ddp;
}

ParamGatherStart param_gather_start(const ParallelSpec& par) {
  const bool interleaved = par.schedule == PipelineSchedule::interleaved_1f1b;
  // Megatron-LM turns --align-param-gather off unless the schedule is interleaved (arguments.py),
  // so `aligned` runs as first-use there (noted, notes.cpp).
  if (par.param_gather_start == ParamGatherStart::automatic || (par.param_gather_start == ParamGatherStart::aligned && !interleaved)) {
    return interleaved ? ParamGatherStart::aligned : ParamGatherStart::first_use;
  }
  return par.param_gather_start;
}

std::vector<double> param_gather_buckets(const std::vector<double>& layer_params, double cap_params) {
  // megatron/core/distributed/param_and_grad_buffer.py fills buckets walking the parameters in
  // reverse and closes one once it holds at least bucket_size parameters, so the bucket holding the
  // chunk's first layers is the remainder; distrib_optimizer.py gathers them in forward order and
  // waits for one in the forward pre-hook of the first module that uses it.
  std::vector<double> starts(layer_params.size(), 0.0);
  double open = 0;
  for (std::size_t i = layer_params.size(); i-- > 0;) {
    open += std::max(0.0, layer_params[i]);
    if (open > 0 && (open >= cap_params || i == 0)) {
      starts[i] = open;
      open = 0;
    }
  }
  return starts;
}

void param_gather_wait(StageWriter& w, double bucket_params) {
  if (bucket_params <= 0) return;
  w.g.gathers.push_back(bucket_params);
  w.push(OpKind::gather_wait, static_cast<int>(w.g.gathers.size() - 1));
}

BucketPolicy bucket_policy(const StepInputs& in, const Layout& lay, bool transformer) {
  const ParallelSpec& par = in.parallel;
  // Gradient buckets: PyTorch DDP's 25 MB unless set; Megatron-Core's max(40M, 1M x dp) parameters
  // for model-parallel layouts.
  BucketPolicy p{par.bucket, false};
  // MirroredStrategy's NCCL all-reduce packs every gradient into one (num_packs = 1).
  if (par.dp_impl == DpImpl::mirrored) p.cap = Bytes(std::numeric_limits<I>::max() / 2);
  // Horovod has no buckets: each tensor (here, each layer's gradients) is handed to its
  // background loop as it becomes ready; fusion happens there (the executor's Horovod cycle).
  if (par.dp_impl == DpImpl::horovod) p.cap = Bytes(1);
  if (transformer && p.cap.count() <= 0) {
    // Megatron-Core's default when layouts are model-parallel: max(40M, 1M x dp x cp) parameters.
    p.megatron = true;
    const double params = std::max(40e6, 1e6 * lay.grad_dp());
    p.cap = Bytes(static_cast<I>(params * hw::dtype_bytes(in.training.grad_dtype)));
  }
  // --overlap-param-gather is Megatron-Core's: its buckets follow Megatron's rules whatever the cap.
  if (transformer && par.overlap_param_gather && par.dp_impl == DpImpl::ddp) p.megatron = true;
  // ZeRO-3 is FSDP's (or DeepSpeed stage 3's) data parallelism, not DDP's or Megatron-Core's: FSDP
  // reduce-scatters the gradient of each unit's FlatParameter when the unit's backward ends (its
  // post-backward hook; PyTorch's FullyShardedDataParallel docs and Zhao et al., "PyTorch FSDP",
  // VLDB 2023, section 3), the same units it all-gathers: here each layer's slot, as the gathers
  // (zero3_gather). An explicit parallel.bucket still buckets by size (DeepSpeed's
  // reduce_bucket_size).
  if (par.zero >= 3 && par.bucket.count() <= 0 && par.dp_impl != DpImpl::mirrored) {
    p.per_unit = true;
    p.megatron = false;
  }
  return p;
}

bool megatron_bucketed(const BucketPolicy& policy, int stage, int chunk) { return !policy.megatron || (stage == 0 && chunk == 0); }

// Buckets fill in the order gradients become final (reverse layer order, as PyTorch DDP and
// Megatron-Core).
void add_buckets(StageGraph& g, const StepInputs& in, const BucketPolicy& policy, int stage, const std::vector<int>& slot_chunk) {
  // PyTorch DDP's rule (torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size):
  // gradient tensors, in the order they become ready (the reverse of the forward order), are added
  // to the open bucket, and the bucket is closed as soon as it holds at least its limit: the
  // first bucket's limit is 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES), every later
  // one's parallel.bucket (bucket_cap_mb). A bucket can thus exceed the cap by one tensor, and a
  // tensor larger than the cap is a bucket of its own. A bucket is reduced once its last tensor's
  // layer has finished its backward pass (the tensors of a layer are taken to become ready
  // together, at the end of the layer's backward). MoE expert parameters travel with the dense
  // tensors of their layer as one tensor. Megatron-Core (megatron/core/distributed/
  // param_and_grad_buffer.py) walks the parameters in reverse too and closes a bucket once it
  // holds at least bucket_size parameters, with no small first bucket.
  const double gb = hw::dtype_bytes(in.training.grad_dtype);
  const double cap = policy.cap.as_double();
  // The small first bucket is PyTorch DDP's (ddp, and its no-overlap baseline); MirroredStrategy
  // and the parameter server bucket by the cap alone.
  const DpImpl impl = in.parallel.dp_impl;
  const bool pytorch = !policy.megatron && (impl == DpImpl::ddp || impl == DpImpl::no_overlap);
  const double first_cap = pytorch ? std::min(cap, static_cast<double>(Bytes::MiB(1).count())) : cap;
  auto& bs = g.buckets;
  const auto& slots = g.grad_slots;
  bs.clear();
  Bucket open;
  double filled = 0;
  bool has_open = false;
  // closes_at[i]: the last bucket that closes at slot i (or -1); buckets close in order.
  std::vector<int> closes_at(slots.size(), -1);
  auto close = [&](std::size_t slot) {
    bs.push_back(open);
    closes_at[slot] = static_cast<int>(bs.size() - 1);
    open = Bucket{};
    filled = 0;
    has_open = false;
  };
  auto chunk_of = [&](std::size_t i) { return i < slot_chunk.size() ? slot_chunk[i] : 0; };
  // (ZeRO-3 reduces every micro-batch's gradients on their own: its slots are not merged.)
  const bool per_chunk = policy.megatron && in.parallel.zero < 3;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const LayerSlot& slot = slots[i];
    // Megatron-Core keeps one buffer, and so its own buckets, per model chunk, and buckets only
    // the first stage's first chunk.
    const bool bucketed = !per_chunk || megatron_bucketed(policy, stage, chunk_of(i));
    std::vector<double> tensors;
    if (slot.tensors.empty()) {
      tensors.push_back(slot.params);
    } else {
      for (auto it = slot.tensors.rbegin(); it != slot.tensors.rend(); ++it) tensors.push_back(static_cast<double>(*it));
    }
    if (slot.expert_params > 0) tensors.push_back(-slot.expert_params);  // negative: expert parameters
    for (double t : tensors) {
      const double params = std::abs(t);
      if (t >= 0) open.params += params;
      else open.expert_params += params;
      filled += params * gb;
      has_open = true;
      if (bucketed && !policy.per_unit && filled >= (bs.empty() ? first_cap : cap)) close(i);
    }
    if (has_open && per_chunk && i + 1 < slots.size() && chunk_of(i + 1) != chunk_of(i)) close(i);
    // Horovod fuses tensors on its own cycle (parallel.fusion_buffer): each layer is handed over
    // as soon as it is ready; ZeRO-3 reduces each unit on its own.
    if (has_open && (impl == DpImpl::horovod || policy.per_unit)) close(i);
  }
  if (has_open && !slots.empty()) close(slots.size() - 1);
  g.slot_bucket = std::move(closes_at);
}

Time optimizer_time(const StageGraph& g, Time host_cost, Time gpu_lead, const StepInputs& in, const Layout& lay, const hw::GpuSpec& gpu) {
  // Parameter servers update the weights on their CPUs (the executor's parameter-server update).
  if (in.parallel.dp_impl == DpImpl::parameter_server) return Time::zero();
  // One fused, memory-bound update over this rank's (sharded) parameters: Adam reads and writes
  // the fp32 master weight and both moments, reads the gradient, writes the low-precision copy.
  // The distributed optimizer shards over dp x cp (see Layout::grad_dp).
  const double shard = in.parallel.zero >= 1 ? static_cast<double>(lay.grad_dp()) : 1.0;
  const double expert_shard = in.parallel.zero >= 1 ? static_cast<double>(lay.expert_grad_dp()) : 1.0;
  const double params = g.dense_params / shard + g.expert_params / expert_shard;
  const ComputeModel cm(gpu, in.compute);
  const double grads = g.dense_params + g.expert_params;
  if (in.training.framework == Framework::megatron) {
    return cm.kernel_time(optimizer_update(in.training, params)) + cm.kernel_time(gradient_zeroing(in.training, grads));
  }
  // PyTorch's optimizer over the parameter tensors (multi-tensor launches), each launch issued by
  // the host after the backward pass's kernels (no gradient zeroing: set_to_none).
  std::vector<std::int64_t> tensors;
  for (const LayerSlot& s : g.grad_slots) {
    if (s.repeat) continue;  // the same tensors, reduced for an earlier micro-batch
    if (s.tensors.empty()) tensors.push_back(static_cast<I>(s.params));
    tensors.insert(tensors.end(), s.tensors.begin(), s.tensors.end());
  }
  // ZeRO / FSDP: each rank updates its shard of every tensor.
  const I parts = static_cast<I>(shard);
  if (parts > 1) {
    for (I& t : tensors) t = (t + parts - 1) / parts;
  }
  Time update = Time::zero();
  Time lead = gpu_lead;
  for (const Kernel& k : framework_optimizer(in.training, tensors)) {
    const Time kt = cm.kernel_time(k);
    update += (host_cost > lead ? host_cost - lead : Time::zero()) + kt;
    lead = (lead > host_cost ? lead - host_cost : Time::zero()) + kt;
  }
  return update;
}

double tied_embedding_bytes(const StageGraph& g, const StepInputs& in, const Layout& lay) {
  const auto* tm = std::get_if<TransformerSpec>(&in.model);
  const bool tied = tm && tm->tied_embeddings && lay.pp() > 1 && (g.has_embedding != g.has_head);
  if (!tied) return 0;
  return static_cast<double>(tm->vocab * tm->hidden) / lay.tp() * hw::dtype_bytes(in.training.grad_dtype);
}

}  // namespace dtsim::workloads
