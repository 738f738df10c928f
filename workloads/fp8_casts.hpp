#pragma once
// Transformer Engine's FP8 casts around a layer's FP8 GEMMs (training.precision fp8, Megatron's
// Transformer Engine layers; docs/model.md, "FP8 casts").
//
// A GEMM reads its input and its output gradient in FP8, so each is cast from 16 bits first, in
// both layouts: row-wise for the forward and input-gradient GEMMs, column-wise (transposed) for the
// weight-gradient GEMM. How many passes that takes depends on the scaling recipe and on where the
// tensor comes from (training.hpp, Fp8Recipe). With sequence parallelism the row-wise cast runs on
// the rank's shard before the all-gather, which then moves one byte per element, and the gathered
// tensor is transposed for the weight gradient.

#include "workloads/program.hpp"

namespace dtsim::workloads {

// Adds the casts to one layer's passes. `fwd` and `bwd` are the passes before userbuffers rewrites
// them, `bwd` built from `fwd` by backward_of (and column_parallel_backward), so the backward's
// input-gradient GEMMs of weighted FP8 GEMMs come in the reverse order of the forward's GEMMs.
void add_fp8_casts(Pass& fwd, Pass& bwd, const ProgramShape& sh);

// Bytes per element of the cast passes (Transformer Engine, transformer_engine/pytorch/csrc/
// quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl, and the cast kernels it calls).
struct Fp8CastBytes {
  static constexpr double amax = 2;       // current scaling's maximum pass: read the 16-bit tensor
  static constexpr double rowwise = 3;    // read 16 bits, write 8
  static constexpr double columnwise = 1; // the transposed 8-bit copy, written by the same pass
  static constexpr double transpose = 2;  // an 8-bit tensor transposed on its own: read 1, write 1
};

}  // namespace dtsim::workloads
