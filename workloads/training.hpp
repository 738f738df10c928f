// Plain descriptions of how a model is trained: batch and sequence sizes, precision,
// recomputation, optimizer, and the parallel layout.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hw/specs.hpp"
#include "sim/units.hpp"
#include "workloads/schedule.hpp"

namespace dtsim::workloads {

enum class Recompute { none, selective, full };
enum class Optimizer { adam, sgd_momentum };
// Attention kernels (`training.attention`): a fused kernel that stores no s x s scores, of the
// FlashAttention-2 generation (flash) or of the first (flash1: FlashAttention 1.x, its Triton
// port, PyTorch 2.0-2.1's SDPA flash kernel; same FLOPs and memory, about half the speed), or
// standard attention (batched GEMMs, softmax and dropout as separate kernels).
enum class Attention { flash, flash1, standard };
constexpr bool fused(Attention a) { return a != Attention::standard; }
// Which framework's kernels a step runs (`training.framework`):
//  megatron       fused kernels as Megatron-LM / Transformer Engine run them (dtsim's analytical program)
//  pytorch_eager  Hugging Face / torchvision code in eager PyTorch: unfused elementwise ops, AMP casts,
//                 fp32 loss over the vocabulary, one kernel launch per op paid on the host
//  torch_compile  the same model under torch.compile: elementwise chains fused by Inductor
enum class Framework { megatron, pytorch_eager, torch_compile };
// How data parallelism is done:
//  ddp               PyTorch DistributedDataParallel: one process per GPU, bucketed all-reduce overlapping backward
//  horovod           one process per GPU, tensor fusion on a cycle, ring all-reduce
//  no_overlap        every bucket reduced after the backward pass (the baseline)
//  mirrored          TensorFlow MirroredStrategy in one node: one all-reduce of all gradients after backward
//  dataparallel      PyTorch nn.DataParallel: one process drives every GPU of a node; inputs scattered from
//                    and outputs gathered on GPU 0, the model replicated from GPU 0, gradients reduced onto it
//  parameter_server  workers push gradients to and pull weights from parameter-server shards (synchronous)
enum class DpImpl { ddp, horovod, no_overlap, mirrored, dataparallel, parameter_server };
// How context parallelism moves keys and values (Megatron-Core's --cp-comm-type):
//  p2p        ring attention: K and V blocks pass around the context-parallel ring while each
//             block's attention runs (Megatron-Core / Transformer Engine default), overlapped
//  allgather  K and V all-gathered before attention, their gradients reduce-scattered after its
//             backward, both exposed (Llama 3, Dubey et al. 2024, section 3.3.2)
//  a2a        DeepSpeed-Ulysses: Q, K and V all-to-all'd from sequence shards to head shards before
//             attention and the output back after it, exposed (Jacobs et al. 2023)
enum class CpComm { p2p, allgather, a2a };
// How a tensor-parallel rank's collectives meet the GEMMs beside them (`parallel.tp_overlap`):
//  none         every collective blocks the compute stream (Megatron-LM before its asynchronous
//               tensor-parallel backward of September 2021)
//  backward     a column-parallel layer's backward reduces its input gradient (reduce-scatter with
//               sequence parallelism, all-reduce without) beside its weight-gradient GEMM and, with
//               sequence parallelism, all-gathers its saved input again beside its input-gradient
//               GEMM (Megatron-LM / Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication,
//               Transformer Engine's Linear); the other collectives block
//  userbuffers  Transformer Engine's userbuffers (Megatron's --tp-comm-overlap) as well: the
//               sequence-parallel all-gathers in front of a GEMM (forward QKV and MLP-up, backward
//               input gradients of the output projection and MLP-down) run chunk by chunk beside it
//               (ring exchange), and the reduce-scatters behind the forward's output projection and
//               MLP-down pipeline with it in 4 pieces
enum class TpOverlap { none, backward, userbuffers };
// When a stage dispatches the first bucket of its overlapped parameter all-gather
// (`parallel.param_gather_start`, with `overlap_param_gather`); the next buckets always go out one
// ahead of the forward pass that waits for them:
//  automatic  aligned with interleaved 1F1B, first_use otherwise (Megatron-Core 0.9 and later,
//             with their defaults)
//  step       every stage as the step starts (Megatron-Core 0.8 and earlier:
//             DistributedOptimizer.zero_grad, before the schedule runs)
//  first_use  a stage when its first forward pass needs it (Megatron-Core 0.9 and later without
//             --align-param-gather, which they force off without interleaving)
//  aligned    every stage all its buckets as the schedule starts (--align-param-gather,
//             interleaved 1F1B only)
enum class ParamGatherStart { automatic, step, first_use, aligned };
// How Transformer Engine scales a GEMM input to FP8 (`training.fp8_recipe`, with precision fp8);
// it sets the cast kernels around each GEMM (docs/model.md, "FP8 casts"):
//  delayed  DelayedScaling (TE's and Megatron-Core's default): the scale comes from earlier
//           steps' maxima, so a cast is one pass (read 16 bits, write 8) that also records the
//           maximum, and a norm writes its output in FP8 itself
//  current  Float8CurrentScaling (NeMo's "FP8-CS"): a pass that finds the tensor's maximum
//           (nvte_compute_amax) before every cast; norms and TE's activations find it as they
//           write, Megatron's own activations and the residual stream's gradients do not
enum class Fp8Recipe { delayed, current };

std::string_view to_string(Recompute r);
std::string_view to_string(Optimizer o);
std::string_view to_string(Attention a);
std::string_view to_string(Framework f);
std::string_view to_string(DpImpl d);
std::string_view to_string(CpComm c);
std::string_view to_string(TpOverlap t);
std::string_view to_string(ParamGatherStart s);
std::string_view to_string(Fp8Recipe r);
std::optional<Recompute> parse_recompute(std::string_view s);
std::optional<Optimizer> parse_optimizer(std::string_view s);
std::optional<Attention> parse_attention(std::string_view s);
std::optional<Framework> parse_framework(std::string_view s);
std::optional<DpImpl> parse_dp_impl(std::string_view s);
std::optional<CpComm> parse_cp_comm(std::string_view s);
std::optional<TpOverlap> parse_tp_overlap(std::string_view s);
std::optional<ParamGatherStart> parse_param_gather_start(std::string_view s);
std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view s);

