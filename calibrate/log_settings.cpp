#include "calibrate/log_settings.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dtsim::calibrate {

LogNcclSettings nccl_settings(const NcclTestsLog& log) {
  LogNcclSettings s;
  auto said = [](const std::string& name, const std::string& value) { return fmt::format("{}={}", name, value); };
  std::string nvls_off;  // NCCL_NVLS_ENABLE=0, as the log has it
  for (const auto& [name, value] : log.nccl_env) {
    if (name == "NCCL_ALGO") {
      s.modelled.push_back({said(name, value), "algo", value});
    } else if (name == "NCCL_PROTO") {
      s.modelled.push_back({said(name, value), "proto", value});
    } else if (name == "NCCL_NVLS_ENABLE") {
      if (value == "0") nvls_off = said(name, value);
    } else if (name == "NCCL_BUFFSIZE") {
      s.modelled.push_back({said(name, value), "buffsize", value});
    } else if (name == "NCCL_P2P_LL_THRESHOLD") {
      s.modelled.push_back({said(name, value), "p2p_ll_threshold", value});
    } else {
      s.not_modelled.push_back(name);
    }
  }
  if (!nvls_off.empty()) {
    auto algo = std::find_if(s.modelled.begin(), s.modelled.end(), [](const LogNcclSetting& m) { return m.option == "algo"; });
    if (algo == s.modelled.end()) {
      s.modelled.push_back({nvls_off, "algo", "^nvls"});
    } else {
      algo->variable += ", " + nvls_off;
      if (!algo->value.empty() && algo->value.front() == '^') algo->value += ",nvls";
    }
  }
  return s;
}

}  // namespace dtsim::calibrate
