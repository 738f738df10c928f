// The NCCL settings an nccl-tests log states (NCCL_DEBUG=INFO prints "NCCL_X set by environment
// to V" for every variable it reads from the environment), turned into the `dtsim collective`
// options that run the same comparison: so that `--compare` on a user's log runs under the
// settings the run had, without the user retyping them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "calibrate/nccl_tests_log.hpp"

namespace dtsim::calibrate {

// One variable the log sets that dtsim models: what it becomes (`option` "algo" or "proto", or
// the communication parameter's name without "comm.") and its value for that.
struct LogNcclSetting {
  std::string variable;  // "NCCL_BUFFSIZE=8388608", as the log has it
  std::string option;    // "algo", "proto" or a comm parameter ("buffsize")
  std::string value;     // for --algo, --proto or --set comm.<option>
};

struct LogNcclSettings {
  std::vector<LogNcclSetting> modelled;
  std::vector<std::string> not_modelled;  // the other NCCL_ variables' names
};

// NCCL_ALGO -> algo, NCCL_PROTO -> proto, NCCL_NVLS_ENABLE=0 -> algo ^nvls (or nvls added to a
// '^' list of NCCL_ALGO's; a list of names without nvls has none already), NCCL_BUFFSIZE ->
// buffsize, NCCL_P2P_LL_THRESHOLD -> p2p_ll_threshold; every other NCCL_ variable is listed as
// not modelled. Values are passed on as written; the caller's parsers refuse bad ones.
LogNcclSettings nccl_settings(const NcclTestsLog& log);

}  // namespace dtsim::calibrate
