#include "workloads/step.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <set>

#include <fmt/format.h>

#include "workloads/framework_program.hpp"
#include "workloads/memory_estimate.hpp"
#include "workloads/program.hpp"
#include "workloads/schedule.hpp"

namespace dtsim::workloads {

std::string_view to_string(TimeKind k) {
  switch (k) {
    case TimeKind::compute: return "compute";
    case TimeKind::tp: return "tp_comm";
    case TimeKind::cp: return "cp_comm";
    case TimeKind::ep: return "ep_comm";
    case TimeKind::pp: return "pp_comm";
    case TimeKind::dp: return "dp_comm";
    case TimeKind::optimizer: return "optimizer";
    case TimeKind::bubble: return "bubble";
    case TimeKind::host: return "host";
    case TimeKind::input: return "input";
    case TimeKind::count: break;
  }
  return "?";
}

namespace {

using I = std::int64_t;

// ---------------------------------------------------------------------------------------------
// Programs: what one stage runs, flattened.

enum class Op : unsigned char { compute, comm, recv_act, recv_grad, send_act, send_grad, grads_ready, gather_wait, end_backward, transfer };

// Data movements of PyTorch's nn.DataParallel, rooted at GPU 0, and its host time.
struct Transfer {
  enum class Kind : unsigned char { host, h2d, scatter, gather, replicate, reduce };
  Kind kind = Kind::host;
  double bytes = 0;  // h2d: in total; scatter, gather: per GPU other than 0; replicate, reduce: the tensors' size
  Time duration;     // host
  std::string name;
};

struct Instr {
  Op op = Op::compute;
  int a = 0;        // comm: index into the stage's comm steps; recv/send: micro-batch; grads_ready: layer slot
  int b = 0;        // recv/send: virtual stage
  Time duration;    // compute, or the compute that runs beside an overlapped collective
  bool overlapped = false;
  int label = 0;    // index into StageProgram::labels (what a timeline calls it)
};

struct LayerSlot {
  double params = 0;
  double expert_params = 0;
  std::vector<std::int64_t> tensors;  // dense parameter tensors in forward order (empty: one tensor)
  bool repeat = false;                // ZeRO-3: an earlier micro-batch's reduction of the same tensors
};

struct StageProgram {
  std::vector<Instr> instrs;
  std::vector<CommStep> comms;        // blocking collectives used by `comm` instructions
  std::vector<LayerSlot> grad_slots;  // layers in the order their gradients become final
  std::vector<double> gathers;        // ZeRO-3: parameters gathered before each layer pass, in order
  std::vector<Transfer> transfers;    // nn.DataParallel: used by `transfer` instructions
  std::vector<std::string> labels{"step"};  // names of the pipeline ops, for timelines
  int current_label = 0;
  double flops = 0;                   // hardware FLOPs of one replica-rank for the whole step
  double recompute_flops = 0;         // of which recomputation (part of flops)
  double dense_params = 0, expert_params = 0;
  int layers = 0;
  int in_flight = 0;
  double activation_bytes = 0;
  bool has_embedding = false, has_head = false;
  // Eager frameworks: the host issues each kernel (host_cost apiece) while the GPU runs the ones
  // already issued; gpu_lead is how far the GPU's queue reaches past the host's clock.
  Time host_cost;
  Time gpu_lead;
};

// A pass, timed: its segments' kernels become compute instructions (consecutive ones merged).
void append_pass(const Pass& pass, const ComputeModel& cm, StageProgram& sp) {
  for (const Segment& seg : pass.segments) {
    Time t = Time::zero();
    for (const Kernel& k : seg.kernels) {
      const Time kt = cm.kernel_time(k);
      if (sp.host_cost > Time::zero()) {
        // The kernel starts when the host has issued it and the GPU has finished the ones before.
        const Time wait = sp.host_cost > sp.gpu_lead ? sp.host_cost - sp.gpu_lead : Time::zero();
        sp.gpu_lead = (sp.gpu_lead > sp.host_cost ? sp.gpu_lead - sp.host_cost : Time::zero()) + kt;
        t += wait + kt;
      } else {
        t += kt;
      }
      sp.flops += k.flops;
    }
    if (seg.comm && seg.comm_overlaps) {
      sp.comms.push_back(*seg.comm);
      sp.instrs.push_back(Instr{Op::comm, static_cast<int>(sp.comms.size() - 1), 0, t, true, sp.current_label});
      continue;
    }
    if (t > Time::zero()) {
      if (!sp.instrs.empty() && sp.instrs.back().op == Op::compute && sp.instrs.back().label == sp.current_label) {
        sp.instrs.back().duration += t;
      } else {
        sp.instrs.push_back(Instr{Op::compute, 0, 0, t, false, sp.current_label});
      }
    }
    if (seg.comm) {
      sp.comms.push_back(*seg.comm);
      sp.instrs.push_back(Instr{Op::comm, static_cast<int>(sp.comms.size() - 1), 0, Time::zero(), false, sp.current_label});
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The simulation.

struct Collective {
  std::vector<std::shared_ptr<const comm::Plan>> plans;
};

struct Bucket {
  double params = 0, expert_params = 0;
};

class Engine;

struct Executor {
  int stage = 0;
  int replica = 0;  // data-parallel index
  const StageProgram* prog = nullptr;
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
  Op wait_op = Op::compute;
  int wait_mb = -1, wait_vs = -1;
  bool record = false;   // this executor's events go into the timeline
  // Data-parallel gradient stream.
  std::deque<Bucket> dp_ready;    // buckets ready to reduce, in order
  bool dp_busy = false;
  int dp_issued = 0;              // collectives started (their sequence number names rendezvous)
  int next_bucket = 0;             // the first bucket not yet handed to data parallelism
  std::vector<int> bucket_of_slot; // the last bucket each gradient slot closes (-1: none)
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
};

class Engine {
 public:
  Engine(const hw::Topology& topo, const StepInputs& in, const Layout& lay, Simulator& sim, FlowNetwork& net)
      : topo_(topo), in_(in), lay_(lay), sim_(sim), net_(net), router_(topo), planner_(topo, router_, in.comm) {}

  Status build();
  void run();
  StepResult result();
  InputReport input_report(double gpu_step_s) const;

 private:
  // Setup.
  Status build_transformer(const TransformerSpec& m);
  Status build_cnn(const CnnSpec& m);
  void build_buckets();
  void bucket_ready(Executor& e, const Bucket& bk);
  // Collectives.
  std::vector<std::vector<int>> groups(CommGroup g, int stage, int replica) const;
  std::vector<std::vector<int>> dp_groups(int stage, bool experts) const;
  bool keep_copy(const std::vector<int>& group, const std::vector<int>& representative_ranks) const;
  const Collective& collective(const std::string& key, CollOp op, Bytes bytes, const std::vector<std::vector<int>>& gs);
  const Collective& p2p(int from_stage, int to_stage, int replica, Bytes bytes);
  void launch(const Collective& c, std::function<void()> done);
  // Flows between GPU pairs (one group each), all at once.
  std::unique_ptr<Collective> pairwise(const std::vector<std::pair<int, int>>& pairs, double bytes);
  const Collective& transfer(const Transfer& t);
  // Host (a node's CPU) to and from GPU ranks; parameter-server pushes and pulls; input copies.
  hw::Path host_path(int rank, int node, int cpu, bool to_host, std::uint64_t label);
  const Collective& host_flows(const std::string& key, const std::vector<std::tuple<int, int, int, bool>>& ends, double bytes);
  const Collective& ps_push(double grad_bytes);
  const Collective& ps_pull(double param_bytes);
  void ps_update(Executor& e);
  // nn.DataParallel's per-call work around the forward and backward passes.
  void dataparallel_before_forward(StageProgram& sp, double input_bytes_per_sample, double params) const;
  void dataparallel_after_forward(StageProgram& sp, double output_bytes_per_sample) const;
  void dataparallel_after_backward(StageProgram& sp, double params) const;
  Status check_dp_impl() const;
  void start_input_copies();
  // Execution.
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
  void deliver(Executor& target, Op kind, int mb, int vs, Time sent);
  void grads_ready(Executor& e, int slot);
  void pump_dp(Executor& e);
  void horovod_cycle(Executor& e);
  void finish_backward(Executor& e);
  void maybe_end_dp(Executor& e);
  void tie_embeddings(Executor& e);
  void optimizer_step(Executor& e);
  void gather_params(Executor& e);
  void pump_gathers(Executor& e);
  // Appends a layer's passes, preceded under ZeRO-3 by the wait for its gathered parameters.
  void append_layer(std::initializer_list<const Pass*> passes, double params, const ComputeModel& cm, StageProgram& sp);
  // Runs `start` once `parties` executors have joined under `key`; `start` receives a callback
  // that runs every participant's continuation.
  void join(const std::string& key, int parties, std::function<void()> cont, std::function<void(std::function<void()>)> start);
  void account(Executor& e) {
    e.time[static_cast<std::size_t>(e.wait_kind)] += (sim_.now() - e.wait_start).seconds();
    e.waiting = false;
  }
  Executor& exec(int stage, int replica) { return execs_[static_cast<std::size_t>(stage * replicas_ + replica)]; }
  int stage_of_vs(int vs) const { return vs % lay_.pp(); }

  const hw::Topology& topo_;
  const StepInputs& in_;
  const Layout& lay_;
  Simulator& sim_;
  FlowNetwork& net_;
  hw::Router router_;
  comm::Planner planner_;
  int vstages_ = 1;           // p * v
  int micro_ = 1;
  int replicas_ = 1;          // data-parallel replicas simulated per stage
  std::vector<StageProgram> programs_;
  std::vector<Executor> execs_;
  std::vector<std::vector<Bucket>> buckets_;  // per stage
  std::vector<std::vector<int>> slot_bucket_; // per stage: bucket of each gradient slot
  std::map<std::string, std::unique_ptr<Collective>> cache_;
  std::map<std::string, std::vector<std::function<void()>>> rendezvous_;
  Bytes bucket_bytes_;
  bool megatron_buckets_ = false;  // Megatron-Core's bucketing (no small first bucket)
  // Mixed GPU kinds: the distinct kinds (node 0's first), each rank's kind, and the stage programs
  // timed on each kind ([kind][stage]); programs are built on gpu_.
  std::vector<const hw::GpuSpec*> kinds_;
  std::vector<int> kind_of_rank_;
  std::vector<std::vector<StageProgram>> kind_programs_;
  const hw::GpuSpec* gpu_ = nullptr;
  bool symmetric_ = true;  // in_.symmetric, false on mixed clusters
  int kind_of(int stage, int replica) const { return kind_of_rank_[static_cast<std::size_t>(lay_.rank(Coords{0, 0, replica, stage}))]; }
  Status check_mixed();
  double act_msg_bytes_ = 0;   // pipeline message per rank pair
  std::uint64_t collectives_ = 0;
  Time h2d_end_;               // when the step's input copies (training.data) finished
  Timeline timeline_;
  // Records [start, end) on one of the executor's tracks (end defaults to now).
  void record(const Executor& e, TimelineEvent::Track track, Time start, std::string name, std::string detail = {},
              std::optional<Time> end = std::nullopt) {
    if (!e.record) return;
    timeline_.events.push_back(
        TimelineEvent{e.stage, e.replica, track, start, end.value_or(sim_.now()), std::move(name), std::move(detail)});
  }
};

// ---------------------------------------------------------------------------------------------

Status Engine::build() {
  const ParallelSpec& par = in_.parallel;
  const TrainingSpec& tr = in_.training;
  const int p = lay_.pp();
  const int v = par.schedule == PipelineSchedule::interleaved_1f1b ? par.virtual_stages : 1;
  if (par.schedule != PipelineSchedule::interleaved_1f1b && par.virtual_stages != 1) {
    return Error("virtual_stages > 1 needs schedule: interleaved-1f1b", "parallel.virtual_stages");
  }
  vstages_ = p * v;
  if (tr.micro_batch < 1) return Error("must be at least 1", "training.micro_batch");
  if (tr.global_batch < 1) return Error("must be at least 1", "training.global_batch");
  const I per_step = tr.micro_batch * lay_.dp();
  if (tr.global_batch % per_step != 0) {
    return Error(fmt::format("global_batch ({}) must be a multiple of micro_batch x dp = {} x {} = {}", tr.global_batch, tr.micro_batch,
                             lay_.dp(), per_step),
                 "training.global_batch");
  }
  micro_ = static_cast<int>(tr.global_batch / per_step);
  if (par.zero < 0 || par.zero > 3) return Error(fmt::format("zero must be 0, 1, 2 or 3, got {}", par.zero), "parallel.zero");
  if (!in_.symmetric && lay_.ep() > 1) return Error("symmetric: false is not supported with expert parallelism", "symmetric");
  replicas_ = in_.symmetric ? 1 : lay_.dp();
  for (const hw::NodeGroup& g : topo_.spec().groups) {
    if (auto st = check_precision(g.node.gpu, tr.precision); !st) return st;
  }
  symmetric_ = in_.symmetric;
  if (auto st = check_dp_impl(); !st) return st;
  if (auto st = check_mixed(); !st) return st;
  // Gradient buckets: PyTorch DDP's 25 MB unless set; Megatron-Core's max(40M, 1M x dp) parameters
  // for model-parallel layouts.
  bucket_bytes_ = par.bucket;
  // MirroredStrategy's NCCL all-reduce packs every gradient into one (num_packs = 1).
  if (par.dp_impl == DpImpl::mirrored) bucket_bytes_ = Bytes(std::numeric_limits<I>::max() / 2);
  // Horovod has no buckets: each tensor (here, each layer's gradients) is handed to its
  // background loop as it becomes ready; fusion happens there (horovod_cycle).
  if (par.dp_impl == DpImpl::horovod) bucket_bytes_ = Bytes(1);
  // One set of stage programs per GPU kind (the last built, node 0's kind, stays in programs_).
  kind_programs_.assign(kinds_.size(), {});
  for (std::size_t k = kinds_.size(); k-- > 0;) {
    gpu_ = kinds_[k];
    programs_.assign(static_cast<std::size_t>(p), StageProgram{});
    Status st = std::visit(
        [&](const auto& m) -> Status {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, TransformerSpec>) return build_transformer(m);
          else return build_cnn(m);
        },
        in_.model);
    if (!st) return st;
    if (kinds_.size() > 1) kind_programs_[k] = programs_;
  }
  build_buckets();
  execs_.clear();
  for (int s = 0; s < p; ++s) {
    for (int r = 0; r < replicas_; ++r) {
      Executor e;
      e.stage = s;
      e.replica = r;
      e.prog = kinds_.size() > 1 ? &kind_programs_[static_cast<std::size_t>(kind_of(s, r))][static_cast<std::size_t>(s)]
                                 : &programs_[static_cast<std::size_t>(s)];
      e.act_ready.assign(static_cast<std::size_t>(micro_ * vstages_), 0);
      e.gathered.assign(programs_[static_cast<std::size_t>(s)].gathers.size(), 0);
      e.grad_ready.assign(static_cast<std::size_t>(micro_ * vstages_), 0);
      e.record = in_.record_timeline && (in_.timeline_stages.empty() || std::find(in_.timeline_stages.begin(), in_.timeline_stages.end(), s) !=
                                                                            in_.timeline_stages.end());
      execs_.push_back(std::move(e));
    }
  }
  for (Executor& e : execs_) {
    e.bucket_of_slot = slot_bucket_[static_cast<std::size_t>(e.stage)];
  }
  return {};
}

// Mixed GPU kinds: every data-parallel replica is simulated on its own kind's programs, so that
// synchronous steps wait for the slowest. Refused where one simulated rank would stand for GPUs
// of different kinds (a tensor- or context-parallel group spanning kinds) or where replicas cannot
// all be simulated (expert parallelism).
Status Engine::check_mixed() {
  kinds_.clear();
  kind_of_rank_.assign(static_cast<std::size_t>(lay_.gpus()), 0);
  for (int rank = 0; rank < lay_.gpus(); ++rank) {
    const hw::GpuSpec& g = topo_.node_template(topo_.node_of(rank)).spec().gpu;
    auto it = std::find_if(kinds_.begin(), kinds_.end(), [&](const hw::GpuSpec* k) { return k->name == g.name; });
    if (it == kinds_.end()) it = kinds_.insert(kinds_.end(), &g);
    kind_of_rank_[static_cast<std::size_t>(rank)] = static_cast<int>(it - kinds_.begin());
  }
  if (kinds_.size() < 2) return {};
  if (lay_.ep() > 1) {
    return Error("a cluster of several GPU kinds cannot be simulated with expert parallelism yet (every replica must be simulated)", "parallel.ep");
  }
  for (int rank = 0; rank < lay_.gpus(); ++rank) {
    const Coords c = lay_.coords(rank);
    const int lead = lay_.rank(Coords{0, 0, c.dp, c.pp});
    if (kind_of_rank_[static_cast<std::size_t>(rank)] != kind_of_rank_[static_cast<std::size_t>(lead)]) {
      return Error(fmt::format("ranks {} ({}) and {} ({}) are in one tensor/context-parallel group: such a group runs at its slowest "
                               "GPU's pace, which dtsim does not simulate; keep tensor and context parallelism within nodes of one kind",
                               lead, kinds_[static_cast<std::size_t>(kind_of_rank_[static_cast<std::size_t>(lead)])]->name, rank,
                               kinds_[static_cast<std::size_t>(kind_of_rank_[static_cast<std::size_t>(rank)])]->name),
                   "parallel");
    }
  }
  replicas_ = lay_.dp();  // every replica, each on its kind
  symmetric_ = false;
  return {};
}

Status Engine::build_transformer(const TransformerSpec& m) {
  const TrainingSpec& tr = in_.training;
  const ParallelSpec& par = in_.parallel;
  const ProgramShape sh = program_shape(m, tr, par, lay_);
  if (auto st = validate_transformer(m, sh); !st) return st;
  const int p = lay_.pp();
  if (m.layers < vstages_) {
    return Error(fmt::format("{} layers cannot fill {} pipeline stages x {} virtual stages", m.layers, p, vstages_ / p), "parallel.pp");
  }
  const Framework fw = tr.framework;
  if (auto st = validate_framework(fw, sh); !st) return st;
  const ComputeModel cm(*gpu_, in_.compute);
  const bool megatron = fw == Framework::megatron;
  const LayerProgram emb = megatron ? transformer_embedding(m, sh) : framework_embedding(m, sh, fw);
  const LayerProgram block = megatron ? transformer_block(m, sh) : framework_block(m, sh, fw);
  const LayerProgram head = megatron ? transformer_head(m, sh) : framework_head(m, sh, fw);
  for (StageProgram& sp : programs_) sp.host_cost = host_per_kernel(in_.compute, fw);
  // Blocks of each virtual stage (parallel.pipeline_split).
  std::vector<std::vector<const LayerProgram*>> vs_layers(static_cast<std::size_t>(vstages_));
  auto blocks = virtual_stage_blocks(m.layers, vstages_, par.split);
  if (!blocks) return blocks.error();
  for (int g = 0; g < vstages_; ++g) {
    auto& L = vs_layers[static_cast<std::size_t>(g)];
    if (g == 0) L.push_back(&emb);
    for (int i = 0; i < (*blocks)[static_cast<std::size_t>(g)]; ++i) L.push_back(&block);
    if (g == vstages_ - 1) L.push_back(&head);
  }
  const int e_bytes = tr.precision == hw::DType::fp32 || tr.precision == hw::DType::tf32 ? 4 : 2;
  // Pipeline messages: each TP rank sends its 1/tp share of the [tokens, hidden] activation
  // (sequence parallelism, or Megatron's scatter/gather of pipeline tensors).
  act_msg_bytes_ = static_cast<double>(tr.micro_batch * (sh.seq / sh.cp) * m.hidden * e_bytes) / lay_.tp();

  ActivationShape as;
  as.micro_batch = tr.micro_batch;
  as.seq = sh.seq;
  as.tp = sh.tp;
  as.cp = sh.cp;
  as.sequence_parallel = sh.sequence_parallel;
  as.recompute = tr.recompute;
  as.attention = tr.attention;
  as.act_bytes = e_bytes;
  as.dropout = sh.dropout > 0 && !sh.dropout_regenerated;  // masks kept for the backward pass
  as.dropout_present = sh.dropout > 0;
  const double per_layer_act = layer_activation_bytes(m, as);
  const int v = vstages_ / p;
  for (int s = 0; s < p; ++s) {
    auto ops = stage_schedule(in_.parallel.schedule, p, micro_, v, s);
    if (!ops) return ops.error();
    StageProgram& sp = programs_[static_cast<std::size_t>(s)];
    // The last backward of each chunk makes its gradients final.
    std::vector<std::size_t> last_b(static_cast<std::size_t>(v), 0);
    for (std::size_t i = 0; i < ops->size(); ++i) {
      if ((*ops)[i].kind == PipeOp::Kind::backward) last_b[static_cast<std::size_t>((*ops)[i].chunk)] = i;
    }
    const bool reduce_each_backward = par.zero >= 3 && lay_.grad_dp() > 1;
    for (std::size_t i = 0; i < ops->size(); ++i) {
      const PipeOp& op = (*ops)[i];
      const int g = virtual_stage(p, s, op.chunk);
      const auto& L = vs_layers[static_cast<std::size_t>(g)];
      sp.labels.push_back(fmt::format("{} mb {}{}", op.kind == PipeOp::Kind::forward ? "forward" : "backward", op.microbatch,
                                      v > 1 ? fmt::format(" chunk {}", op.chunk) : std::string()));
      sp.current_label = static_cast<int>(sp.labels.size() - 1);
      const bool dataparallel = par.dp_impl == DpImpl::dataparallel;
      if (op.kind == PipeOp::Kind::forward) {
        // Token ids in (int64); logits out, in the activation type.
        if (dataparallel) dataparallel_before_forward(sp, 8.0 * static_cast<double>(sh.seq), static_cast<double>(parameter_count(m)));
        if (g > 0) sp.instrs.push_back(Instr{Op::recv_act, op.microbatch, g, Time::zero(), false});
        for (const LayerProgram* lp : L) append_layer({&lp->forward}, static_cast<double>(lp->params), cm, sp);
        if (g < vstages_ - 1) sp.instrs.push_back(Instr{Op::send_act, op.microbatch, g, Time::zero(), false});
        if (dataparallel) dataparallel_after_forward(sp, static_cast<double>(sh.seq * m.vocab * e_bytes));
      } else {
        if (g < vstages_ - 1) sp.instrs.push_back(Instr{Op::recv_grad, op.microbatch, g, Time::zero(), false});
        for (auto it = L.rbegin(); it != L.rend(); ++it) {
          append_layer({&(*it)->recompute, &(*it)->backward}, static_cast<double>((*it)->params), cm, sp);
          sp.recompute_flops += (*it)->recompute.flops();
          // ZeRO-3 / FSDP reduce-scatters a layer's gradients after every micro-batch's backward
          // (docs/model.md, "ZeRO-3 gradient reduction per micro-batch"); otherwise only the
          // last backward of the chunk makes them final.
          const bool last = i == last_b[static_cast<std::size_t>(op.chunk)];
          if (last || reduce_each_backward) {
            sp.grad_slots.push_back(
                LayerSlot{static_cast<double>((*it)->params), static_cast<double>((*it)->expert_params), (*it)->tensors, !last});
            sp.instrs.push_back(Instr{Op::grads_ready, static_cast<int>(sp.grad_slots.size() - 1), 0, Time::zero(), false});
          }
        }
        if (g > 0) sp.instrs.push_back(Instr{Op::send_grad, op.microbatch, g, Time::zero(), false});
        if (dataparallel) dataparallel_after_backward(sp, static_cast<double>(parameter_count(m)));
      }
    }
    sp.instrs.push_back(Instr{Op::end_backward, 0, 0, Time::zero(), false});
    for (int c = 0; c < v; ++c) {
      for (const LayerProgram* lp : vs_layers[static_cast<std::size_t>(virtual_stage(p, s, c))]) {
        sp.dense_params += static_cast<double>(lp->params);
        sp.expert_params += static_cast<double>(lp->expert_params);
        sp.layers += lp == &block ? 1 : 0;
        sp.has_embedding = sp.has_embedding || lp == &emb;
        sp.has_head = sp.has_head || lp == &head;
      }
    }
    sp.in_flight = max_in_flight(*ops);
    // Activations: the peak number of (micro-batch, chunk) pairs in flight, each holding a chunk's
    // layers; the first stage also keeps embedding outputs, the last the fp32 logits of one
    // micro-batch for the loss.
    const double layers_per_chunk = static_cast<double>(sp.layers) / v;
    sp.activation_bytes = sp.in_flight * layers_per_chunk * per_layer_act;
    // The embedding's output is the first block's input, which the block's count already holds;
    // the embedding adds only its dropout mask (one byte per element; Korthikanti et al. 2022, 4.3).
    if (sp.has_embedding && as.dropout) {
      sp.activation_bytes += sp.in_flight * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp) * m.hidden) / (sh.sequence_parallel ? sh.tp : 1);
    }
    if (sp.has_head) sp.activation_bytes += 4.0 * static_cast<double>(tr.micro_batch * (sh.seq / sh.cp)) * static_cast<double>(m.vocab) / lay_.tp();
  }
  if (bucket_bytes_.count() <= 0) {
    // Megatron-Core's default when layouts are model-parallel: max(40M, 1M x dp x cp) parameters.
    megatron_buckets_ = true;
    const double params = std::max(40e6, 1e6 * lay_.grad_dp());
    bucket_bytes_ = Bytes(static_cast<I>(params * hw::dtype_bytes(tr.grad_dtype)));
  }
  return {};
}

Status Engine::build_cnn(const CnnSpec& m) {
  const TrainingSpec& tr = in_.training;
  if (lay_.tp() != 1 || lay_.pp() != 1 || lay_.cp() != 1 || lay_.ep() != 1) {
    return Error(fmt::format("model '{}' is a CNN: only data parallelism is modelled for CNNs (tp = pp = cp = ep = 1)", m.name), "parallel");
  }
  const ComputeModel cm(*gpu_, in_.compute);
  ProgramShape sh;
  sh.micro_batch = tr.micro_batch;
  sh.precision = tr.precision;
  sh.recompute = tr.recompute;
  sh.dropout = tr.dropout.value_or(0.0);
  const Framework fw = tr.framework;
  const auto layers = fw == Framework::megatron ? cnn_program(m, sh) : framework_cnn(m, sh, fw);
  StageProgram& sp = programs_[0];
  sp.host_cost = host_per_kernel(in_.compute, fw);
  const bool dataparallel = in_.parallel.dp_impl == DpImpl::dataparallel;
  const int e_bytes = tr.precision == hw::DType::fp32 || tr.precision == hw::DType::tf32 ? 4 : 2;
  // Without a described input pipeline: fp32 images (torchvision's ToTensor and Normalize).
  const double image_bytes = tr.data ? tr.data->input_bytes.as_double() : 3.0 * static_cast<double>(m.image * m.image) * 4.0;
  for (int mb = 0; mb < micro_; ++mb) {
    sp.labels.push_back(fmt::format("forward mb {}", mb));
    sp.current_label = static_cast<int>(sp.labels.size() - 1);
    if (dataparallel) dataparallel_before_forward(sp, image_bytes, static_cast<double>(parameter_count(m)));
    for (const auto& l : layers) append_layer({&l.forward}, static_cast<double>(l.params), cm, sp);
    if (dataparallel) dataparallel_after_forward(sp, static_cast<double>(m.classes * e_bytes));
    sp.labels.push_back(fmt::format("backward mb {}", mb));
    sp.current_label = static_cast<int>(sp.labels.size() - 1);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      append_layer({&it->recompute, &it->backward}, static_cast<double>(it->params), cm, sp);
      sp.recompute_flops += it->recompute.flops();
      if (mb == micro_ - 1 || (in_.parallel.zero >= 3 && lay_.grad_dp() > 1)) {
        sp.grad_slots.push_back(LayerSlot{static_cast<double>(it->params), 0, it->tensors, mb != micro_ - 1});
        sp.instrs.push_back(Instr{Op::grads_ready, static_cast<int>(sp.grad_slots.size() - 1), 0, Time::zero(), false});
      }
    }
    if (dataparallel) dataparallel_after_backward(sp, static_cast<double>(parameter_count(m)));
  }
  sp.instrs.push_back(Instr{Op::end_backward, 0, 0, Time::zero(), false});
  for (const auto& l : layers) sp.dense_params += static_cast<double>(l.params);
  sp.layers = static_cast<int>(layers.size());
  sp.in_flight = 1;
  // Every layer's input is kept for the backward pass.
  for (const CnnLayer& l : m.layers) sp.activation_bytes += static_cast<double>(tr.micro_batch * l.in_channels * l.in_h * l.in_w * e_bytes);
  return {};
}

// Buckets fill in the order gradients become final (reverse layer order, as PyTorch DDP and
// Megatron-Core).
void Engine::build_buckets() {
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
  buckets_.assign(programs_.size(), {});
  slot_bucket_.assign(programs_.size(), {});
  const double gb = hw::dtype_bytes(in_.training.grad_dtype);
  const double cap = bucket_bytes_.as_double();
  // The small first bucket is PyTorch DDP's (ddp, and its no-overlap baseline); MirroredStrategy
  // and the parameter server bucket by the cap alone.
  const DpImpl impl = in_.parallel.dp_impl;
  const bool pytorch = !megatron_buckets_ && (impl == DpImpl::ddp || impl == DpImpl::no_overlap);
  const double first_cap = pytorch ? std::min(cap, static_cast<double>(Bytes::MiB(1).count())) : cap;
  for (std::size_t s = 0; s < programs_.size(); ++s) {
    auto& bs = buckets_[s];
    const auto& slots = programs_[s].grad_slots;
    Bucket open;
    double filled = 0;
    bool has_open = false;
    // slot_bucket_[s][i]: the last bucket that closes at slot i (or -1); buckets close in order.
    std::vector<int> closes_at(slots.size(), -1);
    auto close = [&](std::size_t slot) {
      bs.push_back(open);
      closes_at[slot] = static_cast<int>(bs.size() - 1);
      open = Bucket{};
      filled = 0;
      has_open = false;
    };
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const LayerSlot& slot = slots[i];
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
        if (filled >= (bs.empty() ? first_cap : cap)) close(i);
      }
      // Horovod fuses tensors on its own cycle (parallel.fusion_buffer): each layer is handed over
      // as soon as it is ready.
      if (has_open && in_.parallel.dp_impl == DpImpl::horovod) close(i);
    }
    if (has_open && !slots.empty()) close(slots.size() - 1);
    // Every bucket waits for one slot: the one that closes it (the engine counts down per bucket).
    slot_bucket_[s] = closes_at;
  }
}

