// The engine's data-movement kernels (kernels.h). They are memory-bound and small next to the
// GEMMs and attention, so they are written for clarity: a grid-stride loop over 16-byte
// vectors (8 halves), one element per iteration.
#include <cuda_fp16.h>

#include <cfloat>

#include "cuda_check.h"
#include "kernels.h"

namespace serving {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

#define SERVING_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

__global__ void embedding_gather_kernel(const uint4* embed, const int32_t* tokens, uint4* out, int T, int vecs) {
  SERVING_GRID_LOOP(i, int64_t(T) * vecs) {
    const int64_t t = i / vecs, c = i % vecs;
    out[i] = embed[int64_t(tokens[t]) * vecs + c];
  }
}

__global__ void split_qkv_kernel(const uint4* qkv, uint4* q, uint4* k, uint4* v, int T, int qv, int kvv) {
  const int row = qv + 2 * kvv;
  SERVING_GRID_LOOP(i, int64_t(T) * row) {
    const int64_t t = i / row;
    const int c = int(i % row);
    if (c < qv)
      q[t * qv + c] = qkv[i];
    else if (c < qv + kvv)
      k[t * kvv + (c - qv)] = qkv[i];
    else
      v[t * kvv + (c - qv - kvv)] = qkv[i];
  }
}

__global__ void kv_cache_write_kernel(const uint4* k, const uint4* v, uint4* kc, uint4* vc, const int64_t* slots, int T,
                                      int heads_kv, int dv, int block_size) {
  SERVING_GRID_LOOP(i, int64_t(T) * heads_kv * dv) {
    const int64_t t = i / (int64_t(heads_kv) * dv);
    const int h = int(i / dv % heads_kv), d = int(i % dv);
    const int64_t slot = slots[t];
    if (slot < 0) continue;
    const int64_t block = slot / block_size, off = slot % block_size;
    const int64_t dst = ((block * heads_kv + h) * block_size + off) * dv + d;
    kc[dst] = k[i];
    vc[dst] = v[i];
  }
}

__global__ void kv_gather_kernel(const uint4* kc, const uint4* vc, const int32_t* table, uint4* kd, uint4* vd, int len,
                                 int heads_kv, int dv, int block_size) {
  SERVING_GRID_LOOP(i, int64_t(heads_kv) * len * dv) {
    const int h = int(i / (int64_t(len) * dv));
    const int j = int(i / dv % len), d = int(i % dv);
    const int64_t block = table[j / block_size];
    const int64_t src = ((block * heads_kv + h) * block_size + j % block_size) * dv + d;
    kd[i] = kc[src];
    vd[i] = vc[src];
  }
}

// [N, H, D] -> [H, N, D] when to_heads, else the reverse; dv = D / 8 vectors per head row.
__global__ void transpose_kernel(const uint4* in, uint4* out, int N, int heads, int dv, bool to_heads) {
  SERVING_GRID_LOOP(i, int64_t(N) * heads * dv) {
    // i indexes the token-major side (t, h, d), j the head-major side (h, t, d)
    const int64_t t = i / (int64_t(heads) * dv);
    const int h = int(i / dv % heads), d = int(i % dv);
    const int64_t j = (int64_t(h) * N + t) * dv + d;
    if (to_heads)
      out[j] = in[i];
    else
      out[i] = in[j];
  }
}

__global__ void swiglu_kernel(const __half2* gu, __half2* out, int T, int inter2) {
  SERVING_GRID_LOOP(i, int64_t(T) * inter2) {
    const int64_t t = i / inter2;
    const int c = int(i % inter2);
    const float2 g = __half22float2(gu[t * 2 * inter2 + c]);
    const float2 u = __half22float2(gu[t * 2 * inter2 + inter2 + c]);
    // silu(g) = g / (1 + e^-g), as Hugging Face's ACT2FN["silu"]
    const float a = g.x / (1.f + __expf(-g.x)) * u.x;
    const float b = g.y / (1.f + __expf(-g.y)) * u.y;
    out[i] = __floats2half2_rn(a, b);
  }
}

__global__ void gather_rows_kernel(const uint4* in, const int32_t* rows, uint4* out, int R, int vecs) {
  SERVING_GRID_LOOP(i, int64_t(R) * vecs) {
    const int64_t r = i / vecs, c = i % vecs;
    out[i] = in[int64_t(rows[r]) * vecs + c];
  }
}

// One block per row: each thread keeps its best (lowest index on ties: it walks upwards and
// replaces only on a strictly larger value) and second best, then a shared-memory tree merges
// the (best, second) pairs.
__global__ void argmax_kernel(const float* logits, ArgmaxResult* out, int vocab) {
  const float* row = logits + int64_t(blockIdx.x) * vocab;
  float b1 = -FLT_MAX, b2 = -FLT_MAX;
  int i1 = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = row[i];
    if (x > b1) {
      b2 = b1;
      b1 = x;
      i1 = i;
    } else if (x > b2) {
      b2 = x;
    }
  }
  __shared__ float s1[kThreads], s2[kThreads];
  __shared__ int si[kThreads];
  s1[threadIdx.x] = b1;
  s2[threadIdx.x] = b2;
  si[threadIdx.x] = i1;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      const float a1 = s1[threadIdx.x], a2 = s2[threadIdx.x];
      const float c1 = s1[threadIdx.x + w], c2 = s2[threadIdx.x + w];
      const int ai = si[threadIdx.x], ci = si[threadIdx.x + w];
      const bool c_wins = c1 > a1 || (c1 == a1 && ci < ai);
      // the second best of the union: the loser's best or the winner's second
      const float second = c_wins ? fmaxf(a1, c2) : fmaxf(c1, a2);
      s1[threadIdx.x] = c_wins ? c1 : a1;
      s2[threadIdx.x] = second;
      si[threadIdx.x] = c_wins ? ci : ai;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = ArgmaxResult{si[0], s1[0], s2[0]};
}

