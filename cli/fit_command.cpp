#include "cli/fit_command.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "calibrate/fit.hpp"
#include "calibrate/nccl_tests_log.hpp"
#include "calibrate/records.hpp"
#include "cli/errors.hpp"
#include "config/profile.hpp"
#include "reports/output.hpp"

namespace dtsim::cli {

namespace {

struct Options {
  std::vector<std::string> results;
  std::vector<std::string> nccl_tests;
  std::string output;
  std::string gpu;
  std::string node;
  std::string algo = "auto";
  std::string proto = "auto";
  std::vector<std::string> sets;
  std::string op;
  std::optional<int> ranks;
  std::optional<int> nodes;
  int holdout = 4;
  std::string description;
  std::string json;
};

// The folder of `path` must exist and be writable; checked before any work.
std::optional<std::string> unwritable(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fmt::format("{}: the folder {} does not exist", path, dir.string());
  if (fs::is_directory(p, ec)) return fmt::format("{}: is a folder", path);
  if (::access(dir.c_str(), W_OK) != 0) return fmt::format("{}: the folder {} is not writable", path, dir.string());
  return std::nullopt;
}

int run(const Options& o) {
  std::vector<std::string> errors;
  if (o.results.empty() && o.nccl_tests.empty()) errors.push_back("nothing to fit: give harness results (RESULTS.jsonl) and/or --nccl-tests LOG");
  if (o.output.empty()) errors.push_back("-o/--output PROFILE.yaml is required");
  for (const auto& out : {o.output, o.json}) {
    if (out.empty()) continue;
    if (auto why = unwritable(out)) errors.push_back(*why);
  }
  if (auto sel = comm::parse_selection(o.algo, o.proto); !sel) errors.push_back("--" + sel.error().field + ": " + sel.error().message);
  std::vector<std::pair<std::string, std::string>> sets;
  for (const auto& s : o.sets) {
    const auto eq = s.find('=');
    std::string key = s.substr(0, eq);
    if (key.rfind("comm.", 0) == 0) key = key.substr(5);
    comm::CommParams probe = comm::CommParams::nccl_defaults();
    if (eq == std::string::npos) {
      errors.push_back(fmt::format("--set: '{}' is not comm.NAME=VALUE", s));
    } else if (auto st = comm::set_comm_param(probe, key, s.substr(eq + 1)); !st) {
      errors.push_back("--set " + st.error().to_string());
    } else {
      sets.emplace_back(key, s.substr(eq + 1));
    }
  }
  std::optional<CollOp> op;
  if (!o.op.empty()) {
    op = parse_coll_op(o.op);
    if (!op) errors.push_back(fmt::format("--op: unknown collective '{}' (allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv)", o.op));
  }
  if (o.ranks && *o.ranks < 1) errors.push_back("--ranks must be at least 1");
  if (o.nodes && *o.nodes < 1) errors.push_back("--nodes must be at least 1");
  if (o.holdout < 0) errors.push_back("--holdout must be 0 (none) or at least 2");
  if (!errors.empty()) {
    for (const auto& e : errors) print_error(e);
    return kExitBadInput;
  }

  calibrate::Dataset data;
  for (const auto& path : o.results) {
    auto recs = calibrate::read_records(path);
    if (!recs) {
      print_error(recs.error().message);
      return kExitBadInput;
    }
    if (auto st = calibrate::add_records(data, *recs); !st) {
      print_error(st.error().message);
      return kExitBadInput;
    }
  }
  for (const auto& path : o.nccl_tests) {
    auto log = calibrate::read_nccl_tests(path);
    if (!log) {
      print_error(log.error().message);
      return kExitBadInput;
    }
    calibrate::NcclTestsInput in;
    in.op = op;
    in.ranks = o.ranks;
    in.nodes = o.nodes;
    in.algo_label = o.algo;
    in.proto_label = o.proto;
    for (const auto& [name, value] : sets) in.set_names.push_back(name);
    if (auto st = calibrate::add_nccl_tests(data, *log, in); !st) {
      print_error(st.error().message);
      return kExitBadInput;
    }
  }
  calibrate::FitOptions fo;
  fo.gpu = o.gpu;
  fo.node = o.node;
  fo.algo = o.algo;
  fo.proto = o.proto;
  fo.sets = sets;
  fo.holdout_every = o.holdout;
  auto fit = calibrate::fit_profile(data, fo);
  if (!fit) {
    print_error(fit.error().message);
    return kExitBadInput;
  }
  std::string description = o.description;
  if (description.empty()) {
    description = fmt::format("dtsim fit of {}{}", data.device_name.empty() ? std::string("unknown device") : data.device_name,
                              fit->node_preset.empty() ? "" : " (" + fit->node_preset + ")");
  }
  const std::string yaml = calibrate::profile_yaml(*fit, description);
  // The profile must read back before it is written: what dtsim fit writes, dtsim reads.
  {
    const std::string probe = o.output + ".check.tmp";
    if (auto st = reports::write_file_atomic(probe, yaml); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
    config::LoadContext ctx;
    const auto back = config::load_profile(probe, ctx);
    std::filesystem::remove(probe);
    DTSIM_ASSERT(back.has_value(), "dtsim fit wrote a profile that does not load");
  }
  if (auto st = reports::write_file_atomic(o.output, yaml); !st) {
    print_error(st.error().message);
    return kExitFailure;
  }
  if (!o.json.empty()) {
    nlohmann::json j{{"params", fit->params}, {"links", fit->link_efficiency}, {"fit", fit->fit}, {"source", fit->source},
                     {"coverage", fit->coverage}, {"warnings", fit->warnings}};
    if (auto st = reports::write_file_atomic(o.json, j.dump(2) + "\n"); !st) {
      print_error(st.error().message);
      return kExitFailure;
    }
  }
  std::printf("dtsim fit: %zu GEMM, %zu memory, %zu overhead, %zu host-link and %zu collective points from %zu input(s)%s\n",
              data.gemm.size(), data.memory.size(), data.overhead.size(), data.links.size(), data.collectives.size(), data.inputs.size(),
              data.failed_points ? fmt::format(" ({} recorded failures left out)", data.failed_points).c_str() : "");
  if (data.power_points > 0) {
    std::printf("%d power-suite point(s) (GEMM time against its share of the time) read and not fitted: no model constant comes from them yet "
                "(docs/calibration.md)\n",
                data.power_points);
  }
  if (!data.device_name.empty()) std::printf("device: %s; presets: gpu %s, node %s\n", data.device_name.c_str(),
                                             fit->gpu_preset.empty() ? "-" : fit->gpu_preset.c_str(),
                                             fit->node_preset.empty() ? "-" : fit->node_preset.c_str());
  // The profile's own error first: it is what a simulation with the profile will show.
  bool headline = false;
  for (const auto& s : fit->residuals) {
    if (s.model != "profile") continue;
    if (!headline) std::printf("\nerror of the written profile (what dtsim will show), |model - measured| / measured:\n");
    headline = true;
    std::printf("  %-32s median %.1f%%, worst %.1f%%%s\n", s.suite.c_str(), 100 * s.median, 100 * s.worst,
                s.worst_where.empty() ? "" : fmt::format(" (at {})", s.worst_where).c_str());
  }
  for (const auto& w : fit->warnings) std::printf("  WARNING: %s\n", w.c_str());
  std::printf("\nfitted parameters (and the algorithm/protocol pairs each was fitted for):\n");
  for (const auto& [name, value] : fit->params) {
    const auto cov = fit->coverage.find(name);
    std::printf("  %-44s %-12s %s\n", name.c_str(), value.c_str(), cov != fit->coverage.end() ? cov->second.c_str() : "");
  }
  for (const auto& [name, eff] : fit->link_efficiency) {
    const auto cov = fit->coverage.find("links." + name + ".efficiency");
    std::printf("  %-44s %-12.4f %s\n", ("links." + name + ".efficiency").c_str(), eff, cov != fit->coverage.end() ? cov->second.c_str() : "");
  }
  const std::string held = o.holdout >= 2 ? fmt::format("on held-out points (1 in {} of each suite, by size)", o.holdout)
                                          : std::string("on the fitted points (--holdout 0: nothing held out)");
  std::printf("\nresiduals of the time, (model - measured) / measured, %s:\n%s", held.c_str(), calibrate::residual_table(*fit).c_str());
  if (!fit->notes.empty()) {
    std::printf("\nnotes:\n");
    for (const auto& n : fit->notes) std::printf("  %s\n", n.c_str());
  }
  std::printf("\nwrote %s\n", o.output.c_str());
  return kExitOk;
}

}  // namespace

void add_fit_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("fit", "Fit a hardware profile from calibration results (dtsim-calibrate JSONL) or nccl-tests logs");
  cmd->add_option("results", o->results, "Result files of dtsim-calibrate (JSON Lines)");
  cmd->add_option("--nccl-tests", o->nccl_tests, "An nccl-tests log (e.g. all_reduce_perf.log); repeat for several");
  cmd->add_option("-o,--output", o->output, "Write the hardware profile (YAML) here");
  cmd->add_option("--gpu", o->gpu, "GPU preset the data came from (default: from the device name)");
  cmd->add_option("--node", o->node, "Node preset for collectives (default: from the GPU, e.g. dgx-h100)");
  cmd->add_option("--algo", o->algo,
                  "Algorithm NCCL ran in the collective data: ring, tree, nvls, a list as NCCL_ALGO takes it (ring,tree; ^nvls), or auto "
                  "(a log's NCCL_ALGO and NCCL_NVLS_ENABLE=0, else NCCL's choice)")
      ->capture_default_str();
  cmd->add_option("--set", o->sets,
                  "comm.NAME=VALUE: a communication parameter the measured runs had (e.g. comm.buffsize=8M for NCCL_BUFFSIZE), "
                  "in place of the log's; written into the profile (dtsim collective --list-params)");
  cmd->add_option("--proto", o->proto,
                  "Protocol NCCL ran: LL, LL128, Simple, a list as NCCL_PROTO takes it, or auto (a log's NCCL_PROTO, else NCCL's "
                  "choice)")
      ->capture_default_str();
  cmd->add_option("--op", o->op, "Collective of the nccl-tests logs (default: from the file name or the log)");
  cmd->add_option("--ranks", o->ranks, "GPUs in the nccl-tests run (default: its '#  Rank' lines)");
  cmd->add_option("--nodes", o->nodes, "Nodes in the nccl-tests run (default: distinct hosts of its '#  Rank' lines)");
  cmd->add_option("--holdout", o->holdout, "Hold every Nth point of each suite (sorted by size) out of the fit; 0 = none")->capture_default_str();
  cmd->add_option("--description", o->description, "The profile's description line");
  cmd->add_option("--json", o->json, "Also write the fit (parameters, residuals, regimes) as JSON");
  cmd->callback([o, &exit_code] { exit_code = run(*o); });
}

}  // namespace dtsim::cli