// ---------------------------------------------------------------------------------------------
// Groups and collectives

bool Engine::keep_copy(const std::vector<int>& group, const std::vector<int>& rep) const {
  // A copy that stays inside one node and shares no node with the simulated replica touches only
  // links of its own node: by symmetry it is the simulated copy's twin and need not run.
  std::set<int> nodes;
  for (int r : group) nodes.insert(topo_.node_of(r));
  if (nodes.size() > 1) return true;
  for (int r : rep) {
    if (nodes.count(topo_.node_of(r))) return true;
  }
  return false;
}

std::vector<std::vector<int>> Engine::groups(CommGroup g, int stage, int replica) const {
  std::vector<std::vector<int>> mine, all;
  std::vector<int> rep_ranks;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        Coords x{t, c, d, stage};
        std::vector<int> grp;
        switch (g) {
          case CommGroup::tp:
            if (t != 0) continue;
            grp = lay_.group(Dim::tp, x);
            break;
          case CommGroup::cp:
            if (c != 0) continue;
            grp = lay_.group(Dim::cp, x);
            break;
          case CommGroup::ep:
            if (d % lay_.ep() != 0) continue;
            grp = lay_.ep_group(x);
            break;
        }
        if (d == replica || (g == CommGroup::ep && d / lay_.ep() == replica / lay_.ep())) {
          mine.push_back(grp);
          rep_ranks.insert(rep_ranks.end(), grp.begin(), grp.end());
        } else {
          all.push_back(grp);
        }
      }
    }
  }
  if (!symmetric_) return mine;
  for (auto& grp : all) {
    if (keep_copy(grp, rep_ranks)) mine.push_back(std::move(grp));
  }
  return mine;
}

