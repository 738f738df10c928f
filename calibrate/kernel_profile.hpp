// Per-kernel comparison of a measured step with the model: a kernel profile (Nsight Compute CSV:
// `id,kernel,grid,block,duration_ns`, one row per kernel in launch order) is classified into kernel
// families (gemm, attention, softmax, dropout, norm, activation, cross_entropy, optimizer, copy,
// embedding) and set beside the time the compute model gives the same families for one step of
// the validation point (`dtsim validate --kernels CSV --point NAME`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calibrate/validate.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

struct ProfiledKernel {
  std::string name;
  double duration_s = 0;
  int line = 0;  // in the CSV
};

// Reads the CSV; errors name file:line and the field. The header must have `kernel` and
// `duration_ns` columns (others are ignored); quoted fields may hold commas.
Expected<std::vector<ProfiledKernel>> read_kernel_csv(const std::string& path);
Expected<std::vector<ProfiledKernel>> parse_kernel_csv(std::string_view text, const std::string& where);

// The family of a measured kernel from its name: "gemm", "attention", "softmax", "dropout", "norm",
// "activation", "cross_entropy", "optimizer", "copy", "embedding", "communication", "startup"
// (initialisation: random fills, casts before training) or "other".
std::string kernel_family_of(std::string_view name);

struct FamilyRow {
  std::string family;
  double measured_s = 0, predicted_s = 0;  // per step
  double measured_kernels = 0, predicted_kernels = 0;
  double error() const { return measured_s > 0 ? (predicted_s - measured_s) / measured_s : 0; }
};

struct KernelComparison {
  std::string point;
  int steps = 0;              // steps the profile holds (optimizer kernels, or as given)
  int startup_kernels = 0;    // left out (before the first step)
  double measured_s = 0, predicted_s = 0;  // sums per step
  std::vector<FamilyRow> rows;  // largest measured first
};

// `steps` 0: one step per optimizer kernel after the start-up kernels (dtsim-validate launches one
// fused Adam per step); PyTorch profiles with several optimizer kernels per step need it given.
Expected<KernelComparison> compare_kernels(const ValidationPoint& p, const std::vector<ProfiledKernel>& kernels, int steps,
                                           const ValidationOptions& o);

std::string kernel_table(const KernelComparison& c);
nlohmann::json kernel_json(const KernelComparison& c);

}  // namespace dtsim::calibrate
