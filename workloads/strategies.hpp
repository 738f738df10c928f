// Parallel strategies as transformations of a step graph: each adds the communication (or the
// data movement, or the optimizer work) that a data-parallel implementation or ZeRO stage puts
// into a step. Hooks write ops into a stage as the builder lays out its passes (nn.DataParallel's
// per-call transfers, ZeRO-3's parameter gathers); passes run over a finished stage graph
// (gradient buckets, the optimizer step, tied embeddings). None of them needs the simulator.
#pragma once

#include <vector>

#include "hw/topology.hpp"
#include "workloads/graph.hpp"
#include "workloads/graph_build.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::workloads {

// Settings that mirrored, nn.DataParallel and parameter-server data parallelism need (data
// parallelism only, one node for the single-process ones, enough CPU sockets for the shards).
Status check_dp_impl(const ParallelSpec& par, const Layout& lay, const hw::Topology& topo);

// nn.DataParallel, per forward call: the single process's host work, the batch copied to GPU 0
// and scattered to the others, and the module replicated from GPU 0.
void dataparallel_before_forward(StageWriter& w, const StepInputs& in, const Layout& lay, double input_bytes_per_sample, double params);
// The outputs gathered on GPU 0 for the loss; in backward, their gradients scattered back.
void dataparallel_after_forward(StageWriter& w, const StepInputs& in, const Layout& lay, double output_bytes_per_sample);
// The replicas' gradients summed into the module on GPU 0.
void dataparallel_after_backward(StageWriter& w, const StepInputs& in, const Layout& lay, double params);

// ZeRO-3 / FSDP: a layer pass of `params` parameters first waits for their gather.
void zero3_gather(StageWriter& w, const StepInputs& in, const Layout& lay, double params);

// Megatron-Core's --overlap-param-gather (parallel.overlap_param_gather, zero 1 or 2): the updated
// parameters of each model chunk are all-gathered bucket by bucket in forward order, a bucket
// waited for before the first layer that holds its parameters in the chunk's first forward pass.
bool overlaps_param_gather(const StepInputs& in, const Layout& lay);
// parallel.param_gather_start with `auto` resolved: aligned under interleaved 1F1B, else first-use
// (also for `aligned` without interleaving, which Megatron-LM does not allow).
ParamGatherStart param_gather_start(const ParallelSpec& par);
// The chunk's buckets, from its layers' parameters in forward order: Megatron-Core's rule (walk the
// parameters from the end, close a bucket once it holds `cap_params`), at layer granularity. For
// each layer, the parameters of the bucket that starts there (0 where none does).
std::vector<double> param_gather_buckets(const std::vector<double>& layer_params, double cap_params);
// Before a layer of the chunk's first forward pass: the wait for the bucket starting there.
void param_gather_wait(StageWriter& w, double bucket_params);

// How gradients are grouped into buckets: PyTorch DDP's cap (with its small first bucket),
// Megatron-Core's, one bucket for MirroredStrategy, one per layer for Horovod's fusion cycle.
struct BucketPolicy {
  Bytes cap;
  bool megatron = false;
  // ZeRO-3 without parallel.bucket: one reduce-scatter per gathered unit (a layer's slot), as
  // FSDP reduces each FlatParameter of its units; the cap is not used.
  bool per_unit = false;
};
BucketPolicy bucket_policy(const StepInputs& in, const Layout& lay, bool transformer);
// Megatron-Core buckets only the first pipeline stage's first model chunk; every other stage and
// chunk is one bucket (megatron/core/distributed/distributed_data_parallel.py: bucket_size =
// None when pp_rank > 0 or disable_bucketing, which training.py sets for model_chunk_idx > 0).
bool megatron_bucketed(const BucketPolicy& policy, int stage, int chunk);
// Fills the stage's buckets from its gradient slots (and which slot closes which bucket);
// `slot_chunk` gives each slot's model chunk (empty: all chunk 0).
void add_buckets(StageGraph& g, const StepInputs& in, const BucketPolicy& policy, int stage = 0, const std::vector<int>& slot_chunk = {});

// The optimizer step's update of the stage's (sharded) parameters on `gpu`; host_cost and
// gpu_lead as the builder left them (eager frameworks issue each launch from the host).
Time optimizer_time(const StageGraph& g, Time host_cost, Time gpu_lead, const StepInputs& in, const Layout& lay, const hw::GpuSpec& gpu);

// Bytes of tied-embedding gradients a stage sums with the stage at the other end of the pipeline
// (0 where it holds both ends or neither).
double tied_embedding_bytes(const StageGraph& g, const StepInputs& in, const Layout& lay);

}  // namespace dtsim::workloads
