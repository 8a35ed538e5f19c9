// The tile machinery of the tuned fp32 flash kernel (exercise 01), shared by the sparse kernels
// of exercises 02 (sliding window) and 03 (block-sparse).
//
// Exercise 01 teaches how one thread block computes one query tile Q_i fast: register tiles of
// S_ij, padded shared memory, cp.async double buffering, an exact exp2 softmax. Exercises 02 and
// 03 change only WHICH key tiles K_j, V_j a query tile visits and WHICH of them need the
// per-element mask. So everything else lives here, once:
//
//   attend_tiles<C>(...)   Q_i once, then the K/V tiles the caller lists, then O_i.
//       The caller passes three small functions:
//         tile_key0(t)      first key of the t-th visited tile (t = 0 .. n_tiles-1)
//         needs_mask(kv0)   false when every real row of the query tile sees every key of the
//                           tile (a "full" tile): the per-element test is skipped
//         visible(i, key)   the mask of one (query row, key) pair, asked only on partial tiles;
//                           keys past seq_k are always hidden, the caller need not test them
//
// Layouts and semantics: common/attention_params.h. Lesson: day10-optimizations/01_flash_tuned.md
// explains every line below; 02_sliding_window.md and 03_block_sparse.md build on it.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "arch/exp2.cuh"
#include "attention_params.h"
#include "check_attention_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"

namespace flash_fp32 {

using course::arch::copy16;
using course::arch::cp_async_commit;
using course::arch::cp_async_wait;
using course::arch::kLog2e;

// Tile shape, from the paper: BR query rows per block, BC keys per tile; the rest is derived.
template <int D_, int BR_, int BC_, int RowsPerThread_>
struct FlashConfig {
  static constexpr int D = D_, BR = BR_, BC = BC_;
  static constexpr int kRowsPerThread = RowsPerThread_;  // query rows one thread owns
  static constexpr int kLanesPerRow = 16;                // a team: half a warp shares rows
  static constexpr int kTeams = BR / kRowsPerThread;     // teams per block
  static constexpr int kThreads = kLanesPerRow * kTeams;
  static constexpr int kKeysPerThread = BC / kLanesPerRow;                   // keys of S_ij per thread
  static constexpr int kColsPerThread = D / kLanesPerRow;                    // columns of O_i per thread
  static constexpr int kVecWidth = kColsPerThread < 4 ? kColsPerThread : 4;  // floats per V read / O write
  // Leading dimensions in shared memory (floats): a pad of 4 floats moves consecutive K rows (and
  // P rows, one per key) by one 16-byte bank group, so a team's float4 loads are conflict-free.
  // Q is read by broadcast and V along a row, so neither needs a pad.
  static constexpr int LDQ = D, LDK = D + 4, LDV = D, LDP = BR + 4;
  static constexpr size_t kSmemBytes = sizeof(float) * size_t(BR * LDQ + BC * LDK + BC * LDV + BC * LDP);
  static_assert(BR % kRowsPerThread == 0 && kRowsPerThread % 4 == 0, "a thread's rows are read as float4");
  static_assert(BC % kLanesPerRow == 0 && D % kLanesPerRow == 0 && kColsPerThread % kVecWidth == 0,
                "a tile must split evenly over the 16 lanes of a team");
};

// Stage rows [row0, row0 + ROWS) of a [n_rows, D] matrix into shared memory (leading dimension
// LD); rows outside [0, n_rows) become zeros, so even a wrong tile index (a bug in the caller's
// tile list) reads nothing outside the matrix. Consecutive threads copy consecutive 16-byte pieces.
template <class C, int ROWS, int LD>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int n_rows) {
  constexpr int kChunksPerRow = C::D / 4;
  for (int idx = threadIdx.x; idx < ROWS * kChunksPerRow; idx += C::kThreads) {
    const int r = idx / kChunksPerRow, c4 = (idx % kChunksPerRow) * 4;
    const bool valid = unsigned(row0 + r) < unsigned(n_rows);  // also false for row0 + r < 0
    copy16(dst + r * LD + c4, valid ? src + int64_t(row0 + r) * C::D + c4 : src, valid);
  }
}

