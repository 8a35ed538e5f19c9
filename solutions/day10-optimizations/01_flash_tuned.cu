// Day 10 · Exercise 01 · flash attention tuned (fp32): register tiling, padded smem, cp.async, exact exp2.
// Lesson: day10-optimizations/01_flash_tuned/README.md. Test: make test EX=01_flash_tuned
//
// The day-06 kernel (one thread per query row, plain loads) made the algorithm visible; this one
// makes it fast. Same algorithm: one thread block owns one query tile Q_i (BR rows) of one
// (batch, query head) and walks over the key tiles K_j, V_j (BC rows each), keeping the running
// row max m_i, row sum ℓ_i and output O_i in registers. What changes is who computes what:
//
//   * a team of kLanesPerRow = 16 lanes (half a warp) shares kRowsPerThread query rows; each
//     thread computes kRowsPerThread × kKeysPerThread scores of S_ij (keys lane, lane+16, ...)
//     and accumulates kRowsPerThread × kColsPerThread outputs of O_i, so every value it loads
//     from shared memory feeds several FMAs (the FMA-to-load ratio sets the speed);
//   * rows of K and P are padded by 4 floats so a team's float4 loads hit distinct banks;
//   * K_{j+1} and V_j are copied with cp.async while S_ij and P_ij·V_j are computed;
//   * exp is exp2 of a rearranged argument that loses no digits (logits of 1e3 stay exact).
// Every statistic of a row lives in the 16 lanes of one team and is combined with shuffles.
// Grouped-query attention comes for free: query head h reads KV head h / G, and the G query
// heads of a group find the same K/V tiles in L2.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "01_flash_tuned.h"
#include "arch/exp2.cuh"
#include "check_attention_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"
#include "smem_limit.h"

namespace {

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
  // Leading dimensions in shared memory (floats). Lanes 0..7 of a team read K rows lane,
  // lane+1, ... at the same column; a pad of 4 floats moves consecutive rows by one 16-byte bank
  // group, so one float4 load per lane is conflict-free. Ps is written the same way (one row per
  // key). Q is read by broadcast (all 16 lanes of a team load the same address) and V along a
  // row, so neither needs a pad.
  static constexpr int LDQ = D, LDK = D + 4, LDV = D, LDP = BR + 4;
  static constexpr size_t kSmemBytes = sizeof(float) * size_t(BR * LDQ + BC * LDK + BC * LDV + BC * LDP);
  static_assert(BR % kRowsPerThread == 0 && kRowsPerThread % 4 == 0, "a thread's rows are read as float4");
  static_assert(BC % kLanesPerRow == 0 && D % kLanesPerRow == 0 && kColsPerThread % kVecWidth == 0,
                "a tile must split evenly over the 16 lanes of a team");
};

// Stage rows [row0, row0 + ROWS) of a [n_rows, D] matrix into shared memory (leading dimension
// LD); rows past n_rows become zeros. Consecutive threads copy consecutive 16-byte pieces of a
// row, so each warp reads whole 128-byte lines (coalesced).
template <class C, int ROWS, int LD>
__device__ __forceinline__ void load_tile(float* dst, const float* src, int row0, int n_rows) {
  constexpr int kChunksPerRow = C::D / 4;
  for (int idx = threadIdx.x; idx < ROWS * kChunksPerRow; idx += C::kThreads) {
    const int r = idx / kChunksPerRow, c4 = (idx % kChunksPerRow) * 4;
    const bool valid = row0 + r < n_rows;
    copy16(dst + r * LD + c4, valid ? src + int64_t(row0 + r) * C::D + c4 : src, valid);
  }
}

