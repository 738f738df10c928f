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

namespace {

// A parameter's value as dtsim writes it back ("8M" and "8388608" alike), or the text as given
// where it does not read.
std::string canonical(const std::string& name, const std::string& value) {
  for (const auto& info : comm::comm_param_table()) {
    if (info.name != name) continue;
    comm::CommParams p = comm::CommParams::nccl_defaults();
    if (!info.set(p, value)) return value;
    return info.get(p);
  }
  return value;
}

}  // namespace

Expected<CommSets> agreed_comm_sets(const std::vector<CollectiveSample>& samples, const CommSets& overrides) {
  CommSets out;
  std::vector<std::string> where;  // the sample that stated each of `out`
  for (const auto& c : samples) {
    for (const auto& set : c.comm_sets) {
      // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
      const std::string& name = set.first;
      const std::string& value = set.second;
      if (std::any_of(overrides.begin(), overrides.end(), [&](const auto& o) { return o.first == name; })) continue;
      const auto it = std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == name; });
      if (it == out.end()) {
        out.emplace_back(name, value);
        where.push_back(c.where);
        continue;
      }
      if (canonical(name, it->second) == canonical(name, value)) continue;
      return Error(fmt::format("the collective measurements state different values of comm.{} ({}: {}; {}: {}), and one profile "
                               "holds one: fit them separately, or give it with --set",
                               name, where[static_cast<std::size_t>(it - out.begin())], it->second, c.where, value));
    }
  }
  return out;
}

}  // namespace dtsim::calibrate
