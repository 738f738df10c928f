// The results document of a sweep, as `dtsim report` reads it and results.json holds it: the
// question, the setup (model, hardware), which parameters were calibrated, the assumptions, and
// one row per point with its resolved configuration, its simulated result, a flat summary of the
// figures reports chart, and the scaling figures (hardware efficiency, and time to a target loss
// under the large-batch model when a critical batch size is given).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/sweep_loader.hpp"
#include "sim/expected.hpp"

namespace dtsim::planning {

// The results file's first line: what the document needs besides the rows.
nlohmann::json sweep_header(const config::SweepSpec& spec);

// Flat figures of one row ({"config", "result"} as `dtsim simulate --json` writes them): gpus,
// step time, throughput, MFU, memory, breakdown, time to train and cost when the run is given.
nlohmann::json row_summary(const nlohmann::json& row);

// Which simulation parameters differ from dtsim's defaults in a resolved configuration, and which
// of them a calibrated profile provided: {"profile", "calibrated": [...], "set": [...]}.
nlohmann::json parameter_sources(const nlohmann::json& config);

// The document from the header and rows (in point order). Reads the measured CSV named by the
// header, when there is one.
Expected<nlohmann::json> sweep_document(const nlohmann::json& header, const std::vector<nlohmann::json>& rows);

}  // namespace dtsim::planning
