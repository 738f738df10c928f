// Bandwidth sharing models: given links (capacities) and flows (the links they use, with a count
// per link, and an optional rate cap), decide each flow's rate.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace dtsim {

// One connected component of the link/flow graph, in compressed sparse rows. A flow uses link
// `use_link[k]` `use_count[k]` times for k in [flow_begin[f], flow_begin[f+1]): a coupled flow
// (a ring collective, say) crosses some links more than once and consumes rate x count there.
struct SharingProblem {
  std::vector<double> capacity;          // per link, bytes/s, > 0
  std::vector<std::uint32_t> flow_begin; // size flows + 1
  std::vector<std::uint32_t> use_link;
  std::vector<double> use_count;
  std::vector<double> flow_cap;          // per flow, bytes/s; +inf when uncapped
  std::vector<double> rate;              // output, per flow

  std::size_t flows() const { return flow_cap.size(); }
  std::size_t links() const { return capacity.size(); }
  void clear();
};

class SharingModel {
 public:
  virtual ~SharingModel() = default;
  virtual std::string_view name() const = 0;
  // True when a flow's rate depends on other flows (the network then re-solves whole connected
  // components); false when each flow can be solved alone.
  virtual bool couples_flows() const = 0;
  virtual void solve(SharingProblem& p) = 0;
};

// Max-min fairness by progressive filling (weighted by use counts): all unfrozen flows' rates
// rise together; a link that saturates freezes the flows crossing it. A heap of link levels,
// refreshed lazily (levels only rise): O((uses + links) log links).
class MaxMinSharing final : public SharingModel {
 public:
  std::string_view name() const override { return "max-min"; }
  bool couples_flows() const override { return true; }
  void solve(SharingProblem& p) override;

 private:
  struct Candidate {
    double level;
    std::uint32_t index;  // link index, or flow index when `is_cap`
    bool is_cap;
  };
  // Scratch space reused between solves.
  std::vector<std::uint32_t> link_begin_, link_flows_, fill_;
  std::vector<double> used_, weight_;
  std::vector<char> frozen_;
  std::vector<Candidate> heap_;
};

// Each flow gets the rate its route would give it alone (min over links of capacity / count,
// and its cap), ignoring every other flow: the contention-free bound, for cross-checks against
// closed-form models.
class ConstantRateSharing final : public SharingModel {
 public:
  std::string_view name() const override { return "constant"; }
  bool couples_flows() const override { return false; }
  void solve(SharingProblem& p) override;
};

std::unique_ptr<SharingModel> make_sharing_model(std::string_view name);  // nullptr if unknown

}  // namespace dtsim
