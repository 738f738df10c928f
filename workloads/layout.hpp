// The parallel layout: how many ways each dimension splits, and where every rank sits. Ranks are
// placed as Megatron-LM does by default: tensor-parallel ranks innermost (adjacent GPUs, inside a
// node), then context, data and pipeline parallel ("tp-cp-dp-pp"); `parallel.order` overrides.
#pragma once

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "sim/expected.hpp"
#include "workloads/training.hpp"

namespace dtsim::workloads {

enum class Dim { tp = 0, cp = 1, dp = 2, pp = 3 };

struct Coords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

class Layout {
 public:
  // Checks that tp x pp x cp x dp equals `gpus` (dp = 0 is derived) and that the order names each
  // dimension once. Model-specific checks are in validate_for_model.
  static Expected<Layout> make(const ParallelSpec& p, int gpus);

  int gpus() const { return gpus_; }
  int size(Dim d) const { return size_[static_cast<std::size_t>(d)]; }
  int tp() const { return size(Dim::tp); }
  int cp() const { return size(Dim::cp); }
  int dp() const { return size(Dim::dp); }
  int pp() const { return size(Dim::pp); }
  int ep() const { return ep_; }

  int rank(const Coords& c) const;
  Coords coords(int rank) const;
  // The ranks that differ from `c` only in dimension `d`, in order of that dimension.
  std::vector<int> group(Dim d, const Coords& c) const;
  // Expert-parallel group: `ep` consecutive data-parallel ranks (as Megatron-Core carves expert
  // parallelism out of the data-parallel dimension).
  std::vector<int> ep_group(const Coords& c) const;
  // Data-parallel group of an expert's weights: the data-parallel ranks holding the same experts.
  std::vector<int> expert_dp_group(const Coords& c) const;
  // Context-parallel ranks hold the same weights as their data-parallel peers, so gradients are
  // reduced, and a distributed optimizer (ZeRO) shards its states, over dp x cp (Megatron-LM's
  // data-parallel group "with context parallel"). These are that group and its size.
  int grad_dp() const { return dp() * cp(); }
  std::vector<int> grad_group(const Coords& c) const;
  // The same for an expert's weights: the expert data-parallel ranks of every context rank.
  int expert_grad_dp() const { return std::max(1, dp() / ep_) * cp(); }
  std::vector<int> expert_grad_group(const Coords& c) const;
  std::string describe() const;  // "tp 8 x pp 16 x dp 8 (order tp-cp-dp-pp)"

 private:
  int gpus_ = 0;
  int ep_ = 1;
  std::array<int, 4> size_{1, 1, 1, 1};
  std::array<int, 4> stride_{1, 1, 1, 1};
  std::string order_;
};

}  // namespace dtsim::workloads
