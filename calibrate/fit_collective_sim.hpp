// The communication model the collective fit moves (fit_collectives.cpp): one cluster's
// collectives simulated under parameters and link efficiencies that the fit changes, and the
// parameters ("knobs") of each algorithm/protocol pair. Internal to calibrate/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/collective.hpp"
#include "comm/params.hpp"
#include "hw/specs.hpp"
#include "hw/topology.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate::detail {

// The communication model on one cluster, with link efficiencies that the fit changes.
struct CommState {
  comm::CommParams comm = comm::CommParams::nccl_defaults();
  std::map<std::string, double> link_eff;
};

class CollectiveSim {
 public:
  static Expected<std::unique_ptr<CollectiveSim>> make(const std::string& node, int nodes, int gpus_per_node);

  // A link type's efficiency in the node or fabric preset (1 when neither has it).
  double link_default(const std::string& name) const;
  const std::string& intra_link() const { return intra_link_; }
  const std::string& nic_link() const { return nic_link_; }
  int ranks() const { return ranks_; }

  // The pairs that can run the collective here and that the selection allows.
  std::vector<std::pair<comm::Algo, comm::Protocol>> candidates(CollOp op, const comm::Selection& sel);

  // Time of one collective alone on the cluster, as `dtsim collective` reports it: of one pair,
  // or of the automatic choice among what the selection allows (`chosen`: "ring/Simple").
  Expected<double> time(const CommState& st, CollOp op, std::int64_t bytes, comm::Algo a, comm::Protocol p);
  Expected<double> time(const CommState& st, CollOp op, std::int64_t bytes, const comm::Selection& sel, std::string* chosen = nullptr);

 private:
  comm::CollectiveRequest request(CollOp op, std::int64_t bytes, const comm::Selection& sel) const;
  Expected<hw::Topology*> topology(const CommState& st);

  hw::ClusterSpec base_;
  int ranks_ = 0;
  std::string intra_link_, nic_link_;
  std::map<std::string, std::unique_ptr<hw::Topology>> cache_;
};

// One parameter the collective fit moves: a comm.* time or fraction, or a link type's efficiency.
struct Knob {
  enum class Kind { time, fraction, link };
  Kind kind = Kind::time;
  std::string name;  // comm parameter name without "comm.", or the link type
  bool valid() const { return !name.empty(); }
  std::string profile_name() const { return kind == Kind::link ? "links." + name + ".efficiency" : "comm." + name; }
};

Time* time_field(comm::CommParams& p, const std::string& name);        // nullptr: not a time knob
double* fraction_field(comm::CommParams& p, const std::string& name);  // nullptr: not a fraction knob
double get_knob(CommState& st, const Knob& k, const CollectiveSim& sim);
void set_knob(CommState& st, const Knob& k, double v);  // clamped: times at 0, fractions to (0, 1]
// The knobs of one algorithm/protocol pair: what its fixed latency and its bandwidth depend on
// (mirrors comm::Planner: hierarchical and direct use ring's tables).
std::pair<Knob, Knob> knobs_of(comm::Algo a, comm::Protocol p, CollOp op, bool multinode, const CollectiveSim& sim);

}  // namespace dtsim::calibrate::detail
