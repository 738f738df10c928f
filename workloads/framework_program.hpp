// The kernels that PyTorch frameworks really launch (`training.framework`): Hugging Face and
// torchvision models in eager PyTorch with AMP (fp32 parameters cast to bf16 before each matrix
// product, unfused element-wise chains in fp32, fp32 logits and log-softmax for the loss), and the
// same models under torch.compile (Inductor fuses each element-wise chain into one kernel and pads
// GEMM shapes). Kernel inventories were read from the PyTorch profiler traces in
// data/traces/h100-2026-11-23 (docs/model.md, "Eager PyTorch and torch.compile"); every kernel's
// bytes and FLOPs come from the model's shape.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/compute.hpp"
#include "workloads/program.hpp"

namespace dtsim::workloads {

// The PyTorch frameworks model one data-parallel replica per GPU (tp = cp = ep = 1).
Status validate_framework(Framework fw, const ProgramShape& s);

LayerProgram framework_embedding(const TransformerSpec& m, const ProgramShape& s, Framework fw);
LayerProgram framework_block(const TransformerSpec& m, const ProgramShape& s, Framework fw);
LayerProgram framework_head(const TransformerSpec& m, const ProgramShape& s, Framework fw);
std::vector<LayerProgram> framework_cnn(const CnnSpec& m, const ProgramShape& s, Framework fw);

// The optimizer step as PyTorch launches it over `tensors` (parameter tensor sizes): fused AdamW or
// foreach SGD with momentum through multi_tensor_apply, one launch per group of at most
// max-tensors tensors or 320 chunks of 65536 elements. zero_grad(set_to_none=True) launches nothing.
std::vector<Kernel> framework_optimizer(const TrainingSpec& tr, const std::vector<std::int64_t>& tensors);

// Kernel launches of a multi_tensor_apply over `tensors` with `depth` tensor lists (PyTorch's
// MultiTensorApply.cuh: at most depth_to_max_tensors[depth - 1] tensors and 320 blocks of 65536
// elements per launch).
int multi_tensor_launches(const std::vector<std::int64_t>& tensors, int depth);

// Host time to issue one kernel (zero for megatron: its host runs ahead of the GPU).
Time host_per_kernel(const ComputeParams& p, Framework fw);

}  // namespace dtsim::workloads
