// The collective part of `dtsim fit`: each suite of nccl-tests or harness points (one operation
// on one shape of ranks and nodes) fits the latency and bandwidth parameters of the algorithm and
// protocol pairs that ran it, through dtsim's own planner and flow simulation, and is scored on
// its held-out points with the profile as written.
#pragma once

#include <memory>

#include "calibrate/fit.hpp"

namespace dtsim::calibrate {

class CollectiveFit {
 public:
  // Fits `d`'s collectives with `o`'s options into `res` (params, link_efficiency, coverage,
  // warnings, residuals, fit["nccl"]); `res` must outlive this object's calls.
  CollectiveFit(const Dataset& d, const FitOptions& o, FitResult& res);
  ~CollectiveFit();
  CollectiveFit(const CollectiveFit&) = delete;
  CollectiveFit& operator=(const CollectiveFit&) = delete;

  // Fits every suite; fails on a cluster or preset the points cannot be simulated on.
  Status fit();
  // Residuals of every fitted suite with the parameters as `res` now holds them (rounded as the
  // profile writes them) and with the defaults, and warnings where the automatic choice picks a
  // pair the fit did not set.
  void add_residuals();

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace dtsim::calibrate