template <class C>
__global__ void __launch_bounds__(C::kThreads)
    flash_attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                           float* __restrict__ o, int heads, int group, int seq_q, int seq_k, float scale,
                           bool causal) {
  constexpr int D = C::D, BR = C::BR, BC = C::BC;
  constexpr int kRowsPerThread = C::kRowsPerThread, kKeysPerThread = C::kKeysPerThread;
  constexpr int kLanesPerRow = C::kLanesPerRow, kColsPerThread = C::kColsPerThread, kVecWidth = C::kVecWidth;
  extern __shared__ float4 smem_f4[];             // float4: 16-byte alignment for the vector accesses
  float* Qs = reinterpret_cast<float*>(smem_f4);  // Q_i   [BR][LDQ]
  float* Ks = Qs + BR * C::LDQ;                   // K_j   [BC][LDK]
  float* Vs = Ks + BC * C::LDK;                   // V_j   [BC][LDV]
  float* Ps = Vs + BC * C::LDV;                   // P_ijᵀ [BC][LDP]: key-major, so a thread reads
                                                  // its kRowsPerThread rows of one key as float4s
  const int lane = threadIdx.x % kLanesPerRow, team = threadIdx.x / kLanesPerRow;
  // Reverse order: under a causal mask the last query tiles have the most keys; starting them
  // first keeps the tail of the grid short.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const int64_t bh = int64_t(blockIdx.z) * heads + blockIdx.y;  // (batch, query head)
  // GQA: query head h of batch b reads KV head h / G, i.e. flat KV index (b·Hq + h) / G.
  const int64_t bh_kv = bh / group;
  const float* q_bh = q + bh * seq_q * D;
  const float* k_bh = k + bh_kv * seq_k * D;
  const float* v_bh = v + bh_kv * seq_k * D;
  float* o_bh = o + bh * seq_q * D;
  const int off = seq_k - seq_q;  // bottom-right alignment: row i sees keys j <= i + off

  // Key tiles to visit. Causal: stop after the tile holding the last key that the tile's last
  // real row can see; tiles above the diagonal are skipped whole. A tile whose rows see no key
  // at all (i + off < 0 for every row) visits none and writes zeros.
  // snippet-begin: causal-tile-range
  int n_kv_tiles = (seq_k + BC - 1) / BC;
  if (causal) {
    const int last_key = min(q0 + BR, seq_q) - 1 + off;
    n_kv_tiles = last_key < 0 ? 0 : min(n_kv_tiles, last_key / BC + 1);
  }
  // snippet-end: causal-tile-range

  float o_acc[kRowsPerThread][kColsPerThread];  // O_i, unnormalised
  float m_i[kRowsPerThread];                    // running row max of the scaled scores
  float l_i[kRowsPerThread];                    // running row sum of exp2(s - m_i), this thread's keys only
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    m_i[m] = -INFINITY;
    l_i[m] = 0.f;
#pragma unroll
    for (int d = 0; d < kColsPerThread; ++d) o_acc[m][d] = 0.f;
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

    // S_ij = Q_i K_jᵀ: kRowsPerThread × kKeysPerThread dot products per thread, four columns of D per step.
    float s[kRowsPerThread][kKeysPerThread] = {};
    // snippet-begin: scores-register-tile
#pragma unroll
    for (int kk = 0; kk < D; kk += 4) {
      float4 qf[kRowsPerThread], kf[kKeysPerThread];
#pragma unroll
      for (int m = 0; m < kRowsPerThread; ++m)
        qf[m] = *reinterpret_cast<const float4*>(&Qs[(team * kRowsPerThread + m) * C::LDQ + kk]);
#pragma unroll
      for (int n = 0; n < kKeysPerThread; ++n)
        kf[n] = *reinterpret_cast<const float4*>(&Ks[(lane + n * kLanesPerRow) * C::LDK + kk]);
#pragma unroll
      for (int m = 0; m < kRowsPerThread; ++m)
#pragma unroll
        for (int n = 0; n < kKeysPerThread; ++n) {
          s[m][n] = fmaf(qf[m].x, kf[n].x, s[m][n]);
          s[m][n] = fmaf(qf[m].y, kf[n].y, s[m][n]);
          s[m][n] = fmaf(qf[m].z, kf[n].z, s[m][n]);
          s[m][n] = fmaf(qf[m].w, kf[n].w, s[m][n]);
        }
    }
    // snippet-end: scores-register-tile
    // (B) every thread is done reading K_j: the next tile may be copied over it.
    __syncthreads();
    if (j + 1 < n_kv_tiles) load_tile<C, BC, C::LDK>(Ks, k_bh, kv0 + BC, seq_k);
    cp_async_commit();  // possibly empty: keeps the group count the same every iteration

    // snippet-begin: mask-and-online-softmax
    // Masks: keys past seq_k (the partial last tile) and, causal, keys above the diagonal.
    // Only tiles that straddle one of the two boundaries need the per-element test.
    const bool need_mask = kv0 + BC > seq_k || (causal && kv0 + BC - 1 > q0 + off);
#pragma unroll
    for (int m = 0; m < kRowsPerThread; ++m) {
      const int i = q0 + team * kRowsPerThread + m;
      float row_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKeysPerThread; ++n) {
        const int key = kv0 + lane + n * kLanesPerRow;
        float x = s[m][n] * scale;
        if (need_mask && (key >= seq_k || (causal && key > i + off))) x = -INFINITY;
        s[m][n] = x;
        row_max = fmaxf(row_max, x);
      }
      // The row's 16 lanes agree on the tile max (xor butterflies stay inside the half warp).
#pragma unroll
      for (int w = kLanesPerRow / 2; w >= 1; w /= 2) row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, w));
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
      for (int n = 0; n < kKeysPerThread; ++n) {
        s[m][n] = exp2f(fmaf(s[m][n], kLog2e, -m_log2));  // P_ij
        row_sum += s[m][n];
      }
      l_i[m] = l_i[m] * alpha + row_sum;
#pragma unroll
      for (int d = 0; d < kColsPerThread; ++d) o_acc[m][d] *= alpha;
    }
    // snippet-end: mask-and-online-softmax
    // snippet-begin: store-p-transposed
    // P_ij -> shared memory, transposed: each float4 holds 4 consecutive rows of one key.
#pragma unroll
    for (int n = 0; n < kKeysPerThread; ++n)
