#include "workloads/notes.hpp"

#include <string>
#include <variant>

#include "workloads/strategies.hpp"

namespace dtsim::workloads {

std::vector<std::string> settings_without_effect(const StepInputs& in, const Layout& lay) {
  std::vector<std::string> out;
  const TrainingSpec& tr = in.training;
  const ParallelSpec& par = in.parallel;
  const bool transformer = std::holds_alternative<TransformerSpec>(in.model);
  if (tr.recompute == Recompute::selective && transformer && fused(tr.attention)) {
    out.push_back(
        "training.recompute: selective has no effect with flash attention: selective recomputation only drops the s x s attention "
        "scores (Korthikanti et al. 2022), which flash attention never stores; use recompute: full to save more memory");
  }
  if (tr.recompute == Recompute::selective && !transformer) {
    out.push_back("training.recompute: selective has no effect on a CNN (it applies to transformer attention); use none or full");
  }
  if (par.sequence_parallel && lay.tp() == 1) {
    out.push_back("parallel.sequence_parallel has no effect with tp = 1 (it splits the norm and dropout activations over the tensor-parallel ranks)");
  }
  if (par.tp_overlap != TpOverlap::backward && lay.tp() == 1) {
    out.push_back("parallel.tp_overlap has no effect with tp = 1 (there are no tensor-parallel collectives to overlap)");
  }
  if (par.zero > 0 && lay.dp() == 1) {
    out.push_back("parallel.zero has no effect with dp = 1 (ZeRO shards over the data-parallel ranks)");
  }
  if (par.overlap_param_gather && (par.zero < 1 || par.zero > 2)) {
    out.push_back("parallel.overlap_param_gather has no effect with zero " + std::to_string(par.zero) +
                  (par.zero == 0 ? " (it overlaps the distributed optimizer's parameter all-gather: zero 1 or 2)"
                                 : " (ZeRO-3 gathers every layer's parameters before it runs anyway)"));
  } else if (par.overlap_param_gather && lay.grad_dp() == 1) {
    out.push_back("parallel.overlap_param_gather has no effect with one data-parallel rank (there is no parameter all-gather)");
  } else if (par.overlap_param_gather && par.dp_impl != DpImpl::ddp) {
    out.push_back("parallel.overlap_param_gather has no effect with dp_impl: " + std::string(to_string(par.dp_impl)) +
                  " (Megatron-LM runs it only with the overlapped gradient reduction, dp_impl: ddp)");
  }
  if (par.param_gather_start != ParamGatherStart::automatic && !overlaps_param_gather(in, lay)) {
    out.push_back("parallel.param_gather_start has no effect without an overlapped parameter all-gather (parallel.overlap_param_gather with zero 1 or 2, dp_impl: ddp and more than one data-parallel rank)");
  } else if (par.param_gather_start == ParamGatherStart::aligned && par.schedule != PipelineSchedule::interleaved_1f1b) {
    out.push_back("parallel.param_gather_start: aligned runs as first-use without schedule: interleaved-1f1b (Megatron-LM turns --align-param-gather off for the other schedules)");
  }
  if (par.separate_gather_group && !(lay.grad_dp() > 1 && (par.zero >= 3 || overlaps_param_gather(in, lay)))) {
    out.push_back("parallel.separate_gather_group has no effect without overlapped parameter all-gathers (zero 3, or overlap_param_gather with zero 1 or 2) over more than one data-parallel rank");
  } else if (par.separate_gather_group && par.dp_impl != DpImpl::ddp) {
    out.push_back("parallel.separate_gather_group has no effect with dp_impl: " + std::string(to_string(par.dp_impl)) +
                  " (only dp_impl: ddp reduces gradients during the backward pass on the gathers' group)");
  }
  if (par.overlap_p2p && lay.pp() == 1) {
    out.push_back("parallel.overlap_p2p has no effect with pp = 1 (there are no pipeline transfers)");
  }
  const bool bucketed = par.dp_impl == DpImpl::ddp || par.dp_impl == DpImpl::parameter_server || par.dp_impl == DpImpl::no_overlap;
  if (!bucketed && par.bucket.count() > 0 && par.bucket != Bytes::MiB(25)) {
    out.push_back("parallel.bucket has no effect with dp_impl: " + std::string(to_string(par.dp_impl)) +
                  " (only DDP-style bucketed reduction uses it; horovod fuses with parallel.fusion_buffer)");
  }
  const ParallelSpec defaults;
  if (par.dp_impl != DpImpl::horovod && (par.fusion_buffer != defaults.fusion_buffer || par.fusion_cycle != defaults.fusion_cycle)) {
    out.push_back("parallel.fusion_buffer and fusion_cycle have no effect unless dp_impl: horovod");
  }
  if (lay.dp() == 1 && par.dp_impl == DpImpl::ddp && par.bucket.count() > 0 && par.bucket != Bytes::MiB(25)) {
    out.push_back("parallel.bucket has no effect with dp = 1 (no gradients are reduced)");
  }
  if (par.split != PipelineSplit::even && lay.pp() == 1 && par.virtual_stages <= 1) {
    out.push_back("parallel.pipeline_split has no effect with pp = 1 (one stage holds every block, the embedding and the loss)");
  }
  // PyTorch frameworks (training.framework): settings their models do not read, and what they
  // leave out (docs/model.md, "Memory as eager PyTorch allocates it").
  const MemoryParams mem_defaults;
  if (tr.framework != Framework::megatron) {
    const std::string fw(to_string(tr.framework));
    if (in.memory.reserved != mem_defaults.reserved) {
      out.push_back("memory.reserved has no effect with framework: " + fw +
                    " (the device memory outside the allocator is memory.cuda_context; the cuBLAS workspace memory.cublas_workspace)");
    }
    if (tr.recompute != Recompute::none && transformer) {
      out.push_back("training.recompute: " + std::string(to_string(tr.recompute)) + " reruns the forward in the step time, but memory under framework: " +
                    fw + " counts every saved tensor as kept (activation checkpointing is not in its memory model), so memory is overstated");
    }
    if (lay.pp() > 1) {
      out.push_back("parallel.pp > 1 with framework: " + fw + " runs the framework's kernels on the pipeline schedule and splits its memory by stage; "
                    "no pipelined eager run was measured (the traces are data-parallel)");
    }
  } else if (in.memory.cuda_context != mem_defaults.cuda_context || in.memory.cublas_workspace != mem_defaults.cublas_workspace) {
    out.push_back("memory.cuda_context and memory.cublas_workspace have no effect with framework: megatron (its allowance is memory.reserved)");
  }
  return out;
}

}  // namespace dtsim::workloads
