#include "workloads/notes.hpp"

#include <string>
#include <variant>

namespace dtsim::workloads {

std::vector<std::string> settings_without_effect(const StepInputs& in, const Layout& lay) {
  std::vector<std::string> out;
  const TrainingSpec& tr = in.training;
  const ParallelSpec& par = in.parallel;
  const bool transformer = std::holds_alternative<TransformerSpec>(in.model);
  if (tr.recompute == Recompute::selective && transformer && tr.attention == Attention::flash) {
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
  if (par.zero > 0 && lay.dp() == 1) {
    out.push_back("parallel.zero has no effect with dp = 1 (ZeRO shards over the data-parallel ranks)");
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
  return out;
}

}  // namespace dtsim::workloads
