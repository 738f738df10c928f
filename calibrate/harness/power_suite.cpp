// Power suite: how fast a large bf16 GEMM runs when it fills a given share of the GPU's time, the
// rest streaming copies (power_plan.hpp). The GEMM suite times each GEMM back to back, so under a
// power cap it learns the capped rate; a training step interleaves its GEMMs with memory-bound
// kernels and may run them faster. These records measure that dependence directly, by the
// kernels' own times (CUDA events around every burst), not by a sampled clock. docs/calibration.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/gemm.hpp"
#include "calibrate/harness/power_plan.hpp"

namespace dtsim::harness {

namespace {

constexpr std::int64_t kSide = 8192;                      // the GEMM: 8192^3 bf16, about 1.5 ms on an H100
constexpr std::size_t kCopyBytes = std::size_t{256} << 20;  // the copy: 256 MiB in, 256 MiB out

// Events for a timed run, destroyed with it.
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Expected<cudaEvent_t> next() {
    cudaEvent_t e = nullptr;
    DTSIM_CUDA(cudaEventCreate(&e));
    events_.push_back(e);
    return e;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

Expected<double> elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  DTSIM_CUDA(cudaEventElapsedTime(&ms, a, b));
  return ms * 1e-3;
}

struct Kernels {
  GemmRunner runner;
  GemmCall gemm;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  char* copy_buf = nullptr;