std::vector<std::vector<int>> Engine::dp_groups(int stage, bool experts) const {
  std::vector<std::vector<int>> out;
  // Gradients are reduced over dp x cp: context-parallel ranks hold the same weights.
  for (int t = 0; t < lay_.tp(); ++t) {
    if (!experts) {
      out.push_back(lay_.grad_group(Coords{t, 0, 0, stage}));
    } else {
      for (int d = 0; d < lay_.ep(); ++d) out.push_back(lay_.expert_grad_group(Coords{t, 0, d, stage}));
    }
  }
  return out;
}

const Collective& Engine::collective(const std::string& key, CollOp op, Bytes bytes, const std::vector<std::vector<int>>& gs) {
  const std::string full = fmt::format("{}|{}|{}", key, static_cast<int>(op), bytes.count());
  auto it = cache_.find(full);
  if (it != cache_.end()) return *it->second;
  auto c = std::make_unique<Collective>();
  for (const auto& g : gs) {
    if (g.size() < 2) continue;
    comm::CollectiveRequest req;
    req.op = op;
    req.size = bytes;
    req.ranks = g;
    auto plan = planner_.plan(req);
    DTSIM_ASSERT(plan.ok(), "a collective of a validated layout could not be planned");
    c->plans.push_back(std::make_shared<const comm::Plan>(std::move(*plan)));
  }
  return *cache_.emplace(full, std::move(c)).first->second;
}

