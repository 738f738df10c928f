// Kernels of the calibration harness and the validation workload (see kernels.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "calibrate/harness/kernels.hpp"

namespace dtsim::gpu {

namespace {

// ---------------------------------------------------------------------------------------------
// Element types

template <class T>
__device__ __forceinline__ float to_f(T x) {
  return static_cast<float>(x);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <class T>
__device__ __forceinline__ T from_f(float x) {
  return static_cast<T>(x);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float x) {
  return __nv_fp8_e4m3(x);
}

#define DTSIM_DISPATCH(t, ...)                    \
  switch (t) {                                    \
    case Elt::f32: {                              \
      using T = float;                            \
      __VA_ARGS__;                                \
      break;                                      \
    }                                             \
    case Elt::f16: {                              \
      using T = __half;                           \
      __VA_ARGS__;                                \
      break;                                      \
    }                                             \
    case Elt::bf16: {                             \
      using T = __nv_bfloat16;                    \
      __VA_ARGS__;                                \
      break;                                      \
    }                                             \
    default: return cudaErrorInvalidValue;        \
  }

// Grid of at most 65535 x 8 blocks (grid-stride loops cover the rest).
unsigned blocks_for(std::size_t n, unsigned threads) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535u * 8u ? 65535u * 8u : b));
}

__device__ __forceinline__ std::uint64_t mix(std::uint64_t x) {
  // splitmix64's finalizer.
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1).
__device__ __forceinline__ float uniform(std::uint64_t seed, std::uint64_t i) {
  return static_cast<float>(mix(seed * 0x100000001B3ull ^ mix(i)) >> 40) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum (or max) over the block; every thread gets the result. blockDim.x <= 1024, multiple of 32.
template <bool Max>
__device__ float block_reduce(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = Max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // part[] may still be read from a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  float r = lane < warps ? part[lane] : (Max ? -INFINITY : 0.0f);
  r = Max ? warp_max(r) : warp_sum(r);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Fills, copies

template <class T>
__global__ void k_fill_random(T* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = from_f<T>((2.0f * uniform(seed, i) - 1.0f) * scale);
  }
}

template <class T>
__global__ void k_fill_value(T* p, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = from_f<T>(v);
  }
}

__global__ void k_fill_tokens(std::int32_t* p, std::size_t n, int vocab, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = static_cast<std::int32_t>(mix(seed ^ mix(i)) % static_cast<std::uint64_t>(vocab));
  }
}

__global__ void k_empty() {}

__global__ void k_copy(const float4* __restrict__ in, float4* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = in[i];
  }
}

__global__ void k_triad(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c, float s, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float4 x = b[i], y = c[i];
    a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

template <class T>
__global__ void k_layernorm_fwd(const T* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta, T* __restrict__ y,
                                float* __restrict__ mean, float* __restrict__ rstd, int cols) {
  const std::size_t row = blockIdx.x;
  const T* xr = x + row * cols;
  float s = 0, ss = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_f(xr[c]);
    s += v;
    ss += v * v;
  }
  s = block_reduce<false>(s);
  ss = block_reduce<false>(ss);
  const float mu = s / cols;
  const float var = fmaxf(ss / cols - mu * mu, 0.0f);
  const float r = rsqrtf(var + 1e-5f);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
  T* yr = y + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = from_f<T>((to_f(xr[c]) - mu) * r * gamma[c] + beta[c]);
}

template <class T>
__global__ void k_layernorm_bwd_dx(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ gamma,
                                   const float* __restrict__ mean, const float* __restrict__ rstd, const T* __restrict__ dresid,
                                   T* __restrict__ dx, int cols) {
  const std::size_t row = blockIdx.x;
  const T* dyr = dy + row * cols;
  const T* xr = x + row * cols;
  const float mu = mean[row], r = rstd[row];
  float a = 0, b = 0;  // sum(dxhat), sum(dxhat * xhat)
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f(dyr[c]) * gamma[c];
    a += g;
    b += g * (to_f(xr[c]) - mu) * r;
  }
  a = block_reduce<false>(a) / cols;
  b = block_reduce<false>(b) / cols;
  T* dxr = dx + row * cols;
  const T* drr = dresid ? dresid + row * cols : nullptr;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (to_f(xr[c]) - mu) * r;
    float v = r * (to_f(dyr[c]) * gamma[c] - a - xhat * b);
    if (drr) v += to_f(drr[c]);
    dxr[c] = from_f<T>(v);
  }
}

