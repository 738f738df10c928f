// dtsim-calibrate: measures what dtsim's hardware model needs (GEMMs through cuBLASLt, memory-bound
// kernels, launch and synchronization overheads, host and peer links, NCCL collectives) with
// Google Benchmark, and appends every finished point to a JSON Lines file for `dtsim fit`.
// docs/calibration.md describes the suites, the records and how to run it on a cluster.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "calibrate/harness/bootstrap.hpp"
#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/facts.hpp"

namespace {

using dtsim::harness::Context;
using dtsim::harness::Options;

constexpr int kNoGpu = 77;  // CTest's skip code

const char* kUsage = R"(dtsim-calibrate: measure a GPU node for dtsim (results: JSON Lines, one record per point)

usage: dtsim-calibrate [options] [Google Benchmark flags]
       mpirun -np N dtsim-calibrate-mpi [options]     (one process per GPU, across nodes)

options:
  --out FILE           append results here (default calibration.jsonl)
  --resume             continue FILE: skip the points it already holds (a torn last line is cut off)
  --retry-errors       with --resume: measure again the points that failed
  --fresh              replace FILE if it exists (without --resume or --fresh an existing FILE is refused)
  --quick              a reduced grid: a few minutes on one H100
  --reps N             repetitions (samples) per point (default 7; --quick 3)
  --rep-ms MS          length of one repetition in milliseconds (default 20; --quick 5)
  --gemm-max N         largest square GEMM (default 16384)
  --gemm-dtypes LIST   comma-separated subset of bf16,fp16,fp8,tf32,fp32
  --nccl-min BYTES     smallest collective (default 8)
  --nccl-max BYTES     largest collective (default 8 GiB, --quick 1 GiB; capped by GPU memory)
  --nccl-type T        float, half or bfloat16 (default float, as nccl-tests)
  --nccl-iters N       timed iterations per collective (default 20; --quick 10)
  --nccl-timeout S     watchdog: abort a collective running longer than S seconds (default 120)
  --gpus N             GPUs this process drives for NCCL (default: every visible GPU)
  --device D           GPU of the single-GPU suites (default 0; MPI: the node-local rank)
  --help               this text

Google Benchmark flags pick and report the points, e.g.
  --benchmark_filter=gemm          suites: gemm, memory, overhead, hostlink, power, nccl (a regular expression)
  --benchmark_list_tests           list the points without running them
  --benchmark_format=json --benchmark_out=FILE
The JSON Lines file is what `dtsim fit` reads: dtsim fit FILE -o profile.yaml
Exit codes: 0 all points measured, 1 some points failed (recorded as errors), 2 bad options,
77 no GPU.
)";

bool starts(const char* a, const char* p) { return std::strncmp(a, p, std::strlen(p)) == 0; }

