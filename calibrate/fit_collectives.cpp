// The collective part of `dtsim fit` (fit_collectives.hpp).
#include "calibrate/fit_collectives.hpp"
#include "sim/text.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibrate/fit_collective_sim.hpp"
#include "calibrate/fit_internal.hpp"
#include "calibrate/fit_settings.hpp"
#include "calibrate/lsq.hpp"
#include "comm/collective.hpp"
#include "config/hardware.hpp"
#include "config/profile.hpp"
#include "hw/topology.hpp"

namespace dtsim::calibrate {

namespace {

using nlohmann::json;
using detail::fraction_text;
using detail::preset_gpus;
using detail::round_sig;
using detail::Scored;
using detail::split;
using detail::summarize;
using detail::time_text;
using detail::CollectiveSim;
using detail::CommState;
using detail::Knob;
using detail::knobs_of;
using detail::get_knob;
using detail::set_knob;
using detail::time_field;
using detail::fraction_field;

// The minimum of f over [lo, hi] by golden-section search (f taken as unimodal there), in
// `steps` steps: the middle of the last bracket.
template <class F>
double golden_min(F&& f, double lo, double hi, int steps) {
  const double ratio = 0.5 * (std::sqrt(5.0) - 1);
  double c1 = hi - ratio * (hi - lo), c2 = lo + ratio * (hi - lo), f1 = f(c1), f2 = f(c2);
  for (int it = 0; it < steps; ++it) {
    if (f1 < f2) {
      hi = c2, c2 = c1, f2 = f1, c1 = hi - ratio * (hi - lo), f1 = f(c1);
    } else {
      lo = c1, c1 = c2, f1 = f2, c2 = lo + ratio * (hi - lo), f2 = f(c2);
    }
  }
  return 0.5 * (lo + hi);
}

}  // namespace

struct CollectiveFit::State {
  State(const Dataset& d, const FitOptions& o, FitResult& res) : d_(d), o_(o), res_(res) {}

  struct Group {
    CollOp op;
    int ranks, nodes;
    std::vector<std::size_t> idx;
  };

  Status fit() {
    if (d_.collectives.empty()) return {};
    // The communication parameters the runs set (an nccl-tests log's NCCL_BUFFSIZE, ...), with
    // the options' --set in their place: the fit, its defaults' residuals and the profile all run
    // under them.
    auto sets = agreed_comm_sets(d_.collectives, o_.sets);
    if (!sets) return sets.error();
    auto apply = [&](const std::string& name, const std::string& value, const char* why) -> Status {
      for (CommState* st : {&state_, &base_}) {
        if (auto ok = comm::set_comm_param(st->comm, name, value); !ok) return Error(fmt::format("comm.{}: {}", name, ok.error().message));
      }
      res_.params["comm." + name] = value;
      owner_["comm." + name] = why;  // the fit does not move it
      res_.notes.push_back(fmt::format("comm.{} = {}: {}, written into the profile", name, value, why));
      return {};
    };
    for (const auto& [name, value] : *sets) {
      if (auto st = apply(name, value, "the measured runs' NCCL setting"); !st) return st;
    }
    for (const auto& [name, value] : o_.sets) {
      if (auto st = apply(name, value, "--set"); !st) return st;
    }
    std::map<std::tuple<int, int, int, int>, Group> groups;  // ordered: op priority, intra first, larger first
    auto priority = [](CollOp op) {
      switch (op) {
        case CollOp::allreduce: return 0;
        case CollOp::reducescatter: return 1;
        case CollOp::allgather: return 2;
        case CollOp::broadcast: return 3;
        case CollOp::reduce: return 4;
        case CollOp::alltoall: return 5;
        case CollOp::sendrecv: return 6;
      }
      return 7;
    };
    // A node count the data did not give: as many nodes as the ranks fill of the node preset.
    const int per_node = res_.node_preset.empty() ? 0 : preset_gpus(res_.node_preset);
    for (std::size_t i = 0; i < d_.collectives.size(); ++i) {
      const auto& c = d_.collectives[i];
      int nodes = c.nodes;
      if (!c.nodes_known && per_node > 0 && c.ranks > per_node * nodes) nodes = (c.ranks + per_node - 1) / per_node;
      auto& g = groups[{nodes > 1 ? 1 : 0, priority(c.op), -c.ranks, nodes}];
      g.op = c.op;
      g.ranks = c.ranks;
      g.nodes = nodes;
      g.idx.push_back(i);
    }
    json arr = json::array();
    for (auto& [key, g] : groups) {
      auto j = fit_group(g);
      if (!j) return j.error();
      arr.push_back(*j);
    }
    res_.fit["nccl"] = arr;
    return {};
  }