// dgamma[c] += sum_rows dy * xhat, dbeta[c] += sum_rows dy: 32 columns per block, rows split
// over gridDim.y blocks, one atomic per column per block.
template <class T>
__global__ void k_layernorm_bwd_params(const T* __restrict__ dy, const T* __restrict__ x, const float* __restrict__ mean,
                                       const float* __restrict__ rstd, float* __restrict__ dgamma, float* __restrict__ dbeta, int rows,
                                       int cols) {
  __shared__ float sg[8][33], sb[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int chunk = (rows + gridDim.y - 1) / gridDim.y;
  const int start = blockIdx.y * chunk, end = min(rows, start + chunk);
  float g = 0, b = 0;
  if (c < cols) {
    for (int r = start + threadIdx.y; r < end; r += 8) {
      const std::size_t i = static_cast<std::size_t>(r) * cols + c;
      const float d = to_f(dy[i]);
      g += d * (to_f(x[i]) - mean[r]) * rstd[r];
      b += d;
    }
  }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; ++k) {
      g += sg[k][threadIdx.x];
      b += sb[k][threadIdx.x];
    }
    atomicAdd(dgamma + c, g);
    atomicAdd(dbeta + c, b);
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax

template <class T>
__global__ void k_softmax_fwd(const T* __restrict__ x, T* __restrict__ y, float scale, bool causal, int cols) {
  const std::size_t row = blockIdx.x + static_cast<std::size_t>(blockIdx.y) * gridDim.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  const int last = causal ? static_cast<int>(row % cols) : cols - 1;
  float m = -INFINITY;
  for (int c = threadIdx.x; c <= last; c += blockDim.x) m = fmaxf(m, to_f(xr[c]) * scale);
  m = block_reduce<true>(m);
  float s = 0;
  for (int c = threadIdx.x; c <= last; c += blockDim.x) s += __expf(to_f(xr[c]) * scale - m);
  s = block_reduce<false>(s);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = from_f<T>(c <= last ? __expf(to_f(xr[c]) * scale - m) * inv : 0.0f);
}

template <class T>
__global__ void k_softmax_bwd(const T* __restrict__ y, const T* __restrict__ dy, T* __restrict__ dx, float scale, int cols) {
  const std::size_t row = blockIdx.x + static_cast<std::size_t>(blockIdx.y) * gridDim.x;
  const T* yr = y + row * cols;
  const T* dyr = dy + row * cols;
  float d = 0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) d += to_f(yr[c]) * to_f(dyr[c]);
  d = block_reduce<false>(d);
  T* dxr = dx + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) dxr[c] = from_f<T>(to_f(yr[c]) * (to_f(dyr[c]) - d) * scale);
}

dim3 row_grid(std::int64_t rows) {
  // rows = x * y with x <= 65535 * 32 (x limit is 2^31 - 1; y limit 65535).
  std::int64_t y = 1;
  while (rows / y > 2147483647LL || (rows % y) != 0) ++y;
  return dim3(static_cast<unsigned>(rows / y), static_cast<unsigned>(y));
}

// ---------------------------------------------------------------------------------------------
// Element-wise

__device__ __forceinline__ float gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float k = 0.7978845608028654f;
  const float u = k * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x);
}

template <class T>
__global__ void k_gelu_fwd(const T* __restrict__ x, T* __restrict__ y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(gelu(to_f(x[i])));
  }
}

template <class T>
__global__ void k_gelu_bwd(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    dx[i] = from_f<T>(to_f(dy[i]) * gelu_grad(to_f(x[i])));
  }
}

template <class T>
__global__ void k_dropout(const T* __restrict__ x, T* __restrict__ y, std::size_t n, float p, std::uint64_t seed) {
  const float keep = 1.0f / (1.0f - p);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    y[i] = from_f<T>(uniform(seed, i) >= p ? to_f(x[i]) * keep : 0.0f);
  }
}