// Reads our options, leaves the rest (Google Benchmark's) in argv. Returns an error text or "".
std::string parse(int& argc, char** argv, Options& o, bool& help) {
  std::vector<char*> rest{argv[0]};
  auto value = [&](int& i, const char* name) -> const char* {
    const std::size_t n = std::strlen(name);
    if (argv[i][n] == '=') return argv[i] + n + 1;
    if (i + 1 < argc) return argv[++i];
    return nullptr;
  };
  auto number = [](const char* v, double& out) {
    char* end = nullptr;
    out = std::strtod(v, &end);
    if (end == v) return false;
    double mult = 1;
    const std::string suf = end;
    if (suf == "K" || suf == "KiB") mult = 1024.0;
    else if (suf == "M" || suf == "MiB") mult = 1024.0 * 1024;
    else if (suf == "G" || suf == "GiB") mult = 1024.0 * 1024 * 1024;
    else if (!suf.empty()) return false;
    out *= mult;
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto opt = [&](const char* name) { return std::strcmp(a, name) == 0 || (starts(a, name) && a[std::strlen(name)] == '='); };
    double d = 0;
    if (std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0) help = true;
    else if (std::strcmp(a, "--resume") == 0) o.resume = true;
    else if (std::strcmp(a, "--retry-errors") == 0) o.retry_errors = true;
    else if (std::strcmp(a, "--fresh") == 0) o.fresh = true;
    else if (std::strcmp(a, "--quick") == 0) o.quick = true;
    else if (opt("--out")) {
      const char* v = value(i, "--out");
      if (!v) return "--out needs a file name";
      o.out = v;
    } else if (opt("--nccl-type")) {
      const char* v = value(i, "--nccl-type");
      if (!v || (std::strcmp(v, "float") != 0 && std::strcmp(v, "half") != 0 && std::strcmp(v, "bfloat16") != 0)) {
        return "--nccl-type must be float, half or bfloat16";
      }
      o.nccl_type = v;
    } else if (opt("--gemm-dtypes")) {
      const char* v = value(i, "--gemm-dtypes");
      if (!v) return "--gemm-dtypes needs a list";
      std::string s = v;
      std::size_t pos = 0;
      while (pos <= s.size()) {
        const std::size_t c = s.find(',', pos);
        const std::string t = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        if (t != "bf16" && t != "fp16" && t != "fp8" && t != "tf32" && t != "fp32") return "--gemm-dtypes: unknown type '" + t + "'";
        o.gemm_dtypes.push_back(t);
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    } else if (opt("--reps") || opt("--rep-ms") || opt("--gemm-max") || opt("--nccl-min") || opt("--nccl-max") || opt("--nccl-iters") ||
               opt("--nccl-timeout") || opt("--gpus") || opt("--device")) {
      const std::string name = std::string(a).substr(0, std::string(a).find('='));
      const char* v = value(i, name.c_str());
      if (!v || !number(v, d) || d < 0) return name + " needs a non-negative number";
      if (name == "--reps") o.reps = static_cast<int>(d);
      else if (name == "--rep-ms") o.rep_ms = d;
      else if (name == "--gemm-max") o.gemm_max = static_cast<std::int64_t>(d);
      else if (name == "--nccl-min") o.nccl_min = static_cast<std::int64_t>(d);
      else if (name == "--nccl-max") o.nccl_max = static_cast<std::int64_t>(d);
      else if (name == "--nccl-iters") o.nccl_iters = static_cast<int>(d);
      else if (name == "--nccl-timeout") o.nccl_timeout_s = d;
      else if (name == "--gpus") o.gpus = static_cast<int>(d);
      else o.device = static_cast<int>(d);
    } else if (starts(a, "--benchmark_")) {
      rest.push_back(argv[i]);
    } else {
      return std::string("unknown option '") + a + "' (see --help)";
    }
  }
  if (o.resume && o.fresh) return "--resume and --fresh exclude each other";
  if (o.retry_errors && !o.resume) return "--retry-errors needs --resume";
  argc = static_cast<int>(rest.size());
  for (int i = 0; i < argc; ++i) argv[i] = rest[static_cast<std::size_t>(i)];
  return "";
}

// Only rank 0 reports (the others run the same benchmarks silently, for the collectives).
class Quiet : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  const int argc0 = argc;
  std::vector<char*> argv0(argv, argv + argc);
  Options opt;
  bool help = false;
  const std::string bad = parse(argc, argv, opt, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!bad.empty()) {
    std::fprintf(stderr, "dtsim-calibrate: %s\n", bad.c_str());
    return 2;
  }
  std::string why;
  const int gpus = dtsim::harness::device_count(&why);
  if (gpus == 0) {
    std::fprintf(stderr, "dtsim-calibrate: no GPU to measure (%s); nothing was run\n", why.c_str());
    return kNoGpu;
  }
  auto boot = dtsim::harness::make_bootstrap(&argc, &argv);
  Context ctx;
  ctx.opt = opt;
  ctx.boot = boot.get();
  ctx.local_gpus = gpus;
  ctx.device_index = boot->mpi() ? boot->local_rank() % gpus : std::min(opt.device, gpus - 1);
  ctx.timing.reps = opt.reps > 0 ? opt.reps : (opt.quick ? 3 : 7);
  ctx.timing.rep_seconds = (opt.rep_ms > 0 ? opt.rep_ms : (opt.quick ? 5.0 : 20.0)) * 1e-3;
  if (cudaSetDevice(ctx.device_index) != cudaSuccess || cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "dtsim-calibrate: cannot use GPU %d\n", ctx.device_index);
    return 1;
  }
  auto facts = dtsim::harness::device_facts(ctx.device_index);
  if (!facts) {
    std::fprintf(stderr, "dtsim-calibrate: %s\n", facts.error().message.c_str());
    return 1;
  }
  ctx.device = *facts;
  ctx.run = dtsim::harness::run_facts(argc0, argv0.data(), boot->rank(), boot->size(), boot->nodes());
  {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, ctx.device_index);
    ctx.cc_major = p.major;
    ctx.cc_minor = p.minor;
    ctx.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    ctx.memory_bytes = p.totalGlobalMem;
  }

  // The result file: rank 0 writes; the points already done are the same on every rank.
  dtsim::calibrate::ResultLog log;
  std::string done_list;
  if (boot->rank() == 0) {
    if (opt.fresh) std::remove(opt.out.c_str());
    auto l = dtsim::calibrate::ResultLog::open(opt.out, opt.resume);
    if (!l) {
      std::fprintf(stderr, "dtsim-calibrate: %s\n", l.error().message.c_str());
      boot->abort(2);
      return 2;
    }
    log = std::move(*l);
    ctx.log = &log;
    if (log.repaired()) std::fprintf(stderr, "dtsim-calibrate: %s: cut off a torn last line (a crash during a write)\n", opt.out.c_str());
    for (const auto& [point, status] : log.statuses()) {
      if (log.done(point, opt.retry_errors)) done_list += point + "\n";
    }
    if (opt.resume) std::fprintf(stderr, "dtsim-calibrate: %s holds %zu points; %s\n", opt.out.c_str(), log.recorded(),
                                 opt.retry_errors ? "failed ones are measured again" : "they are skipped");
  }
  std::uint64_t len = done_list.size();
  if (auto st = boot->broadcast(&len, sizeof len, 0); !st) boot->abort(1);
  done_list.resize(len);
  if (len > 0) {
    if (auto st = boot->broadcast(done_list.data(), len, 0); !st) boot->abort(1);
  }
  for (std::size_t pos = 0; pos < done_list.size();) {
    const std::size_t nl = done_list.find('\n', pos);
    ctx.done.insert(done_list.substr(pos, nl - pos));
    pos = nl + 1;
  }

  // One process: every suite. Under MPI (one process per GPU) only the collectives, on every
  // rank; the single-GPU suites are the plain binary's job.
  if (!boot->mpi()) {
    dtsim::harness::register_overhead(ctx);
    dtsim::harness::register_memory(ctx);
    dtsim::harness::register_gemm(ctx);
    dtsim::harness::register_hostlink(ctx);
  }
#ifdef DTSIM_HAVE_NCCL
  dtsim::harness::register_nccl(ctx);
#endif
  // Last: it holds the GPU at its power cap for half a minute.
  if (!boot->mpi()) dtsim::harness::register_power(ctx);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (boot->rank() == 0) {
    std::fprintf(stderr, "dtsim-calibrate: %s (%d SMs), %d GPU(s) here, %d rank(s) on %d node(s); results: %s\n",
                 ctx.device["name"].get<std::string>().c_str(), ctx.device["sms"].get<int>(), gpus, boot->size(), boot->nodes(), opt.out.c_str());
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Quiet quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  for (auto& release : ctx.release) release();
  const int failures = static_cast<int>(boot->max(ctx.failures));
  if (boot->rank() == 0 && failures > 0) {
    std::fprintf(stderr, "dtsim-calibrate: %d point(s) failed; their errors are in %s\n", failures, opt.out.c_str());
  }
  cudaStreamDestroy(ctx.stream);
  return failures > 0 ? 1 : 0;
}