// One thread's share of the query tile: kRowsPerThread rows, kColsPerThread columns of O_i
// (unnormalised), and per row the running max m_i and this thread's part of the sum ℓ_i.
template <class C>
struct RowState {
  float o[C::kRowsPerThread][C::kColsPerThread];
  float m[C::kRowsPerThread];
  float l[C::kRowsPerThread];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int d = 0; d < C::kColsPerThread; ++d) o[r][d] = 0.f;
    }
  }
};

// S_ij = Q_i K_jᵀ for this thread's kRowsPerThread rows × kKeysPerThread keys (keys lane,
// lane + 16, ...), four columns of D per step.
template <class C>
__device__ __forceinline__ void compute_scores(float (&s)[C::kRowsPerThread][C::kKeysPerThread], const float* Qs,
                                               const float* Ks, int team, int lane) {
#pragma unroll
  for (int r = 0; r < C::kRowsPerThread; ++r)
#pragma unroll
    for (int n = 0; n < C::kKeysPerThread; ++n) s[r][n] = 0.f;
#pragma unroll
  for (int kk = 0; kk < C::D; kk += 4) {
    float4 qf[C::kRowsPerThread], kf[C::kKeysPerThread];
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r)
      qf[r] = *reinterpret_cast<const float4*>(&Qs[(team * C::kRowsPerThread + r) * C::LDQ + kk]);
#pragma unroll
    for (int n = 0; n < C::kKeysPerThread; ++n)
      kf[n] = *reinterpret_cast<const float4*>(&Ks[(lane + n * C::kLanesPerRow) * C::LDK + kk]);
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r)
#pragma unroll
      for (int n = 0; n < C::kKeysPerThread; ++n) {
        s[r][n] = fmaf(qf[r].x, kf[n].x, s[r][n]);
        s[r][n] = fmaf(qf[r].y, kf[n].y, s[r][n]);
        s[r][n] = fmaf(qf[r].z, kf[n].z, s[r][n]);
        s[r][n] = fmaf(qf[r].w, kf[n].w, s[r][n]);
      }
  }
}

// The online-softmax update of this thread's rows with tile S_ij (keys kv0 ...): scale, mask
// (only when needs_mask), new row max over the team's 16 lanes, rescale ℓ_i and O_i by
// alpha = exp(m_old - m_new), and turn s into P_ij in place.
template <class C, class Visible>
__device__ __forceinline__ void softmax_update(RowState<C>& st, float (&s)[C::kRowsPerThread][C::kKeysPerThread],
                                               float scale, bool needs_mask, int q0, int kv0, int seq_k,
                                               Visible visible, int team, int lane) {
#pragma unroll
  for (int r = 0; r < C::kRowsPerThread; ++r) {
    const int i = q0 + team * C::kRowsPerThread + r;
    float row_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < C::kKeysPerThread; ++n) {
      const int key = kv0 + lane + n * C::kLanesPerRow;
      float x = s[r][n] * scale;
      if (needs_mask && (key >= seq_k || !visible(i, key))) x = -INFINITY;
      s[r][n] = x;
      row_max = fmaxf(row_max, x);
    }
#pragma unroll
    for (int w = C::kLanesPerRow / 2; w >= 1; w /= 2)
      row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, w));
    const float m_new = fmaxf(st.m[r], row_max);
    // Nothing visible yet: subtracting 0 instead of -inf gives p = 0 and alpha = 0 on an empty
    // row, never exp2(-inf - -inf) = NaN.
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    // m·log2e is rounded once, the same way for alpha and for p (no FMA contraction), so the
    // rounding is a common shift of the row and cancels in the softmax (lesson 01).
    const float m_log2 = __fmul_rn(m_use, kLog2e);
    const float alpha = exp2f(__fmul_rn(st.m[r], kLog2e) - m_log2);
    st.m[r] = m_new;
    float row_sum = 0.f;
#pragma unroll
    for (int n = 0; n < C::kKeysPerThread; ++n) {
      s[r][n] = exp2f(fmaf(s[r][n], kLog2e, -m_log2));
      row_sum += s[r][n];
    }
    st.l[r] = st.l[r] * alpha + row_sum;
#pragma unroll
    for (int d = 0; d < C::kColsPerThread; ++d) st.o[r][d] *= alpha;
  }
}

