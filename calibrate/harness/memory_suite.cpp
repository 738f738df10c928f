// Memory-bound suite: streaming (device copy kernel, cudaMemcpy, triad) on buffers well beyond L2,
// and the memory-bound kernels of a transformer step (layernorm, softmax, GELU, dropout-residual,
// Adam) at transformer shapes. Buffers rotate so that every launch reads data that is not in L2.
// `bytes` in each record is the traffic dtsim's compute model counts for the kernel
// (workloads/program.cpp, program_kernels.cpp), so that the fitted efficiency is the model's own parameter; the
// cross-entropy points, which no kind is fitted to, count each tensor once instead.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <functional>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/kernels.hpp"

namespace dtsim::harness {

namespace {

using gpu::Elt;

struct MemPoint {
  std::string kernel;
  std::string shape;
  double bytes = 0;                  // counted traffic per launch
  std::size_t footprint = 0;         // bytes one set of buffers takes
  nlohmann::json params;
  // Launches the kernel on buffer set `base` (footprint bytes, random contents).
  std::function<cudaError_t(char* base, cudaStream_t)> launch;
  // Optional: run once on each buffer set after the random fill, untimed (valid indices).
  std::function<cudaError_t(char* base, cudaStream_t)> prepare = {};
};

void run_point(Context& ctx, const MemPoint& p, benchmark::State& st) {
  const std::string point = "memory/" + p.kernel + "/" + p.shape;
  nlohmann::json params = p.params;
  params["kernel"] = p.kernel;
  params["bytes"] = p.bytes;
  params["shape"] = p.shape;
  auto measure = [&]() -> Expected<nlohmann::json> {
    // Enough buffer sets to cover 3x L2 (at most 64 sets, and a quarter of the free memory).
    std::size_t free_b = 0, total_b = 0;
    DTSIM_CUDA(cudaMemGetInfo(&free_b, &total_b));
    const std::size_t fp = (p.footprint + 255) / 256 * 256;
    std::size_t sets = std::clamp<std::size_t>((3 * ctx.l2_bytes + fp - 1) / fp, 1, 64);
    while (sets > 1 && sets * fp > free_b / 4) --sets;
    if (fp > free_b) return Error("needs " + std::to_string(fp >> 20) + " MiB; " + std::to_string(free_b >> 20) + " MiB free");
    char* base = nullptr;
    DTSIM_CUDA(cudaMalloc(&base, sets * fp));
    struct Free {
      char* p;
      ~Free() { cudaFree(p); }
    } guard{base};
    DTSIM_CUDA(gpu::fill_random(base, sets * fp / 2, Elt::bf16, 0xa11ce, 1.0f, ctx.stream));
    if (p.prepare) {
      for (std::size_t i = 0; i < sets; ++i) DTSIM_CUDA(p.prepare(base + i * fp, ctx.stream));
    }
    auto t = time_on_stream(
        ctx.stream,
        [&](std::size_t i) -> Status {
          DTSIM_CUDA(p.launch(base + (i % sets) * fp, ctx.stream));
          return {};
        },
        ctx.timing);
    if (!t) return t.error();
    nlohmann::json r = t->to_json();
    r["GBps"] = p.bytes / t->median_s * 1e-9;
    r["buffer_sets"] = sets;
    return r;
  };
  auto r = measure();
  if (!r) {
    cudaGetLastError();
    ctx.record("memory", point, params, r.error());
    st.SkipWithError(r.error().message.c_str());
    return;
  }
  ctx.record("memory", point, params, *r);
  st.SetIterationTime((*r)["time_s"].get<double>());
  st.counters["GB/s"] = (*r)["GBps"].get<double>();
}

}  // namespace

void register_memory(Context& ctx) {
  std::vector<MemPoint> pts;
  const Elt t = Elt::bf16;
  const std::size_t e = 2;
  // Streaming, buffers of S bytes each.
  const std::vector<std::int64_t> stream_sizes =
      ctx.opt.quick ? std::vector<std::int64_t>{std::int64_t{4} << 20, std::int64_t{64} << 20, std::int64_t{1} << 30}
                    : std::vector<std::int64_t>{std::int64_t{1} << 20, std::int64_t{4} << 20, std::int64_t{16} << 20, std::int64_t{64} << 20,
                                                std::int64_t{256} << 20, std::int64_t{1} << 30, std::int64_t{4} << 30};
  for (std::int64_t s : stream_sizes) {
    const auto sz = static_cast<std::size_t>(s);
    const std::string shape = bytes_label(s);
    pts.push_back({"copy", shape, 2.0 * s, 2 * sz, {{"buffer_bytes", s}},
                   [sz](char* b, cudaStream_t st) { return gpu::copy(b, b + sz, sz, st); }});
    pts.push_back({"memcpy", shape, 2.0 * s, 2 * sz, {{"buffer_bytes", s}},
                   [sz](char* b, cudaStream_t st) { return cudaMemcpyAsync(b + sz, b, sz, cudaMemcpyDeviceToDevice, st); }});
    pts.push_back({"triad", shape, 3.0 * s, 3 * sz, {{"buffer_bytes", s}}, [sz](char* b, cudaStream_t st) {
                     return gpu::triad(reinterpret_cast<float*>(b), reinterpret_cast<const float*>(b + sz),
                                       reinterpret_cast<const float*>(b + 2 * sz), 0.5f, sz / 4, st);
                   }});
  }
  // Transformer shapes: tokens T x hidden h (bf16 activations).
  const std::vector<std::int64_t> hiddens = ctx.opt.quick ? std::vector<std::int64_t>{768, 4096} : std::vector<std::int64_t>{768, 2048, 4096, 8192};
  const std::vector<std::int64_t> tokens = ctx.opt.quick ? std::vector<std::int64_t>{8192} : std::vector<std::int64_t>{2048, 8192, 32768};
  for (std::int64_t h : hiddens) {
    for (std::int64_t T : tokens) {
      const std::string shape = std::to_string(T) + "x" + std::to_string(h);
      const std::size_t n = static_cast<std::size_t>(T * h);
      const int rows = static_cast<int>(T), cols = static_cast<int>(h);
      // x, y, dy, dx (bf16), gamma, beta, dgamma, dbeta (fp32, h), mean, rstd (fp32, T).
      const std::size_t act = n * e, vec = static_cast<std::size_t>(h) * 4, stat = static_cast<std::size_t>(T) * 4;
      const std::size_t ln_fp = 4 * act + 4 * vec + 2 * stat;
      auto ln_ptrs = [=](char* b) {
        struct P {
          char *x, *y, *dy, *dx;
          float *g, *be, *dg, *db, *mean, *rstd;
        } p{b, b + act, b + 2 * act, b + 3 * act, reinterpret_cast<float*>(b + 4 * act), reinterpret_cast<float*>(b + 4 * act + vec),
            reinterpret_cast<float*>(b + 4 * act + 2 * vec), reinterpret_cast<float*>(b + 4 * act + 3 * vec),
            reinterpret_cast<float*>(b + 4 * act + 4 * vec), reinterpret_cast<float*>(b + 4 * act + 4 * vec + stat)};
        return p;
      };
      pts.push_back({"layernorm_fwd", shape, 2.0 * static_cast<double>(act), ln_fp, {{"tokens", T}, {"hidden", h}},
                     [=](char* b, cudaStream_t st) {
                       auto p = ln_ptrs(b);
                       return gpu::layernorm_fwd(p.x, p.g, p.be, p.y, p.mean, p.rstd, rows, cols, t, st);
                     }});
      pts.push_back({"layernorm_bwd", shape, 3.0 * static_cast<double>(act), ln_fp, {{"tokens", T}, {"hidden", h}},
                     [=](char* b, cudaStream_t st) {
                       auto p = ln_ptrs(b);
                       return gpu::layernorm_bwd(p.dy, p.x, p.g, p.mean, p.rstd, nullptr, p.dx, p.dg, p.db, rows, cols, t, st);
                     }});
      pts.push_back({"dropout_residual", shape, 3.0 * static_cast<double>(act), 3 * act, {{"tokens", T}, {"hidden", h}},
                     [=](char* b, cudaStream_t st) { return gpu::dropout_residual_fwd(b, b + act, b + 2 * act, n, 0.1f, 7, t, st); }});
      // Head-layout copies of unfused attention (dtsim: compute.memory.layout): the [T, 3h]
      // projection into q, k, v as [b, heads, s, d], and the context back to [T, h].
      const int s_len = static_cast<int>(std::min<std::int64_t>(T, 1024)), heads = static_cast<int>(std::max<std::int64_t>(1, h / 64));
      const int bsz = static_cast<int>(T / s_len), dh = static_cast<int>(h) / heads;
      pts.push_back({"layout_qkv", shape, 6.0 * static_cast<double>(act), 6 * act, {{"tokens", T}, {"hidden", h}},
                     [=](char* b, cudaStream_t st) { return gpu::split_qkv(b, b + 3 * act, b + 4 * act, b + 5 * act, bsz, s_len, heads, dh, t, st); }});
      pts.push_back({"layout_heads", shape, 2.0 * static_cast<double>(act), 2 * act, {{"tokens", T}, {"hidden", h}},
                     [=](char* b, cudaStream_t st) { return gpu::merge_heads(b, b + act, bsz, s_len, heads, dh, t, st); }});
      const std::size_t ff = n * 4;  // MLP activations: T x 4h
      pts.push_back({"gelu_fwd", std::to_string(T) + "x" + std::to_string(4 * h), 2.0 * static_cast<double>(ff * e), 2 * ff * e,
                     {{"tokens", T}, {"hidden", 4 * h}},
                     [=](char* b, cudaStream_t st) { return gpu::gelu_fwd(b, b + ff * e, ff, t, st); }});
      pts.push_back({"gelu_bwd", std::to_string(T) + "x" + std::to_string(4 * h), 3.0 * static_cast<double>(ff * e), 3 * ff * e,
                     {{"tokens", T}, {"hidden", 4 * h}},
                     [=](char* b, cudaStream_t st) { return gpu::gelu_bwd(b, b + ff * e, b + 2 * ff * e, ff, t, st); }});
    }
  }
  // Attention softmax: batch x heads matrices of seq x seq (causal).
  for (std::int64_t seq : ctx.opt.quick ? std::vector<std::int64_t>{1024} : std::vector<std::int64_t>{512, 1024, 2048}) {
    for (std::int64_t bh : ctx.opt.quick ? std::vector<std::int64_t>{96} : std::vector<std::int64_t>{48, 192}) {
      const std::int64_t rows = bh * seq;
      const std::size_t n = static_cast<std::size_t>(rows * seq);
      const std::string shape = std::to_string(bh) + "x" + std::to_string(seq) + "x" + std::to_string(seq);
      const int cols = static_cast<int>(seq);
      pts.push_back({"softmax_fwd", shape, 2.0 * static_cast<double>(n * e), 2 * n * e, {{"matrices", bh}, {"seq", seq}},
                     [=](char* b, cudaStream_t st) { return gpu::softmax_fwd(b, b + n * e, 0.125f, true, rows, cols, t, st); }});
      pts.push_back({"softmax_bwd", shape, 3.0 * static_cast<double>(n * e), 3 * n * e, {{"matrices", bh}, {"seq", seq}},
                     [=](char* b, cudaStream_t st) { return gpu::softmax_bwd(b, b + n * e, b + 2 * n * e, 0.125f, rows, cols, t, st); }});
    }
  }
  // Adam over N parameters: fp32 weights, moments, gradient; bf16 copy (30 bytes per parameter).
  for (std::int64_t params : ctx.opt.quick ? std::vector<std::int64_t>{125'000'000} : std::vector<std::int64_t>{25'000'000, 125'000'000, 350'000'000}) {
    const std::size_t n = static_cast<std::size_t>(params);
    pts.push_back({"adam", std::to_string(params), 30.0 * static_cast<double>(n), 18 * n, {{"parameters", params}},
                   [=](char* b, cudaStream_t st) {
                     float* w = reinterpret_cast<float*>(b);
                     gpu::AdamConfig c;
                     return gpu::adam(w, w + n, w + 2 * n, w + 3 * n, b + 16 * n, n, c, t, st);
                   }});
  }
  // Fused cross-entropy over the vocabulary (dtsim: the head's `cross_entropy`): forward reads the
  // bf16 logits of a row (one block per row, three passes: max, sum, write) and writes fp32
  // log-probabilities; backward reads those and writes the bf16 logit gradient. `bytes` counts
  // each tensor once (6 per element), the harness's convention; the model decides the passes.
  // Rows: GPT-2's vocabulary padded (the validation workload's), split 2, 4, 8 ways as a
  // vocabulary-parallel head would, and Llama 3's 128,256: where a row stops fitting on chip, the
  // kernel's second and third passes over it come from HBM.
  std::vector<std::pair<std::int64_t, int>> ce_shapes;
  if (ctx.opt.quick) {
    ce_shapes = {{8192, 50304}};
  } else {
    for (std::int64_t T : {1024, 4096, 8192, 16384}) ce_shapes.emplace_back(T, 50304);
    for (int v : {6288, 12576, 25152, 128256}) ce_shapes.emplace_back(8192, v);
  }
  for (const auto& ce : ce_shapes) {
    const std::int64_t T = ce.first;
    const int vocab = ce.second;
    const std::size_t n = static_cast<std::size_t>(T) * vocab;
    const std::size_t logits = n * e, logp = n * 4, tgt = static_cast<std::size_t>(T) * 4;
    const std::string shape = std::to_string(T) + "x" + std::to_string(vocab);
    const int rows = static_cast<int>(T);
    auto prepare = [=](char* b, cudaStream_t st) {
      return gpu::fill_tokens(reinterpret_cast<std::int32_t*>(b + logits + logp), static_cast<std::size_t>(rows), vocab, 99, st);
    };
    pts.push_back({"cross_entropy_fwd", shape, 6.0 * static_cast<double>(n), logits + logp + tgt + 256, {{"tokens", T}, {"vocab", vocab}},
                   [=](char* b, cudaStream_t st) {
                     return gpu::cross_entropy_fwd(b, reinterpret_cast<const std::int32_t*>(b + logits + logp), reinterpret_cast<float*>(b + logits),
                                                   reinterpret_cast<float*>(b + logits + logp + tgt), rows, vocab, t, st);
                   },
                   prepare});
    pts.push_back({"cross_entropy_bwd", shape, 6.0 * static_cast<double>(n), logits + logp + tgt + 256, {{"tokens", T}, {"vocab", vocab}},
                   [=](char* b, cudaStream_t st) {
                     return gpu::cross_entropy_bwd(reinterpret_cast<const float*>(b + logits), reinterpret_cast<const std::int32_t*>(b + logits + logp),
                                                   b, rows, vocab, t, st);
                   },
                   prepare});
  }
  for (const MemPoint& p : pts) {
    const std::string name = "memory/" + p.kernel + "/" + p.shape;
    if (ctx.is_done(name)) continue;
    benchmark::RegisterBenchmark(name.c_str(), [&ctx, p](benchmark::State& st) {
      for (auto _ : st) run_point(ctx, p, st);
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace dtsim::harness
