// The NCCL settings a collective fit runs under (fit_settings.hpp).
#include "calibrate/fit_settings.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/text.hpp"

namespace dtsim::calibrate {

comm::Selection selection_of(const std::string& algo, const std::string& proto) {
  auto word = [](const std::string& label) {
    const std::string l = ascii_lower(label);
    return l.empty() || l == "default" ? std::string("auto") : l;
  };
  if (auto sel = comm::parse_selection(word(algo), word(proto))) return *sel;
  comm::Selection out;
  if (ascii_lower(algo).find("nvls") != std::string::npos) out.algo = comm::Algo::nvls;
  return out;
}

bool is_auto(const comm::Selection& s) { return !s.algo && !s.protocol && s.algos.empty() && s.protocols.empty(); }

std::string describe(const comm::Selection& s) {
  auto names = [](const auto& list) {
    std::string out;
    for (auto v : list) out += fmt::format("{}{}", out.empty() ? "" : ",", comm::to_string(v));
    return out;
  };
  const std::string a = s.algo ? std::string(comm::to_string(*s.algo)) : s.algos.empty() ? "auto" : names(s.algos);
  const std::string p = s.protocol ? std::string(comm::to_string(*s.protocol)) : names(s.protocols);
  return p.empty() ? a : a + " / " + p;
}

Expected<CommSets> agreed_comm_sets(const std::vector<CollectiveSample>& samples, const CommSets& overrides) {
  if (samples.empty()) return CommSets{};
  auto own = [&](const CollectiveSample& c) {
    CommSets out;
    for (const auto& s : c.comm_sets) {
      if (std::none_of(overrides.begin(), overrides.end(), [&](const auto& o) { return o.first == s.first; })) out.push_back(s);
    }
    return out;
  };
  auto text = [](const CommSets& v) {
    std::string out;
    for (const auto& [n, val] : v) out += fmt::format("{}comm.{}={}", out.empty() ? "" : " ", n, val);
    return out.empty() ? std::string("NCCL's defaults") : out;
  };
  const CommSets first = own(samples.front());
  for (const auto& c : samples) {
    const CommSets mine = own(c);
    if (mine == first) continue;
    return Error(fmt::format("the collective measurements ran under different NCCL settings ({}: {}; {}: {}), and one profile "
                             "holds one set: fit them separately, or give the parameter with --set",
                             samples.front().where, text(first), c.where, text(mine)));
  }
  return first;
}

}  // namespace dtsim::calibrate