// P_ij -> shared memory, transposed (key-major): each float4 holds 4 consecutive rows of one key.
template <class C>
__device__ __forceinline__ void store_p(float* Ps, const float (&s)[C::kRowsPerThread][C::kKeysPerThread], int team,
                                        int lane) {
#pragma unroll
  for (int n = 0; n < C::kKeysPerThread; ++n)
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; r += 4)
      *reinterpret_cast<float4*>(&Ps[(lane + n * C::kLanesPerRow) * C::LDP + team * C::kRowsPerThread + r]) =
          make_float4(s[r][n], s[r + 1][n], s[r + 2][n], s[r + 3][n]);
}

// O_i += P_ij V_j: per key, kRowsPerThread probabilities times kColsPerThread values of V.
template <class C>
__device__ __forceinline__ void accumulate_pv(RowState<C>& st, const float* Ps, const float* Vs, int team, int lane) {
#pragma unroll 8
  for (int c = 0; c < C::BC; ++c) {
    float p[C::kRowsPerThread], vv[C::kColsPerThread];
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; r += 4) {
      const float4 pf = *reinterpret_cast<const float4*>(&Ps[c * C::LDP + team * C::kRowsPerThread + r]);
      p[r] = pf.x, p[r + 1] = pf.y, p[r + 2] = pf.z, p[r + 3] = pf.w;
    }
#pragma unroll
    for (int e = 0; e < C::kColsPerThread; e += C::kVecWidth) {
      const float* src = &Vs[c * C::LDV + e * C::kLanesPerRow + lane * C::kVecWidth];
      if constexpr (C::kVecWidth == 4) {
        const float4 t = *reinterpret_cast<const float4*>(src);
        vv[e] = t.x, vv[e + 1] = t.y, vv[e + 2] = t.z, vv[e + 3] = t.w;
      } else {
        const float2 t = *reinterpret_cast<const float2*>(src);
        vv[e] = t.x, vv[e + 1] = t.y;
      }
    }
#pragma unroll
    for (int r = 0; r < C::kRowsPerThread; ++r)
#pragma unroll
      for (int d = 0; d < C::kColsPerThread; ++d) st.o[r][d] = fmaf(p[r], vv[d], st.o[r][d]);
  }
}

// Epilogue: the row's 16 lanes add up ℓ_i; O_i / ℓ_i is written for every real row. A row that
// saw no key (ℓ_i = 0, O_i = 0) is written as zeros.
template <class C>
__device__ __forceinline__ void write_output(const RowState<C>& st, float* o_bh, int q0, int seq_q, int team,
                                             int lane) {
#pragma unroll
  for (int r = 0; r < C::kRowsPerThread; ++r) {
    float l = st.l[r];
#pragma unroll
    for (int w = C::kLanesPerRow / 2; w >= 1; w /= 2) l += __shfl_xor_sync(0xffffffffu, l, w);
    const float inv_l = l > 0.f ? 1.f / l : 0.f;
    const int i = q0 + team * C::kRowsPerThread + r;
    if (i >= seq_q) continue;  // padding row of the last, partial query tile
#pragma unroll
    for (int e = 0; e < C::kColsPerThread; e += C::kVecWidth) {
      float* dst = &o_bh[int64_t(i) * C::D + e * C::kLanesPerRow + lane * C::kVecWidth];
      if constexpr (C::kVecWidth == 4) {
        *reinterpret_cast<float4*>(dst) =
            make_float4(st.o[r][e] * inv_l, st.o[r][e + 1] * inv_l, st.o[r][e + 2] * inv_l, st.o[r][e + 3] * inv_l);
      } else {
        *reinterpret_cast<float2*>(dst) = make_float2(st.o[r][e] * inv_l, st.o[r][e + 1] * inv_l);
      }
    }
  }
}

