#include "workloads/executor.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "workloads/flows.hpp"
#include "workloads/graph_build.hpp"

namespace dtsim::workloads {

namespace {

using I = std::int64_t;

// One simulated (stage, replica) running its stage graph.
struct Executor {
  int stage = 0;
  int replica = 0;  // data-parallel index
  const StageGraph* prog = nullptr;
  std::size_t pc = 0;
  bool waiting = false;
  TimeKind wait_kind = TimeKind::compute;
  Time wait_start;
  std::array<double, kTimeKinds> time{};
  int background = 0;  // collectives in flight beside compute (they slow it down: see change_background)
  // The compute in progress: work left (at full speed) since `compute_since`, done at full speed
  // or, while communication overlaps it, at 1 / (1 + compute.comm_slowdown) of it.
  bool computing = false;
  bool compute_slow = false;
  Time compute_left, compute_since;
  EventId compute_event;
  std::function<void()> compute_done;
  std::vector<char> act_ready, grad_ready;
  OpKind wait_op = OpKind::compute;
  int wait_mb = -1, wait_vs = -1;
  bool record = false;   // this executor's events go into the timeline
  // Data-parallel gradient stream.
  std::deque<Bucket> dp_ready;    // buckets ready to reduce, in order
  bool dp_busy = false;
  int dp_issued = 0;              // collectives started (their sequence number names rendezvous)
  int next_bucket = 0;             // the first bucket not yet handed to data parallelism
  std::deque<Bucket> horovod_pending;  // Horovod: tensors (here, layers) waiting for the next fusion cycle
  bool horovod_tick = false;
  bool backward_done = false;
  bool finished = false;
  Time end;
  // ZeRO-3 parameter gathers: issued one layer ahead on their own stream, waited for per layer.
  std::vector<char> gathered;
  bool gather_busy = false;
  int gather_next = 0;     // next gather the stream starts (in order)
  int gather_allowed = 0;  // prefetch limit: one layer ahead of the layer being computed
  int waiting_gather = -1;
  // Host-launched ops (GraphOp::host_gap): the host's launch clock, and the other streams.
  Time host;
  std::map<int, Time> stream_free;  // stream (not 0) -> when its last op ends
  Time streams_end;                 // when the last op on another stream ends
  bool optimized = false;           // the optimizer step is over; the ops after end_backward run
};

class Engine {
 public:
  Engine(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph, const GpuKinds& kinds, Simulator& sim,
         FlowNetwork& net)
      : in_(in), lay_(lay), graph_(graph), sim_(sim), net_(net), symmetric_(in.symmetric && !kinds.mixed()),
        replicas_(symmetric_ ? 1 : lay.dp()), flows_(topo, in, lay, symmetric_) {
    // Mixed GPU kinds: every data-parallel replica is simulated on its own kind's graphs, so that
    // synchronous steps wait for the slowest.
    for (int s = 0; s < graph.stages; ++s) {
      for (int r = 0; r < replicas_; ++r) {
        Executor e;
        e.stage = s;
        e.replica = r;
        e.prog = &graph.kinds[static_cast<std::size_t>(kinds.mixed() ? kinds.kind_of(lay, s, r) : 0)][static_cast<std::size_t>(s)];
        e.act_ready.assign(static_cast<std::size_t>(graph.micro_batches * graph.virtual_stages), 0);
        e.gathered.assign(e.prog->gathers.size(), 0);
        e.grad_ready.assign(static_cast<std::size_t>(graph.micro_batches * graph.virtual_stages), 0);
        e.record = in.record_timeline &&
                   (in.timeline_stages.empty() || std::find(in.timeline_stages.begin(), in.timeline_stages.end(), s) != in.timeline_stages.end());
        execs_.push_back(std::move(e));
      }
    }
  }

  Status run();
  ExecutionRecord take_record();

