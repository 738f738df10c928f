// dtsim-validate: times the validation workload (gpt.hpp: a GPT-style decoder trained data
// parallel over the local GPUs, NCCL all-reduce of gradient buckets overlapping backward) at
// several batch sizes, model sizes and GPU counts, and appends one JSON Lines record per point
// for `dtsim validate`, which predicts the same steps with the simulator.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "calibrate/harness/facts.hpp"
#include "calibrate/records.hpp"
#include "calibrate/workload/gpt.hpp"

namespace {

using dtsim::workload::GptShape;
using dtsim::workload::Replica;
using dtsim::workload::StepOptions;

const char* kUsage = R"(dtsim-validate: time a GPT-style training step for `dtsim validate`

usage: dtsim-validate [options]

options:
  --out FILE         append results here (default validation.jsonl)
  --resume           continue FILE: skip the points it already holds
  --fresh            replace FILE if it exists
  --quick            fewer steps per point (2 warm-up, 5 timed)
  --models LIST      comma-separated: gpt-125m, gpt-350m, gpt-760m, gpt-1.3b (default gpt-125m,gpt-350m)
  --batches LIST     micro-batch sizes per GPU (default 1,2,4,8,16,32)
  --gpus LIST        GPU counts (default 1, 2, 4, 8 up to the GPUs present, and all of them)
  --seq N            sequence length (default 1024)
  --steps N          timed steps per point (default 10)
  --warmup N         untimed steps first (default 3)
  --bucket BYTES     DDP gradient bucket (default 25000000, PyTorch's)
  --dropout P        dropout probability (default 0.1)
  --timeout S        abort a point that takes longer than S seconds (default 300)
  --help             this text
The model: token and learned position embeddings, pre-LayerNorm blocks with attention through
GEMMs and a softmax kernel (no flash attention), a 4h GELU MLP, no biases, an LM head tied to the
embedding, bf16 with fp32 master weights and Adam; docs/calibration.md maps it onto dtsim's model.
Exit codes: 0 every point measured or skipped for memory, 1 some failed, 2 bad options, 77 no GPU.
)";

struct Options {
  std::string out = "validation.jsonl";
  bool resume = false, fresh = false, quick = false;
  std::vector<std::string> models{"gpt-125m", "gpt-350m"};
  std::vector<int> batches{1, 2, 4, 8, 16, 32};
  std::vector<int> gpus;
  int seq = 1024, steps = 0, warmup = 0;
  std::int64_t bucket = 25'000'000;
  float dropout = 0.1f;
  double timeout_s = 300;
};

bool shape_for(const std::string& name, int seq, GptShape& g) {
  // GPT-3 family shapes (Brown et al. 2020, table 2.1), GPT-2's vocabulary padded to 50304.
  struct S {
    const char* name;
    int hidden, layers, heads;
  };
  static const S shapes[] = {{"gpt-125m", 768, 12, 12}, {"gpt-350m", 1024, 24, 16}, {"gpt-760m", 1536, 24, 16}, {"gpt-1.3b", 2048, 24, 16}};
  for (const S& s : shapes) {
    if (name == s.name) {
      g.name = s.name;
      g.hidden = s.hidden;
      g.layers = s.layers;
      g.heads = s.heads;
      g.ffn = 4 * s.hidden;
      g.vocab = 50304;
      g.seq = seq;
      return true;
    }
  }
  return false;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t c = s.find(',', pos);
    out.push_back(s.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

std::string parse(int argc, char** argv, Options& o, bool& help) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    auto ints = [&](std::vector<int>& out) -> bool {
      const char* v = value();
      if (!v) return false;
      out.clear();
      for (const auto& t : split(v)) {
        char* end = nullptr;
        const long x = std::strtol(t.c_str(), &end, 10);
        if (end == t.c_str() || *end || x <= 0) return false;
        out.push_back(static_cast<int>(x));
      }
      return !out.empty();
    };
    auto num = [&](double& out) -> bool {
      const char* v = value();
      if (!v) return false;
      char* end = nullptr;
      out = std::strtod(v, &end);
      return end != v && !*end && out >= 0;
    };
    double d = 0;
    if (a == "--help" || a == "-h") help = true;
    else if (a == "--resume") o.resume = true;
    else if (a == "--fresh") o.fresh = true;
    else if (a == "--quick") o.quick = true;
    else if (a == "--out") {
      const char* v = value();
      if (!v) return "--out needs a file name";
      o.out = v;
    } else if (a == "--models") {
      const char* v = value();
      if (!v) return "--models needs a list";
      o.models = split(v);
      GptShape g;
      for (const auto& m : o.models) {
        if (!shape_for(m, 1024, g)) return "--models: unknown model '" + m + "' (gpt-125m, gpt-350m, gpt-760m, gpt-1.3b)";
      }
    } else if (a == "--batches") {
      if (!ints(o.batches)) return "--batches needs positive integers, e.g. 1,2,4";
    } else if (a == "--gpus") {
      if (!ints(o.gpus)) return "--gpus needs positive integers, e.g. 1,8";
    } else if (a == "--seq" || a == "--steps" || a == "--warmup" || a == "--bucket" || a == "--dropout" || a == "--timeout") {
      if (!num(d)) return a + " needs a non-negative number";
      if (a == "--seq") o.seq = static_cast<int>(d);
      else if (a == "--steps") o.steps = static_cast<int>(d);
      else if (a == "--warmup") o.warmup = static_cast<int>(d);
      else if (a == "--bucket") o.bucket = static_cast<std::int64_t>(d);
      else if (a == "--dropout") o.dropout = static_cast<float>(d);
      else o.timeout_s = d;
    } else {
      return "unknown option '" + a + "' (see --help)";
    }
  }
  if (o.resume && o.fresh) return "--resume and --fresh exclude each other";
  if (o.seq < 16 || o.seq % 8 != 0) return "--seq must be a multiple of 8, at least 16";
  if (o.dropout >= 1.0f) return "--dropout must be below 1";
  if (o.bucket <= 0) return "--bucket must be positive";
  return "";
}

struct PointResult {
  std::string status = "ok";
  std::string error;
  std::vector<double> step_s, host_s;  // per timed step: the slowest rank
  float loss_first = 0, loss_last = 0;
  int buckets = 0;
};

PointResult run_point(const GptShape& g, const StepOptions& so, int n, int warmup, int steps, double timeout_s) {
  PointResult res;
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
  if (n > 1) {
    std::vector<int> devs(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) devs[static_cast<std::size_t>(i)] = i;
    const ncclResult_t r = ncclCommInitAll(comms.data(), n, devs.data());
    if (r != ncclSuccess) {
      res.status = "error";
      res.error = std::string("ncclCommInitAll: ") + ncclGetErrorString(r);
      return res;
    }
  }
  std::atomic<bool> failed{false};
  std::atomic<int> finished{0};
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::vector<dtsim::workload::StepTimes>> times(static_cast<std::size_t>(n));
  std::vector<int> buckets(static_cast<std::size_t>(n), 0);
  std::barrier sync(n);
  auto worker = [&](int rank) {
    const auto ur = static_cast<std::size_t>(rank);
    {
      Replica rep;
      auto fail = [&](const std::string& e) {
        errors[ur] = e;
        failed = true;
      };
      if (auto st = rep.init(g, so, rank, rank, n, comms[ur]); !st) fail(st.error().message);
      buckets[ur] = rep.buckets();
      sync.arrive_and_wait();
      for (int i = 0; i < warmup + steps && !failed; ++i) {
        auto t = rep.step(i);
        if (!t) {
          fail(t.error().message);
          break;
        }
        if (i >= warmup) times[ur].push_back(*t);
        if (i == 0 && !std::isfinite(t->loss)) {
          fail("the loss is not finite after the first step");
          break;
        }
        sync.arrive_and_wait();
      }
      if (failed) sync.arrive_and_drop();  // let the others leave their barrier
      cudaDeviceSynchronize();
    }
    ++finished;
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(worker, r);
  // A watchdog for the point: a rank that never returns (a hung all-reduce) ends it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool aborted = false;
  while (finished.load() < n) {
    if (!aborted && std::chrono::steady_clock::now() > deadline) {
      for (ncclComm_t c : comms) {
        if (c) ncclCommAbort(c);
      }
      aborted = true;
      failed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& t : threads) t.join();
  if (!aborted) {
    for (ncclComm_t c : comms) {
      if (c) ncclCommDestroy(c);
    }
  }
  for (int r = 0; r < n; ++r) {
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      res.status = "error";
      res.error = "rank " + std::to_string(r) + ": " + errors[static_cast<std::size_t>(r)];
      return res;
    }
  }
  if (aborted) {
    res.status = "error";
    res.error = "the point did not finish within --timeout; the NCCL communicators were aborted";
    return res;
  }
  for (int i = 0; i < steps; ++i) {
    double gs = 0, hs = 0;
    for (int r = 0; r < n; ++r) {
      const auto& t = times[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
      gs = std::max(gs, t.gpu_s);
      hs = std::max(hs, t.host_s);
    }
    res.step_s.push_back(gs);
    res.host_s.push_back(hs);
  }
  res.loss_first = times[0].front().loss;
  res.loss_last = times[0].back().loss;
  res.buckets = buckets[0];
  return res;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool help = false;
  const std::string bad = parse(argc, argv, o, help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!bad.empty()) {
    std::fprintf(stderr, "dtsim-validate: %s\n", bad.c_str());
    return 2;
  }
  std::string why;
  const int present = dtsim::harness::device_count(&why);
  if (present == 0) {
    std::fprintf(stderr, "dtsim-validate: no GPU to run on (%s); nothing was run\n", why.c_str());
    return 77;
  }
  if (o.gpus.empty()) {
    for (int n = 1; n <= present; n *= 2) o.gpus.push_back(n);
    if (o.gpus.back() != present) o.gpus.push_back(present);
  }
  const int warmup = o.warmup > 0 ? o.warmup : (o.quick ? 2 : 3);
  const int steps = o.steps > 0 ? o.steps : (o.quick ? 5 : 10);
  if (o.fresh) std::remove(o.out.c_str());
  auto log = dtsim::calibrate::ResultLog::open(o.out, o.resume);
  if (!log) {
    std::fprintf(stderr, "dtsim-validate: %s\n", log.error().message.c_str());
    return 2;
  }
  auto facts = dtsim::harness::device_facts(0);
  if (!facts) {
    std::fprintf(stderr, "dtsim-validate: %s\n", facts.error().message.c_str());
    return 1;
  }
  const nlohmann::json run = dtsim::harness::run_facts(argc, argv, 0, 1, 1);
  int failures = 0;
  std::printf("%-10s %6s %6s %5s  %12s %12s %12s %9s\n", "model", "seq", "mbatch", "gpus", "step (ms)", "host (ms)", "tokens/s", "loss");
  for (const auto& name : o.models) {
    GptShape g;
    shape_for(name, o.seq, g);
    for (int n : o.gpus) {
      if (n > present) {
        std::fprintf(stderr, "dtsim-validate: %d GPUs asked for, %d present: skipped\n", n, present);
        continue;
      }
      for (int mb : o.batches) {
        const std::string point = g.name + "/seq" + std::to_string(o.seq) + "/mb" + std::to_string(mb) + "/gpus" + std::to_string(n);
        if (log->done(point)) continue;
        StepOptions so;
        so.micro_batch = mb;
        so.dropout = o.dropout;
        so.bucket_bytes = o.bucket;
        nlohmann::json params{
            {"model",
             {{"name", g.name}, {"hidden", g.hidden}, {"layers", g.layers}, {"heads", g.heads}, {"ffn", g.ffn}, {"vocab", g.vocab},
              {"max_seq", g.seq}, {"gated_mlp", false}, {"bias", false}, {"tied_embeddings", true}, {"positions", "learned"},
              {"norm", "layernorm"}, {"parameters", g.parameters()}}},
            {"training",
             {{"micro_batch", mb}, {"global_batch", mb * n}, {"seq_len", g.seq}, {"precision", "bf16"}, {"grad_dtype", "fp32"},
              {"attention", "standard"}, {"optimizer", "adam"}, {"dropout", o.dropout}}},
            {"parallel", {{"dp", n}, {"bucket_bytes", o.bucket}}},
            {"gpus", n}};
        nlohmann::json rec{{"schema", dtsim::calibrate::kValidateSchema}, {"suite", "train_step"}, {"point", point},
                           {"params", params},  {"device", *facts},    {"run", run}};
        // Points that cannot fit are skipped (recorded), not attempted.
        std::size_t free_b = 0, total_b = 0;
        cudaSetDevice(0);
        cudaMemGetInfo(&free_b, &total_b);
        const std::size_t need = Replica::bytes_needed(g, so);
        if (need > free_b) {
          rec["status"] = "skipped";
          rec["error"] = "needs about " + std::to_string(need >> 30) + " GiB per GPU; " + std::to_string(free_b >> 30) + " GiB free";
          std::printf("%-10s %6d %6d %5d  skipped: %s\n", g.name.c_str(), o.seq, mb, n, rec["error"].get<std::string>().c_str());
          (void)log->append(rec);
          continue;
        }
        const PointResult r = run_point(g, so, n, warmup, steps, o.timeout_s);
        rec["status"] = r.status;
        if (r.status != "ok") {
          ++failures;
          rec["error"] = r.error;
          std::printf("%-10s %6d %6d %5d  error: %s\n", g.name.c_str(), o.seq, mb, n, r.error.c_str());
        } else {
          const double t = median(r.step_s);
          const double tokens = static_cast<double>(mb) * n * g.seq;
          rec["params"]["parallel"]["buckets"] = r.buckets;
          rec["result"] = {{"step_time_s", t},
                           {"step_time_min_s", *std::min_element(r.step_s.begin(), r.step_s.end())},
                           {"step_time_max_s", *std::max_element(r.step_s.begin(), r.step_s.end())},
                           {"host_step_time_s", median(r.host_s)},
                           {"steps", steps},
                           {"warmup_steps", warmup},
                           {"tokens_per_s", tokens / t},
                           {"loss_first", r.loss_first},
                           {"loss_last", r.loss_last}};
          std::printf("%-10s %6d %6d %5d  %12.2f %12.2f %12.0f %9.4f\n", g.name.c_str(), o.seq, mb, n, t * 1e3, median(r.host_s) * 1e3,
                      tokens / t, r.loss_last);
        }
        std::fflush(stdout);
        if (auto st = log->append(rec); !st) std::fprintf(stderr, "dtsim-validate: %s\n", st.error().message.c_str());
      }
    }
  }
  return failures > 0 ? 1 : 0;
}