template <class T>
__global__ void k_dropout_residual(const T* __restrict__ x, const T* __restrict__ resid, T* __restrict__ out, std::size_t n, float p,
                                   std::uint64_t seed) {
  const float keep = 1.0f / (1.0f - p);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = from_f<T>(to_f(resid[i]) + (uniform(seed, i) >= p ? to_f(x[i]) * keep : 0.0f));
  }
}

template <class T>
__global__ void k_adam(float* __restrict__ w, float* __restrict__ m, float* __restrict__ v, const float* __restrict__ g, T* __restrict__ h,
                       std::size_t n, AdamConfig c, float bc1, float bc2) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i] * c.grad_scale;
    const float mi = c.beta1 * m[i] + (1.0f - c.beta1) * gi;
    const float vi = c.beta2 * v[i] + (1.0f - c.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float wi = w[i];
    wi -= c.lr * ((mi / bc1) / (sqrtf(vi / bc2) + c.eps) + c.weight_decay * wi);
    w[i] = wi;
    if (h) h[i] = from_f<T>(wi);
  }
}

template <class T>
__global__ void k_embedding_fwd(const std::int32_t* __restrict__ tok, const T* __restrict__ wte, const T* __restrict__ wpe, T* __restrict__ out,
                                std::size_t n, int seq, int hidden) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / hidden;
    const int c = static_cast<int>(i % hidden);
    const int pos = static_cast<int>(row % seq);
    out[i] = from_f<T>(to_f(wte[static_cast<std::size_t>(tok[row]) * hidden + c]) + to_f(wpe[static_cast<std::size_t>(pos) * hidden + c]));
  }
}

template <class T>
__global__ void k_embedding_bwd(const std::int32_t* __restrict__ tok, const T* __restrict__ dout, float* __restrict__ dwte,
                                float* __restrict__ dwpe, std::size_t n, int seq, int hidden) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / hidden;
    const int c = static_cast<int>(i % hidden);
    const float d = to_f(dout[i]);
    atomicAdd(dwte + static_cast<std::size_t>(tok[row]) * hidden + c, d);
    atomicAdd(dwpe + (row % seq) * hidden + c, d);
  }
}

template <class T>
__global__ void k_ce_fwd(const T* __restrict__ logits, const std::int32_t* __restrict__ targets, float* __restrict__ logp,
                         float* __restrict__ loss, int vocab, float inv_rows) {
  const std::size_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) m = fmaxf(m, to_f(x[c]));
  m = block_reduce<true>(m);
  float s = 0;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) s += __expf(to_f(x[c]) - m);
  s = block_reduce<false>(s);
  const float lse = m + __logf(s);
  float* lp = logp + row * vocab;
  for (int c = threadIdx.x; c < vocab; c += blockDim.x) lp[c] = to_f(x[c]) - lse;
  if (threadIdx.x == 0) atomicAdd(loss, -(to_f(x[targets[row]]) - lse) * inv_rows);
}

template <class T>
__global__ void k_ce_bwd(const float* __restrict__ logp, const std::int32_t* __restrict__ targets, T* __restrict__ dlogits, std::size_t n,
                         int vocab, float inv_rows) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / vocab;
    const int c = static_cast<int>(i % vocab);
    dlogits[i] = from_f<T>((__expf(logp[i]) - (c == targets[row] ? 1.0f : 0.0f)) * inv_rows);
  }
}

// qkv[b*s, 3h] element (row, col) <-> q/k/v[b, heads, s, d].
template <class T, bool Split>
__global__ void k_qkv(T* qkv, T* q, T* k, T* v, int s, int heads, int d, std::size_t n) {
  const int h = heads * d;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / (3 * h);
    const int col = static_cast<int>(i % (3 * h));
    const int which = col / h, head = (col % h) / d, j = col % d;
    const std::size_t bb = row / s, pos = row % s;
    const std::size_t o = ((bb * heads + head) * s + pos) * d + j;
    T* dst = which == 0 ? q : which == 1 ? k : v;
    if (Split) dst[o] = qkv[i];
    else qkv[i] = dst[o];
  }
}