// One query tile [q0, q0 + BR) of one (batch, head) against the n_tiles key tiles the caller
// chooses (see the top of this file). Pipeline as in exercise 01: K_{t+1} and V_t are copied
// with cp.async while S_it and P_it·V_t are computed. Needs C::kSmemBytes of dynamic shared memory.
template <class C, class TileKey0, class NeedsMask, class Visible>
__device__ __forceinline__ void attend_tiles(const float* q_bh, const float* k_bh, const float* v_bh, float* o_bh,
                                             int q0, int seq_q, int seq_k, float scale, int n_tiles, TileKey0 tile_key0,
                                             NeedsMask needs_mask, Visible visible) {
  extern __shared__ float4 smem_f4[];             // float4: 16-byte alignment for the vector accesses
  float* Qs = reinterpret_cast<float*>(smem_f4);  // Q_i   [BR][LDQ]
  float* Ks = Qs + C::BR * C::LDQ;                // K_j   [BC][LDK]
  float* Vs = Ks + C::BC * C::LDK;                // V_j   [BC][LDV]
  float* Ps = Vs + C::BC * C::LDV;                // P_ijᵀ [BC][LDP]
  const int lane = threadIdx.x % C::kLanesPerRow, team = threadIdx.x / C::kLanesPerRow;

  RowState<C> st;
  st.init();
  load_tile<C, C::BR, C::LDQ>(Qs, q_bh, q0, seq_q);
  if (n_tiles > 0) load_tile<C, C::BC, C::LDK>(Ks, k_bh, tile_key0(0), seq_k);
  cp_async_commit();

  for (int t = 0; t < n_tiles; ++t) {
    const int kv0 = tile_key0(t);
    cp_async_wait<0>();
    // (A) K_t (and Q_i) have landed for every thread; every thread has finished the previous
    //     P·V, so Vs and Ps may be overwritten.
    __syncthreads();
    load_tile<C, C::BC, C::LDV>(Vs, v_bh, kv0, seq_k);  // V_t arrives while S_it is computed
    cp_async_commit();

    float s[C::kRowsPerThread][C::kKeysPerThread];
    compute_scores<C>(s, Qs, Ks, team, lane);
    // (B) every thread is done reading K_t: the next tile may be copied over it.
    __syncthreads();
    if (t + 1 < n_tiles) load_tile<C, C::BC, C::LDK>(Ks, k_bh, tile_key0(t + 1), seq_k);
    cp_async_commit();  // possibly empty: keeps the group count the same every iteration

    softmax_update<C>(st, s, scale, needs_mask(kv0), q0, kv0, seq_k, visible, team, lane);
    store_p<C>(Ps, s, team, lane);
    cp_async_wait<1>();  // V_t has landed (K_{t+1} may still be in flight)
    // (C) all of P_it is written and all of V_t is visible to every thread.
    __syncthreads();
    accumulate_pv<C>(st, Ps, Vs, team, lane);
  }
  cp_async_wait<0>();
  write_output<C>(st, o_bh, q0, seq_q, team, lane);
}

// Host side: the argument checks of exercise 01's launcher, shared by the launchers built on
// this file (each adds its own: window, layout, ...). Throw std::invalid_argument naming the field.
inline void check_aligned16(const void* ptr, const char* fn, const char* field) {
  course::require_aligned(ptr, 16, fn, field);
}

inline void check_heads(int batch, int heads_q, int heads_kv, int head_dim, const char* fn) {
  course::require_positive(batch, fn, "batch");
  course::require(batch <= 65535, fn, "batch", "must be <= 65535 (grid z)");
  course::require_positive(heads_q, fn, "heads_q");
  course::require(heads_q <= 65535, fn, "heads_q", "must be <= 65535 (grid y)");
  course::require_positive(heads_kv, fn, "heads_kv");
  course::require(
      heads_kv <= heads_q && heads_q % heads_kv == 0, fn, "heads_kv",
      "must divide heads_q (got heads_q=" + std::to_string(heads_q) + ", heads_kv=" + std::to_string(heads_kv) + ")");
  course::require(head_dim == 32 || head_dim == 64 || head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(head_dim) + ")");
}

// The dense launchers' shared checks (common/check_attention_args.h) plus the head dims this
// file's kernels are compiled for.
inline void check_dense_args(const float* q, const float* k, const float* v, const float* o,
                             const course::AttentionParams& p, const char* fn) {
  course::require_attention_tensors(q, k, v, o, p, fn);
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
}

// Host side: opt in to more than 48 KiB of shared memory and the largest carveout.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
}

// Calls launch(Config{}) with the first configuration whose shared memory fits smem_limit (the
// last one is the fallback), e.g.
//   with_first_fitting<FlashConfig<64, 64, 64, 8>, FlashConfig<64, 64, 32, 8>>(limit, [&](auto c) {...});
template <class First, class... Rest, class Launch>
void with_first_fitting(int smem_limit, Launch&& launch) {
  if constexpr (sizeof...(Rest) == 0) {
    launch(First{});
  } else {
    if (First::kSmemBytes <= size_t(smem_limit))
      launch(First{});
    else
      with_first_fitting<Rest...>(smem_limit, launch);
  }
}

}  // namespace flash_fp32
