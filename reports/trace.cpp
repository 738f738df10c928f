#include "reports/trace.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dtsim::reports {

namespace {

using workloads::TimelineEvent;

const char* track_name(TimelineEvent::Track t) {
  switch (t) {
    case TimelineEvent::Track::compute: return "compute";
    case TimelineEvent::Track::comm: return "tp/cp/ep comm";
    case TimelineEvent::Track::dp: return "dp comm";
    case TimelineEvent::Track::pipeline: return "pipeline";
  }
  return "?";
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// Picoseconds as microseconds, exactly (six decimals).
std::string micros(std::int64_t ps) {
  const bool neg = ps < 0;
  const std::uint64_t a = neg ? static_cast<std::uint64_t>(-ps) : static_cast<std::uint64_t>(ps);
  std::string s = fmt::format("{}{}.{:06d}", neg ? "-" : "", a / 1000000, a % 1000000);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

Expected<std::vector<int>> parse_rank_list(const std::string& text, int gpus) {
  std::set<int> out;
  std::size_t pos = 0;
  if (text.empty()) return Error("the rank list is empty (e.g. 0-7,64)", "--trace-ranks");
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const std::size_t dash = item.find('-');
    int lo = -1, hi = -1;
    try {
      std::size_t used = 0;
      lo = std::stoi(item.substr(0, dash), &used);
      if (used != item.substr(0, dash).size()) lo = -1;
      hi = lo;
      if (dash != std::string::npos) {
        const std::string h = item.substr(dash + 1);
        hi = std::stoi(h, &used);
        if (used != h.size()) hi = -1;
      }
    } catch (...) {
      lo = hi = -1;
    }
    if (lo < 0 || hi < lo) return Error(fmt::format("'{}' is not a rank or a range such as 0-7", item), "--trace-ranks");
    if (hi >= gpus) return Error(fmt::format("rank {} does not exist: the cluster has {} GPUs (ranks 0-{})", hi, gpus, gpus - 1), "--trace-ranks");
    for (int r = lo; r <= hi; ++r) out.insert(r);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::vector<int>(out.begin(), out.end());
}

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]));
    i = j + 1;
  }
  return out;
}

TraceSelection select_trace_ranks(const std::vector<int>& requested, const workloads::Layout& lay, bool symmetric) {
  std::vector<int> ranks = requested;
  if (ranks.empty()) {
    for (int s = 0; s < lay.pp(); ++s) ranks.push_back(lay.rank(workloads::Coords{0, 0, 0, s}));
    std::sort(ranks.begin(), ranks.end());
  }
  TraceSelection sel;
  std::set<std::pair<int, int>> executors;
  std::set<int> stages;
  for (int r : ranks) {
    const workloads::Coords c = lay.coords(r);
    const std::pair<int, int> e{c.pp, symmetric ? 0 : c.dp};
    if (!executors.count(e) && static_cast<int>(executors.size()) >= kMaxTraceExecutors) {
      sel.cut = true;
      continue;
    }
    executors.insert(e);
    stages.insert(c.pp);
    sel.ranks.push_back(r);
  }
  sel.stages.assign(stages.begin(), stages.end());
  sel.executors = static_cast<int>(executors.size());
  return sel;
}

