// The execution graph of one training step: what each pipeline stage runs, as plain data, between
// the builders that write it (graph_build.hpp: the analytical transformer and CNN programs) plus
// the parallel strategies that add communication to it (strategies.hpp), and the executor that
// runs it on the event engine and the network (executor.hpp).
//
// Each stage is one stream of ops in program order (its compute stream; a blocking collective or
// a pipeline send holds it). The other dependencies are explicit:
//   - pipeline edges: send_act (micro-batch m, virtual stage g) feeds recv_act (m, g + 1) on the
//     stage holding g + 1; send_grad (m, g) feeds recv_grad (m, g - 1);
//   - gradient edges: grads_ready (slot i) makes a layer's gradients final; the buckets that close
//     at slot i (StageGraph::slot_bucket) are then reduced on the data-parallel stream;
//   - gather edges: gather_wait (i) waits for parameter gather i, which runs on a stream of its
//     own (ZeRO-3: at most one layer ahead; the distributed optimizer's overlapped gather:
//     executor_dp.cpp, first_gathers_allowed);
//   - end_backward: the data-parallel stream drains, then the optimizer step runs (the `optimizer`
//     time below), then the ops after it, if any (a traced step's optimizer kernels), then, with
//     ZeRO-1/2, the all-gather of the updated shards.
// Communication ops name a collective (comm), a pipeline peer or a data movement (transfer); the
// executor maps them onto groups of ranks from the layout. The graph of one stage stands for every
// tensor-/context-parallel rank of it and, by symmetry, for its data-parallel replicas.
//
// Mixed GPU kinds: one set of stage graphs per kind (the same ops, timed on each kind).
// graph_json.hpp writes a StepGraph as JSON and reads it back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/units.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads {

enum class OpKind : unsigned char {
  compute,       // duration on the compute stream
  comm,          // a blocking tensor/context/expert-parallel collective: a = comm index; overlapped: beside `duration` of compute
  recv_act,      // wait for micro-batch a's activation into virtual stage b
  recv_grad,     // wait for micro-batch a's gradient into virtual stage b
  send_act,      // send micro-batch a's activation from virtual stage b to b + 1 (blocking)
  send_grad,     // send micro-batch a's gradient from virtual stage b to b - 1 (blocking)
  grads_ready,   // gradient slot a is final: its buckets may be reduced
  gather_wait,   // ZeRO-3: wait for parameter gather a
  end_backward,  // the backward pass is over: drain data parallelism, then the optimizer step
  transfer,      // nn.DataParallel data movement or host time: a = transfer index
};
inline constexpr OpKind kAllOpKinds[] = {OpKind::compute,   OpKind::comm,        OpKind::recv_act,     OpKind::recv_grad, OpKind::send_act,
                                         OpKind::send_grad, OpKind::grads_ready, OpKind::gather_wait, OpKind::end_backward, OpKind::transfer};
std::string_view to_string(OpKind k);

// Data movements of PyTorch's nn.DataParallel, rooted at GPU 0, and its host time.
struct Transfer {
  enum class Kind : unsigned char { host, h2d, scatter, gather, replicate, reduce };
  Kind kind = Kind::host;
  double bytes = 0;  // h2d: in total; scatter, gather: per GPU other than 0; replicate, reduce: the tensors' size
  Time duration;     // host
  std::string name;
};
std::string_view to_string(Transfer::Kind k);

struct GraphOp {
  OpKind kind = OpKind::compute;
  int a = 0;        // comm: index into comms; recv/send: micro-batch; grads_ready: gradient slot; gather_wait: gather; transfer: index
  int b = 0;        // recv/send: virtual stage
  Time duration;    // compute, or the compute that runs beside an overlapped collective
  bool overlapped = false;
  int label = 0;    // index into StageGraph::labels (what a timeline calls it)
  // Host-launched compute (a traced step; zero for the analytical builders, whose host is always
  // ahead): the host launches this op `host_gap` after the previous launch of the stage graph,
  // and the GPU starts it at max(launch, stream free) + `delay` (launch latency or inter-kernel
  // gap). `stream` 0 is the compute stream, which waits for every collective and pipeline op;
  // an op on another stream runs beside it, ordered only with that stream's own ops.
  Time host_gap;
  Time delay;
  int stream = 0;
};

// The gradients of one layer becoming final.
struct LayerSlot {
  double params = 0;
  double expert_params = 0;
  std::vector<std::int64_t> tensors;  // dense parameter tensors in forward order (empty: one tensor)
  bool repeat = false;                // ZeRO-3: an earlier micro-batch's reduction of the same tensors
};

// Gradients reduced together (a DDP bucket; under Horovod, one layer handed to its fusion cycle).
struct Bucket {
  double params = 0, expert_params = 0;
};

struct StageGraph {
  std::vector<GraphOp> ops;           // program order on the stage's stream
  std::vector<CommStep> comms;        // collectives used by `comm` ops
  std::vector<LayerSlot> grad_slots;  // layers in the order their gradients become final
  std::vector<Bucket> buckets;        // gradient buckets, in reduction order
  std::vector<int> slot_bucket;       // per gradient slot: the last bucket it closes (-1: none)
  std::vector<double> gathers;        // parameters gathered before a layer pass (ZeRO-3; overlapped ZeRO-1/2 buckets), in order
  std::vector<Transfer> transfers;    // nn.DataParallel: used by `transfer` ops
  std::vector<std::string> labels{"step"};  // names of the pipeline ops, for timelines
  Time optimizer;                     // the optimizer step's update on this stage's GPU kind
  double tied_grad_bytes = 0;         // gradients of a tied embedding summed with the stage at the other end (0: none)
  // Bookkeeping for reports and the memory model.
  double flops = 0;                   // hardware FLOPs of one replica-rank for the whole step
  double recompute_flops = 0;         // of which recomputation (part of flops)
  double dense_params = 0, expert_params = 0;
  int layers = 0;
  int in_flight = 0;
  double activation_bytes = 0;
  bool has_embedding = false, has_head = false;
};

struct StepGraph {
  int stages = 1;           // pipeline stages
  int virtual_stages = 1;   // stages x model chunks per stage
  int micro_batches = 1;    // per pipeline per step
  double act_msg_bytes = 0; // pipeline message per rank pair
  std::vector<std::string> gpu_kinds;           // node 0's first
  std::vector<std::vector<StageGraph>> kinds;   // [kind][stage]
  const std::vector<StageGraph>& stage_graphs() const { return kinds.front(); }  // node 0's kind
};

}  // namespace dtsim::workloads