const Collective& Engine::p2p(int from_stage, int to_stage, int replica, Bytes bytes) {
  const std::string key = fmt::format("p2p|{}|{}|{}|{}", from_stage, to_stage, replica, bytes.count());
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  // One flow per rank pair; every replica's pairs that cross nodes or share one with ours.
  std::vector<std::pair<int, int>> mine, others;
  std::vector<int> rep;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        const int a = lay_.rank(Coords{t, c, d, from_stage}), b = lay_.rank(Coords{t, c, d, to_stage});
        if (d == replica) {
          mine.emplace_back(a, b);
          rep.push_back(a);
          rep.push_back(b);
        } else if (symmetric_) {
          others.emplace_back(a, b);
        }
      }
    }
  }
  for (auto [a, b] : others) {
    if (keep_copy({a, b}, rep)) mine.emplace_back(a, b);
  }
  auto plan = std::make_shared<comm::Plan>();
  plan->op = CollOp::sendrecv;
  comm::Phase ph;
  const auto& lat = in_.comm.lat(comm::Algo::ring, comm::Protocol::simple);
  for (auto [a, b] : mine) {
    const hw::Path path = router_.route(a, b, static_cast<std::uint64_t>(a) * 7919 + static_cast<std::uint64_t>(b));
    std::vector<LinkUse> uses;
    for (LinkId l : path) uses.push_back(LinkUse{l, 1});
    const bool cross = topo_.node_of(a) != topo_.node_of(b);
    const Time latency = lat.base + lat.step[static_cast<std::size_t>(cross ? comm::Transport::net : comm::Transport::nvlink)] +
                         in_.comm.call_overhead;
    ph.groups.push_back(comm::FlowGroup{merge_uses(std::move(uses)), bytes, latency});
  }
  plan->phases.push_back(std::move(ph));
  auto c = std::make_unique<Collective>();
  c->plans.push_back(std::move(plan));
  return *cache_.emplace(key, std::move(c)).first->second;
}

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
// Data parallelism without collectives of its own (nn.DataParallel, parameter servers), and the
// copies of input data

