#include "workloads/executor.hpp"

#include "workloads/executor_engine.hpp"

namespace dtsim::workloads {

namespace detail {

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

// training.data: each step's samples are copied from host memory into the GPUs of the first
// pipeline stage while the step runs (the loader prefetches), contending for PCIe with the rest.
void Engine::start_input_copies() {
  const auto& data = in_.training.data;
  if (!data || in_.parallel.dp_impl == DpImpl::dataparallel) return;
  const double samples = static_cast<double>(in_.training.global_batch) / lay_.dp();
  launch(flows_.input_copies(samples * data->input_bytes.as_double()), [this] { h2d_end_ = sim_.now(); });
}

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

void Engine::retry(Executor& e) {
  e.time[static_cast<std::size_t>(e.wait_kind)] += (sim_.now() - e.wait_start).seconds();
  e.waiting = false;
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
        if (in_.parallel.overlap_p2p) {
          // Megatron-Core's overlap_p2p_comm (schedules.py, interleaved 1F1B): the send is issued
          // with the next receive and the schedule goes on with the next chunk while it travels;
          // its handle is waited for before the next chunk in that direction (here: before the
          // next send in that direction, so at most one is in flight each way). NCCL's send
          // kernel slows the compute beside it like any overlapped collective
          // (change_background). The receiver still waits.
          const std::size_t dir = fwd ? 0 : 1;
          if (e.sends_in_flight[dir] > 0) {
            block(e, TimeKind::pp);
            e.waiting_send = static_cast<int>(dir);
            return;
          }
          ++e.sends_in_flight[dir];
          change_background(e, +1);
          launch(c, [this, &e, &target, fwd, mb, to_vs, dir, start = sim_.now()] {
            sent(e, target, fwd, mb, to_vs, start, true);
            change_background(e, -1);
            --e.sends_in_flight[dir];
            if (e.waiting && e.waiting_send == static_cast<int>(dir)) {
              e.waiting_send = -1;
              retry(e);
            }
          });
          break;
        }
        // Blocking, as Megatron-LM's p2p_communication (torch.distributed send/recv on NCCL, waited
        // for before the schedule goes on): the sender waits for its transfer, as pipeline
        // communication.
        block(e, TimeKind::pp);
        launch(c, [this, &e, &target, fwd, mb, to_vs, start = sim_.now()] {
          sent(e, target, fwd, mb, to_vs, start, false);
          resume(e);
        });
        return;
      }
      case OpKind::grads_ready:
        grads_ready(e, in.a);
        break;
      case OpKind::gather_wait:
        allow_gathers(e, in.a + 1);
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
  if (!e.optimized) return;
  if (!e.params_gathered) {
    // ZeRO-1/2 and the distributed optimizer gather the updated shards once the update (the
    // optimizer step and the ops after end_backward) is done; the step ends after it.
    e.params_gathered = true;
    if (gather_params(e)) return;
  }
  e.end = std::max(sim_.now(), e.streams_end);
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
  e.compute_event = sim_.schedule_in(wall, [&e] {
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

void Engine::sent(Executor& e, Executor& target, bool fwd, int mb, int to_vs, Time start, bool overlapped) {
  if (e.record) {
    record(e, TimelineEvent::Track::pipeline, start, fmt::format("send {} mb {}", fwd ? "activation" : "gradient", mb),
           fmt::format("{} per rank pair to stage {}{}", to_string(Bytes(static_cast<I>(graph_.act_msg_bytes))), stage_of_vs(to_vs),
                       overlapped ? ", overlapped" : ""));
  }
  deliver(target, fwd ? OpKind::recv_act : OpKind::recv_grad, mb, to_vs, start);
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

}  // namespace detail

Expected<ExecutionRecord> execute_step_graph(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph) {
  auto kinds = gpu_kinds(topo, lay);
  if (!kinds) return kinds.error();
  auto model = make_sharing_model(in.sharing);
  if (!model) return Error(fmt::format("unknown sharing model '{}' (max-min, constant)", in.sharing), "sharing");
  Simulator sim;
  FlowNetwork net(sim, std::move(model));
  topo.install(net);
  detail::Engine engine(topo, in, lay, graph, *kinds, sim, net);
  if (auto st = engine.run(); !st) return st.error();
  return engine.take_record();
}

}  // namespace dtsim::workloads