  Status run_gemm(cudaStream_t s) { return runner.run(gemm, a, b, c, s); }
  Status run_copy(cudaStream_t s) {
    DTSIM_CUDA(gpu::copy(copy_buf, copy_buf + kCopyBytes, kCopyBytes, s));
    return {};
  }
  // One repetition: the GEMM burst, then the copies; `before` and `between`, when given, are
  // recorded before the burst and after it.
  Status run_pattern(const PowerPattern& p, cudaStream_t s, cudaEvent_t before = nullptr, cudaEvent_t between = nullptr) {
    if (before != nullptr) {
      DTSIM_CUDA(cudaEventRecord(before, s));
    }
    for (int i = 0; i < p.gemms; ++i) DTSIM_CHECK(run_gemm(s));
    if (between != nullptr) {
      DTSIM_CUDA(cudaEventRecord(between, s));
    }
    for (int i = 0; i < p.copies; ++i) DTSIM_CHECK(run_copy(s));
    return {};
  }
};

// One pattern: untimed for `warm_s` (the power controller settles), then `reps` repetitions with
// an event before each burst, after it, and after the last copies.
Expected<nlohmann::json> measure(Kernels& k, const PowerPattern& p, int warm_reps, int reps, cudaStream_t s) {
  // Every event is created before the GPU starts, so that creating them does not gap the queue.
  EventPool pool;
  std::vector<cudaEvent_t> start(static_cast<std::size_t>(reps)), mid(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    auto e0 = pool.next();
    if (!e0) return e0.error();
    auto e1 = pool.next();
    if (!e1) return e1.error();
    start[static_cast<std::size_t>(i)] = *e0;
    mid[static_cast<std::size_t>(i)] = *e1;
  }
  auto end = pool.next();
  if (!end) return end.error();
  for (int i = 0; i < warm_reps; ++i) DTSIM_CHECK(k.run_pattern(p, s));
  for (int i = 0; i < reps; ++i) DTSIM_CHECK(k.run_pattern(p, s, start[static_cast<std::size_t>(i)], mid[static_cast<std::size_t>(i)]));
  DTSIM_CUDA(cudaEventRecord(*end, s));
  DTSIM_CUDA(cudaEventSynchronize(*end));
  double gemm_s = 0, copy_s = 0;
  for (int i = 0; i < reps; ++i) {
    const auto u = static_cast<std::size_t>(i);
    auto g = elapsed_s(start[u], mid[u]);
    if (!g) return g.error();
    auto c = elapsed_s(mid[u], i + 1 < reps ? start[u + 1] : *end);
    if (!c) return c.error();
    gemm_s += *g;
    copy_s += *c;
  }
  const double gemms = static_cast<double>(reps) * p.gemms, copies = static_cast<double>(reps) * p.copies;
  const double per_gemm = gemm_s / gemms;
  const double flops = 2.0 * static_cast<double>(kSide) * static_cast<double>(kSide) * static_cast<double>(kSide);
  return nlohmann::json{{"time_s", per_gemm},
                        {"tflops", flops / per_gemm * 1e-12},
                        {"copy_time_s", copies > 0 ? copy_s / copies : 0.0},
                        {"gemm_share", gemm_s / (gemm_s + copy_s)},
                        {"seconds", gemm_s + copy_s},
                        {"reps", reps}};
}

void run_suite(Context& ctx, benchmark::State& st) {
  auto k = std::make_unique<Kernels>();
  Arena arena;
  auto fail = [&](const std::string& point, const Error& e) {
    cudaGetLastError();
    ctx.record("power", point, {{"dtype", "bf16"}}, e);
    st.SkipWithError(e.message.c_str());
  };
  const std::string base = "power/bf16/NT/" + std::to_string(kSide) + "x" + std::to_string(kSide) + "x" + std::to_string(kSide);
  if (auto s = k->runner.init(); !s) return fail(base, s.error());
  k->gemm.kind = GemmKind::bf16;
  k->gemm.m = k->gemm.n = k->gemm.k = kSide;
  k->gemm.trans_b = true;
  const auto elt = static_cast<int>(gpu::Elt::bf16);
  const std::size_t matrix = static_cast<std::size_t>(kSide * kSide) * 2;
  auto a = arena.get(0, matrix, elt, ctx.stream);
  auto b = arena.get(1, matrix, elt, ctx.stream);
  auto c = arena.get(2, matrix, elt, ctx.stream);
  auto buf = arena.get(3, 2 * kCopyBytes, static_cast<int>(gpu::Elt::f32), ctx.stream);
  for (const auto* x : {&a, &b, &c, &buf}) {
    if (!*x) return fail(base, x->error());
  }
  k->a = *a, k->b = *b, k->c = *c, k->copy_buf = static_cast<char*>(*buf);

  // Each kernel alone (the GEMM suite's timing), to size the patterns.
  auto gemm_alone = time_on_stream(ctx.stream, [&](std::size_t) { return k->run_gemm(ctx.stream); }, ctx.timing);
  if (!gemm_alone) return fail(base, gemm_alone.error());
  auto copy_alone = time_on_stream(ctx.stream, [&](std::size_t) { return k->run_copy(ctx.stream); }, ctx.timing);
  if (!copy_alone) return fail(base, copy_alone.error());
  const double tg = gemm_alone->median_s, tc = copy_alone->median_s;
  const double warm_s = ctx.opt.quick ? 0.3 : 1.0, timed_s = ctx.opt.quick ? 0.5 : 2.0;
  for (const PowerPattern& p : power_patterns(tg, tc)) {
    const std::string point = base + "/" + p.name();
    if (ctx.is_done(point)) continue;
    const nlohmann::json params{{"dtype", "bf16"},          {"m", kSide},
                                {"n", kSide},               {"k", kSide},
                                {"layout", "NT"},           {"gemms", p.gemms},
                                {"copies", p.copies},       {"planned_share", p.share},
                                {"copy_bytes", kCopyBytes}, {"gemm_alone_s", tg},
                                {"copy_alone_s", tc},       {"warm_s", warm_s}};
    auto r = measure(*k, p, power_repetitions(p, tg, tc, warm_s), power_repetitions(p, tg, tc, timed_s), ctx.stream);
    if (!r) {
      cudaGetLastError();
      ctx.record("power", point, params, r.error());
      continue;
    }
    ctx.record("power", point, params, *r);
    st.counters[p.name() + " TFLOPS"] = (*r)["tflops"].get<double>();
  }
  st.SetIterationTime(tg);
}

}  // namespace

void register_power(Context& ctx) {
  if (ctx.cc_major < 8) {
    if (!ctx.is_done("power/bf16")) ctx.skipped("power", "power/bf16", {{"dtype", "bf16"}}, "bf16 needs compute capability 8.0 (Ampere) or newer");
    return;
  }
  benchmark::RegisterBenchmark("power/bf16", [&ctx](benchmark::State& st) {
    for (auto _ : st) run_suite(ctx, st);
  })->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

}  // namespace dtsim::harness
