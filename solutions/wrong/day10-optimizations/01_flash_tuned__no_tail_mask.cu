// WRONG ON PURPOSE: no guard for the last, partial key tile. Its rows past seq_k are padding
// (zero-filled here; in a kernel without the zero fill they would be the next head's keys or
// memory past the buffer) and are not masked, so each padding key gets score 0 and weight
// exp(0 - m) in ℓ_i: the output is scaled down. Without a causal mask (which happens to hide
// those keys too) every Nk that is not a multiple of BC (64) fails.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "01_flash_tuned.h"
#include "check_args.h"
#include "cp_async.cuh"
#include "cuda_check.h"

namespace {

constexpr float kLog2e = 1.4426950408889634f;

// Tile shape. BR = query rows per block, BC = keys per tile, TM = query rows per thread.
template <int D_, int BR_, int BC_, int TM_>
struct FlashConfig {
  static constexpr int D = D_, BR = BR_, BC = BC_, TM = TM_;
  static constexpr int TX = 16;            // lanes that share a row: half a warp
  static constexpr int TY = BR / TM;       // row groups per block
  static constexpr int THREADS = TX * TY;
  static constexpr int TN = BC / TX;       // keys of S_ij per thread
  static constexpr int DN = D / TX;        // columns of O_i per thread
  static constexpr int VW = DN < 4 ? DN : 4;  // vector width of V reads and O writes
  // Leading dimensions in shared memory (floats). Lanes tx = 0..7 read K rows tx, tx+1, ... at
  // the same column; a pad of 4 floats moves consecutive rows by one 16-byte bank group, so one
  // float4 load per lane is conflict-free. Ps is written the same way (one row per key). Q is
  // read by broadcast (all 16 lanes of a row group load the same address) and V along a row,
  // so neither needs a pad.
  static constexpr int LDQ = D, LDK = D + 4, LDV = D, LDP = BR + 4;
  static constexpr size_t kSmemBytes = sizeof(float) * size_t(BR * LDQ + BC * LDK + BC * LDV + BC * LDP);
  static_assert(BR % TM == 0 && TM % 4 == 0, "TM rows per thread, read as float4");
  static_assert(BC % TX == 0 && D % TX == 0 && DN % VW == 0, "tile must split over 16 lanes");
};

// Stage rows [row0, row0 + ROWS) of a [n_rows, D] matrix into shared memory (leading dimension
// LD); rows past n_rows become zeros. Consecutive threads copy consecutive 16-byte pieces of a
// row, so each warp reads whole 128-byte lines (coalesced).
template <class C, int ROWS, int LD>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int n_rows) {
  constexpr int kChunksPerRow = C::D / 4;
  for (int idx = threadIdx.x; idx < ROWS * kChunksPerRow; idx += C::THREADS) {
    const int r = idx / kChunksPerRow, c4 = (idx % kChunksPerRow) * 4;
    const bool valid = row0 + r < n_rows;
    copy16(dst + r * LD + c4, valid ? src + int64_t(row0 + r) * C::D + c4 : src, valid);
  }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS)
