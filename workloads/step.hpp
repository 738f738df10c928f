// One training step on the whole cluster: every pipeline stage runs its schedule of forward and
// backward passes (compute kernels on the compute stream, tensor/context/expert-parallel
// collectives, pipeline sends and receives), data-parallel gradient reduction overlaps the
// backward pass on a communication stream, then the optimizer steps. All communication shares
// the flow-level network, so contention between groups shows.
//
// Symmetry: tensor-parallel ranks run identical programs and are simulated once. By default one
// data-parallel replica per stage is simulated too; every collective copy of the other replicas
// that crosses a node boundary or shares a node with the simulated replica is still put on the
// network, so the simulated replica sees the same contention as all of them (the output says
// so). `symmetric: false` simulates every data-parallel replica.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "comm/collective.hpp"
#include "hw/topology.hpp"
#include "workloads/compute.hpp"
#include "workloads/graph.hpp"
#include "workloads/layout.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace dtsim::workloads {

// What one simulated rank did and when (for Chrome/Perfetto traces). Recorded only on request.
struct TimelineEvent {
  enum class Track : unsigned char { compute, comm, dp, pipeline };
  int stage = 0;
  int replica = 0;   // data-parallel replica
  Track track = Track::compute;
  Time start, end;
  std::string name;   // "forward mb 3 chunk 0", "tp allreduce", "dp reducescatter", "send activation", ...
  std::string detail; // size and group
};

struct Timeline {
  std::vector<TimelineEvent> events;  // in start order per rank
  // The global GPU ranks a simulated (stage, replica) stands for: its tensor- and
  // context-parallel ranks (identical programs).
  std::vector<std::vector<int>> ranks;  // [stage * replicas + replica]
  int replicas = 1;
};

struct StepInputs {
  ModelSpec model;
  TrainingSpec training;
  ParallelSpec parallel;
  ComputeParams compute;
  comm::CommParams comm = comm::CommParams::nccl_defaults();
  MemoryParams memory;
  std::string sharing = "max-min";
  bool symmetric = true;
  bool free_communication = false;  // what-if: every collective and transfer takes no time
  bool record_timeline = false;
  std::vector<int> timeline_stages;  // stages to record (empty: all)
};

// Where a stage's time went. Exposed communication is time the compute stream waited for it.
// host: the single process driving several GPUs (nn.DataParallel); input: waiting for the loader.
enum class TimeKind { compute, tp, cp, ep, pp, dp, optimizer, bubble, host, input, count };
inline constexpr int kTimeKinds = static_cast<int>(TimeKind::count);
std::string_view to_string(TimeKind k);

struct StageReport {
  int stage = 0;
  int layers = 0;
  double end_s = 0;                              // when the stage's step ended
  std::array<double, kTimeKinds> time_s{};       // compute, exposed comm by kind, bubble
  double idle_s = 0;                             // until the slowest stage ended
  int in_flight = 0;                             // micro-batch activations held at the peak
  MemoryBreakdown memory;
};

// The input pipeline in steady state (StepResult::input, when training.data is given). Each stage
// is the time it needs per step; the loader's period is the slowest of them.
struct InputReport {
  bool modelled = false;
  std::string dataset;
  double read_s = 0;        // reading the step's samples from storage
  double decode_s = 0;      // decoding and augmenting them
  double h2d_s = 0;         // copying them into the GPUs (simulated, contending with other PCIe traffic)
  double period_s = 0;      // max of the three
  double gpu_step_s = 0;    // the step without waiting for data
  std::string bound_by;     // "gpus" or the slowest loader stage ("storage", "decode", "host-to-device copy")
  double loader_samples_per_s = 0;
  double gpu_samples_per_s = 0;
};

// Per GPU kind, on clusters of several kinds: the slowest kind bounds a synchronous step.
struct KindReport {
  std::string gpu;
  int gpus = 0;
  double peak_flops_per_gpu = 0;
  double compute_s = 0;     // the longest compute time of a simulated rank of this kind
  double end_s = 0;         // when its last simulated rank finished the step
  double utilization = 0;   // compute_s / step time
  double mfu = 0;           // against this kind's own peak
};

struct StepResult {
  std::string layout;                 // "tp 8 x pp 16 x cp 1 x dp 8, order tp-cp-dp-pp"
  int gpus = 0;
  int micro_batches = 0;              // per pipeline per step (gradient accumulation)
  std::int64_t seq = 0;
  double params = 0;                  // total parameters of the model
  double active_params = 0;           // used per token (MoE)
  double step_time_s = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;            // 0 for CNNs
  double model_flops_per_step = 0;    // by the convention of model_flops_per_sample
  double hardware_flops_per_step = 0; // model FLOPs + recomputed kernels' FLOPs (HFU; >= model)
  double kernel_flops_per_step = 0;   // the kernels' own count (causal flash attention: half the scores)
  double tflops_per_gpu = 0;          // model FLOPs per GPU per second, in TFLOP/s
  double mfu = 0;                     // model FLOPs utilization of the dense peak
  double hfu = 0;                     // hardware FLOPs utilization
  double peak_flops_per_gpu = 0;
  std::array<double, kTimeKinds> breakdown_s{};  // of the stage that ends last
  double idle_s = 0;
  std::vector<StageReport> stages;
  MemoryBreakdown peak_memory;        // of the rank that needs the most
  bool fits = true;
  std::string memory_note;            // names the rank, need and capacity when it does not fit
  bool symmetric = true;
  std::string symmetry_note;
  std::uint64_t events = 0;
  std::uint64_t collectives = 0;
  InputReport input;
  std::vector<KindReport> kinds;      // only for clusters of several GPU kinds
  Timeline timeline;                  // when StepInputs::record_timeline
};

// The flow: build_step_graph (builders and strategies: graph_build.hpp, strategies.hpp) writes the
// step graph (graph.hpp) of `in`; execute_step_graph (executor.hpp) runs it on the network; the
// result is assembled from the graph and the run.
Expected<StepResult> simulate_step(const hw::Topology& topo, const StepInputs& in);
// Runs `graph` (e.g. read back with graph_json.hpp) instead of the configuration's own; the
// configuration still gives the cluster, layout and communication settings, and the graph must
// have its shape (stages, virtual stages, micro-batches, GPU kinds). nullptr: the built graph.
Expected<StepResult> simulate_step(const hw::Topology& topo, const StepInputs& in, const StepGraph* graph);
// A run's timeline events (ExecutionRecord::timeline) in start order per rank, with the ranks each
// simulated (stage, replica) stands for; adjacent compute events of one name merged.
Timeline make_timeline(std::vector<TimelineEvent> events, int replicas, const Layout& lay);
// The step graph the configuration builds (what simulate_step runs).
Expected<StepGraph> build_step_graph(const hw::Topology& topo, const StepInputs& in);

}  // namespace dtsim::workloads
