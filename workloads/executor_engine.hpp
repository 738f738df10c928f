// The step-graph executor's engine, shared by executor.cpp (ops, compute, pipeline messages, the
// run) and executor_dp.cpp (data parallelism: gradient buckets, Horovod, parameter servers,
// ZeRO gathers, the optimizer step). Internal: only those two files include it.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "workloads/executor.hpp"
#include "workloads/flows.hpp"
#include "workloads/graph_build.hpp"

namespace dtsim::workloads::detail {

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
  int gather_allowed = 0;  // the last gather the stream may start: one ahead of the one waited for
  int waiting_gather = -1;
  // One NCCL stream for the data-parallel group (Engine::shared_dp_stream_): the gathers and the
  // gradient reductions run one at a time, in the order they were issued. Issue numbers: of each
  // gather once it may start (-1 before), and of each ready bucket, in dp_ready's order.
  std::vector<std::int64_t> gather_issued;
  std::deque<std::int64_t> dp_ready_issued;
  std::int64_t issued = 0;
  // parallel.overlap_p2p: pipeline sends in flight by direction (activations, gradients), and the
  // direction whose send the stream waits for before it issues the next (-1: none).
  std::array<int, 2> sends_in_flight{};
  int waiting_send = -1;
  // Host-launched ops (GraphOp::host_gap): the host's launch clock, and the other streams.
  Time host;
  std::map<int, Time> stream_free;  // stream (not 0) -> when its last op ends
  Time streams_end;                 // when the last op on another stream ends
  bool optimized = false;           // the optimizer step is over; the ops after end_backward run
  bool params_gathered = false;     // ZeRO-1/2: the updated shards were gathered (after those ops)
};

class Engine {
 public:
  Engine(const hw::Topology& topo, const StepInputs& in, const Layout& lay, const StepGraph& graph, const GpuKinds& kinds, Simulator& sim,
         FlowNetwork& net)
      : in_(in), lay_(lay), graph_(graph), sim_(sim), net_(net), symmetric_(in.symmetric && !kinds.mixed()),
        replicas_(symmetric_ ? 1 : lay.dp()), shared_dp_stream_(shares_dp_stream(in.parallel)), flows_(topo, in, lay, symmetric_) {
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
        e.gather_issued.assign(e.prog->gathers.size(), -1);
        e.gather_allowed = -1;
        allow_gathers(e, first_gathers_allowed(in));
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
  // Whether the gathers and the gradient reductions share one stream: the data-parallel group's,
  // unless separate_gather_group. Only with dp_impl ddp, which issues each bucket when it is ready
  // (in program order, the same on every replica): Horovod's fusion cycles follow the clock, and
  // the implementations that reduce after the backward pass issue their buckets once no gather is
  // left to share the stream with.
  static bool shares_dp_stream(const ParallelSpec& p) { return !p.separate_gather_group && p.dp_impl == DpImpl::ddp; }
  // The gathers a stage may start before its ops wait for any (executor_dp.cpp).
  static int first_gathers_allowed(const StepInputs& in);
  // Gathers up to `last` may start; each gets its issue number.
  static void allow_gathers(Executor& e, int last);
  // A bucket is ready to reduce: queued with its issue number.
  static void queue_bucket(Executor& e, const Bucket& bk);
  // Whether the data-parallel stream may start the next gather (`gather`) or bucket now.
  bool dp_stream_turn(const Executor& e, bool gather) const;
  // Starts whatever the data-parallel streams can run next.
  void pump_dp_streams(Executor& e);
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
  // Ends a wait and runs the op it waited at again (resume goes past it).
  void retry(Executor& e);
  // A pipeline send from `e` that started at `start` is done: its timeline entry, then deliver.
  void sent(Executor& e, Executor& target, bool fwd, int mb, int to_vs, Time start, bool overlapped);
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
  // ZeRO-1/2: starts the all-gather of the updated shards (the step goes on when it is done);
  // false where there is nothing to gather.
  bool gather_params(Executor& e);
  // The optimizer step is over: the ops after end_backward run, then the parameter gather (if
  // any), then the step ends.
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
  // The parameter gathers and the gradient reductions go to one process group, and so to one NCCL
  // stream (PyTorch's ProcessGroupNCCL: "any collectives, even if issued in different streams,
  // contend for the same per-device NCCL stream", torch/distributed/fsdp/api.py BackwardPrefetch).
  bool shared_dp_stream_ = true;
  CommFlows flows_;
  std::vector<Executor> execs_;
  std::map<std::string, std::vector<std::function<void()>>> rendezvous_;
  std::uint64_t collectives_ = 0;
  Time h2d_end_;
  std::vector<TimelineEvent> timeline_;
};

}  // namespace dtsim::workloads::detail