flash_attention_kernel(const float* __restrict__ q, const float* __restrict__ k,
                       const float* __restrict__ v, float* __restrict__ o, int heads, int seq_q,
                       int seq_k, float scale, bool causal) {
  constexpr int D = C::D, BR = C::BR, BC = C::BC, TM = C::TM, TN = C::TN, TX = C::TX;
  constexpr int DN = C::DN, VW = C::VW;
  extern __shared__ float4 smem_f4[];  // float4: 16-byte alignment for the vector accesses
  float* Qs = reinterpret_cast<float*>(smem_f4);  // Q_i   [BR][LDQ]
  float* Ks = Qs + BR * C::LDQ;                    // K_j   [BC][LDK]
  float* Vs = Ks + BC * C::LDK;                    // V_j   [BC][LDV]
  float* Ps = Vs + BC * C::LDV;                    // P_ijᵀ [BC][LDP]: key-major, so a thread reads
                                                   // its TM rows of one key as float4s
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  // Reverse order: under a causal mask the last query tiles have the most keys; starting them
  // first keeps the tail of the grid short.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const int64_t bh = int64_t(blockIdx.z) * heads + blockIdx.y;
  const float* q_bh = q + bh * seq_q * D;
  const float* k_bh = k + bh * seq_k * D;  // MHA: query head h reads KV head h
  const float* v_bh = v + bh * seq_k * D;
  float* o_bh = o + bh * seq_q * D;
  const int off = seq_k - seq_q;  // bottom-right alignment: row i sees keys j <= i + off

  // Key tiles to visit. Causal: stop after the tile holding the last key that the tile's last
  // real row can see; tiles above the diagonal are skipped whole. A tile whose rows see no key
  // at all (i + off < 0 for every row) visits none and writes zeros.
  int n_kv_tiles = (seq_k + BC - 1) / BC;
  if (causal) {
    const int last_key = min(q0 + BR, seq_q) - 1 + off;
    n_kv_tiles = last_key < 0 ? 0 : min(n_kv_tiles, last_key / BC + 1);
  }

  float o_acc[TM][DN];  // O_i, unnormalised
  float m_i[TM];        // running row max of the scaled scores
  float l_i[TM];        // running row sum of exp2(s - m_i), this thread's keys only
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    m_i[m] = -INFINITY;
    l_i[m] = 0.f;
#pragma unroll
    for (int d = 0; d < DN; ++d) o_acc[m][d] = 0.f;
  }

  load_tile<C, BR, C::LDQ>(Qs, q_bh, q0, seq_q);
  if (n_kv_tiles > 0) load_tile<C, BC, C::LDK>(Ks, k_bh, 0, seq_k);
  cp_async_commit();

  for (int j = 0; j < n_kv_tiles; ++j) {
    const int kv0 = j * BC;
    cp_async_wait<0>();
    // (A) K_j (and Q_i) have landed for every thread's copies; every thread has also finished
    //     the previous P·V, so Vs and Ps may be overwritten.
    __syncthreads();
    load_tile<C, BC, C::LDV>(Vs, v_bh, kv0, seq_k);  // V_j arrives while S_ij is computed
    cp_async_commit();

    // S_ij = Q_i K_jᵀ: TM × TN dot products per thread, four columns of D per step.
    float s[TM][TN] = {};
#pragma unroll
    for (int kk = 0; kk < D; kk += 4) {
      float4 qf[TM], kf[TN];
#pragma unroll
      for (int m = 0; m < TM; ++m) qf[m] = *reinterpret_cast<const float4*>(&Qs[(ty * TM + m) * C::LDQ + kk]);
#pragma unroll
      for (int n = 0; n < TN; ++n) kf[n] = *reinterpret_cast<const float4*>(&Ks[(tx + n * TX) * C::LDK + kk]);
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int n = 0; n < TN; ++n) {
          s[m][n] = fmaf(qf[m].x, kf[n].x, s[m][n]);
          s[m][n] = fmaf(qf[m].y, kf[n].y, s[m][n]);
          s[m][n] = fmaf(qf[m].z, kf[n].z, s[m][n]);
          s[m][n] = fmaf(qf[m].w, kf[n].w, s[m][n]);
        }
    }
    // (B) every thread is done reading K_j: the next tile may be copied over it.
    __syncthreads();
    if (j + 1 < n_kv_tiles) load_tile<C, BC, C::LDK>(Ks, k_bh, kv0 + BC, seq_k);
    cp_async_commit();  // possibly empty: keeps the group count the same every iteration

    // Masks: keys past seq_k (the partial last tile) and, causal, keys above the diagonal.
    // Only tiles that straddle one of the two boundaries need the per-element test.
    const bool need_mask = kv0 + BC > seq_k || (causal && kv0 + BC - 1 > q0 + off);