template <class T, bool Merge>
__global__ void k_heads(T* ctx, T* out, int s, int heads, int d, std::size_t n) {
  const int h = heads * d;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / h;
    const int col = static_cast<int>(i % h);
    const int head = col / d, j = col % d;
    const std::size_t bb = row / s, pos = row % s;
    const std::size_t o = ((bb * heads + head) * s + pos) * d + j;
    if (Merge) out[i] = ctx[o];
    else ctx[o] = out[i];
  }
}

template <class T>
__global__ void k_cast(const float* __restrict__ in, T* __restrict__ out, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = from_f<T>(in[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// NCCL data checks

__device__ __forceinline__ float pattern(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((i * 3 + static_cast<std::size_t>(rank) * 7) % 13) - 6);
}

template <class T>
__global__ void k_fill_pattern(T* p, std::size_t n, int rank, std::size_t offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = from_f<T>(pattern(rank, offset + i));
  }
}

template <class T>
__global__ void k_check(const T* p, std::size_t n, CheckOp op, int rank, int nranks, int root, std::size_t chunk,
                        unsigned long long* wrong) {
  unsigned long long bad = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float want = 0;
    switch (op) {
      case CheckOp::allreduce:
        for (int r = 0; r < nranks; ++r) want += pattern(r, i);
        break;
      case CheckOp::allgather: want = pattern(static_cast<int>(i / chunk), i % chunk); break;
      case CheckOp::reducescatter:
        for (int r = 0; r < nranks; ++r) want += pattern(r, static_cast<std::size_t>(rank) * chunk + i);
        break;
      case CheckOp::alltoall: want = pattern(static_cast<int>(i / chunk), static_cast<std::size_t>(rank) * chunk + i % chunk); break;
      case CheckOp::broadcast: want = pattern(root, i); break;
      case CheckOp::sendrecv: want = pattern((rank - 1 + nranks) % nranks, i); break;
    }
    if (to_f(p[i]) != want) ++bad;
  }
  if (bad) atomicAdd(wrong, bad);
}

}  // namespace

const char* elt_name(Elt e) {
  switch (e) {
    case Elt::f32: return "float";
    case Elt::f16: return "half";
    case Elt::bf16: return "bfloat16";
    case Elt::f8e4m3: return "fp8_e4m3";
  }
  return "?";
}

cudaError_t fill_random(void* p, std::size_t n, Elt t, std::uint64_t seed, float scale, cudaStream_t stream) {
  if (t == Elt::f8e4m3) {
    k_fill_random<__nv_fp8_e4m3><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed, scale);
    return cudaGetLastError();
  }
  DTSIM_DISPATCH(t, k_fill_random<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(p), n, seed, scale));
  return cudaGetLastError();
}

cudaError_t fill_value(void* p, std::size_t n, Elt t, float value, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_fill_value<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(p), n, value));
  return cudaGetLastError();
}

cudaError_t fill_tokens(std::int32_t* p, std::size_t n, int vocab, std::uint64_t seed, cudaStream_t stream) {
  k_fill_tokens<<<blocks_for(n, 256), 256, 0, stream>>>(p, n, vocab, seed);
  return cudaGetLastError();
}

cudaError_t empty_kernel(cudaStream_t stream) {
  k_empty<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t copy(const void* in, void* out, std::size_t bytes, cudaStream_t stream) {
  if (bytes % 16 != 0) return cudaErrorInvalidValue;
  const std::size_t n = bytes / 16;
  k_copy<<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<const float4*>(in), static_cast<float4*>(out), n);
  return cudaGetLastError();
}

cudaError_t triad(float* a, const float* b, const float* c, float s, std::size_t n, cudaStream_t stream) {
  if (n % 4 != 0) return cudaErrorInvalidValue;
  k_triad<<<blocks_for(n / 4, 256), 256, 0, stream>>>(reinterpret_cast<float4*>(a), reinterpret_cast<const float4*>(b),
                                                      reinterpret_cast<const float4*>(c), s, n / 4);
  return cudaGetLastError();
}

cudaError_t layernorm_fwd(const void* x, const float* gamma, const float* beta, void* y, float* mean, float* rstd, int rows, int cols,
                          Elt t, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_layernorm_fwd<T><<<rows, 256, 0, stream>>>(static_cast<const T*>(x), gamma, beta, static_cast<T*>(y), mean, rstd, cols));
  return cudaGetLastError();
}