Status Engine::check_dp_impl() const {
  const ParallelSpec& par = in_.parallel;
  const DpImpl d = par.dp_impl;
  if (d != DpImpl::mirrored && d != DpImpl::dataparallel && d != DpImpl::parameter_server) return {};
  const std::string name(to_string(d));
  if (lay_.tp() != 1 || lay_.pp() != 1 || lay_.cp() != 1 || lay_.ep() != 1) {
    return Error(fmt::format("dp_impl {} is data parallelism only: it needs tp = pp = cp = ep = 1", name), "parallel.dp_impl");
  }
  if (par.zero != 0) return Error(fmt::format("dp_impl {} does not shard optimizer state: zero must be 0", name), "parallel.zero");
  if ((d == DpImpl::mirrored || d == DpImpl::dataparallel) && topo_.nodes() > 1) {
    return Error(fmt::format("dp_impl {} runs in one process on one node, but the cluster has {} nodes (use ddp or horovod across nodes)",
                             name, topo_.nodes()),
                 "parallel.dp_impl");
  }
  if (d == DpImpl::parameter_server) {
    const int shards = par.parameter_server.shards;
    if (shards < 1) return Error("must be at least 1", "parallel.parameter_server.shards");
    int sockets = 0;
    for (int n = 0; n < topo_.nodes(); ++n) sockets += topo_.node_template(n).spec().cpus;
    if (shards > sockets) {
      return Error(fmt::format("{} shards, but the cluster's nodes have {} CPU sockets to host them (one shard per socket)", shards, sockets),
                   "parallel.parameter_server.shards");
    }
  }
  return {};
}

namespace {
void add_transfer(StageProgram& sp, Transfer t) {
  sp.transfers.push_back(std::move(t));
  sp.instrs.push_back(Instr{Op::transfer, static_cast<int>(sp.transfers.size() - 1), 0, Time::zero(), false, sp.current_label});
}
}  // namespace

// Per forward call: the single process's host work, the batch copied to GPU 0 and scattered to the
// others, and the module replicated from GPU 0 (its fp32 parameters, as autocast keeps them).
void Engine::dataparallel_before_forward(StageProgram& sp, double input_bytes_per_sample, double params) const {
  const int n = lay_.dp();
  const double mb = static_cast<double>(in_.training.micro_batch);
  const Time host = in_.parallel.dataparallel.host_overhead_per_gpu;
  if (host > Time::zero()) add_transfer(sp, Transfer{Transfer::Kind::host, 0, host * n, "host: replicate modules, launch per-GPU threads"});
  add_transfer(sp, Transfer{Transfer::Kind::h2d, mb * n * input_bytes_per_sample, Time::zero(), "copy the batch to GPU 0"});
  if (n < 2) return;
  add_transfer(sp, Transfer{Transfer::Kind::scatter, mb * input_bytes_per_sample, Time::zero(), "scatter inputs from GPU 0"});
  add_transfer(sp, Transfer{Transfer::Kind::replicate, params * 4.0, Time::zero(), "replicate the model from GPU 0"});
}

// The outputs gathered on GPU 0 for the loss; in backward, their gradients scattered back.
void Engine::dataparallel_after_forward(StageProgram& sp, double output_bytes_per_sample) const {
  if (lay_.dp() < 2) return;
  const double b = static_cast<double>(in_.training.micro_batch) * output_bytes_per_sample;
  add_transfer(sp, Transfer{Transfer::Kind::gather, b, Time::zero(), "gather outputs on GPU 0"});
  add_transfer(sp, Transfer{Transfer::Kind::scatter, b, Time::zero(), "scatter output gradients from GPU 0"});
}

// The replicas' gradients summed into the module on GPU 0.
void Engine::dataparallel_after_backward(StageProgram& sp, double params) const {
  if (lay_.dp() < 2) return;
  add_transfer(sp, Transfer{Transfer::Kind::reduce, params * hw::dtype_bytes(in_.training.grad_dtype), Time::zero(), "reduce gradients onto GPU 0"});
}

std::unique_ptr<Collective> Engine::pairwise(const std::vector<std::pair<int, int>>& pairs, double bytes) {
  auto plan = std::make_shared<comm::Plan>();
  plan->op = CollOp::sendrecv;
  comm::Phase ph;
  for (auto [a, b] : pairs) {
    const hw::Path path = router_.route(a, b, static_cast<std::uint64_t>(a) * 7919 + static_cast<std::uint64_t>(b));
    std::vector<LinkUse> uses;
    for (LinkId l : path) uses.push_back(LinkUse{l, 1});
    ph.groups.push_back(comm::FlowGroup{merge_uses(std::move(uses)), Bytes(static_cast<I>(bytes)), router_.latency(path) + in_.comm.call_overhead});
  }
  plan->phases.push_back(std::move(ph));
  auto c = std::make_unique<Collective>();
  c->plans.push_back(std::move(plan));
  return c;
}

