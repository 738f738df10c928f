// A step graph as JSON, and back. The document:
//   {"format": "dtsim-step-graph", "version": 1, "stages", "virtual_stages", "micro_batches",
//    "act_msg_bytes", "kinds": [{"gpu", "stages": [STAGE, ...]}, ...]}
// with each STAGE holding "ops" (each {"kind", "label", and the kind's own fields: "duration_ps",
// "comm", "overlapped", "micro_batch", "virtual_stage", "slot", "gather", "transfer"}), "comms",
// "grad_slots", "buckets", "slot_bucket", "gathers", "transfers", "labels", "optimizer_ps",
// "tied_grad_bytes" and the bookkeeping of StageGraph. Times are integer picoseconds (dtsim's
// clock), so a graph read back runs to the same figures as the one written; byte counts and
// parameter counts are JSON numbers that round-trip exactly. docs/config.md lists every field.
//
// Reading checks everything the executor relies on (kinds, fields, types, ranges, indices,
// pipeline peers, the end_backward op) and names the JSON path of the first problem
// ("kinds[0].stages[1].ops[17].comm: 9 is out of range [0, 3]").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/expected.hpp"
#include "workloads/graph.hpp"

namespace dtsim::workloads {

inline constexpr std::string_view kGraphFormat = "dtsim-step-graph";
inline constexpr int kGraphVersion = 1;

nlohmann::json graph_to_json(const StepGraph& g);
Expected<StepGraph> graph_from_json(const nlohmann::json& j);

// Written all or nothing (write_file_atomic); read with the file's name in every error.
Status write_graph_file(const std::string& path, const StepGraph& g);
Expected<StepGraph> read_graph_file(const std::string& path);

// A graph to be run for a configuration must have the shape of the one it builds: the same
// pipeline stages, virtual stages, micro-batches and GPU kinds (in order).
Status check_graph_shape(const StepGraph& given, const StepGraph& built);

}  // namespace dtsim::workloads