std::string chrome_trace(const workloads::StepResult& r, const workloads::Layout& lay, const hw::Topology& topo, const TraceSelection& sel,
                         const TraceInfo& info) {
  const workloads::Timeline& tl = r.timeline;
  const int replicas = std::max(1, tl.replicas);
  const bool symmetric = replicas == 1 && lay.dp() > 1;
  // The shown ranks grouped by node, then by executor.
  std::map<int, std::map<std::pair<int, int>, std::vector<int>>> nodes;
  for (int rank : sel.ranks) {
    const workloads::Coords c = lay.coords(rank);
    nodes[topo.node_of(rank)][{c.pp, symmetric ? 0 : c.dp}].push_back(rank);
  }
  // Events per executor, in start order per track.
  std::map<std::pair<int, int>, std::vector<const TimelineEvent*>> events;
  for (const TimelineEvent& e : tl.events) events[{e.stage, e.replica}].push_back(&e);

  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& obj) {
    if (!first) out += ",\n";
    out += obj;
    first = false;
  };
  for (const auto& [node, execs] : nodes) {
    std::vector<int> node_ranks;
    for (const auto& [e, rs] : execs) node_ranks.insert(node_ranks.end(), rs.begin(), rs.end());
    std::sort(node_ranks.begin(), node_ranks.end());
    const int pid = node;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", pid,
                     quoted(fmt::format("node {} (ranks {} shown)", node, format_rank_list(node_ranks)))));
    emit(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", pid, node));
    int tid = 0;
    for (const auto& [exec, ranks] : execs) {
      const auto it = events.find(exec);
      // The ranks this executor stands for on this node, and the chosen ranks it shows.
      std::set<int> stands_for(ranks.begin(), ranks.end());
      const std::size_t slot = static_cast<std::size_t>(exec.first * replicas + exec.second);
      if (slot < tl.ranks.size()) {
        for (int rk : tl.ranks[slot]) {
          if (topo.node_of(rk) == node) stands_for.insert(rk);
        }
      }
      const std::string who = fmt::format("ranks {} (stage {}{})", format_rank_list(std::vector<int>(stands_for.begin(), stands_for.end())),
                                          exec.first, symmetric ? "" : fmt::format(", replica {}", exec.second));
      // Lanes per track so that no two events of one thread overlap.
      for (int track = 0; track < 4; ++track) {
        std::vector<std::int64_t> lane_end;
        std::vector<std::pair<int, const TimelineEvent*>> placed;
        if (it != events.end()) {
          std::vector<const TimelineEvent*> evs;
          for (const TimelineEvent* e : it->second) {
            if (static_cast<int>(e->track) == track) evs.push_back(e);
          }
          std::stable_sort(evs.begin(), evs.end(), [](const TimelineEvent* a, const TimelineEvent* b) { return a->start < b->start; });
          for (const TimelineEvent* e : evs) {
            std::size_t lane = 0;
            while (lane < lane_end.size() && lane_end[lane] > e->start.picoseconds()) ++lane;
            if (lane == lane_end.size()) lane_end.push_back(0);
            lane_end[lane] = std::max(e->end.picoseconds(), e->start.picoseconds());
            placed.emplace_back(static_cast<int>(lane), e);
          }
        }
        const std::size_t lanes = std::max<std::size_t>(1, lane_end.size());
        const int base_tid = tid + 1;
        for (std::size_t lane = 0; lane < lanes; ++lane) {
          ++tid;
          const std::string name = fmt::format("{} {}{}", who, track_name(static_cast<TimelineEvent::Track>(track)),
                                               lane > 0 ? fmt::format(" ({})", lane + 1) : "");
          emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", pid, tid, quoted(name)));
          emit(fmt::format(R"({{"ph":"M","name":"thread_sort_index","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", pid, tid, tid));
        }
        for (const auto& [lane, e] : placed) {
          // args only when there is something to say (the thread name holds stage and ranks).
          emit(fmt::format(R"({{"name":{},"cat":{},"ph":"X","ts":{},"dur":{},"pid":{},"tid":{}{}}})", quoted(e->name),
                           quoted(track_name(e->track)), micros(e->start.picoseconds()),
                           micros(std::max<std::int64_t>(0, e->end.picoseconds() - e->start.picoseconds())), pid, base_tid + lane,
                           e->detail.empty() ? std::string() : ",\"args\":{\"detail\":" + quoted(e->detail) + "}"));
        }
      }
    }
  }
  out += "\n],\n\"displayTimeUnit\":\"ns\",\n";
  nlohmann::json other = {{"tool", "dtsim simulate --trace"},
                          {"title", info.title},
                          {"layout", info.layout},
                          {"step_time_s", r.step_time_s},
                          {"ranks_shown", format_rank_list(sel.ranks)},
                          {"executors_shown", sel.executors},
                          {"cut_to_limit", sel.cut},
                          {"identical_ranks", "the tensor- and context-parallel ranks of one stage and replica run identical programs: "
                                              "one set of tracks stands for all of them"}};
  other["symmetry"] = symmetric ? info.symmetry_note + "; every data-parallel replica of a stage shows the simulated replica's timeline"
                                : info.symmetry_note;
  out += "\"otherData\":" + other.dump() + "\n}\n";
  return out;
}

}  // namespace dtsim::reports