#pragma unroll
    for (int m = 0; m < TM; ++m) {
      const int i = q0 + ty * TM + m;
      float row_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < TN; ++n) {
        const int key = kv0 + tx + n * TX;
        float x = s[m][n] * scale;
        if (need_mask && causal && key > i + off) x = -INFINITY;  // BUG: keys >= seq_k not masked
        s[m][n] = x;
        row_max = fmaxf(row_max, x);
      }
      // The row's 16 lanes agree on the tile max (xor butterflies stay inside the half warp).
#pragma unroll
      for (int w = TX / 2; w >= 1; w /= 2) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, w));
      const float m_new = fmaxf(m_i[m], row_max);
      // Nothing visible yet: m_new is -inf and exp2(-inf - -inf) would be NaN. Subtracting 0
      // instead gives p = exp2(-inf) = 0 and alpha = 0 on l = O = 0: the row stays empty.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      // exp(x - m) = exp2(x·log2e - m·log2e). The product m·log2e is rounded once, the same way
      // for alpha now and for this tile's p (__fmul_rn forbids fusing it into an FMA), so the
      // rounding is a common shift of the whole row and cancels in the softmax. x·log2e - that
      // is one fmaf: exact product, one rounding of a small result. Logits of 1e3 stay accurate.
      const float m_log2 = __fmul_rn(m_use, kLog2e);
      const float alpha = exp2f(__fmul_rn(m_i[m], kLog2e) - m_log2);  // exp(m_old - m_new)
      m_i[m] = m_new;
      float row_sum = 0.f;
#pragma unroll
      for (int n = 0; n < TN; ++n) {
        s[m][n] = exp2f(fmaf(s[m][n], kLog2e, -m_log2));  // P_ij
        row_sum += s[m][n];
      }
      l_i[m] = l_i[m] * alpha + row_sum;
#pragma unroll
      for (int d = 0; d < DN; ++d) o_acc[m][d] *= alpha;
    }
    // P_ij -> shared memory, transposed: each float4 holds 4 consecutive rows of one key.
#pragma unroll
    for (int n = 0; n < TN; ++n)
#pragma unroll
      for (int m = 0; m < TM; m += 4)
        *reinterpret_cast<float4*>(&Ps[(tx + n * TX) * C::LDP + ty * TM + m]) =
            make_float4(s[m][n], s[m + 1][n], s[m + 2][n], s[m + 3][n]);
    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
    // (C) all of P_ij is written and all of V_j is visible to every thread.
    __syncthreads();

    // O_i += P_ij V_j: per key, TM probabilities times DN values of V.
#pragma unroll 8
    for (int c = 0; c < BC; ++c) {
      float p[TM], vv[DN];
#pragma unroll
      for (int m = 0; m < TM; m += 4) {
        const float4 pf = *reinterpret_cast<const float4*>(&Ps[c * C::LDP + ty * TM + m]);
        p[m] = pf.x, p[m + 1] = pf.y, p[m + 2] = pf.z, p[m + 3] = pf.w;
      }
#pragma unroll
      for (int e = 0; e < DN; e += VW) {
        const float* src = &Vs[c * C::LDV + e * TX + tx * VW];
        if constexpr (VW == 4) {
          const float4 t = *reinterpret_cast<const float4*>(src);
          vv[e] = t.x, vv[e + 1] = t.y, vv[e + 2] = t.z, vv[e + 3] = t.w;
        } else {
          const float2 t = *reinterpret_cast<const float2*>(src);
          vv[e] = t.x, vv[e + 1] = t.y;
        }
      }
#pragma unroll
      for (int m = 0; m < TM; ++m)
#pragma unroll
        for (int d = 0; d < DN; ++d) o_acc[m][d] = fmaf(p[m], vv[d], o_acc[m][d]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: each lane summed only its own keys; the row's 16 lanes add up to ℓ_i. A row that
  // saw no key has ℓ_i = 0 and O_i = 0 and is written as zeros.
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    float l = l_i[m];
#pragma unroll
    for (int w = TX / 2; w >= 1; w /= 2) l += __shfl_xor_sync(0xffffffffu, l, w);
    const float inv_l = l > 0.f ? 1.f / l : 0.f;
    const int i = q0 + ty * TM + m;
    if (i >= seq_q) continue;  // padding row of the last, partial query tile
#pragma unroll
    for (int e = 0; e < DN; e += VW) {
      float* dst = &o_bh[int64_t(i) * D + e * TX + tx * VW];
      if constexpr (VW == 4) {
        *reinterpret_cast<float4*>(dst) = make_float4(o_acc[m][e] * inv_l, o_acc[m][e + 1] * inv_l,
                                                      o_acc[m][e + 2] * inv_l, o_acc[m][e + 3] * inv_l);
      } else {
        *reinterpret_cast<float2*>(dst) = make_float2(o_acc[m][e] * inv_l, o_acc[m][e + 1] * inv_l);
      }
    }
  }
}