cudaError_t layernorm_bwd(const void* dy, const void* x, const float* gamma, const float* mean, const float* rstd, const void* dresid,
                          void* dx, float* dgamma, float* dbeta, int rows, int cols, Elt t, cudaStream_t stream) {
  const dim3 pgrid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(rows < 1024 ? (rows + 7) / 8 : 128));
  DTSIM_DISPATCH(t,
                 k_layernorm_bwd_dx<T><<<rows, 256, 0, stream>>>(static_cast<const T*>(dy), static_cast<const T*>(x), gamma, mean, rstd,
                                                                 static_cast<const T*>(dresid), static_cast<T*>(dx), cols);
                 k_layernorm_bwd_params<T><<<pgrid, dim3(32, 8), 0, stream>>>(static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd,
                                                                              dgamma, dbeta, rows, cols));
  return cudaGetLastError();
}

cudaError_t softmax_fwd(const void* x, void* y, float scale, bool causal, std::int64_t rows, int cols, Elt t, cudaStream_t stream) {
  const unsigned threads = cols >= 1024 ? 256 : cols >= 256 ? 128 : 32;
  DTSIM_DISPATCH(t, k_softmax_fwd<T><<<row_grid(rows), threads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), scale, causal, cols));
  return cudaGetLastError();
}

cudaError_t softmax_bwd(const void* y, const void* dy, void* dx, float scale, std::int64_t rows, int cols, Elt t, cudaStream_t stream) {
  const unsigned threads = cols >= 1024 ? 256 : cols >= 256 ? 128 : 32;
  DTSIM_DISPATCH(t, k_softmax_bwd<T><<<row_grid(rows), threads, 0, stream>>>(static_cast<const T*>(y), static_cast<const T*>(dy),
                                                                            static_cast<T*>(dx), scale, cols));
  return cudaGetLastError();
}

cudaError_t gelu_fwd(const void* x, void* y, std::size_t n, Elt t, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_gelu_fwd<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n));
  return cudaGetLastError();
}

cudaError_t gelu_bwd(const void* x, const void* dy, void* dx, std::size_t n, Elt t, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_gelu_bwd<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(dy),
                                                                         static_cast<T*>(dx), n));
  return cudaGetLastError();
}

cudaError_t dropout_fwd(const void* x, void* y, std::size_t n, float p, std::uint64_t seed, Elt t, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_dropout<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, p, seed));
  return cudaGetLastError();
}

cudaError_t dropout_bwd(const void* dy, void* dx, std::size_t n, float p, std::uint64_t seed, Elt t, cudaStream_t stream) {
  // The same mask scales the gradient.
  return dropout_fwd(dy, dx, n, p, seed, t, stream);
}

cudaError_t dropout_residual_fwd(const void* x, const void* resid, void* out, std::size_t n, float p, std::uint64_t seed, Elt t,
                                 cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_dropout_residual<T><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(resid),
                                                                                 static_cast<T*>(out), n, p, seed));
  return cudaGetLastError();
}

cudaError_t adam(float* master, float* m, float* v, const float* grad, void* half_copy, std::size_t n, AdamConfig c, Elt t,
                 cudaStream_t stream) {
  const float bc1 = 1.0f - powf(c.beta1, static_cast<float>(c.step));
  const float bc2 = 1.0f - powf(c.beta2, static_cast<float>(c.step));
  DTSIM_DISPATCH(t, k_adam<T><<<blocks_for(n, 256), 256, 0, stream>>>(master, m, v, grad, static_cast<T*>(half_copy), n, c, bc1, bc2));
  return cudaGetLastError();
}

cudaError_t embedding_fwd(const std::int32_t* tokens, const void* wte, const void* wpe, void* out, int tokens_n, int seq, int hidden,
                          Elt t, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(tokens_n) * hidden;
  DTSIM_DISPATCH(t, k_embedding_fwd<T><<<blocks_for(n, 256), 256, 0, stream>>>(tokens, static_cast<const T*>(wte), static_cast<const T*>(wpe),
                                                                              static_cast<T*>(out), n, seq, hidden));
  return cudaGetLastError();
}