// Where training data comes from and how it reaches the GPUs (`training.data`). A loader runs
// beside the GPUs (PyTorch DataLoader workers, tf.data) with prefetching, so in steady state a step
// takes the longer of the GPUs' step and the slowest loader stage: reading, decoding and
// augmenting, and the host-to-device copy (simulated on the node's PCIe topology).
struct InputPipeline {
  enum class Storage { local, shared };
  enum class Decoder { cpu, gpu };
  std::string dataset;                 // a name for the output ("imagenet-1k")
  double samples = 0;                  // samples in the dataset (one epoch)
  Bytes sample_bytes;                  // stored (encoded) size of one sample
  Bytes input_bytes;                   // one sample as copied to the GPU (decoded, augmented, collated)
  Storage storage = Storage::local;    // local: every node reads its share from its own drives; shared: one
                                       // file system or object store serves all nodes
  std::string storage_name = "local-nvme";
  Bandwidth read_bandwidth;            // local: per node; shared: in total
  Decoder decoder = Decoder::cpu;
  double decode_rate = 0;              // samples/s: per CPU core (cpu) or per GPU (gpu)
  int cores_per_gpu = 0;               // CPU cores decoding for each GPU (cpu)
};

struct TrainingSpec {
  std::int64_t global_batch = 0;   // samples (sequences or images) per optimizer step
  std::int64_t micro_batch = 1;    // samples per forward/backward pass on one pipeline
  std::int64_t seq_len = 0;        // transformers; 0: the model's max_seq
  hw::DType precision = hw::DType::bf16;   // GEMM and activation type
  hw::DType grad_dtype = hw::DType::fp32;  // gradient reduction type (PyTorch AMP and Megatron default)
  Recompute recompute = Recompute::none;
  Optimizer optimizer = Optimizer::adam;
  Attention attention = Attention::flash;
  Framework framework = Framework::megatron;
  // Dropout probability; nullopt: the model family's usual setting (0.1 for GPT/BERT-style models
  // with biases, none for Llama-style ones).
  std::optional<double> dropout;
  // How the backward pass gets the dropout mask: stored by the forward (PyTorch, Megatron: one byte
  // per element) or regenerated from the random seed (dtsim-validate's workload; no mask in memory).
  bool dropout_mask_regenerated = false;
  // The random-number generator of the dropout kernels: Philox (PyTorch, Megatron-LM, Transformer
  // Engine; cheap next to the bytes) or a 64-bit hash per element (dtsim-validate's kernels).
  bool dropout_hash_rng = false;
  // How standard (unfused) attention lays out its heads: Megatron-LM's views of the fused QKV
  // projection and one permute-and-copy of the context (PyTorch copies), or dtsim-validate's own
  // kernels that split Q, K and V out by head and merge the context back (head_layout: split).
  bool head_layout_split = false;
  // The vocabulary-parallel cross-entropy as one fused kernel (Megatron-Core's
  // --cross-entropy-loss-fusion, Transformer Engine's, dtsim-validate's) or as Megatron-LM's
  // PyTorch operations on fp32 logits (its default through Megatron-Core r0.8:
  // VocabParallelCrossEntropy after logits.float(); cross_entropy: unfused).
  bool cross_entropy_unfused = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;  // with precision fp8
  std::optional<InputPipeline> data;       // nullopt: data is assumed to be on the GPU in time (not modelled)
};

