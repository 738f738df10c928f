#include "workloads/executor_engine.hpp"

#include <limits>

#include "workloads/strategies.hpp"

namespace dtsim::workloads::detail {

// Once every worker's gradients are in: each shard sums them and applies the update on its CPU,
// then every worker pulls the new fp32 weights of every shard.
void Engine::ps_update(Executor& e) {
  block(e, TimeKind::dp);
  join("ps-update", replicas_, [this, &e, start = sim_.now()] {
    record(e, TimelineEvent::Track::dp, start, "parameter-server update and pull", "shards sum gradients, update, workers pull weights");
    account(e);
    after_optimizer(e);
  }, [this, params = e.prog->dense_params](std::function<void()> all_done) {
    const ParameterServerSpec& ps = in_.parallel.parameter_server;
    const double read = static_cast<double>(lay_.dp()) * params / ps.shards * hw::dtype_bytes(in_.training.grad_dtype);
    const Time update = Time::from_seconds(read / ps.update_bandwidth.bytes_per_s());
    sim_.schedule_in(update, [this, params, all_done] { launch(flows_.ps_pull(params * 4.0), all_done); });
  });
}

// ZeRO-3 / FSDP: gathers a layer's parameter shards before it runs, on a stream of its own, at
// most one layer ahead of the layer being computed (FSDP's default forward/backward prefetch).
// With Megatron-Core's --overlap-param-gather the same stream gathers the distributed optimizer's
// buckets, the next one dispatched once the forward pass has waited for the one before
// (distrib_optimizer.py _finish_param_sync_helper).
int Engine::first_gathers_allowed(const StepInputs& in) {
  // ZeRO-3 / FSDP: the first layer's gather starts with the step.
  if (in.parallel.zero >= 3) return 0;
  switch (param_gather_start(in.parallel)) {
    // --align-param-gather (Megatron-Core 0.9 and later, on by default with the interleaved
    // schedule): every stage dispatches its model chunks' buckets when its schedule starts
    // (megatron/core/pipeline_parallel/schedules.py, "Synchronize params for first two model
    // chunks"; later chunks a few micro-batches ahead, here at once), and they run one after
    // another on the gather stream.
    case ParamGatherStart::aligned: return std::numeric_limits<int>::max();
    // Megatron-Core 0.8 and earlier: DistributedOptimizer.zero_grad, called by train_step before
    // the schedule runs, dispatches the first bucket on every stage (core_r0.8.0
    // optimizer/distrib_optimizer.py); each next one goes out once the forward pass has waited
    // for the one before (_finish_param_sync_helper).
    case ParamGatherStart::step: return 0;
    // Megatron-Core 0.9 and later without alignment (forced off without interleaving): a stage
    // dispatches its first bucket when its forward pass first needs it, and each next one once it
    // has waited for the one before (param_and_grad_buffer.py finish_param_sync).
    case ParamGatherStart::first_use:
    case ParamGatherStart::automatic: break;
  }
  return -1;
}

void Engine::allow_gathers(Executor& e, int last) {
  const std::int64_t n = static_cast<std::int64_t>(e.gather_issued.size());
  for (std::int64_t i = std::max<std::int64_t>(std::int64_t{e.gather_allowed} + 1, 0); i <= std::min<std::int64_t>(last, n - 1); ++i) {
    e.gather_issued[static_cast<std::size_t>(i)] = e.issued++;
  }
  e.gather_allowed = std::max(e.gather_allowed, last);
}

void Engine::queue_bucket(Executor& e, const Bucket& bk) {
  e.dp_ready.push_back(bk);
  e.dp_ready_issued.push_back(e.issued++);
}

// On a shared stream a collective starts when none is running and nothing issued before it waits.
bool Engine::dp_stream_turn(const Executor& e, bool gather) const {
  if (!shared_dp_stream_) return gather ? !e.gather_busy : !e.dp_busy;
  if (e.gather_busy || e.dp_busy) return false;
  const bool gather_ready = e.gather_next < static_cast<int>(e.gather_issued.size()) && e.gather_next <= e.gather_allowed;
  if (gather_ready && !e.dp_ready_issued.empty()) {
    const bool gather_first = e.gather_issued[static_cast<std::size_t>(e.gather_next)] < e.dp_ready_issued.front();
    return gather == gather_first;
  }
  return true;
}

void Engine::pump_dp_streams(Executor& e) {
  pump_gathers(e);
  pump_dp(e);
}

void Engine::pump_gathers(Executor& e) {
  const auto& gs = e.prog->gathers;
  if (e.gather_next >= static_cast<int>(gs.size()) || e.gather_next > e.gather_allowed || !dp_stream_turn(e, true)) return;
  const int idx = e.gather_next++;
  e.gather_busy = true;
  change_background(e, +1);
  const bool mixed = in_.training.precision != hw::DType::fp32 && in_.training.precision != hw::DType::tf32;
  const double bytes = gs[static_cast<std::size_t>(idx)] * (mixed ? 2.0 : 4.0);
  const int stage = e.stage;
  join(fmt::format("zg|{}|{}", stage, idx), replicas_, [this, &e, idx, bytes, start = sim_.now()] {
    record(e, TimelineEvent::Track::dp, start, "dp allgather (parameters)",
           fmt::format("{} per rank, {} {} ({})", to_string(Bytes(static_cast<I>(bytes))), in_.parallel.zero >= 3 ? "layer" : "bucket", idx,
                       in_.parallel.zero >= 3 ? "ZeRO-3 prefetch" : "overlapped with the forward pass"));
    e.gather_busy = false;
    change_background(e, -1);
    e.gathered[static_cast<std::size_t>(idx)] = 1;
    if (e.waiting && e.waiting_gather == idx) {
      e.waiting_gather = -1;
      resume(e);
    }
    pump_dp_streams(e);
  }, [this, stage, bytes](std::function<void()> all_done) {
    launch(flows_.dp_collective(stage, false, CollOp::allgather, Bytes(static_cast<I>(bytes))), all_done);
  });
}

void Engine::grads_ready(Executor& e, int slot) {
  const int last = e.prog->slot_bucket[static_cast<std::size_t>(slot)];
  for (; e.next_bucket <= last; ++e.next_bucket) bucket_ready(e, e.prog->buckets[static_cast<std::size_t>(e.next_bucket)]);
}

void Engine::bucket_ready(Executor& e, const Bucket& bk) {
  switch (in_.parallel.dp_impl) {
    case DpImpl::ddp:
    case DpImpl::parameter_server:  // pushed to the shards as buckets fill, like DDP's all-reduces
      queue_bucket(e, bk);
      pump_dp(e);
      break;
    case DpImpl::dataparallel:  // reduced onto GPU 0 after each backward call (a transfer)
      break;
    case DpImpl::no_overlap:
    case DpImpl::mirrored:
      queue_bucket(e, bk);  // reduced once the backward pass is over (finish_backward)
      break;
    case DpImpl::horovod:
      e.horovod_pending.push_back(bk);
      if (!e.horovod_tick) {
        e.horovod_tick = true;
        sim_.schedule_in(in_.parallel.fusion_cycle, [this, &e] { horovod_cycle(e); });
      }
      break;
  }
}

// Reduces ready buckets one after another, as on one NCCL stream.
void Engine::pump_dp(Executor& e) {
  if (e.dp_busy) return;
  const DpImpl impl = in_.parallel.dp_impl;
  if ((impl == DpImpl::no_overlap || impl == DpImpl::mirrored) && !e.backward_done) return;
  const bool ps = impl == DpImpl::parameter_server;
  if (lay_.grad_dp() < 2 && !ps) {  // one replica: nothing to reduce
    e.dp_ready.clear();
    e.dp_ready_issued.clear();
  }
  if (e.dp_ready.empty()) {
    maybe_end_dp(e);
    return;
  }
  if (!dp_stream_turn(e, false)) return;
  const Bucket bk = e.dp_ready.front();
  e.dp_ready.pop_front();
  e.dp_ready_issued.pop_front();
  e.dp_busy = true;
  change_background(e, +1);
  const int seq = e.dp_issued++;
  const char* opname = ps ? "push to parameter servers" : in_.parallel.zero >= 1 ? "dp reducescatter" : "dp allreduce";
  auto finished = [this, &e, start = sim_.now(), opname, bk, seq] {
    if (e.record) {
      const double gb = hw::dtype_bytes(in_.training.grad_dtype);
      record(e, TimelineEvent::Track::dp, start, fmt::format("{} bucket {}", opname, seq),
             fmt::format("{} of gradients{}", to_string(Bytes(static_cast<I>(bk.params * gb))),
                         bk.expert_params > 0 ? fmt::format(" + {} of expert gradients", to_string(Bytes(static_cast<I>(bk.expert_params * gb)))) : std::string()));
    }
    e.dp_busy = false;
    change_background(e, -1);
    pump_dp_streams(e);
  };
  const int stage = e.stage;
  join(fmt::format("dp|{}|{}", stage, seq), replicas_, finished, [this, stage, bk, ps](std::function<void()> all_done) {
    const CollOp op = in_.parallel.zero >= 1 ? CollOp::reducescatter : CollOp::allreduce;
    const double gb = hw::dtype_bytes(in_.training.grad_dtype);
    if (ps) {
      launch(flows_.ps_push(bk.params * gb), all_done);
      return;
    }
    std::vector<const Collective*> cs;
    if (bk.params > 0) {
      cs.push_back(&flows_.dp_collective(stage, false, op, Bytes(static_cast<I>(bk.params * gb))));
    }
    if (bk.expert_params > 0 && lay_.expert_grad_dp() > 1) {
      cs.push_back(&flows_.dp_collective(stage, true, op, Bytes(static_cast<I>(bk.expert_params * gb))));
    }
    if (cs.empty()) {
      sim_.schedule_in(Time::zero(), all_done);
      return;
    }
    auto left = std::make_shared<int>(static_cast<int>(cs.size()));
    for (const Collective* c : cs) {
      launch(*c, [left, all_done] {
        if (--*left == 0) all_done();
      });
    }
  });
}

// Horovod's background loop: each cycle it takes every gradient that became ready and packs it
// into fusion buffers of at most `fusion_buffer` bytes, then all-reduces them one after another;
// it repeats until no tensors are left (Horovod's tensor-fusion docs: "the cycle repeats until
// all tensors are reduced"), so one cycle can send many buffers.
void Engine::horovod_cycle(Executor& e) {
  e.horovod_tick = false;
  const double cap = in_.parallel.fusion_buffer.as_double() / hw::dtype_bytes(in_.training.grad_dtype);
  // Tensors are fused whole, in the order they became ready, while the buffer has room; a tensor
  // larger than the buffer is reduced on its own (Horovod never splits a tensor).
  while (!e.horovod_pending.empty()) {
    Bucket b = e.horovod_pending.front();
    e.horovod_pending.pop_front();
    while (!e.horovod_pending.empty()) {
      const Bucket& next = e.horovod_pending.front();
      if (b.params + b.expert_params + next.params + next.expert_params > cap) break;
      b.params += next.params;
      b.expert_params += next.expert_params;
      e.horovod_pending.pop_front();
    }
    queue_bucket(e, b);
  }
  pump_dp(e);
}

void Engine::finish_backward(Executor& e) {
  e.backward_done = true;
  block(e, TimeKind::dp);
  pump_dp(e);
}

// The step's gradient reduction is over when the backward pass is done and nothing is queued,
// running or waiting for a fusion cycle.
void Engine::maybe_end_dp(Executor& e) {
  if (e.finished || !e.backward_done || e.dp_busy || !e.dp_ready.empty() || e.horovod_tick ||
      !e.horovod_pending.empty()) {
    return;
  }
  e.finished = true;
  tie_embeddings(e);
}

void Engine::tie_embeddings(Executor& e) {
  const double bytes = e.prog->tied_grad_bytes;
  const bool tied = bytes > 0;
  if (!tied) {
    account(e);
    optimizer_step(e);
    return;
  }
  // The first and last stages sum the gradients of the embedding they share (still waiting as
  // data-parallel time).
  const int replica = e.replica;
  join(fmt::format("tie|{}", replica), 2, [this, &e, start = sim_.now()] {
    record(e, TimelineEvent::Track::dp, start, "embedding allreduce", "tied input/output embedding gradients, first and last stage");
    account(e);
    optimizer_step(e);
  }, [this, bytes, replica](std::function<void()> all_done) {
    launch(flows_.tie_collective(replica, Bytes(static_cast<I>(bytes))), all_done);
  });
}

void Engine::optimizer_step(Executor& e) {
  if (in_.parallel.dp_impl == DpImpl::parameter_server) {
    ps_update(e);  // the shards update the weights
    return;
  }
  // The update's time on this rank's GPU kind is the graph's (strategies.hpp, optimizer_time).
  block(e, TimeKind::optimizer);
  const Time update = e.prog->optimizer;
  sim_.schedule_in(update, [this, &e] {
    record(e, TimelineEvent::Track::compute, e.wait_start, "optimizer step",
           fmt::format("{} update", in_.training.optimizer == Optimizer::adam ? "Adam" : "SGD"));
    account(e);
    after_optimizer(e);
  });
}

bool Engine::gather_params(Executor& e) {
  if (in_.parallel.zero < 1 || in_.parallel.zero >= 3 || lay_.grad_dp() < 2) return false;
  // --overlap-param-gather: the gather runs under the next step's first forward pass instead
  // (the stage graph's gather waits; this step began with the previous one's). Decided by the
  // graph, which may come from a file (--graph), not by the setting.
  if (!e.prog->gathers.empty()) return false;
  // ZeRO / the distributed optimizer: gather the updated shards back into full parameters.
  const bool mixed = in_.training.precision != hw::DType::fp32 && in_.training.precision != hw::DType::tf32;
  const double bytes = e.prog->dense_params * (mixed ? 2.0 : 4.0);
  block(e, TimeKind::dp);
  const int stage = e.stage;
  join(fmt::format("gather|{}", stage), replicas_, [this, &e, bytes] {
    record(e, TimelineEvent::Track::dp, e.wait_start, "dp allgather (updated parameters)",
           fmt::format("{} per rank (ZeRO / distributed optimizer)", to_string(Bytes(static_cast<I>(bytes)))));
    account(e);
    advance(e);
  }, [this, stage, bytes](std::function<void()> all_done) {
    launch(flows_.dp_collective(stage, false, CollOp::allgather, Bytes(static_cast<I>(bytes))), all_done);
  });
  return true;
}

void Engine::after_optimizer(Executor& e) {
  e.optimized = true;
  advance(e);
}

}  // namespace dtsim::workloads::detail