#pragma unroll
      for (int m = 0; m < kRowsPerThread; m += 4)
        *reinterpret_cast<float4*>(&Ps[(lane + n * kLanesPerRow) * C::LDP + team * kRowsPerThread + m]) =
            make_float4(s[m][n], s[m + 1][n], s[m + 2][n], s[m + 3][n]);
    // snippet-end: store-p-transposed
    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
    // (C) all of P_ij is written and all of V_j is visible to every thread.
    __syncthreads();

    // snippet-begin: pv-register-tile
    // O_i += P_ij V_j: per key, kRowsPerThread probabilities times kColsPerThread values of V.
#pragma unroll 8
    for (int c = 0; c < BC; ++c) {
      float p[kRowsPerThread], vv[kColsPerThread];
#pragma unroll
      for (int m = 0; m < kRowsPerThread; m += 4) {
        const float4 pf = *reinterpret_cast<const float4*>(&Ps[c * C::LDP + team * kRowsPerThread + m]);
        p[m] = pf.x, p[m + 1] = pf.y, p[m + 2] = pf.z, p[m + 3] = pf.w;
      }
#pragma unroll
      for (int e = 0; e < kColsPerThread; e += kVecWidth) {
        const float* src = &Vs[c * C::LDV + e * kLanesPerRow + lane * kVecWidth];
        if constexpr (kVecWidth == 4) {
          const float4 t = *reinterpret_cast<const float4*>(src);
          vv[e] = t.x, vv[e + 1] = t.y, vv[e + 2] = t.z, vv[e + 3] = t.w;
        } else {
          const float2 t = *reinterpret_cast<const float2*>(src);
          vv[e] = t.x, vv[e + 1] = t.y;
        }
      }
#pragma unroll
      for (int m = 0; m < kRowsPerThread; ++m)
#pragma unroll
        for (int d = 0; d < kColsPerThread; ++d) o_acc[m][d] = fmaf(p[m], vv[d], o_acc[m][d]);
    }
    // snippet-end: pv-register-tile
  }
  cp_async_wait<0>();

  // snippet-begin: epilogue
  // Epilogue: each lane summed only its own keys; the row's 16 lanes add up to ℓ_i. A row that
  // saw no key has ℓ_i = 0 and O_i = 0 and is written as zeros.
#pragma unroll
  for (int m = 0; m < kRowsPerThread; ++m) {
    float l = l_i[m];
#pragma unroll
    for (int w = kLanesPerRow / 2; w >= 1; w /= 2) l += __shfl_xor_sync(0xffffffffu, l, w);
    const float inv_l = l > 0.f ? 1.f / l : 0.f;
    const int i = q0 + team * kRowsPerThread + m;
    if (i >= seq_q) continue;  // padding row of the last, partial query tile
#pragma unroll
    for (int e = 0; e < kColsPerThread; e += kVecWidth) {
      float* dst = &o_bh[int64_t(i) * D + e * kLanesPerRow + lane * kVecWidth];
      if constexpr (kVecWidth == 4) {
        *reinterpret_cast<float4*>(dst) =
            make_float4(o_acc[m][e] * inv_l, o_acc[m][e + 1] * inv_l, o_acc[m][e + 2] * inv_l, o_acc[m][e + 3] * inv_l);
      } else {
        *reinterpret_cast<float2*>(dst) = make_float2(o_acc[m][e] * inv_l, o_acc[m][e + 1] * inv_l);
      }
    }
  }
  // snippet-end: epilogue
}

template <class C>
void launch(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
            cudaStream_t stream) {
  const auto kernel = flash_attention_kernel<C>;
  // Above 48 KiB of shared memory a kernel must opt in; ask for the largest carveout too.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  const dim3 grid((p.seq_q + C::BR - 1) / C::BR, p.heads_q, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, o, p.heads_q, p.group_size(), p.seq_q, p.seq_k,
                                                       p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

// Launches the first configuration whose shared memory fits this GPU (the last one is the
// fallback). Tile shapes measured on an H100 (lesson: "Tile shapes per GPU"); the smaller ones
// fit the 99 KiB of consumer GPUs and the 64 KiB of Turing.
template <class First, class... Rest>
void launch_first_fitting(int smem_limit, const float* q, const float* k, const float* v, float* o,
                          const course::AttentionParams& p, cudaStream_t stream) {
  if constexpr (sizeof...(Rest) == 0) {
    launch<First>(q, k, v, o, p, stream);
  } else {
    if (First::kSmemBytes <= size_t(smem_limit))
      launch<First>(q, k, v, o, p, stream);
    else
      launch_first_fitting<Rest...>(smem_limit, q, k, v, o, p, stream);
  }
}

}  // namespace

void flash_attention_tuned(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                           cudaStream_t stream) {
  const char* fn = "flash_attention_tuned";
  course::require_attention_tensors(q, k, v, o, p, fn);
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");

  const int smem_limit = course::smem_limit_per_block();
  switch (p.head_dim) {  // FlashConfig<D, BR, BC, kRowsPerThread>
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