__global__ void fill_random_kernel(uint16_t* out, int64_t n, uint64_t seed, TensorKind kind, int layer, float stddev) {
  SERVING_GRID_LOOP(i, n) { out[i] = random_weight_half_bits(seed, kind, layer, uint64_t(i), stddev); }
}

}  // namespace

void embedding_gather(const __half* embed, const int32_t* tokens, __half* out, int T, int hidden, cudaStream_t stream) {
  if (T <= 0) return;
  const int vecs = hidden / 8;
  embedding_gather_kernel<<<blocks_for(int64_t(T) * vecs), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(embed), tokens, reinterpret_cast<uint4*>(out), T, vecs);
  CUDA_CHECK_LAUNCH();
}

void split_qkv(const __half* qkv, __half* q, __half* k, __half* v, int T, int heads_q, int heads_kv, int head_dim,
               cudaStream_t stream) {
  if (T <= 0) return;
  const int qv = heads_q * head_dim / 8, kvv = heads_kv * head_dim / 8;
  split_qkv_kernel<<<blocks_for(int64_t(T) * (qv + 2 * kvv)), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(qkv), reinterpret_cast<uint4*>(q), reinterpret_cast<uint4*>(k),
      reinterpret_cast<uint4*>(v), T, qv, kvv);
  CUDA_CHECK_LAUNCH();
}

void kv_cache_write(const __half* k, const __half* v, __half* k_cache, __half* v_cache, const int64_t* slots, int T,
                    int heads_kv, int head_dim, int block_size, cudaStream_t stream) {
  if (T <= 0) return;
  const int dv = head_dim / 8;
  kv_cache_write_kernel<<<blocks_for(int64_t(T) * heads_kv * dv), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(k), reinterpret_cast<const uint4*>(v), reinterpret_cast<uint4*>(k_cache),
      reinterpret_cast<uint4*>(v_cache), slots, T, heads_kv, dv, block_size);
  CUDA_CHECK_LAUNCH();
}

void kv_gather(const __half* k_cache, const __half* v_cache, const int32_t* block_table, __half* k_dense,
               __half* v_dense, int len, int heads_kv, int head_dim, int block_size, cudaStream_t stream) {
  if (len <= 0) return;
  const int dv = head_dim / 8;
  kv_gather_kernel<<<blocks_for(int64_t(len) * heads_kv * dv), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(k_cache), reinterpret_cast<const uint4*>(v_cache), block_table,
      reinterpret_cast<uint4*>(k_dense), reinterpret_cast<uint4*>(v_dense), len, heads_kv, dv, block_size);
  CUDA_CHECK_LAUNCH();
}

void tokens_to_heads(const __half* in, __half* out, int N, int heads, int head_dim, cudaStream_t stream) {
  if (N <= 0) return;
  transpose_kernel<<<blocks_for(int64_t(N) * heads * head_dim / 8), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), N, heads, head_dim / 8, true);
  CUDA_CHECK_LAUNCH();
}

void heads_to_tokens(const __half* in, __half* out, int N, int heads, int head_dim, cudaStream_t stream) {
  if (N <= 0) return;
  transpose_kernel<<<blocks_for(int64_t(N) * heads * head_dim / 8), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), N, heads, head_dim / 8, false);
  CUDA_CHECK_LAUNCH();
}

void swiglu(const __half* gate_up, __half* out, int T, int inter, cudaStream_t stream) {
  if (T <= 0) return;
  swiglu_kernel<<<blocks_for(int64_t(T) * inter / 2), kThreads, 0, stream>>>(
      reinterpret_cast<const __half2*>(gate_up), reinterpret_cast<__half2*>(out), T, inter / 2);
  CUDA_CHECK_LAUNCH();
}

void gather_rows(const __half* in, const int32_t* rows, __half* out, int R, int width, cudaStream_t stream) {
  if (R <= 0) return;
  gather_rows_kernel<<<blocks_for(int64_t(R) * width / 8), kThreads, 0, stream>>>(
      reinterpret_cast<const uint4*>(in), rows, reinterpret_cast<uint4*>(out), R, width / 8);
  CUDA_CHECK_LAUNCH();
}

void argmax_rows(const float* logits, ArgmaxResult* out, int R, int vocab, cudaStream_t stream) {
  if (R <= 0) return;
  argmax_kernel<<<R, kThreads, 0, stream>>>(logits, out, vocab);
  CUDA_CHECK_LAUNCH();
}

void fill_random(__half* out, int64_t n, uint64_t seed, TensorKind kind, int layer, float stddev, cudaStream_t stream) {
  if (n <= 0) return;
  fill_random_kernel<<<blocks_for(n), kThreads, 0, stream>>>(reinterpret_cast<uint16_t*>(out), n, seed, kind, layer,
                                                             stddev);
  CUDA_CHECK_LAUNCH();
}

}  // namespace serving
