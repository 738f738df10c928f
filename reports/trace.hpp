// The simulated step as a Chrome trace (the JSON object format that chrome://tracing and Perfetto's
// UI open): one process per node, one thread per track of each simulated executor shown (compute,
// tensor/context/expert-parallel communication, data-parallel communication, pipeline transfers),
// "X" complete events with microsecond timestamps, "M" metadata naming processes and threads.
//
// A simulated executor stands for the tensor- and context-parallel ranks of one pipeline stage and
// data-parallel replica (they run identical programs); its thread names list the ranks. With
// symmetric simulation (the default) one data-parallel replica per stage is simulated and every
// replica of a stage shows that replica's timeline (the trace says so in otherData). Overlapping
// events of one track (ZeRO-3 gathers beside gradient reductions, say) go to extra lanes, so that
// every thread's events are disjoint.
#pragma once

#include <string>
#include <vector>

#include "hw/topology.hpp"
#include "sim/expected.hpp"
#include "workloads/layout.hpp"
#include "workloads/step.hpp"

namespace dtsim::reports {

// At most this many executors (stage, replica) are written; a selection beyond it is cut.
inline constexpr int kMaxTraceExecutors = 64;

// "0-7,64,128-131" -> the ranks, sorted and unique; each within [0, gpus).
Expected<std::vector<int>> parse_rank_list(const std::string& text, int gpus);
// "0-7,64" from sorted ranks.
std::string format_rank_list(const std::vector<int>& ranks);

struct TraceSelection {
  std::vector<int> ranks;          // shown, sorted
  std::vector<int> stages;         // pipeline stages to record (StepInputs::timeline_stages)
  int executors = 0;               // simulated executors shown
  bool cut = false;                // the request had more than kMaxTraceExecutors executors
};

// The ranks to show: `requested` (empty: the first rank of every pipeline stage), mapped onto the
// executors that are simulated (symmetric: replica 0 of each stage).
TraceSelection select_trace_ranks(const std::vector<int>& requested, const workloads::Layout& lay, bool symmetric);

struct TraceInfo {
  std::string title;     // "llama2-70b on 8 x dgx-h100"
  std::string layout;
  std::string symmetry_note;
};

// The trace JSON text of a step recorded with record_timeline.
std::string chrome_trace(const workloads::StepResult& r, const workloads::Layout& lay, const hw::Topology& topo, const TraceSelection& sel,
                         const TraceInfo& info);

}  // namespace dtsim::reports