 private:
  void launch(const Collective& c, std::function<void()> done);
  void ps_update(Executor& e);
  void start_input_copies();
  // Runs `work` of compute (its time at full speed), then `done`.
  void start_compute(Executor& e, Time work, std::function<void()> done);
  void schedule_compute(Executor& e);
  // A collective starts (+1) or ends (-1) beside the executor's compute stream.
  void change_background(Executor& e, int delta);
  void advance(Executor& e);
  void block(Executor& e, TimeKind k);
  void resume(Executor& e);
  // A pipeline message sent at `sent` arrives; a receiver waiting for it resumes, its wait since
  // `sent` booked as pipeline communication and the rest as bubble.
  void deliver(Executor& target, OpKind kind, int mb, int vs, Time sent);
  void grads_ready(Executor& e, int slot);
  void bucket_ready(Executor& e, const Bucket& bk);
  void pump_dp(Executor& e);
  void horovod_cycle(Executor& e);
  void finish_backward(Executor& e);
  void maybe_end_dp(Executor& e);
  void tie_embeddings(Executor& e);
  void optimizer_step(Executor& e);
  void gather_params(Executor& e);
  // The optimizer step is over: the ops after end_backward run, then the step ends.
  void after_optimizer(Executor& e);
  // Compute on the compute stream, after its host launch and launch delay (GraphOp::host_gap).
  void run_compute(Executor& e, const GraphOp& op);
  // Compute on another stream: placed at max(launch, that stream free) + delay, beside the rest.
  void run_on_stream(Executor& e, const GraphOp& op);
  void pump_gathers(Executor& e);
  // Runs `start` once `parties` executors have joined under `key`; `start` receives a callback
  // that runs every participant's continuation.
  void join(const std::string& key, int parties, std::function<void()> cont, std::function<void(std::function<void()>)> start);
  void account(Executor& e) {
    e.time[static_cast<std::size_t>(e.wait_kind)] += (sim_.now() - e.wait_start).seconds();
    e.waiting = false;
  }
  Executor& exec(int stage, int replica) { return execs_[static_cast<std::size_t>(stage * replicas_ + replica)]; }
  int stage_of_vs(int vs) const { return vs % graph_.stages; }
  // Records [start, end) on one of the executor's tracks (end defaults to now).
  void record(const Executor& e, TimelineEvent::Track track, Time start, std::string name, std::string detail = {},
              std::optional<Time> end = std::nullopt) {
    if (!e.record) return;
    timeline_.push_back(TimelineEvent{e.stage, e.replica, track, start, end.value_or(sim_.now()), std::move(name), std::move(detail)});
  }

