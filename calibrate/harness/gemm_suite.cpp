// GEMM suite: cuBLASLt matrix products per math type over square sizes and the GEMM shapes of
// transformer layers (forward, input gradient, weight gradient) at several token counts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <set>

#include "calibrate/harness/check.hpp"
#include "calibrate/harness/context.hpp"
#include "calibrate/harness/gemm.hpp"

namespace dtsim::harness {

namespace {

struct Shape {
  std::int64_t m, n, k;
  std::string layout;  // row-major: "NT" forward, "NN" input gradient, "TN" weight gradient
  std::string source;  // "square", or "<model>/<layer>/<pass>/tokens=<T>"
};

// Linear layers of dtsim's model zoo (presets/models/; vocabularies padded to a multiple of 128
// as Megatron does). GPT-3 175B with tensor parallelism 8, as trained.
struct Layers {
  const char* name;
  std::int64_t hidden, qkv_out, attn_in, up_out, ffn_in, vocab;
};
const Layers kModels[] = {
    {"gpt3-125m", 768, 3 * 768, 768, 3072, 3072, 50304},
    {"gpt3-1.3b", 2048, 3 * 2048, 2048, 8192, 8192, 50304},
    {"gpt3-6.7b", 4096, 3 * 4096, 4096, 16384, 16384, 50304},
    {"llama3-8b", 4096, 4096 + 2 * 1024, 4096, 2 * 14336, 14336, 128256},
    {"gpt3-175b-tp8", 12288, 3 * 12288 / 8, 12288 / 8, 49152 / 8, 49152 / 8, 0},
};

std::vector<Shape> model_shapes(const Layers& l, std::int64_t tokens, bool backward) {
  std::vector<Shape> out;
  struct Lin {
    const char* layer;
    std::int64_t out, in;
  };
  std::vector<Lin> lins{{"qkv", l.qkv_out, l.hidden}, {"attn_out", l.hidden, l.attn_in}, {"mlp_up", l.up_out, l.hidden},
                        {"mlp_down", l.hidden, l.ffn_in}};
  if (l.vocab > 0) lins.push_back({"lm_head", l.vocab, l.hidden});
  const std::string t = "tokens=" + std::to_string(tokens);
  for (const Lin& x : lins) {
    const std::string base = std::string(l.name) + "/" + x.layer + "/";
    out.push_back({tokens, x.out, x.in, "NT", base + "fwd/" + t});  // Y = X W^T
    if (backward) {
      out.push_back({tokens, x.in, x.out, "NN", base + "dgrad/" + t});  // dX = dY W
      out.push_back({x.out, x.in, tokens, "TN", base + "wgrad/" + t});  // dW = dY^T X
    }
  }
  return out;
}

struct GemmPoint {
  GemmKind kind;
  Shape shape;
};

void run_point(Context& ctx, const GemmPoint& p, GemmRunner& runner, Arena& arena, benchmark::State& st) {
  const bool fp8 = p.kind == GemmKind::fp8;
  GemmCall c;
  c.kind = p.kind;
  c.m = p.shape.m;
  c.n = p.shape.n;
  c.k = p.shape.k;
  c.trans_a = p.shape.layout[0] == 'T';
  c.trans_b = p.shape.layout[1] == 'T';
  if (fp8) c.trans_a = false, c.trans_b = true;  // cuBLASLt runs fp8 as TN only: same sizes, forward layout
  const std::string layout = c.layout();
  const std::string point = "gemm/" + std::string(to_string(p.kind)) + "/" + layout + "/" + std::to_string(c.m) + "x" + std::to_string(c.n) +
                            "x" + std::to_string(c.k);
  const int in_bytes = static_cast<int>(gpu::elt_bytes(input_elt(p.kind)));
  const int out_bytes = static_cast<int>(gpu::elt_bytes(output_elt(p.kind)));
  const nlohmann::json params{{"dtype", to_string(p.kind)}, {"m", c.m},          {"n", c.n},
                              {"k", c.k},                 {"batch", 1},          {"layout", layout},
                              {"a_bytes", in_bytes},      {"c_bytes", out_bytes}, {"shape", p.shape.source}};
  auto measure = [&]() -> Expected<nlohmann::json> {
    const int elt_in = static_cast<int>(input_elt(p.kind)), elt_out = static_cast<int>(output_elt(p.kind));
    auto a = arena.get(0, c.a_elems() * static_cast<std::size_t>(in_bytes), elt_in, ctx.stream);
    if (!a) return a.error();
    auto b = arena.get(1, c.b_elems() * static_cast<std::size_t>(in_bytes), elt_in, ctx.stream);
    if (!b) return b.error();
    auto out = arena.get(2, c.c_elems() * static_cast<std::size_t>(out_bytes), elt_out, ctx.stream);
    if (!out) return out.error();
    auto t = time_on_stream(ctx.stream, [&](std::size_t) { return runner.run(c, *a, *b, *out, ctx.stream); }, ctx.timing);
    if (!t) return t.error();
    nlohmann::json r = t->to_json();
    const double flops = 2.0 * static_cast<double>(c.m) * static_cast<double>(c.n) * static_cast<double>(c.k);
    r["tflops"] = flops / t->median_s * 1e-12;
    return r;
  };
  auto r = measure();
  if (!r) {
    // An out-of-memory or unsupported shape is this point's error; the run goes on.
    cudaGetLastError();
    ctx.record("gemm", point, params, r.error());
    st.SkipWithError(r.error().message.c_str());
    return;
  }
  ctx.record("gemm", point, params, *r);
  st.SetIterationTime((*r)["time_s"].get<double>());
  st.counters["TFLOPS"] = (*r)["tflops"].get<double>();
}

}  // namespace

void register_gemm(Context& ctx) {
  // Shared by every GEMM benchmark; created by the first one that runs.
  struct Shared {
    std::unique_ptr<GemmRunner> runner;
    std::unique_ptr<Arena> arena;
  };
  auto shared = std::make_shared<Shared>();
  ctx.release.push_back([shared] {
    shared->arena.reset();
    shared->runner.reset();
  });
  std::vector<GemmKind> kinds;
  const bool fp8_ok = ctx.cc_major > 8 || (ctx.cc_major == 8 && ctx.cc_minor >= 9);
  for (GemmKind k : {GemmKind::bf16, GemmKind::fp16, GemmKind::fp8, GemmKind::tf32, GemmKind::fp32}) {
    const std::string name = to_string(k);
    if (!ctx.opt.gemm_dtypes.empty() && std::find(ctx.opt.gemm_dtypes.begin(), ctx.opt.gemm_dtypes.end(), name) == ctx.opt.gemm_dtypes.end()) {
      continue;
    }
    if ((k == GemmKind::tf32 || k == GemmKind::bf16) && ctx.cc_major < 8) {
      if (!ctx.is_done("gemm/" + name)) {
        ctx.skipped("gemm", "gemm/" + name, {{"dtype", name}}, name + " needs compute capability 8.0 (Ampere) or newer");
      }
      continue;
    }
    if (k == GemmKind::fp8 && !fp8_ok) {
      if (!ctx.is_done("gemm/fp8")) {
        ctx.skipped("gemm", "gemm/fp8", {{"dtype", "fp8"}},
                    "fp8 GEMMs need compute capability 8.9 or newer; this GPU is " + std::to_string(ctx.cc_major) + "." +
                        std::to_string(ctx.cc_minor));
      }
      continue;
    }
    kinds.push_back(k);
  }
  std::vector<GemmPoint> points;
  std::set<std::string> seen;
  const std::vector<std::int64_t> tokens = ctx.opt.quick ? std::vector<std::int64_t>{2048, 8192} : std::vector<std::int64_t>{2048, 8192, 32768};
  for (GemmKind k : kinds) {
    for (std::int64_t s = 256; s <= ctx.opt.gemm_max; s *= 2) points.push_back({k, {s, s, s, "NT", "square"}});
    // Model shapes: in quick mode bf16 and fp8 only, three models.
    const bool models = !ctx.opt.quick || k == GemmKind::bf16 || k == GemmKind::fp8;
    if (!models || k == GemmKind::fp32) continue;
    for (const Layers& l : kModels) {
      if (ctx.opt.quick && std::string(l.name) != "gpt3-125m" && std::string(l.name) != "gpt3-6.7b" && std::string(l.name) != "llama3-8b") {
        continue;
      }
      for (std::int64_t t : tokens) {
        for (const Shape& s : model_shapes(l, t, !(ctx.opt.quick && k == GemmKind::fp8))) points.push_back({k, s});
      }
    }
  }
  for (const GemmPoint& p : points) {
    const bool fp8 = p.kind == GemmKind::fp8;
    const std::string layout = fp8 ? "NT" : p.shape.layout;
    const std::string name = "gemm/" + std::string(to_string(p.kind)) + "/" + layout + "/" + std::to_string(p.shape.m) + "x" +
                             std::to_string(p.shape.n) + "x" + std::to_string(p.shape.k);
    if (!seen.insert(name).second || ctx.is_done(name)) continue;
    benchmark::RegisterBenchmark(name.c_str(), [&ctx, p, shared](benchmark::State& st) {
      for (auto _ : st) {
        if (!shared->runner) {
          auto r = std::make_unique<GemmRunner>();
          if (auto s = r->init(); !s) {
            st.SkipWithError(s.error().message.c_str());
            break;
          }
          shared->runner = std::move(r);
          shared->arena = std::make_unique<Arena>();
        }
        run_point(ctx, p, *shared->runner, *shared->arena, st);
      }
    })->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace dtsim::harness