const Collective& Engine::transfer(const Transfer& t) {
  const std::string key = fmt::format("xfer|{}|{}", static_cast<int>(t.kind), t.bytes);
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  const int n = lay_.dp();
  std::vector<std::pair<int, int>> from0, to0;
  for (int r = 1; r < n; ++r) {
    from0.emplace_back(0, r);
    to0.emplace_back(r, 0);
  }
  std::unique_ptr<Collective> c;
  const bool nccl = in_.parallel.dataparallel.nccl;
  switch (t.kind) {
    case Transfer::Kind::host: c = std::make_unique<Collective>(); break;
    case Transfer::Kind::h2d: {
      const hw::NodeTemplate& nt = topo_.node_template(0);
      return host_flows(key, {{0, 0, nt.cpu_of_gpu(0) - nt.cpu_vertex(0), false}}, t.bytes);
    }
    case Transfer::Kind::scatter: c = pairwise(from0, t.bytes); break;
    case Transfer::Kind::gather: c = pairwise(to0, t.bytes); break;
    case Transfer::Kind::replicate:
    case Transfer::Kind::reduce: {
      if (!nccl) {
        c = pairwise(t.kind == Transfer::Kind::replicate ? from0 : to0, t.bytes);
        break;
      }
      std::vector<int> ranks(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
      return collective(key, t.kind == Transfer::Kind::replicate ? CollOp::broadcast : CollOp::reduce, Bytes(static_cast<I>(t.bytes)), {ranks});
    }
  }
  return *cache_.emplace(key, std::move(c)).first->second;
}

// GPU rank <-> CPU socket `cpu` of `node`: inside a node over PCIe (and the socket link); across
// nodes through the GPU's nearest NIC, the fabric, and the NIC nearest to that socket.
hw::Path Engine::host_path(int rank, int node, int cpu, bool to_host, std::uint64_t label) {
  const int gnode = topo_.node_of(rank);
  const hw::NodeTemplate& gt = topo_.node_template(gnode);
  const hw::NodeTemplate& ht = topo_.node_template(node);
  const int gv = gt.gpu_vertex(topo_.local_of(rank)), cv = ht.cpu_vertex(cpu);
  hw::Path p;
  if (gnode == node) {
    to_host ? router_.append_local(node, gv, cv, p) : router_.append_local(node, cv, gv, p);
    return p;
  }
  const int gnic = gt.nic_vertex(gt.nearest_nic(topo_.local_of(rank), topo_.fabric_nics(gnode)));
  int hnic = ht.nic_vertex(0);
  for (int k = 1; k < topo_.fabric_nics(node); ++k) {
    if (ht.route_cost(ht.nic_vertex(k), cv) < ht.route_cost(hnic, cv)) hnic = ht.nic_vertex(k);
  }
  if (to_host) {
    router_.append_local(gnode, gv, gnic, p);
    router_.append_fabric(topo_.vertex(gnode, gnic), topo_.vertex(node, hnic), label, p);
    router_.append_local(node, hnic, cv, p);
  } else {
    router_.append_local(node, cv, hnic, p);
    router_.append_fabric(topo_.vertex(node, hnic), topo_.vertex(gnode, gnic), label, p);
    router_.append_local(gnode, gnic, gv, p);
  }
  return p;
}

// One flow per (rank, node, cpu, to_host) end, `bytes` each.
const Collective& Engine::host_flows(const std::string& key, const std::vector<std::tuple<int, int, int, bool>>& ends, double bytes) {
  if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  auto plan = std::make_shared<comm::Plan>();
  plan->op = CollOp::sendrecv;
  comm::Phase ph;
  for (const auto& [rank, node, cpu, to_host] : ends) {
    const hw::Path path = host_path(rank, node, cpu, to_host, static_cast<std::uint64_t>(rank) * 7919 + static_cast<std::uint64_t>(node));
    std::vector<LinkUse> uses;
    for (LinkId l : path) uses.push_back(LinkUse{l, 1});
    ph.groups.push_back(comm::FlowGroup{merge_uses(std::move(uses)), Bytes(static_cast<I>(bytes)), router_.latency(path) + in_.comm.call_overhead});
  }
  plan->phases.push_back(std::move(ph));
  auto c = std::make_unique<Collective>();
  c->plans.push_back(std::move(plan));
  return *cache_.emplace(key, std::move(c)).first->second;
}

namespace {
// Parameter-server shard s: node s mod nodes, socket s / nodes.
std::pair<int, int> shard_home(int s, int nodes) { return {s % nodes, s / nodes}; }
}  // namespace

// Every worker sends its gradients' 1/shards to every shard (all workers: the shards are shared).
const Collective& Engine::ps_push(double grad_bytes) {
  const int shards = in_.parallel.parameter_server.shards;
  std::vector<std::tuple<int, int, int, bool>> ends;
  for (int w = 0; w < lay_.dp(); ++w) {
    for (int s = 0; s < shards; ++s) {
      const auto [node, cpu] = shard_home(s, topo_.nodes());
      ends.emplace_back(w, node, cpu, true);
    }
  }
  return host_flows(fmt::format("ps-push|{}", grad_bytes), ends, grad_bytes / shards);
}

const Collective& Engine::ps_pull(double param_bytes) {
  const int shards = in_.parallel.parameter_server.shards;
  std::vector<std::tuple<int, int, int, bool>> ends;
  for (int w = 0; w < lay_.dp(); ++w) {
    for (int s = 0; s < shards; ++s) {
      const auto [node, cpu] = shard_home(s, topo_.nodes());
      ends.emplace_back(w, node, cpu, false);
    }
  }
  return host_flows(fmt::format("ps-pull|{}", param_bytes), ends, param_bytes / shards);
}

// Once every worker's gradients are in: each shard sums them and applies the update on its CPU,
// then every worker pulls the new fp32 weights of every shard.
void Engine::ps_update(Executor& e) {
  block(e, TimeKind::dp);
  join("ps-update", replicas_, [this, &e, start = sim_.now()] {
    record(e, TimelineEvent::Track::dp, start, "parameter-server update and pull", "shards sum gradients, update, workers pull weights");
    account(e);
    e.end = sim_.now();
  }, [this, params = e.prog->dense_params](std::function<void()> all_done) {
    const ParameterServerSpec& ps = in_.parallel.parameter_server;
    const double read = static_cast<double>(lay_.dp()) * params / ps.shards * hw::dtype_bytes(in_.training.grad_dtype);
    const Time update = Time::from_seconds(read / ps.update_bandwidth.bytes_per_s());
    sim_.schedule_in(update, [this, params, all_done] { launch(ps_pull(params * 4.0), all_done); });
  });
}

// training.data: each step's samples are copied from host memory into the GPUs of the first
// pipeline stage while the step runs (the loader prefetches), contending for PCIe with the rest.
void Engine::start_input_copies() {
  const auto& data = in_.training.data;
  if (!data || in_.parallel.dp_impl == DpImpl::dataparallel) return;
  const double samples = static_cast<double>(in_.training.global_batch) / lay_.dp();
  std::vector<std::tuple<int, int, int, bool>> ends;
  for (int d = 0; d < lay_.dp(); ++d) {
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        const int r = lay_.rank(Coords{t, c, d, 0});
        const int node = topo_.node_of(r);
        const hw::NodeTemplate& nt = topo_.node_template(node);
        ends.emplace_back(r, node, nt.cpu_of_gpu(topo_.local_of(r)) - nt.cpu_vertex(0), false);  // its socket
      }
    }
  }
  launch(host_flows("input", ends, samples * data->input_bytes.as_double()), [this] { h2d_end_ = sim_.now(); });
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
  if (e.record && e.pc < e.prog->instrs.size()) {
    const Instr& in = e.prog->instrs[e.pc];
    const std::string& label = e.prog->labels[static_cast<std::size_t>(in.label)];
    if (in.op == Op::compute) {
      record(e, TimelineEvent::Track::compute, e.wait_start, label);
    } else if (in.op == Op::transfer) {
      const Transfer& t = e.prog->transfers[static_cast<std::size_t>(in.a)];
      record(e, t.kind == Transfer::Kind::host ? TimelineEvent::Track::compute : TimelineEvent::Track::dp, e.wait_start, t.name,
             t.kind == Transfer::Kind::host ? std::string() : fmt::format("{}, {}", to_string(Bytes(static_cast<I>(t.bytes))), label));
    } else if (in.op == Op::comm && !in.overlapped) {
      const CommStep& c = e.prog->comms[static_cast<std::size_t>(in.a)];
      record(e, TimelineEvent::Track::comm, e.wait_start, fmt::format("{} {}", to_string(c.group), to_string(c.op)),
             fmt::format("{} per rank, {}; compute waits", to_string(c.bytes), label));
    }
  }
  ++e.pc;
  advance(e);
}

void Engine::advance(Executor& e) {
  const StageProgram& sp = *e.prog;
  while (e.pc < sp.instrs.size()) {
    const Instr& in = sp.instrs[e.pc];
    switch (in.op) {
      case Op::compute: {
        block(e, TimeKind::compute);
        start_compute(e, in.duration, [this, &e] { resume(e); });
        return;
      }
      case Op::comm: {
        const CommStep& c = sp.comms[static_cast<std::size_t>(in.a)];
        const TimeKind kind = c.group == CommGroup::tp ? TimeKind::tp : c.group == CommGroup::cp ? TimeKind::cp : TimeKind::ep;
        const std::string key = fmt::format("{}|{}|{}", to_string(c.group), e.stage, e.replica);
        const Collective& coll = collective(key, c.op, c.bytes, groups(c.group, e.stage, e.replica));
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
      case Op::recv_act:
      case Op::recv_grad: {
        const auto idx = static_cast<std::size_t>(in.a * vstages_ + in.b);
        auto& ready = in.op == Op::recv_act ? e.act_ready : e.grad_ready;
        if (!ready[idx]) {
          block(e, TimeKind::bubble);
          e.wait_op = in.op;
          e.wait_mb = in.a;
          e.wait_vs = in.b;
          return;
        }
        break;
      }
      case Op::send_act:
      case Op::send_grad: {
        const bool fwd = in.op == Op::send_act;
        const int to_vs = fwd ? in.b + 1 : in.b - 1;
        const int to_stage = stage_of_vs(to_vs);
        Executor& target = exec(to_stage, e.replica);
        const Collective& c = p2p(e.stage, to_stage, e.replica, Bytes(static_cast<I>(act_msg_bytes_)));
        const int mb = in.a;
        // Blocking, as Megatron-LM's p2p_communication (torch.distributed send/recv on NCCL, waited
        // for before the schedule goes on): the sender waits for its transfer, as pipeline
        // communication.
        block(e, TimeKind::pp);
        launch(c, [this, &e, &target, fwd, mb, to_vs, start = sim_.now()] {
          if (e.record) {
            record(e, TimelineEvent::Track::pipeline, start, fmt::format("send {} mb {}", fwd ? "activation" : "gradient", mb),
                   fmt::format("{} per rank pair to stage {}", to_string(Bytes(static_cast<I>(act_msg_bytes_))), stage_of_vs(to_vs)));
          }
          deliver(target, fwd ? Op::recv_act : Op::recv_grad, mb, to_vs, start);
          resume(e);
        });
        return;
      }
      case Op::grads_ready:
        grads_ready(e, in.a);
        break;
      case Op::gather_wait:
        e.gather_allowed = std::max(e.gather_allowed, in.a + 1);
        pump_gathers(e);
        if (!e.gathered[static_cast<std::size_t>(in.a)]) {
          block(e, TimeKind::dp);
          e.waiting_gather = in.a;
          return;
        }
        break;
      case Op::end_backward:
        ++e.pc;
        finish_backward(e);
        return;
      case Op::transfer: {
        const Transfer& t = sp.transfers[static_cast<std::size_t>(in.a)];
        if (t.kind == Transfer::Kind::host) {
          block(e, TimeKind::host);
          sim_.schedule_in(t.duration, [this, &e] { resume(e); });
          return;
        }
        block(e, t.kind == Transfer::Kind::h2d ? TimeKind::input : TimeKind::dp);
        launch(transfer(t), [this, &e] { resume(e); });
        return;
      }
    }
    ++e.pc;
  }
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

void Engine::deliver(Executor& t, Op kind, int mb, int vs, Time sent) {
  const auto idx = static_cast<std::size_t>(mb * vstages_ + vs);
  (kind == Op::recv_act ? t.act_ready : t.grad_ready)[idx] = 1;
  if (t.waiting && t.wait_op == kind && t.wait_mb == mb && t.wait_vs == vs) {
    t.wait_op = Op::compute;
    const double in_transfer = (sim_.now() - std::max(sent, t.wait_start)).seconds();
    t.time[static_cast<std::size_t>(TimeKind::pp)] += in_transfer;
    t.time[static_cast<std::size_t>(TimeKind::bubble)] -= in_transfer;
    resume(t);
  }
}

void Engine::append_layer(std::initializer_list<const Pass*> passes, double params, const ComputeModel& cm, StageProgram& sp) {
  if (in_.parallel.zero >= 3 && lay_.grad_dp() > 1 && params > 0) {
    sp.gathers.push_back(params);
    sp.instrs.push_back(Instr{Op::gather_wait, static_cast<int>(sp.gathers.size() - 1), 0, Time::zero(), false});
  }
  for (const Pass* p : passes) append_pass(*p, cm, sp);
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
    launch(collective(fmt::format("dp|{}", stage), CollOp::allgather, Bytes(static_cast<I>(bytes)), dp_groups(stage, false)), all_done);
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
  const int last = e.bucket_of_slot[static_cast<std::size_t>(slot)];
  for (; e.next_bucket <= last; ++e.next_bucket) bucket_ready(e, buckets_[static_cast<std::size_t>(e.stage)][static_cast<std::size_t>(e.next_bucket)]);
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
      launch(ps_push(bk.params * gb), all_done);
      return;
    }
    std::vector<const Collective*> cs;
    if (bk.params > 0) {
      cs.push_back(&collective(fmt::format("dp|{}", stage), op, Bytes(static_cast<I>(bk.params * gb)), dp_groups(stage, false)));
    }
    if (bk.expert_params > 0 && lay_.expert_grad_dp() > 1) {
      cs.push_back(&collective(fmt::format("edp|{}", stage), op, Bytes(static_cast<I>(bk.expert_params * gb)), dp_groups(stage, true)));
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
  const StageProgram& sp = *e.prog;
  const auto* tm = std::get_if<TransformerSpec>(&in_.model);
  const bool tied = tm && tm->tied_embeddings && lay_.pp() > 1 && (sp.has_embedding != sp.has_head);
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
  }, [this, tm, replica](std::function<void()> all_done) {
    std::vector<std::vector<int>> gs;
    for (int t = 0; t < lay_.tp(); ++t) {
      for (int c = 0; c < lay_.cp(); ++c) {
        for (int d = 0; d < lay_.dp(); ++d) {
          if (!symmetric_ && d != replica) continue;
          gs.push_back({lay_.rank(Coords{t, c, d, 0}), lay_.rank(Coords{t, c, d, lay_.pp() - 1})});
        }
      }
    }
    const double bytes = static_cast<double>(tm->vocab * tm->hidden) / lay_.tp() * hw::dtype_bytes(in_.training.grad_dtype);
    launch(collective(fmt::format("tie|{}", replica), CollOp::allreduce, Bytes(static_cast<I>(bytes)), gs), all_done);
  });
}