  const StepInputs& in_;
  const Layout& lay_;
  const StepGraph& graph_;
  Simulator& sim_;
  FlowNetwork& net_;
  bool symmetric_ = true;  // in_.symmetric, false on mixed clusters
  int replicas_ = 1;       // data-parallel replicas simulated per stage
  CommFlows flows_;
  std::vector<Executor> execs_;
  std::map<std::string, std::vector<std::function<void()>>> rendezvous_;
  std::uint64_t collectives_ = 0;
  Time h2d_end_;
  std::vector<TimelineEvent> timeline_;
};

// Puts an op's flows on the network (none with free_communication); `done` runs once all have ended.
void Engine::launch(const Collective& c, std::function<void()> done) {
  if (c.plans.empty() || in_.free_communication) {
    sim_.schedule_in(Time::zero(), std::move(done));
    return;
  }
  ++collectives_;
  auto left = std::make_shared<std::size_t>(c.plans.size());
  auto cb = std::make_shared<std::function<void()>>(std::move(done));
  for (const auto& plan : c.plans) {
    comm::execute(net_, plan, [left, cb] {
      if (--*left == 0) (*cb)();
    });
  }
}


// ---------------------------------------------------------------------------------------------

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

// training.data: each step's samples are copied from host memory into the GPUs of the first
// pipeline stage while the step runs (the loader prefetches), contending for PCIe with the rest.
void Engine::start_input_copies() {
  const auto& data = in_.training.data;
  if (!data || in_.parallel.dp_impl == DpImpl::dataparallel) return;
  const double samples = static_cast<double>(in_.training.global_batch) / lay_.dp();
  launch(flows_.input_copies(samples * data->input_bytes.as_double()), [this] { h2d_end_ = sim_.now(); });
}

// ---------------------------------------------------------------------------------------------
// Execution

void Engine::block(Executor& e, TimeKind k) {
  e.waiting = true;
  e.wait_kind = k;
  e.wait_start = sim_.now();
}

void Engine::resume(Executor& e) {
  e.time[static_cast<std::size_t>(e.wait_kind)] += (sim_.now() - e.wait_start).seconds();
  e.waiting = false;
  if (e.record && e.pc < e.prog->ops.size()) {
    const GraphOp& in = e.prog->ops[e.pc];
    const std::string& label = e.prog->labels[static_cast<std::size_t>(in.label)];
    if (in.kind == OpKind::compute) {
      record(e, TimelineEvent::Track::compute, e.wait_start, label);
    } else if (in.kind == OpKind::transfer) {
      const Transfer& t = e.prog->transfers[static_cast<std::size_t>(in.a)];
      record(e, t.kind == Transfer::Kind::host ? TimelineEvent::Track::compute : TimelineEvent::Track::dp, e.wait_start, t.name,
             t.kind == Transfer::Kind::host ? std::string() : fmt::format("{}, {}", to_string(Bytes(static_cast<I>(t.bytes))), label));
    } else if (in.kind == OpKind::comm && !in.overlapped) {
      const CommStep& c = e.prog->comms[static_cast<std::size_t>(in.a)];
      record(e, TimelineEvent::Track::comm, e.wait_start, fmt::format("{} {}", to_string(c.group), to_string(c.op)),
             fmt::format("{} per rank, {}; compute waits", to_string(c.bytes), label));
    }
  }
  ++e.pc;
  advance(e);
}

void Engine::advance(Executor& e) {
  const StageGraph& sp = *e.prog;
  while (e.pc < sp.ops.size()) {
    const GraphOp& in = sp.ops[e.pc];
    switch (in.kind) {
      case OpKind::compute: {
        if (in.stream != 0) {
          run_on_stream(e, in);
          break;
        }
        run_compute(e, in);
        return;
      }
      case OpKind::comm: {
        const CommStep& c = sp.comms[static_cast<std::size_t>(in.a)];
        const TimeKind kind = c.group == CommGroup::tp ? TimeKind::tp : c.group == CommGroup::cp ? TimeKind::cp : TimeKind::ep;
        const Collective& coll = flows_.group_collective(c, e.stage, e.replica);
        if (in.overlapped) {
          // Compute and the collective run side by side; continue when both are done.
          auto left = std::make_shared<int>(2);
          auto both = [this, &e, left] {
            if (--*left == 0) resume(e);
          };
          block(e, kind);
          // The collective slows the compute beside it while it runs (change_background).
          change_background(e, +1);
          const std::string& label = sp.labels[static_cast<std::size_t>(in.label)];
          start_compute(e, in.duration, [this, &e, both, kind, label, start = sim_.now()] {
            // The compute part is booked as compute; the excess as exposed communication.
            const double busy = (sim_.now() - start).seconds();
            e.time[static_cast<std::size_t>(kind)] -= busy;
            e.time[static_cast<std::size_t>(TimeKind::compute)] += busy;
            record(e, TimelineEvent::Track::compute, start, label);
            both();
          });
          launch(coll, [this, &e, both, start = sim_.now(), c, label] {
            change_background(e, -1);
            record(e, TimelineEvent::Track::comm, start, fmt::format("{} {}", to_string(c.group), to_string(c.op)),
                   fmt::format("{} per rank, {}; overlapped with compute", to_string(c.bytes), label));
            both();
          });
          return;
        }
        block(e, kind);
        launch(coll, [this, &e] { resume(e); });
        return;
      }
      case OpKind::recv_act:
      case OpKind::recv_grad: {
        const auto idx = static_cast<std::size_t>(in.a * graph_.virtual_stages + in.b);
        auto& ready = in.kind == OpKind::recv_act ? e.act_ready : e.grad_ready;
        if (!ready[idx]) {
          block(e, TimeKind::bubble);
          e.wait_op = in.kind;
          e.wait_mb = in.a;
          e.wait_vs = in.b;
          return;
        }
        break;
      }
      case OpKind::send_act:
      case OpKind::send_grad: {
        const bool fwd = in.kind == OpKind::send_act;
        const int to_vs = fwd ? in.b + 1 : in.b - 1;
        const int to_stage = stage_of_vs(to_vs);
        Executor& target = exec(to_stage, e.replica);
        const Collective& c = flows_.p2p(e.stage, to_stage, e.replica, Bytes(static_cast<I>(graph_.act_msg_bytes)));
        const int mb = in.a;
        // Blocking, as Megatron-LM's p2p_communication (torch.distributed send/recv on NCCL, waited
        // for before the schedule goes on): the sender waits for its transfer, as pipeline
        // communication.
        block(e, TimeKind::pp);
        launch(c, [this, &e, &target, fwd, mb, to_vs, start = sim_.now()] {
          if (e.record) {
            record(e, TimelineEvent::Track::pipeline, start, fmt::format("send {} mb {}", fwd ? "activation" : "gradient", mb),
                   fmt::format("{} per rank pair to stage {}", to_string(Bytes(static_cast<I>(graph_.act_msg_bytes))), stage_of_vs(to_vs)));
          }
          deliver(target, fwd ? OpKind::recv_act : OpKind::recv_grad, mb, to_vs, start);
          resume(e);
        });
        return;
      }
      case OpKind::grads_ready:
        grads_ready(e, in.a);
        break;
      case OpKind::gather_wait:
        e.gather_allowed = std::max(e.gather_allowed, in.a + 1);
        pump_gathers(e);
        if (!e.gathered[static_cast<std::size_t>(in.a)]) {
          block(e, TimeKind::dp);
          e.waiting_gather = in.a;
          return;
        }
        break;
      case OpKind::end_backward:
        ++e.pc;
        finish_backward(e);
        return;
      case OpKind::transfer: {
        const Transfer& t = sp.transfers[static_cast<std::size_t>(in.a)];
        if (t.kind == Transfer::Kind::host) {
          block(e, TimeKind::host);
          sim_.schedule_in(t.duration, [this, &e] { resume(e); });
          return;
        }
        block(e, t.kind == Transfer::Kind::h2d ? TimeKind::input : TimeKind::dp);
        launch(flows_.transfer(t), [this, &e] { resume(e); });
        return;
      }
    }
    ++e.pc;
  }
  if (e.optimized) e.end = std::max(sim_.now(), e.streams_end);
}

void Engine::run_compute(Executor& e, const GraphOp& op) {
  e.host = e.host + op.host_gap;
  const Time wait = (e.host > sim_.now() ? e.host - sim_.now() : Time::zero()) + op.delay;
  if (wait <= Time::zero()) {
    block(e, TimeKind::compute);
    start_compute(e, op.duration, [this, &e] { resume(e); });
    return;
  }
  // The stream waits for the host to launch the op (a host-bound step) and for the launch
  // latency or inter-kernel gap measured after it.
  block(e, TimeKind::host);
  sim_.schedule_in(wait, [this, &e, work = op.duration] {
    account(e);
    block(e, TimeKind::compute);
    start_compute(e, work, [this, &e] { resume(e); });
  });
}

void Engine::run_on_stream(Executor& e, const GraphOp& op) {
  e.host = e.host + op.host_gap;
  Time& free = e.stream_free[op.stream];
  const Time start = std::max(e.host, free) + op.delay;
  free = start + op.duration;
  e.streams_end = std::max(e.streams_end, free);
  record(e, TimelineEvent::Track::compute, start, e.prog->labels[static_cast<std::size_t>(op.label)], fmt::format("stream {}", op.stream), free);
}

void Engine::start_compute(Executor& e, Time work, std::function<void()> done) {
  DTSIM_ASSERT(!e.computing, "an executor runs one compute stream");
  e.computing = true;
  e.compute_left = work;
  e.compute_since = sim_.now();
  e.compute_slow = e.background > 0 && in_.compute.comm_slowdown > 0;
  e.compute_done = std::move(done);
  schedule_compute(e);
}

void Engine::schedule_compute(Executor& e) {
  const Time wall = e.compute_slow ? Time::from_seconds(e.compute_left.seconds() * (1.0 + in_.compute.comm_slowdown)) : e.compute_left;
  e.compute_event = sim_.schedule_in(wall, [this, &e] {
    e.computing = false;
    auto done = std::move(e.compute_done);
    done();
  });
}

// Communication kernels take SMs and memory bandwidth from the compute beside them: compute runs
// at 1 / (1 + comm_slowdown) of its speed exactly while at least one collective overlaps it, so
// that the penalty grows with the overlapped time (at most comm_slowdown x that time) and never
// touches compute that runs alone.
void Engine::change_background(Executor& e, int delta) {
  e.background += delta;
  DTSIM_ASSERT(e.background >= 0, "more collectives ended than started");
  const bool slow = e.background > 0 && in_.compute.comm_slowdown > 0;
  if (!e.computing || slow == e.compute_slow) return;
  const Time elapsed = sim_.now() - e.compute_since;
  const Time done = e.compute_slow ? Time::from_seconds(elapsed.seconds() / (1.0 + in_.compute.comm_slowdown)) : elapsed;
  e.compute_left = std::max(Time::zero(), e.compute_left - done);
  e.compute_since = sim_.now();
  e.compute_slow = slow;
  sim_.cancel(e.compute_event);
  schedule_compute(e);
}

void Engine::deliver(Executor& t, OpKind kind, int mb, int vs, Time sent) {
  const auto idx = static_cast<std::size_t>(mb * graph_.virtual_stages + vs);
  (kind == OpKind::recv_act ? t.act_ready : t.grad_ready)[idx] = 1;
  if (t.waiting && t.wait_op == kind && t.wait_mb == mb && t.wait_vs == vs) {
    t.wait_op = OpKind::compute;
    const double in_transfer = (sim_.now() - std::max(sent, t.wait_start)).seconds();
    t.time[static_cast<std::size_t>(TimeKind::pp)] += in_transfer;
    t.time[static_cast<std::size_t>(TimeKind::bubble)] -= in_transfer;
    resume(t);
  }
}


// ZeRO-3 / FSDP: gathers a layer's parameter shards before it runs, on a stream of its own, at
// most one layer ahead of the layer being computed (FSDP's default forward/backward prefetch).
void Engine::pump_gathers(Executor& e) {
  const auto& gs = e.prog->gathers;
  if (e.gather_busy || e.gather_next >= static_cast<int>(gs.size()) || e.gather_next > e.gather_allowed) return;
  const int idx = e.gather_next++;
  e.gather_busy = true;
  change_background(e, +1);
  const bool mixed = in_.training.precision != hw::DType::fp32 && in_.training.precision != hw::DType::tf32;
  const double bytes = gs[static_cast<std::size_t>(idx)] * (mixed ? 2.0 : 4.0);
  const int stage = e.stage;
  join(fmt::format("zg|{}|{}", stage, idx), replicas_, [this, &e, idx, bytes, start = sim_.now()] {
    record(e, TimelineEvent::Track::dp, start, "dp allgather (parameters)",
           fmt::format("{} per rank, layer {} (ZeRO-3 prefetch)", to_string(Bytes(static_cast<I>(bytes))), idx));
    e.gather_busy = false;
    change_background(e, -1);
    e.gathered[static_cast<std::size_t>(idx)] = 1;
    if (e.waiting && e.waiting_gather == idx) {
      e.waiting_gather = -1;
      resume(e);
    }
    pump_gathers(e);
  }, [this, stage, bytes](std::function<void()> all_done) {
    launch(flows_.dp_collective(stage, false, CollOp::allgather, Bytes(static_cast<I>(bytes))), all_done);
  });
}

void Engine::join(const std::string& key, int parties, std::function<void()> cont,
                  std::function<void(std::function<void()>)> start) {
  auto& waiting = rendezvous_[key];
  waiting.push_back(std::move(cont));
  if (static_cast<int>(waiting.size()) < parties) return;
  auto conts = std::make_shared<std::vector<std::function<void()>>>(std::move(waiting));
  rendezvous_.erase(key);
  start([conts] {
    for (auto& c : *conts) c();
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
      e.dp_ready.push_back(bk);
      pump_dp(e);
      break;
    case DpImpl::dataparallel:  // reduced onto GPU 0 after each backward call (a transfer)
      break;
    case DpImpl::no_overlap:
    case DpImpl::mirrored:
      e.dp_ready.push_back(bk);  // reduced once the backward pass is over (finish_backward)
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
  if (e.dp_ready.empty()) {
    maybe_end_dp(e);
    return;
  }
  const Bucket bk = e.dp_ready.front();
  e.dp_ready.pop_front();
  const bool ps = impl == DpImpl::parameter_server;
  if (lay_.grad_dp() < 2 && !ps) {
    pump_dp(e);
    return;
  }
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
    pump_dp(e);
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
    e.dp_ready.push_back(b);
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
    gather_params(e);
  });
}

void Engine::gather_params(Executor& e) {
  if (in_.parallel.zero < 1 || in_.parallel.zero >= 3 || lay_.grad_dp() < 2) {
    after_optimizer(e);
    return;
  }
  // ZeRO / the distributed optimizer: gather the updated shards back into full parameters.
  const bool mixed = in_.training.precision != hw::DType::fp32 && in_.training.precision != hw::DType::tf32;
  const double bytes = e.prog->dense_params * (mixed ? 2.0 : 4.0);
  block(e, TimeKind::dp);
  const int stage = e.stage;
  join(fmt::format("gather|{}", stage), replicas_, [this, &e, bytes] {
    record(e, TimelineEvent::Track::dp, e.wait_start, "dp allgather (updated parameters)",
           fmt::format("{} per rank (ZeRO / distributed optimizer)", to_string(Bytes(static_cast<I>(bytes)))));
    account(e);
    after_optimizer(e);
  }, [this, stage, bytes](std::function<void()> all_done) {
    launch(flows_.dp_collective(stage, false, CollOp::allgather, Bytes(static_cast<I>(bytes))), all_done);
  });
}

void Engine::after_optimizer(Executor& e) {
  e.optimized = true;
  advance(e);
}

Status Engine::run() {
  start_input_copies();
  for (Executor& e : execs_) {
    sim_.schedule_in(Time::zero(), [this, &e] {
      pump_gathers(e);
      advance(e);
    });
  }
  sim_.run();
  for (const Executor& e : execs_) {
    if (e.finished && !e.waiting) continue;
    // Only a graph read from a file can do this: a built one always finishes.
    const std::string at = e.pc < e.prog->ops.size() ? fmt::format("op {} ({})", e.pc, to_string(e.prog->ops[e.pc].kind)) : "the end of its ops";
    return Error(fmt::format("the graph deadlocked: stage {} (replica {}) never finished its step; it waits at {} (a receive with "
                             "no matching send, a gather, a tied-embedding partner or a rendezvous that never comes)",
                             e.stage, e.replica, at),
                 "graph");
  }
  return {};
}

ExecutionRecord Engine::take_record() {
  ExecutionRecord r;
  r.replicas = replicas_;
  r.symmetric = symmetric_;
  for (const Executor& e : execs_) r.ranks.push_back(RankRecord{e.stage, e.replica, e.time, e.end});
  r.h2d_end = h2d_end_;
  r.events = sim_.events_executed();
  r.collectives = collectives_;
  r.timeline = std::move(timeline_);
  return r;
}

}  // namespace

Expected<ExecutionRecord> execute_step_graph(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph) {
  auto kinds = gpu_kinds(topo, lay);
  if (!kinds) return kinds.error();
  auto model = make_sharing_model(in.sharing);
  if (!model) return Error(fmt::format("unknown sharing model '{}' (max-min, constant)", in.sharing), "sharing");
  Simulator sim;
  FlowNetwork net(sim, std::move(model));
  topo.install(net);
  Engine engine(topo, in, lay, graph, *kinds, sim, net);
  if (auto st = engine.run(); !st) return st.error();
  return engine.take_record();
}

}  // namespace dtsim::workloads