// PyTorch nn.DataParallel specifics.
struct DataParallelSpec {
  // Host time per GPU per forward/backward call of the single Python process (replicating modules,
  // launching per-GPU threads that contend for the GIL). An assumption to calibrate; 0 ignores it.
  Time host_overhead_per_gpu = Time::us(500);
  // nccl: replication and gradient reduction use NCCL broadcast and reduce (torch.cuda.comm with
  // NCCL, the default on CUDA); copies: device-to-device copies from and to GPU 0.
  bool nccl = true;
};

// Synchronous parameter servers: `shards` shards of the parameters, shard i on node i mod nodes
// (colocated with the workers, as TensorFlow's PS deployments commonly run), each on its host CPU.
struct ParameterServerSpec {
  int shards = 1;
  // Rate at which a shard's CPU sums the workers' gradients and applies the update, in bytes of
  // gradient read per second. An assumption to calibrate.
  Bandwidth update_bandwidth = Bandwidth::GBps(10);
};

struct ParallelSpec {
  int tp = 1;
  int pp = 1;
  int dp = 0;   // 0: the GPU count divided by tp * pp * cp
  int cp = 1;
  CpComm cp_comm = CpComm::p2p;
  int ep = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  PipelineSplit split = PipelineSplit::even;  // how blocks are spread over the virtual stages (schedule.hpp)
  int zero = 0;                    // 0 (plain data parallel), 1, 2 or 3 (3 = FSDP full sharding)
  bool sequence_parallel = false;
  TpOverlap tp_overlap = TpOverlap::backward;
  // Megatron-Core's --overlap-param-gather (zero 1 or 2): the distributed optimizer's all-gather of
  // the updated parameters runs bucket by bucket under the next step's first forward pass, each
  // bucket waited for before its first layer, instead of after the optimizer step.
  bool overlap_param_gather = false;
  ParamGatherStart param_gather_start = ParamGatherStart::automatic;
  // Megatron-Core's overlap_p2p_comm (interleaved schedule): a pipeline send is issued and the
  // schedule goes on; only its receiver waits for it. Off: the sender waits (p2p_communication's
  // blocking send/recv).
  bool overlap_p2p = false;
  // The parameter all-gathers (ZeRO-3, overlap_param_gather) on a process group of their own, so
  // that they run beside the gradient reductions. Off (PyTorch FSDP, DeepSpeed ZeRO-3, Megatron-Core):
  // both go to the data-parallel group, whose one NCCL stream runs them one at a time in issue order.
  bool separate_gather_group = false;
  DpImpl dp_impl = DpImpl::ddp;
  Bytes bucket = Bytes::MiB(25);           // DDP gradient bucket cap (PyTorch bucket_cap_mb=25, in MiB)
  Bytes fusion_buffer = Bytes(64 << 20);   // Horovod tensor fusion threshold
  Time fusion_cycle = Time::ms(1);         // Horovod cycle time
  std::string order = "tp-cp-dp-pp";      // rank placement, innermost first (Megatron's default)
  DataParallelSpec dataparallel;
  ParameterServerSpec parameter_server;
};

}  // namespace dtsim::workloads
