// The NCCL settings a collective fit runs under: which algorithms and protocols the measured runs
// allowed (a sample's labels, in NCCL_ALGO's and NCCL_PROTO's syntax) and which communication
// parameters they set (a log's NCCL_BUFFSIZE, ...), agreed over the whole dataset.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "calibrate/fit.hpp"
#include "comm/params.hpp"
#include "sim/expected.hpp"

namespace dtsim::calibrate {

// What a sample's labels allow: NCCL_ALGO's and NCCL_PROTO's syntax ("Ring,Tree", "^nvls",
// "Simple"), or a source's label ("", "default": NCCL's choice; another naming NVLS: nvls).
comm::Selection selection_of(const std::string& algo, const std::string& proto);
bool is_auto(const comm::Selection& s);
// "ring", "ring,tree", "auto"; "ring,tree / Simple" where the protocol is restricted too.
std::string describe(const comm::Selection& s);

// A communication parameter (its name without "comm.") and its value, as written.
using CommSets = std::vector<std::pair<std::string, std::string>>;

// The parameters the collective samples state (in the order first stated), but those that
// `overrides` (--set) give: a sample that does not state one is taken to have run under it (a log
// prints a variable only where NCCL read it), and two that state different values are an error
// naming both, since one profile holds one value.
Expected<CommSets> agreed_comm_sets(const std::vector<CollectiveSample>& samples, const CommSets& overrides);

}  // namespace dtsim::calibrate