template <class C>
void launch(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
            cudaStream_t stream) {
  const auto kernel = flash_attention_kernel<C>;
  // Above 48 KiB of shared memory a kernel must opt in; ask for the largest carveout too.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  const dim3 grid((p.seq_q + C::BR - 1) / C::BR, p.heads_q, p.batch);
  kernel<<<grid, C::THREADS, C::kSmemBytes, stream>>>(q, k, v, o, p.heads_q, p.seq_q, p.seq_k,
                                                       p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

// Launches the first configuration whose shared memory fits this GPU (the last one is the
// fallback). Tile shapes measured on an H100 (lesson: "02 · What to measure"); the smaller ones
// fit the 99 KiB of consumer GPUs and the 64 KiB of Turing.
template <class First, class... Rest>
void launch_first_fitting(int smem_limit, const float* q, const float* k, const float* v, float* o,
                          const course::AttentionParams& p, cudaStream_t stream) {
  if constexpr (sizeof...(Rest) == 0) {
    launch<First>(q, k, v, o, p, stream);
  } else {
    if (First::kSmemBytes <= size_t(smem_limit)) launch<First>(q, k, v, o, p, stream);
    else launch_first_fitting<Rest...>(smem_limit, q, k, v, o, p, stream);
  }
}

void check_aligned(const void* ptr, const char* field) {
  course::require(reinterpret_cast<uintptr_t>(ptr) % 16 == 0, "flash_attention_tuned", field,
                  "must be 16-byte aligned (rows are copied as float4)");
}

}  // namespace

void flash_attention_tuned(const float* q, const float* k, const float* v, float* o,
                     const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "flash_attention_tuned";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k, fn, "k");
  course::require_not_null(v, fn, "v");
  course::require_not_null(o, fn, "o");
  check_aligned(q, "q");
  check_aligned(k, "k");
  check_aligned(v, "v");
  check_aligned(o, "o");
  course::require_positive(p.batch, fn, "batch");
  course::require(p.batch <= 65535, fn, "batch", "must be <= 65535 (grid z)");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require(p.heads_q <= 65535, fn, "heads_q", "must be <= 65535 (grid y)");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_kv == p.heads_q, fn, "heads_kv", "must equal heads_q (GQA is exercise 03)");
  course::require_positive(p.seq_q, fn, "seq_q");
  course::require_positive(p.seq_k, fn, "seq_k");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are day 10)");

  int device = 0, smem_limit = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  switch (p.head_dim) {  // FlashConfig<D, BR, BC, TM>
    case 32:
      launch_first_fitting<FlashConfig<32, 64, 64, 8>>(smem_limit, q, k, v, o, p, stream);
      break;
    case 64:
      launch_first_fitting<FlashConfig<64, 64, 64, 8>, FlashConfig<64, 64, 32, 8>>(smem_limit, q, k, v, o, p, stream);
      break;
    default:
      launch_first_fitting<FlashConfig<128, 128, 64, 8>, FlashConfig<128, 64, 32, 8>, FlashConfig<128, 32, 32, 4>>(
          smem_limit, q, k, v, o, p, stream);
      break;
  }
}