  Expected<json> fit_group(const Group& g) {
    const std::string suite = fmt::format("nccl.{}.{}x{}", to_string(g.op), g.ranks / std::max(1, g.nodes), g.nodes);
    const auto& cs = d_.collectives;
    auto [train, held] = split(g.idx.size(), o_.holdout_every, [&](std::size_t a, std::size_t b) {
      return std::make_pair(cs[g.idx[a]].bytes, cs[g.idx[a]].in_place) < std::make_pair(cs[g.idx[b]].bytes, cs[g.idx[b]].in_place);
    });
    std::vector<bool> is_held(g.idx.size(), false);
    for (std::size_t j : held) is_held[j] = true;
    // What NCCL ran: the options' selection, else the data's labels (NCCL_ALGO and NCCL_PROTO of
    // a log) where every point of the group has the same, else dtsim's automatic choice.
    auto option = [](const std::string& s) { return s.empty() || ascii_lower(s) == "auto" ? std::string() : s; };
    const std::string opt_algo = option(o_.algo), opt_proto = option(o_.proto);
    std::set<std::pair<std::string, std::string>> labels;
    for (std::size_t i : g.idx) labels.emplace(opt_algo.empty() ? cs[i].algo_label : opt_algo, opt_proto.empty() ? cs[i].proto_label : opt_proto);
    comm::Selection target;
    bool from_data = false;  // the data's labels chose at least a part
    if (labels.size() == 1) {
      target = selection_of(labels.begin()->first, labels.begin()->second);
      // Only where a label of the data, not an option, restricts a part.
      const comm::Selection data_algo = selection_of(opt_algo.empty() ? labels.begin()->first : "", "");
      const comm::Selection data_proto = selection_of("", opt_proto.empty() ? labels.begin()->second : "");
      from_data = !is_auto(data_algo) || !is_auto(data_proto);
    } else {
      res_.notes.push_back(fmt::format("{}: its points ran under different NCCL_ALGO / NCCL_PROTO settings: fitted under dtsim's "
                                       "automatic choice (pass --algo and --proto, or fit the logs separately)",
                                       suite));
    }
    json out{{"op", std::string(to_string(g.op))}, {"ranks", g.ranks}, {"nodes", g.nodes},
             {"scope", g.nodes > 1 ? "inter-node" : "intra-node"}, {"algorithm", describe(target)}};

    std::shared_ptr<CollectiveSim> sim;
    std::vector<std::pair<comm::Algo, comm::Protocol>> cands;
    if (g.ranks >= 2 && !res_.node_preset.empty() && g.ranks % g.nodes == 0) {
      auto s = CollectiveSim::make(res_.node_preset, g.nodes, g.ranks / g.nodes);
      if (!s) {
        res_.notes.push_back(fmt::format("{}: no simulator mapping ({} x {} GPUs of {}: {})", suite, g.nodes, g.ranks / g.nodes,
                                         res_.node_preset, s.error().message));
      } else {
        sim = std::move(*s);
        cands = sim->candidates(g.op, target);
        if (cands.empty()) {
          return Error(fmt::format("{}: dtsim cannot run {} with {} on {} ({}{}); choose another --algo or --proto", suite,
                                   to_string(g.op), describe(target), res_.node_preset, cs[g.idx.front()].where,
                                   from_data ? ", as its NCCL settings state" : ""));
        }
      }
    } else if (g.ranks < 2) {
      res_.notes.push_back(fmt::format("{}: one rank: NCCL runs no communication; alpha-beta kept in fit: only", suite));
    } else if (res_.node_preset.empty()) {
      res_.notes.push_back(d_.device_name.empty()
                               ? fmt::format("{}: the data names no GPU (an nccl-tests log without '#  Rank' lines): pass --gpu or --node to map "
                                             "collectives onto dtsim",
                                             suite)
                               : fmt::format("{}: no node preset for '{}': pass --node to map collectives onto dtsim", suite, d_.device_name));
    }
    // Protocols the simulator has for the target: one regime each at most.
    std::vector<comm::Protocol> protos;
    for (comm::Protocol p : comm::kAllProtocols) {
      const bool have = sim ? std::any_of(cands.begin(), cands.end(), [&](const auto& c) { return c.second == p; }) : true;
      if (have) protos.push_back(p);
    }
    std::vector<XY> pts;
    for (std::size_t j : train) pts.push_back(XY{static_cast<double>(cs[g.idx[j]].bytes), cs[g.idx[j]].time_s});
    std::stable_sort(pts.begin(), pts.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
    const std::vector<Regime> regimes = fit_regimes(pts, static_cast<int>(protos.size()));
    // Protocol of each regime, in size order; protocols without a regime share the next larger one's.
    auto proto_regime = [&](comm::Protocol p) -> std::size_t {
      const std::size_t k = regimes.size();
      if (k == 1) return 0;
      if (k == protos.size()) return static_cast<std::size_t>(std::find(protos.begin(), protos.end(), p) - protos.begin());
      return p == protos.front() ? 0 : k - 1;  // two regimes of three protocols: smallest one, and the rest
    };
    json rj = json::array();
    for (std::size_t r = 0; r < regimes.size(); ++r) {
      std::string names;
      for (comm::Protocol p : protos) {
        if (proto_regime(p) == r) names += (names.empty() ? "" : ",") + std::string(comm::to_string(p));
      }
      const Regime& re = regimes[r];
      rj.push_back(json{{"from_bytes", static_cast<std::int64_t>(re.from)},
                        {"to_bytes", static_cast<std::int64_t>(re.to)},
                        {"protocols", names},
                        {"alpha_us", round_sig(re.line.alpha * 1e6, 5)},
                        {"bandwidth_GBps", re.line.beta > 0 ? round_sig(1e-9 / re.line.beta, 5) : 0.0}});
    }
    out["regimes"] = rj;
    {
      std::vector<Scored> sc;
      for (std::size_t j = 0; j < g.idx.size(); ++j) {
        const auto& c = cs[g.idx[j]];
        const double t = regime_for(regimes, static_cast<double>(c.bytes)).line(static_cast<double>(c.bytes));
        sc.push_back(Scored{(t - c.time_s) / c.time_s, c.where, is_held[j]});
      }
      res_.residuals.push_back(summarize(suite, "alpha-beta", sc));
    }
    if (!sim) return out;

    // Map each regime onto the knobs of every candidate pair with its protocol: a fixed-latency
    // knob (affine in the knob: probed) and a bandwidth knob (transfer time ~ 1 / knob).
    const bool multinode = g.nodes > 1;
    std::vector<std::string> set_here;
    const Snapshot before = snapshot();
    for (int round = 0; round < 12; ++round) {
      double change = 0;
      for (std::size_t ri = regimes.size(); ri-- > 0;) {
        const Regime& re = regimes[ri];
        for (const auto& [a, p] : cands) {
          if (proto_regime(p) != ri) continue;
          auto [lat, bw] = knobs_of(a, p, g.op, multinode, *sim);
          auto t = [&, algo = a, proto = p](double bytes) { return sim->time(state_, g.op, static_cast<std::int64_t>(bytes), algo, proto); };
          const std::string pair = fmt::format("{}/{}", comm::to_string(a), comm::to_string(p));
          if (bw.valid() && claim(bw, suite, pair) && re.line.beta > 0) {
            // A fitted LL128 ring rate is the measured one: the A100's measured ratio to NCCL's
            // model (a default) must not scale it again, in the fit or in the profile.
            if (bw.name == "ring.LL128.bandwidth_factor" && state_.comm.ring_ll128_achieved_ratio_sm80_nvlink != 1.0) {
              state_.comm.ring_ll128_achieved_ratio_sm80_nvlink = 1.0;
              res_.params["comm.ring.LL128.achieved_ratio.sm80_nvlink"] = fraction_text(1.0);
            }
            const double hi = std::max(re.to, 1024.0);
            auto l0 = t(0), t1 = t(hi);
            if (!l0) return l0.error();
            if (!t1) return t1.error();
            const double k = (*t1 - *l0) / hi;
            const double e = get_knob(state_, bw, *sim);
            if (k > 0) {
              const double want = e * k / re.line.beta;
              const double ne = std::clamp(want, 1e-3, 1.0);
              if (ne != want && round == 0) {
                res_.notes.push_back(fmt::format("{} {}: {} would need {:.4g} to match the measured bandwidth, clamped to {:.4g} (the "
                                                 "measurements are {} than the model allows: check the node preset and the rank count)",
                                                 suite, pair, bw.profile_name(), want, ne, want > 1.0 ? "faster" : "slower"));
              }
              change = std::max(change, std::fabs(ne - e) / e);
              set_knob(state_, bw, ne);
              note_set(set_here, bw);
              covered(suite, pair, bw);
            }
          }
          if (lat.valid() && claim(lat, suite, pair)) {
            auto l0 = t(0);
            if (!l0) return l0.error();
            const double x = get_knob(state_, lat, *sim);
            set_knob(state_, lat, x + 1e-6);
            auto l1 = t(0);
            set_knob(state_, lat, x);
            if (!l1) return l1.error();
            const double slope = (*l1 - *l0) / 1e-6;
            if (slope > 1e-3) {
              const double nx = std::max(0.0, x + (re.line.alpha - *l0) / slope);
              change = std::max(change, std::fabs(nx - x) / std::max(x, 1e-7));
              set_knob(state_, lat, nx);
              note_set(set_here, lat);
              covered(suite, pair, lat);
            }
          }
        }
      }
      if (change < 1e-7) break;
    }
    // The mapping above matches a line, and the model is not one (NVLS's loops and its pipeline's
    // fill and drain, channel pieces, slices). Where one algorithm/protocol pair serves a regime,
    // its own knobs (a latency, a protocol's or NVLS's bandwidth factor; not a link's efficiency,
    // which other regimes share) are then set to the values that minimise the model's squared
    // relative error on the regime's training points, starting from the mapped ones (a
    // golden-section search on each knob in turn, so the polish never ends worse than the mapping
    // on those points).
    for (std::size_t ri = 0; ri < regimes.size(); ++ri) {
      std::vector<std::pair<comm::Algo, comm::Protocol>> serving;
      for (const auto& c : cands) {
        if (proto_regime(c.second) == ri) serving.push_back(c);
      }
      if (serving.size() != 1) continue;
      // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
      const comm::Algo a = serving.front().first;
      const comm::Protocol p = serving.front().second;
      auto [lat, bw] = knobs_of(a, p, g.op, multinode, *sim);
      const std::string pair = fmt::format("{}/{}", comm::to_string(a), comm::to_string(p));
      std::vector<Knob> knobs;
      for (const Knob& k : {lat, bw}) {
        // A link's efficiency also sets the other protocols' rates on that link: left to the
        // mapping, which settles that coupling over its rounds.
        if (k.kind == Knob::Kind::link) continue;
        if (k.valid() && owner_.count(k.profile_name()) && owner_.at(k.profile_name()) == suite + " " + pair) knobs.push_back(k);
      }
      if (knobs.empty()) continue;
      const Regime& re = regimes[ri];
      Status failed;
      auto error = [&]() {
        double sum = 0;
        for (std::size_t i = re.first; i < re.last; ++i) {
          auto t = sim->time(state_, g.op, static_cast<std::int64_t>(pts[i].x), a, p);
          if (!t) {
            failed = t.error();
            return 0.0;
          }
          const double e = (*t - pts[i].y) / pts[i].y;
          sum += e * e;
        }
        return sum;
      };
      for (int round = 0; round < 4; ++round) {
        for (const Knob& k : knobs) {
          const double x0 = get_knob(state_, k, *sim);
          const double best0 = error();
          // Over [x0 / 2, 2 x0] in log space (a fraction stays at most 1).
          double lo = std::log(std::max(x0, 1e-9) / 2), hi = std::log(std::max(x0, 1e-9) * 2);
          if (k.kind != Knob::Kind::time) hi = std::min(hi, 0.0);
          auto at = [&](double l) {
            set_knob(state_, k, std::exp(l));
            return error();
          };
          const double xm = std::exp(golden_min(at, lo, hi, 40));
          set_knob(state_, k, xm);
          if (error() > best0) set_knob(state_, k, x0);
          if (!failed.ok()) return failed.error();
          note_set(set_here, k);
        }
      }
    }
    // The fitted lines are the measured times of whatever NCCL ran at each size, for every pair
    // that could have run it; NCCL's tuner model would choose among them by other numbers
    // (its tree correction factors), so the profile picks the fastest fitted pair instead: within
    // a node only, unless the data crossed nodes (elsewhere the defaults, and NCCL's model, apply).
    if (!set_here.empty() && !owner_.count("comm.choice")) {  // unless --set gave it
      auto& choice = res_.params["comm.choice"];
      if (multinode) choice = "fastest";
      else if (choice != "fastest") choice = "fastest-on-one-node";
    }
    // The mapping and the polish act knob by knob, each pair on its own; together, and with the
    // choice among the pairs the profile makes, they can end further from the group's training
    // points than where they started (the regimes are protocols by size, and what NCCL ran at a
    // size may be another algorithm, as NVLS trees on H100 nodes). So the group's fit starts again
    // from whichever is closer to its training points (mean |relative error| of the time), the
    // mapped parameters or those it had before, and then moves each parameter of the pairs the
    // profile's choice runs at those sizes to the value that minimises that error under that
    // choice (a scan, then a golden-section search, on each in turn, kept only where it lowers
    // the error): a fit never leaves its own points worse.
    if (!set_here.empty()) {
      std::vector<std::size_t> points;
      for (std::size_t j : train) points.push_back(g.idx[j]);
      // Four starts: the mapped parameters or those before them, each with the choice the
      // mapping writes (the fastest fitted pair) or the one before it (NCCL's tuner model). The
      // choice is the whole profile's: a start that changes it must not leave the training
      // points of a group fitted before this one worse.
      auto choice_of = [](const std::map<std::string, std::string>& params) {
        const auto it = params.find("comm.choice");
        return it == params.end() ? std::string() : it->second;
      };
      const std::string fast = choice_of(res_.params), prior = choice_of(before.params);
      auto with = [](std::map<std::string, std::string> params, const std::string& choice) {
        if (choice.empty()) params.erase("comm.choice");
        else params["comm.choice"] = choice;
        return params;
      };
      auto harms_earlier = [&](const CommState& st, const std::map<std::string, std::string>& params, const std::string& c) -> Expected<bool> {
        if (c == prior) return false;
        for (const GroupEval& ge : comm_groups_) {
          if (!ge.sim) continue;
          auto now = objective(*ge.sim, st, with(params, prior), ge.g.op, ge.target, ge.train);
          auto then = objective(*ge.sim, st, with(params, c), ge.g.op, ge.target, ge.train);
          if (!now) return now.error();
          if (!then) return then.error();
          if (*then > *now) return true;
        }
        return false;
      };
      bool from_mapped = true;
      std::string choice = fast;
      double best = std::numeric_limits<double>::infinity(), mapped_err = 0;
      for (const bool mapped : {true, false}) {
        for (const std::string& c : {fast, prior}) {
          const CommState& st = mapped ? state_ : before.state;
          const auto& params = mapped ? res_.params : before.params;
          auto e = objective(*sim, st, with(params, c), g.op, target, points);
          if (!e) return e.error();
          if (mapped && c == fast) mapped_err = *e;
          if (!(*e < best)) continue;
          auto harms = harms_earlier(st, params, c);
          if (!harms) return harms.error();
          if (*harms) continue;
          best = *e, from_mapped = mapped, choice = c;
        }
      }
      if (!from_mapped) {
        const std::string mapped_knobs = fmt::format("{}", fmt::join(set_here, ", "));
        restore(before);  // drops the mapping's notes too
        set_here.clear();
        res_.notes.push_back(fmt::format("{}: the regimes' parameters ({}) predicted its training points worse than those before them "
                                         "(mean |relative error| {:.1f}% against {:.1f}%{}): the fit starts again from the latter",
                                         suite, mapped_knobs, 100 * mapped_err, 100 * best,
                                         choice == prior ? "" : fmt::format(", with comm.choice {}", choice)));
      }
      res_.params = with(res_.params, choice);
      const double start = best;
      for (int round = 0; round < 2; ++round) {
        const double round_start = best;
        std::vector<std::pair<Knob, std::string>> knobs;  // with the pair it belongs to
        for (std::size_t i : points) {
          std::string chosen;
          CommState s = with_choice(state_, res_.params);
          auto t = sim->time(s, g.op, cs[i].bytes, target, &chosen);
          if (!t) return t.error();
          const auto slash = chosen.find('/');
          const auto a = comm::parse_algo(chosen.substr(0, slash));
          const auto p = comm::parse_protocol(chosen.substr(slash + 1));
          if (!a || !p) continue;
          auto [lat, bw] = knobs_of(*a, *p, g.op, multinode, *sim);
          for (const Knob& k : {lat, bw}) {
            if (!k.valid() || !may_claim(k, suite, chosen)) continue;
            if (std::none_of(knobs.begin(), knobs.end(), [&](const auto& e) { return e.first.profile_name() == k.profile_name(); })) {
              knobs.emplace_back(k, chosen);
            }
          }
        }
        for (const auto& entry : knobs) {
          // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
          const Knob& k = entry.first;
          const std::string& pair = entry.second;
          const double x0 = get_knob(state_, k, *sim);
          Status failed;
          auto at = [&](double l) {
            set_knob(state_, k, std::exp(l));
            auto e = objective(*sim, state_, res_.params, g.op, target, points);
            if (!e) {
              failed = e.error();
              return std::numeric_limits<double>::infinity();
            }
            return *e;
          };
          // The choice among pairs makes the error jump where the chosen pair changes, so a
          // coarse scan over [x0 / 2, 2 x0] (steps of 2^(1/4); a fraction stays at most 1) finds
          // the best cell first, and a golden-section search refines it.
          // A latency the mapping clamped to 0 is scanned from 0.1 us.
          const double l0 = std::log(std::max(x0, k.kind == Knob::Kind::time ? 1e-7 : 1e-9)), step = std::log(2.0) / 4;
          const double top = k.kind != Knob::Kind::time ? 0.0 : l0 + 4 * step;
          std::vector<double> grid;
          for (int i = -4; i <= 4; ++i) grid.push_back(std::min(l0 + i * step, top));
          std::size_t ib = 0;
          double fb = std::numeric_limits<double>::infinity();
          for (std::size_t i = 0; i < grid.size(); ++i) {
            const double f = at(grid[i]);
            if (f < fb) fb = f, ib = i;
          }
          const double lm = golden_min(at, grid[ib == 0 ? 0 : ib - 1], grid[std::min(ib + 1, grid.size() - 1)], 12);
          if (!failed.ok()) return failed.error();
          double fm = at(lm);  // at() leaves the knob at the point it evaluates
          if (!failed.ok()) return failed.error();
          if (fb < fm) fm = at(grid[ib]);
          if (fm < best) {
            best = fm;
            claim(k, suite, pair);
            note_set(set_here, k);
            covered(suite, pair, k);
          } else {
            set_knob(state_, k, x0);
          }
        }
        if (best > 0.99 * round_start) break;  // another round would move little
      }
      if (set_here.empty()) {
        // Nothing kept: the profile holds what it had, the choice included.
        restore(before);
        res_.notes.push_back(fmt::format("{}: no fitted parameter predicted its training points better than those before the fit "
                                         "(mean |relative error| {:.1f}%): left as they were",
                                         suite, 100 * start));
      } else if (best < start) {
        res_.notes.push_back(fmt::format("{}: mean |relative error| on its training points {:.1f}% with the fitted parameters ({:.1f}% before "
                                         "the last step)",
                                         suite, 100 * best, 100 * start));
      }
    }
    json knobs = json::array();
    for (const auto& k : set_here) knobs.push_back(k);
    out["knobs"] = knobs;
    std::vector<std::size_t> train_points;
    for (std::size_t j : train) train_points.push_back(g.idx[j]);
    comm_groups_.push_back(GroupEval{suite, g, is_held, target, from_data, sim, train_points});
    return out;
  }

  // What the fit of one group may have to undo.
  struct Snapshot {
    CommState state;
    std::map<std::string, std::string> params;
    std::map<std::string, double> links;
    std::map<std::string, std::string> coverage, owner;
    std::map<std::string, std::set<std::string>> fitted_pairs;
    std::size_t notes = 0;  // the notes then: later ones speak of what is undone
  };
  Snapshot snapshot() const {
    return Snapshot{state_, res_.params, res_.link_efficiency, res_.coverage, owner_, fitted_pairs_, res_.notes.size()};
  }
  void restore(const Snapshot& s) {
    res_.notes.resize(std::min(res_.notes.size(), s.notes));
    state_ = s.state;
    res_.params = s.params;
    res_.link_efficiency = s.links;
    res_.coverage = s.coverage;
    owner_ = s.owner;
    fitted_pairs_ = s.fitted_pairs;
  }

  // The state with the choice (`comm.choice`) the profile's parameters give.
  static CommState with_choice(const CommState& st, const std::map<std::string, std::string>& params) {
    CommState s = st;
    if (auto c = params.find("comm.choice"); c != params.end()) {
      const Status ok = comm::set_comm_param(s.comm, "choice", c->second);
      DTSIM_ASSERT(ok.ok(), "fit: the choice it writes does not read back");
    }
    return s;
  }

  // Mean absolute relative error of the time on these points (the medians the fit reports weigh
  // an outlier as little), under the state and the choice the profile's parameters give.
  Expected<double> objective(CollectiveSim& sim, const CommState& st, const std::map<std::string, std::string>& params, CollOp op,
                             const comm::Selection& sel, const std::vector<std::size_t>& points) const {
    const CommState s = with_choice(st, params);
    double sum = 0;
    for (std::size_t i : points) {
      const auto& c = d_.collectives[i];
      auto t = sim.time(s, op, c.bytes, sel);
      if (!t) return t.error();
      const double e = (*t - c.time_s) / c.time_s;
      sum += std::fabs(e);
    }
    return points.empty() ? 0.0 : sum / static_cast<double>(points.size());
  }

  // Which algorithm/protocol pairs of which suite each fitted parameter was fitted for.
  void covered(const std::string& suite, const std::string& pair, const Knob& k) {
    fitted_pairs_[suite].insert(pair);
    auto& c = res_.coverage[k.profile_name()];
    const std::string what = suite + " " + pair;
    if (c.find(what) == std::string::npos) c += (c.empty() ? "" : ", ") + what;
  }

  bool claim(const Knob& k, const std::string& suite, const std::string& pair) {
    const std::string owner = suite + " " + pair;
    auto [it, fresh] = owner_.emplace(k.profile_name(), owner);
    return fresh || it->second == owner;
  }
  // Whether claim() would succeed, without claiming.
  bool may_claim(const Knob& k, const std::string& suite, const std::string& pair) const {
    const auto it = owner_.find(k.profile_name());
    return it == owner_.end() || it->second == suite + " " + pair;
  }

  void note_set(std::vector<std::string>& list, const Knob& k) {
    if (std::find(list.begin(), list.end(), k.profile_name()) == list.end()) list.push_back(k.profile_name());
    if (k.kind == Knob::Kind::link) res_.link_efficiency[k.name] = state_.link_eff[k.name];
    if (k.kind == Knob::Kind::time) res_.params["comm." + k.name] = time_text(time_field(state_.comm, k.name)->seconds());
    if (k.kind == Knob::Kind::fraction) res_.params["comm." + k.name] = fraction_text(*fraction_field(state_.comm, k.name));
  }

  void add_residuals() {
    // Collectives: rebuild the state from the texts the profile holds.
    CommState written;
    for (const auto& [name, value] : res_.params) {
      if (name.rfind("comm.", 0) == 0) {
        const Status st = comm::set_comm_param(written.comm, name.substr(5), value);
        DTSIM_ASSERT(st.ok(), "fit: a comm parameter the fit wrote does not read back");
      }
    }
    written.link_eff = res_.link_efficiency;
    for (const GroupEval& ge : comm_groups_) {
      auto sim = CollectiveSim::make(res_.node_preset, ge.g.nodes, ge.g.ranks / ge.g.nodes);
      if (!sim) continue;
      std::vector<Scored> fit_sc, def_sc;
      for (std::size_t j = 0; j < ge.g.idx.size(); ++j) {
        const auto& c = d_.collectives[ge.g.idx[j]];
        auto tf = (*sim)->time(written, c.op, c.bytes, ge.target);
        auto td = (*sim)->time(base_, c.op, c.bytes, ge.target);
        if (!tf || !td) continue;
        fit_sc.push_back(Scored{(*tf - c.time_s) / c.time_s, c.where, ge.held[j]});
        def_sc.push_back(Scored{(*td - c.time_s) / c.time_s, c.where, ge.held[j]});
      }
      res_.residuals.push_back(summarize(ge.suite, "profile", fit_sc));
      res_.residuals.push_back(summarize(ge.suite, "defaults", def_sc));
      // Where NCCL's tuner (as modelled, runs with --algo auto) will pick an algorithm/protocol
      // the fit never set, the fitted parameters do not apply: say at which sizes.
      const auto& pairs = fitted_pairs_[ge.suite];
      std::map<std::string, std::vector<std::int64_t>> unfitted;
      std::set<std::int64_t> sizes;
      for (std::size_t idx : ge.g.idx) sizes.insert(d_.collectives[idx].bytes);
      for (std::int64_t bytes : sizes) {
        std::string chosen;
        auto t = (*sim)->time(written, ge.g.op, bytes, comm::Selection{}, &chosen);
        if (!t || chosen.empty() || pairs.count(chosen)) continue;
        unfitted[chosen].push_back(bytes);
      }
      for (const auto& [pair, at] : unfitted) {
        res_.warnings.push_back(fmt::format("{}: with --algo auto the tuner picks {}, which this fit did not set, at {} of the measured sizes "
                                            "({} B to {} B): the profile's defaults apply there; pass --algo to the fit and to the runs, "
                                            "or add measurements of {}{}",
                                            ge.suite, pair, at.size(), at.front(), at.back(), pair,
                                            ge.from_data ? fmt::format(" (the measured run allowed {} only, by its NCCL settings: give "
                                                                       "dtsim the same --algo and --proto)",
                                                                       describe(ge.target))
                                                         : std::string()));
      }
    }
  }

  struct GroupEval {
    std::string suite;
    Group g;
    std::vector<bool> held;
    comm::Selection target;
    bool from_data = false;  // the target is the data's NCCL settings, not the options'
    std::shared_ptr<CollectiveSim> sim;  // null where the group maps onto no simulator
    std::vector<std::size_t> train;      // its training points (indices into the dataset)
  };

  const Dataset& d_;
  const FitOptions& o_;
  FitResult& res_;
  CommState state_;
  CommState base_;  // the defaults under the runs' NCCL settings: what `dtsim collective` gives without a profile
  std::map<std::string, std::string> owner_;  // knob -> the group and pair that set it
  std::map<std::string, std::set<std::string>> fitted_pairs_;  // suite -> "ring/LL", ... it fitted
  std::vector<GroupEval> comm_groups_;
};

CollectiveFit::CollectiveFit(const Dataset& d, const FitOptions& o, FitResult& res) : st_(std::make_unique<State>(d, o, res)) {}
CollectiveFit::~CollectiveFit() = default;

Status CollectiveFit::fit() { return st_->fit(); }

void CollectiveFit::add_residuals() { st_->add_residuals(); }

}  // namespace dtsim::calibrate