void Engine::optimizer_step(Executor& e) {
  if (in_.parallel.dp_impl == DpImpl::parameter_server) {
    ps_update(e);  // the shards update the weights
    return;
  }
  // One fused, memory-bound update over this rank's (sharded) parameters: Adam reads and writes
  // the fp32 master weight and both moments, reads the gradient, writes the low-precision copy.
  // The distributed optimizer shards over dp x cp (see Layout::grad_dp).
  const double shard = in_.parallel.zero >= 1 ? static_cast<double>(lay_.grad_dp()) : 1.0;
  const double expert_shard = in_.parallel.zero >= 1 ? static_cast<double>(lay_.expert_grad_dp()) : 1.0;
  const double params = e.prog->dense_params / shard + e.prog->expert_params / expert_shard;
  const ComputeModel cm(kinds_.size() > 1 ? *kinds_[static_cast<std::size_t>(kind_of(e.stage, e.replica))] : *kinds_.front(), in_.compute);
  block(e, TimeKind::optimizer);
  const double grads = e.prog->dense_params + e.prog->expert_params;
  Time update = Time::zero();
  if (in_.training.framework == Framework::megatron) {
    update = cm.kernel_time(optimizer_update(in_.training, params)) + cm.kernel_time(gradient_zeroing(in_.training, grads));
  } else {
    // PyTorch's optimizer over the parameter tensors (multi-tensor launches), each launch issued by
    // the host after the backward pass's kernels (no gradient zeroing: set_to_none).
    std::vector<std::int64_t> tensors;
    for (const LayerSlot& s : e.prog->grad_slots) {
      if (s.repeat) continue;  // the same tensors, reduced for an earlier micro-batch
      if (s.tensors.empty()) tensors.push_back(static_cast<I>(s.params));
      tensors.insert(tensors.end(), s.tensors.begin(), s.tensors.end());
    }
    // ZeRO / FSDP: each rank updates its shard of every tensor.
    const I parts = static_cast<I>(shard);
    if (parts > 1) {
      for (I& t : tensors) t = (t + parts - 1) / parts;
    }
    Time lead = e.prog->gpu_lead;
    for (const Kernel& k : framework_optimizer(in_.training, tensors)) {
      const Time kt = cm.kernel_time(k);
      const Time host = e.prog->host_cost;
      update += (host > lead ? host - lead : Time::zero()) + kt;
      lead = (lead > host ? lead - host : Time::zero()) + kt;
    }
  }
  sim_.schedule_in(update, [this, &e] {
    record(e, TimelineEvent::Track::compute, e.wait_start, "optimizer step",
           fmt::format("{} update", in_.training.optimizer == Optimizer::adam ? "Adam" : "SGD"));
    account(e);
    gather_params(e);
  });
}

void Engine::gather_params(Executor& e) {
  if (in_.parallel.zero < 1 || in_.parallel.zero >= 3 || lay_.grad_dp() < 2) {
    e.end = sim_.now();
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
    e.end = sim_.now();
  }, [this, stage, bytes](std::function<void()> all_done) {
    launch(collective(fmt::format("dp|{}", stage), CollOp::allgather, Bytes(static_cast<I>(bytes)), dp_groups(stage, false)), all_done);
  });
}

void Engine::run() {
  start_input_copies();
  for (Executor& e : execs_) {
    sim_.schedule_in(Time::zero(), [this, &e] {
      pump_gathers(e);
      advance(e);
    });
  }
  sim_.run();
  for (const Executor& e : execs_) {
    DTSIM_ASSERT(e.finished && !e.waiting, "a pipeline stage never finished its step (the schedule deadlocked)");
  }
}