cudaError_t embedding_bwd(const std::int32_t* tokens, const void* dout, float* dwte, float* dwpe, int tokens_n, int seq, int hidden,
                          Elt t, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(tokens_n) * hidden;
  DTSIM_DISPATCH(t, k_embedding_bwd<T><<<blocks_for(n, 256), 256, 0, stream>>>(tokens, static_cast<const T*>(dout), dwte, dwpe, n, seq,
                                                                              hidden));
  return cudaGetLastError();
}

cudaError_t cross_entropy_fwd(const void* logits, const std::int32_t* targets, float* logprobs, float* loss, int rows, int vocab, Elt t,
                              cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_ce_fwd<T><<<rows, 512, 0, stream>>>(static_cast<const T*>(logits), targets, logprobs, loss, vocab, 1.0f / rows));
  return cudaGetLastError();
}

cudaError_t cross_entropy_bwd(const float* logprobs, const std::int32_t* targets, void* dlogits, int rows, int vocab, Elt t,
                              cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(rows) * vocab;
  DTSIM_DISPATCH(t, k_ce_bwd<T><<<blocks_for(n, 256), 256, 0, stream>>>(logprobs, targets, static_cast<T*>(dlogits), n, vocab, 1.0f / rows));
  return cudaGetLastError();
}

cudaError_t split_qkv(const void* qkv, void* q, void* k, void* v, int b, int s, int heads, int d, Elt t, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(b) * s * 3 * heads * d;
  DTSIM_DISPATCH(t, k_qkv<T, true><<<blocks_for(n, 256), 256, 0, stream>>>(const_cast<T*>(static_cast<const T*>(qkv)), static_cast<T*>(q),
                                                                          static_cast<T*>(k), static_cast<T*>(v), s, heads, d, n));
  return cudaGetLastError();
}

cudaError_t merge_qkv(const void* dq, const void* dk, const void* dv, void* dqkv, int b, int s, int heads, int d, Elt t,
                      cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(b) * s * 3 * heads * d;
  DTSIM_DISPATCH(t, k_qkv<T, false><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(dqkv), const_cast<T*>(static_cast<const T*>(dq)),
                                                                           const_cast<T*>(static_cast<const T*>(dk)),
                                                                           const_cast<T*>(static_cast<const T*>(dv)), s, heads, d, n));
  return cudaGetLastError();
}

cudaError_t merge_heads(const void* ctx, void* out, int b, int s, int heads, int d, Elt t, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(b) * s * heads * d;
  DTSIM_DISPATCH(t, k_heads<T, true><<<blocks_for(n, 256), 256, 0, stream>>>(const_cast<T*>(static_cast<const T*>(ctx)), static_cast<T*>(out),
                                                                            s, heads, d, n));
  return cudaGetLastError();
}

cudaError_t split_heads(const void* out, void* ctx, int b, int s, int heads, int d, Elt t, cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(b) * s * heads * d;
  DTSIM_DISPATCH(t, k_heads<T, false><<<blocks_for(n, 256), 256, 0, stream>>>(static_cast<T*>(ctx), const_cast<T*>(static_cast<const T*>(out)),
                                                                             s, heads, d, n));
  return cudaGetLastError();
}

cudaError_t cast_from_f32(const float* in, void* out, std::size_t n, Elt t, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_cast<T><<<blocks_for(n, 256), 256, 0, stream>>>(in, static_cast<T*>(out), n));
  return cudaGetLastError();
}

cudaError_t fill_pattern(void* p, std::size_t count, Elt t, int rank, std::size_t offset, cudaStream_t stream) {
  DTSIM_DISPATCH(t, k_fill_pattern<T><<<blocks_for(count, 256), 256, 0, stream>>>(static_cast<T*>(p), count, rank, offset));
  return cudaGetLastError();
}

cudaError_t check_result(const void* p, std::size_t count, Elt t, CheckOp op, int rank, int nranks, int root, std::size_t chunk,
                         unsigned long long* wrong, cudaStream_t stream) {
  if (chunk == 0) chunk = 1;
  DTSIM_DISPATCH(t, k_check<T><<<blocks_for(count, 256), 256, 0, stream>>>(static_cast<const T*>(p), count, op, rank, nranks, root, chunk,
                                                                          wrong));
  return cudaGetLastError();
}

}  // namespace dtsim::gpu