StepResult Engine::result() {
  StepResult r;
  r.layout = lay_.describe();
  r.gpus = lay_.gpus();
  r.micro_batches = micro_;
  r.params = static_cast<double>(parameter_count(in_.model));
  const auto* tm = std::get_if<TransformerSpec>(&in_.model);
  r.active_params = tm ? static_cast<double>(active_parameter_count(*tm)) : r.params;
  r.seq = tm ? (in_.training.seq_len > 0 ? in_.training.seq_len : tm->max_seq) : 0;
  const Executor* critical = &execs_.front();
  for (const Executor& e : execs_) {
    if (e.end > critical->end) critical = &e;
  }
  const TrainingSpec& tr = in_.training;
  r.input = input_report(critical->end.seconds());
  // In steady state a step takes at least the loader's period; the wait is booked as input time on
  // every stage (the first stage waits for data, the others for the first).
  const double input_wait = r.input.modelled ? std::max(0.0, r.input.period_s - r.input.gpu_step_s) : 0.0;
  r.step_time_s = critical->end.seconds() + input_wait;
  r.breakdown_s = critical->time;
  r.breakdown_s[static_cast<std::size_t>(TimeKind::input)] += input_wait;
  const double gbatch = static_cast<double>(tr.global_batch);
  r.samples_per_s = gbatch / r.step_time_s;
  r.tokens_per_s = tm ? gbatch * static_cast<double>(r.seq) / r.step_time_s : 0.0;
  r.model_flops_per_step = model_flops_per_sample(in_.model, r.seq) * gbatch;
  // One FLOP convention for MFU and HFU (Korthikanti et al. 2022): hardware FLOPs are the model
  // FLOPs plus the FLOPs of the recomputed kernels, so HFU >= MFU by construction. The kernels'
  // own count (a causal flash-attention kernel skips the masked half) is kept beside it.
  double kernel_flops = 0, recompute_flops = 0;
  for (const StageProgram& sp : programs_) {
    kernel_flops += sp.flops;
    recompute_flops += sp.recompute_flops;
  }
  const double replicas = static_cast<double>(lay_.tp()) * lay_.cp() * lay_.dp();
  r.kernel_flops_per_step = kernel_flops * replicas;
  r.hardware_flops_per_step = r.model_flops_per_step + recompute_flops * replicas;
  const auto peak_of = [&](const hw::GpuSpec& g) {
    const auto pk = g.peak.find(tr.precision);
    return pk != g.peak.end() ? pk->second.flops_per_s() : 0.0;
  };
  // Mixed kinds: the mean peak over the GPUs, so that MFU is against the cluster's total peak.
  double peak_sum = 0;
  for (int rank = 0; rank < lay_.gpus(); ++rank) peak_sum += peak_of(*kinds_[static_cast<std::size_t>(kind_of_rank_[static_cast<std::size_t>(rank)])]);
  r.peak_flops_per_gpu = peak_sum / lay_.gpus();
  if (kinds_.size() > 1) {
    for (std::size_t k = 0; k < kinds_.size(); ++k) {
      KindReport kr;
      kr.gpu = kinds_[k]->name;
      for (int rank : kind_of_rank_) kr.gpus += rank == static_cast<int>(k) ? 1 : 0;
      kr.peak_flops_per_gpu = peak_of(*kinds_[k]);
      for (const Executor& e : execs_) {
        if (kind_of(e.stage, e.replica) != static_cast<int>(k)) continue;
        kr.compute_s = std::max(kr.compute_s, e.time[static_cast<std::size_t>(TimeKind::compute)]);
        kr.end_s = std::max(kr.end_s, e.end.seconds());
      }
      kr.utilization = r.step_time_s > 0 ? kr.compute_s / r.step_time_s : 0.0;
      // Every GPU does the same model work per step (the layout splits it evenly).
      if (kr.peak_flops_per_gpu > 0) kr.mfu = r.model_flops_per_step / r.gpus / (r.step_time_s * kr.peak_flops_per_gpu);
      r.kinds.push_back(kr);
    }
  }
  r.tflops_per_gpu = r.model_flops_per_step / r.step_time_s / r.gpus * 1e-12;
  if (r.peak_flops_per_gpu > 0) {
    r.mfu = r.model_flops_per_step / (r.step_time_s * r.gpus * r.peak_flops_per_gpu);
    r.hfu = r.hardware_flops_per_step / (r.step_time_s * r.gpus * r.peak_flops_per_gpu);
  }
  double busy = 0;
  for (double t : r.breakdown_s) busy += t;
  r.idle_s = std::max(0.0, r.step_time_s - busy);
  // Eager frameworks: memory as PyTorch allocates it, from the memory-only estimate (same stages).
  std::optional<MemoryEstimate> eager_memory;
  if (tr.framework != Framework::megatron) {
    // The layout checks are the engine's own, passed already.
    if (auto est = estimate_memory(topo_, in_)) eager_memory = std::move(*est);
  }
  for (int s = 0; s < lay_.pp(); ++s) {
    const Executor& e = exec(s, 0);
    const StageProgram& sp = programs_[static_cast<std::size_t>(s)];
    StageReport st;
    st.stage = s;
    st.layers = sp.layers;
    st.end_s = e.end.seconds() + input_wait;
    st.time_s = e.time;
    st.time_s[static_cast<std::size_t>(TimeKind::input)] += input_wait;
    double b = 0;
    for (double t : st.time_s) b += t;
    st.idle_s = std::max(0.0, r.step_time_s - b);
    st.in_flight = sp.in_flight;
    StageMemoryInput mi;
    mi.stage = s;
    mi.dense_params = sp.dense_params;
    mi.expert_params = sp.expert_params;
    mi.dp = lay_.grad_dp();
    mi.expert_dp = lay_.expert_grad_dp();
    mi.activations = sp.activation_bytes;
    if (in_.parallel.zero >= 3) mi.gathered_params = 2.0 * sp.dense_params / std::max(1, sp.layers);
    // The stage's smallest GPU (clusters of several kinds may differ in memory).
    int rank = lay_.rank(Coords{0, 0, 0, s});
    for (int d = 1; d < lay_.dp(); ++d) {
      const int other = lay_.rank(Coords{0, 0, d, s});
      if (topo_.node_template(topo_.node_of(other)).spec().gpu.memory < topo_.node_template(topo_.node_of(rank)).spec().gpu.memory) rank = other;
    }
    const Bytes capacity = topo_.node_template(topo_.node_of(rank)).spec().gpu.memory;
    st.memory = eager_memory ? eager_memory->stages[static_cast<std::size_t>(s)].memory : stage_memory(mi, tr, in_.parallel.zero, in_.memory, capacity);
    if (st.memory.total > r.peak_memory.total) r.peak_memory = st.memory;
    if (!st.memory.fits && r.fits) {
      r.fits = false;
      r.memory_note = fmt::format("out of memory: rank {} (pipeline stage {}) needs {:.1f} GiB but its GPU has {:.1f} GiB", rank, s,
                                  st.memory.total / 1073741824.0, st.memory.capacity / 1073741824.0);
    }
    r.stages.push_back(st);
  }
  r.symmetric = symmetric_;
  const int tpcp = lay_.tp() * lay_.cp();
  if (symmetric_ && (lay_.dp() > 1 || tpcp > 1)) {
    std::string who;
    if (lay_.dp() > 1) who = fmt::format("1 of {} data-parallel replicas", lay_.dp());
    if (tpcp > 1) who += fmt::format("{}1 of {} tensor/context-parallel ranks", who.empty() ? "" : " and ", tpcp);
    r.symmetry_note = fmt::format(
        "symmetric ranks simulated once: per pipeline stage, {} run compute; all communication that crosses a node or shares one "
        "with them is on the network",
        who);
  } else if (tpcp > 1) {
    r.symmetry_note = fmt::format("every data-parallel replica simulated; the {} tensor/context-parallel ranks of a replica run identical programs and are simulated once", tpcp);
  }
  r.events = sim_.events_executed();
  r.collectives = collectives_;
  if (in_.record_timeline) {
    timeline_.replicas = replicas_;
    for (int s = 0; s < lay_.pp(); ++s) {
      for (int d = 0; d < replicas_; ++d) {
        std::vector<int> ranks;
        for (int t = 0; t < lay_.tp(); ++t) {
          for (int c = 0; c < lay_.cp(); ++c) ranks.push_back(lay_.rank(Coords{t, c, d, s}));
        }
        std::sort(ranks.begin(), ranks.end());
        timeline_.ranks.push_back(std::move(ranks));
      }
    }
    std::stable_sort(timeline_.events.begin(), timeline_.events.end(), [](const TimelineEvent& a, const TimelineEvent& b) {
      return std::tie(a.stage, a.replica, a.track, a.start) < std::tie(b.stage, b.replica, b.track, b.start);
    });
    // A pass split only by bookkeeping (gradients becoming final mid-backward) is one event.
    std::vector<TimelineEvent> merged;
    for (TimelineEvent& ev : timeline_.events) {
      if (!merged.empty()) {
        TimelineEvent& prev = merged.back();
        if (prev.stage == ev.stage && prev.replica == ev.replica && prev.track == ev.track &&
            ev.track == TimelineEvent::Track::compute && prev.name == ev.name && prev.end == ev.start) {
          prev.end = ev.end;
          continue;
        }
      }
      merged.push_back(std::move(ev));
    }
    timeline_.events = std::move(merged);
    r.timeline = std::move(timeline_);
  }
  return r;
}

}  // namespace

// The loader's stages per step, in steady state (see InputPipeline).
InputReport Engine::input_report(double gpu_step_s) const {
  InputReport ir;
  const auto& data = in_.training.data;
  if (!data) return ir;
  ir.modelled = true;
  ir.dataset = data->dataset;
  ir.gpu_step_s = gpu_step_s;
  const double batch = static_cast<double>(in_.training.global_batch);
  const double per_replica = batch / lay_.dp();
  // Reading: a node reads the samples of the data-parallel replicas whose first stage it holds.
  if (data->storage == InputPipeline::Storage::shared) {
    ir.read_s = batch * data->sample_bytes.as_double() / data->read_bandwidth.bytes_per_s();
  } else {
    std::vector<double> node_samples(static_cast<std::size_t>(topo_.nodes()), 0.0);
    for (int d = 0; d < lay_.dp(); ++d) node_samples[static_cast<std::size_t>(topo_.node_of(lay_.rank(Coords{0, 0, d, 0})))] += per_replica;
    const double most = *std::max_element(node_samples.begin(), node_samples.end());
    ir.read_s = most * data->sample_bytes.as_double() / data->read_bandwidth.bytes_per_s();
  }
  // Decoding: each replica's samples by its own workers (CPU cores) or its GPU's decoder.
  const double rate = data->decoder == InputPipeline::Decoder::cpu ? data->decode_rate * data->cores_per_gpu : data->decode_rate;
  ir.decode_s = per_replica / rate;
  // nn.DataParallel copies its batch inside the step (a transfer); otherwise the copies ran beside it.
  ir.h2d_s = in_.parallel.dp_impl == DpImpl::dataparallel ? 0.0 : h2d_end_.seconds();
  ir.period_s = std::max({ir.read_s, ir.decode_s, ir.h2d_s});
  ir.gpu_samples_per_s = batch / gpu_step_s;
  ir.loader_samples_per_s = ir.period_s > 0 ? batch / ir.period_s : 0.0;
  if (ir.period_s <= gpu_step_s) ir.bound_by = "gpus";
  else if (ir.period_s == ir.read_s) ir.bound_by = "storage";
  else if (ir.period_s == ir.decode_s) ir.bound_by = "decode";
  else ir.bound_by = "host-to-device copy";
  return ir;
}

Expected<StepResult> simulate_step(const hw::Topology& topo, const StepInputs& in) {
  auto lay = Layout::make(in.parallel, topo.gpus());
  if (!lay) return lay.error();
  auto model = make_sharing_model(in.sharing);
  if (!model) return Error(fmt::format("unknown sharing model '{}' (max-min, constant)", in.sharing), "sharing");
  Simulator sim;
  FlowNetwork net(sim, std::move(model));
  topo.install(net);
  Engine engine(topo, in, *lay, sim, net);
  if (auto st = engine.build(); !st) return st.error();
  engine.run();
  return engine.result();
}

}  // namespace dtsim::workloads
