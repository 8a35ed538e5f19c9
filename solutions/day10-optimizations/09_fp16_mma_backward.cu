// Day 10 · Exercise 09 · FlashAttention-2 backward on mma.sync: dQ, dK, dV in fp16/bf16, fp32 accumulation
// Lesson: day10-optimizations/09_fp16_mma_backward/README.md. Test: make test EX=09_fp16_mma_backward
//
// Three kernels. bwd_prep_kernel: D_i = rowsum(dO_i ∘ O_i) in fp32, and the fp32 dQ accumulator
// zeroed. bwd_mma_kernel: one thread block per (batch, KV head, key block K_j, V_j of Bc keys);
// warp w owns the 16 keys 16w .. 16w + 15 of the block. The block walks the query tiles Q_i, dO_i
// (Br = 64 rows) of the G query heads that read its KV head, and per tile each warp computes
// Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ with keys on the accumulator rows, so that Pᵀ and dSᵀ come
// out in exactly the layout of an mma A operand: dV += Pᵀ dO_i and dK += dSᵀ Q_i take them from
// registers, and the B operands dO_i, Q_i come by ldmatrix.trans. dQ_i += dS K_j needs dS with
// queries on the rows: the block writes dSᵀ to shared memory, each warp reads a 32-row × (D/4 or
// D/2)-column piece of the product back with ldmatrix.trans and adds it to the accumulator with
// fp32 atomics. dK and dV stay in registers until the block ends. bwd_dq_kernel: dQ = scale ·
// accumulator, rounded to 16 bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "09_fp16_mma_backward.h"
#include "arch/exp2.cuh"
#include "check_attention_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"
#include "arch/sm80.cuh"
#include "smem_limit.h"

// ---- index helpers (09_fp16_mma_backward.h), host and device ---------------------------------
// Defined here, in the kernel's translation unit, so that nvcc inlines them into the kernel.
// `make test EX=09_fp16_mma_backward` checks them even without a GPU.
// snippet-begin: query-tiles
__host__ __device__ BwdTileRange bwd_query_tiles(int k0, int seq_q, int seq_k, bool causal, int br) {
  const int first_row = causal ? k0 - (seq_k - seq_q) : 0;  // the first row that sees key k0
  return {first_row > 0 ? first_row / br : 0, (seq_q + br - 1) / br};
}
// snippet-end: query-tiles

// snippet-begin: acc-coords
__host__ __device__ int bwd_acc_key(int lane, int e, int key0) {
  return key0 + lane / 4 + 8 * (e / 2);  // rows: group g = lane / 4, elements 2, 3 eight rows lower
}

__host__ __device__ int bwd_acc_query(int lane, int n, int e, int q0) {
  return q0 + 8 * n + 2 * (lane % 4) + e % 2;  // columns: fragment n's 8 queries, pair 2·t4, 2·t4 + 1
}
// snippet-end: acc-coords

namespace {

using course::arch::cp_async4;
using course::arch::cp_async_commit;
using course::arch::cp_async_wait;
using course::arch::kLog2e;
using course::arch::smem_u32;
namespace sm80 = course::arch::sm80;

using course::arch::sm80::atomic_add_f32x2;
using course::arch::sm80::ldmatrix_x4;
using course::arch::sm80::ldmatrix_x4_trans;
using course::arch::sm80::load_tile;
using course::arch::sm80::mma_16816;
using course::arch::sm80::pack2;
using course::arch::sm80::swizzled;
using course::arch::sm80::unpack2;

constexpr int kBr = 64;  // query rows per tile

// ---- (1) D_i = rowsum(dO_i ∘ O_i); the dQ accumulator zeroed ----------------------------------
// 8 lanes per row, each D/8 consecutive elements (one or two 16-byte loads of O and of dO).
template <class T, int D>
__global__ void __launch_bounds__(256)
    bwd_prep_kernel(const T* __restrict__ o, const T* __restrict__ d_o, float* __restrict__ delta,
                    float* __restrict__ dq_acc, int64_t rows) {
  constexpr int kPer = D / 8;  // elements per lane
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 8;
  const int part = threadIdx.x % 8;
  float sum = 0.f;
  if (row < rows) {
    const uint4* o4 = reinterpret_cast<const uint4*>(o + row * D + part * kPer);
    const uint4* g4 = reinterpret_cast<const uint4*>(d_o + row * D + part * kPer);
#pragma unroll
    for (int c = 0; c < kPer / 8; ++c) {
      const uint4 a = o4[c], b = g4[c];
      const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        // snippet-begin: delta
        const float2 of = unpack2<T>(av[x]), gf = unpack2<T>(bv[x]);
        sum = fmaf(of.x, gf.x, sum);
        sum = fmaf(of.y, gf.y, sum);
        // snippet-end: delta
      }
    }
    float4* z = reinterpret_cast<float4*>(dq_acc + row * D + part * kPer);
#pragma unroll
    for (int c = 0; c < kPer / 4; ++c) z[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // The row's 8 partial sums sit in 8 neighbouring lanes (every lane takes part, also past the end).
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  sum += __shfl_xor_sync(0xffffffffu, sum, 4);
  if (row < rows && part == 0) delta[row] = sum;
}

// ---- (2) the main pass -------------------------------------------------------------------------
template <class T, int D, int kWarps, int kStages>
struct BwdConfig {
  static constexpr int kBc = 16 * kWarps;  // keys per block: 16 per warp
  static constexpr int kThreads = 32 * kWarps;
  // dQ_i (Br × D) is split over the warps as 2 (rows) × kWarps / 2 (columns).
  static constexpr int kDqCols = D / (kWarps / 2);
  // K_j, V_j; kStages × (Q_i, dO_i); dSᵀ; kStages × (L_i, D_i); alignment slack
  static constexpr size_t kSmemBytes = size_t(2 * kBc * D + 2 * kStages * kBr * D + kBc * kBr) * sizeof(T) +
                                       size_t(2 * kStages * kBr) * sizeof(float) +
                                       256;  // slack to start the tiles at a 256-byte boundary

  static_assert(D % 64 == 0, "the swizzle permutes groups of 8 chunks of 8 values: D must be a multiple of 64");
  static_assert(kWarps % 2 == 0 && kDqCols % 16 == 0,
                "dQ's columns split over kWarps / 2 warps in whole 16-column ldmatrix blocks");
  static_assert(kBr % 16 == 0 && 2 * kBr <= kThreads, "one thread per row copies L_i, one more D_i");
  static_assert(kSmemBytes <= size_t(course::arch::sm80::kMaxSmemPerBlock),
                "K_j, V_j, the Q_i / dO_i stages and dSᵀ must fit an A100's opt-in shared memory");
};

template <class T, int D, int kWarps, int kStages>
__global__ void __launch_bounds__(32 * kWarps, 1)
    bwd_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
                   const float* __restrict__ lse, const float* __restrict__ delta, float* __restrict__ dq_acc,
                   T* __restrict__ dk, T* __restrict__ dv, course::AttentionParams p, float scale) {
  using C = BwdConfig<T, D, kWarps, kStages>;
  constexpr int kBc = C::kBc, kThreads = C::kThreads, kDqCols = C::kDqCols;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // The tiles start at a 256-byte boundary (the launch adds 256 bytes of slack): a swizzled
  // 16-byte chunk then sits in bits 4..7 of its shared-memory address, where XOR with a constant
  // moves to another chunk of the same row (see "Addresses: a lane's base XOR a constant").
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 255u) & ~255u;
  T* Ks = reinterpret_cast<T*>(smem_raw + (base - raw));  // kBc × D
  T* Vs = Ks + kBc * D;                                   // kBc × D
  T* Qs = Vs + kBc * D;                                   // kStages tiles of kBr × D
  T* dOs = Qs + kStages * kBr * D;                        // kStages tiles of kBr × D
  T* dSs = dOs + kStages * kBr * D;                       // dSᵀ: kBc × kBr (keys × queries)
  float* Ls = reinterpret_cast<float*>(dSs + kBc * kBr);  // kStages × kBr
  float* Ds = Ls + kStages * kBr;                         // kStages × kBr
  constexpr uint32_t kRow = 2 * D;                        // bytes per row of K_j, V_j, Q_i, dO_i
  constexpr uint32_t kRowS = 2 * kBr;                     // bytes per row of dSᵀ
  constexpr uint32_t kStage = kBr * kRow;
  const uint32_t Ks_a = base, Vs_a = Ks_a + kBc * kRow, Qs_a = Vs_a + kBc * kRow;
  const uint32_t dOs_a = Qs_a + kStages * kStage, dSs_a = dOs_a + kStages * kStage;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // fragment row group and column pair of this lane
  // Under the causal mask the first key blocks see the most query tiles: blockIdx.x = 0 first.
  const int k0 = blockIdx.x * kBc;
  const int h_kv = blockIdx.y, b = blockIdx.z;
  const int Nq = p.seq_q, Nk = p.seq_k, off = Nk - Nq;
  const int G = p.heads_q / p.heads_kv;
  const int64_t kv_base = (int64_t(b) * p.heads_kv + h_kv) * Nk;
  const T* Kg = k + kv_base * D;
  const T* Vg = v + kv_base * D;
  const int key0 = k0 + warp * 16;  // this warp's 16 keys: the rows of its Sᵀ fragments

  // Addresses: a lane's base XOR a constant. An ldmatrix.x4 lane supplies row r of one 8×8
  // matrix; with r7 = lane & 7 and the swizzle, chunk c of that row sits at chunk c ^ r7. The
  // chunks the loops step through are c = c_lane + 2·(loop index) with c_lane < 2, so their
  // addresses are base_lane ^ (index << 5): one instruction, no table of offsets in registers.
  const int r7 = lane & 7, b3 = (lane >> 3) & 1, b4 = lane >> 4;
  // A = rows 16w + r7 + 8·b3 of K_j / V_j, chunk 2kk + b4 (S phase): address ^ (kk << 5).
  const uint32_t a_k = Ks_a + (warp * 16 + r7 + 8 * b3) * kRow + ((b4 ^ r7) << 4);
  const uint32_t a_v = a_k + (Vs_a - Ks_a);
  // B = rows 16np + r7 + 8·b4 of Q_i / dO_i, chunk 2kk + b3 (S phase): ^ (kk << 5), + np·16 rows.
  const uint32_t b_q = Qs_a + (r7 + 8 * b4) * kRow + ((b3 ^ r7) << 4);
  // Bᵀ = rows 16kk + r7 + 8·b3 of Q_i / dO_i, chunk 2dp + b4 (dV, dK): ^ (dp << 5), + kk·16 rows.
  const uint32_t bt_q = Qs_a + (r7 + 8 * b3) * kRow + ((b4 ^ r7) << 4);
  // dSᵀ stores: row 16w + g (+ 8 for registers 1, 3), chunk n = 2kk + reg / 2, bytes 4·t4.
  const uint32_t s_ds = dSs_a + (warp * 16 + g) * kRowS + (g << 4) + 4 * t4;
  // dQ phase, warp (wm, wn): A = dSᵀ rows 16kk + r7 + 8·b4, chunk 2(2wm + mi) + b3: ^ (mi << 5);
  // B = K_j rows 16kk + r7 + 8·b3, chunk wn·kDqCols/8 + 2np + b4: ^ (np << 5).
  const int wm = warp % 2, wn = warp / 2;
  const uint32_t a_ds = dSs_a + (r7 + 8 * b4) * kRowS + (((4 * wm + b3) ^ r7) << 4);
  const uint32_t b_k = Ks_a + (r7 + 8 * b3) * kRow + (((wn * (kDqCols / 8) + b4) ^ r7) << 4);

  // The (query head, query tile) steps of this block: the G heads of the group, each over the
  // same range of query tiles; step s is head h_kv·G + s / n_tiles, tile begin + s % n_tiles.
  const BwdTileRange tiles = bwd_query_tiles(k0, Nq, Nk, p.causal, kBr);
  const int n_tiles = tiles.end > tiles.begin ? tiles.end - tiles.begin : 0;
  const int n_steps = G * n_tiles;

  // Issues the copies of step s (Q_i, dO_i, L_i, D_i) into stage `st`; rows past Nq are zeros.
  auto load_step = [&](int s, int st) {
    const int h = h_kv * G + s / n_tiles, q0 = (tiles.begin + s % n_tiles) * kBr;
    const int64_t row_base = (int64_t(b) * p.heads_q + h) * Nq;
    load_tile<D, kBr, kThreads>(Qs + st * kBr * D, q + row_base * D, q0, Nq);
    load_tile<D, kBr, kThreads>(dOs + st * kBr * D, d_o + row_base * D, q0, Nq);
    const int r = threadIdx.x % kBr;
    const bool valid = q0 + r < Nq;
    const int64_t src = valid ? row_base + q0 + r : 0;
    if (threadIdx.x < kBr)
      cp_async4(Ls + st * kBr + r, lse + src, valid);
    else if (threadIdx.x < 2 * kBr)
      cp_async4(Ds + st * kBr + r, delta + src, valid);
  };

  // K_j, V_j once, with step 0 in the same commit group.
  load_tile<D, kBc, kThreads>(Ks, Kg, k0, Nk);
  load_tile<D, kBc, kThreads>(Vs, Vg, k0, Nk);
  if (n_steps > 0) load_step(0, 0);
  cp_async_commit();

  float dv_acc[D / 8][4] = {};  // dV of the warp's 16 keys: fragment n covers columns 8n .. 8n + 7
  float dk_acc[D / 8][4] = {};  // dK likewise (scale applied at the end)
  const float scale_log2 = scale * kLog2e;

  for (int s = 0; s < n_steps; ++s) {
    const int st = kStages == 2 ? s % 2 : 0;
    // Step s has landed, and every warp is done with step s - 1 (its dSᵀ, and the stage the
    // prefetch below overwrites).
    cp_async_wait<0>();
    __syncthreads();
    if constexpr (kStages == 2) {
      if (s + 1 < n_steps) load_step(s + 1, (s + 1) % 2);
      cp_async_commit();
    }
    const int h = h_kv * G + s / n_tiles, q0 = (tiles.begin + s % n_tiles) * kBr;
    const uint32_t stage_off = st * kStage;
    const float* Lt = Ls + st * kBr;
    const float* Dt = Ds + st * kBr;

    // Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ: 16 keys × 64 queries per warp, 8 accumulator fragments
    // each. A = the warp's rows of K_j (V_j), B = Q_iᵀ (dO_iᵀ): Q's rows as stored, no .trans.
    float sacc[kBr / 8][4] = {};
    float dpacc[kBr / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      ldmatrix_x4(ka, a_k ^ (kk << 5));
      ldmatrix_x4(va, a_v ^ (kk << 5));
      const uint32_t bq = (b_q + stage_off) ^ (kk << 5);
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        uint32_t qb[4], ob[4];
        ldmatrix_x4(qb, bq + np * 16 * kRow);
        mma_16816<T>(sacc[2 * np], ka, qb[0], qb[1]);
        mma_16816<T>(sacc[2 * np + 1], ka, qb[2], qb[3]);
        ldmatrix_x4(ob, bq + (dOs_a - Qs_a) + np * 16 * kRow);
        mma_16816<T>(dpacc[2 * np], va, ob[0], ob[1]);
        mma_16816<T>(dpacc[2 * np + 1], va, ob[2], ob[3]);
      }
    }

    // P = exp(scale·S − L_i), 0 where masked, in place of S; dS = P ∘ (dP − D_i) in place of dP.
    // A column of Sᵀ is a query: its L_i and D_i come from the stage's copies. Only tiles that
    // reach past Nk or past the block's first diagonal need the mask.
    const bool needs_mask = k0 + kBc > Nk || (p.causal && k0 + kBc - 1 > q0 + off);
#pragma unroll
    for (int n = 0; n < kBr / 8; ++n) {
      const int col = 8 * n + 2 * t4;  // the lane's two queries of fragment n: q0 + col, q0 + col + 1
      const float2 lse2 = *reinterpret_cast<const float2*>(Lt + col);
      const float2 d2 = *reinterpret_cast<const float2*>(Dt + col);
      const float l_log2[2] = {lse2.x * kLog2e, lse2.y * kLog2e};  // L_i in base 2
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float d_i = e % 2 ? d2.y : d2.x;
        // snippet-begin: recompute-p
        float pv = exp2f(fmaf(sacc[n][e], scale_log2, -l_log2[e % 2]));
        if (needs_mask) {
          const int key = bwd_acc_key(lane, e, key0), query = bwd_acc_query(lane, n, e, q0);
          if (key >= Nk || (p.causal && key > query + off)) pv = 0.f;
        }
        // snippet-end: recompute-p
        sacc[n][e] = pv;
        // snippet-begin: ds
        dpacc[n][e] = pv * (dpacc[n][e] - d_i);
        // snippet-end: ds
      }
    }

    // dV += Pᵀ dO_i and dK += dSᵀ Q_i: k-step kk covers queries 16kk .. 16kk + 15, i.e.
    // fragments 2kk and 2kk + 1, whose C layout is the A layout (registers 0, 1: fragment 2kk,
    // rows g and g + 8; registers 2, 3: fragment 2kk + 1). B = dO_i (Q_i), queries × D as stored:
    // ldmatrix.trans. dSᵀ also goes to shared memory for dQ, one 32-bit pair per register.
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      uint32_t pa[4], da[4];
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) {
        const int n = 2 * kk + reg / 2, e = 2 * (reg % 2);
        pa[reg] = pack2<T>(sacc[n][e], sacc[n][e + 1]);
        da[reg] = pack2<T>(dpacc[n][e], dpacc[n][e + 1]);
        sm80::st_shared_b32((s_ds ^ (n << 4)) + (reg % 2) * 8 * kRowS, da[reg]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        const uint32_t bt = ((bt_q + stage_off) ^ (dp << 5)) + kk * 16 * kRow;
        uint32_t ob[4], qb[4];
        ldmatrix_x4_trans(ob, bt + (dOs_a - Qs_a));
        mma_16816<T>(dv_acc[2 * dp], pa, ob[0], ob[1]);
        mma_16816<T>(dv_acc[2 * dp + 1], pa, ob[2], ob[3]);
        ldmatrix_x4_trans(qb, bt);
        mma_16816<T>(dk_acc[2 * dp], da, qb[0], qb[1]);
        mma_16816<T>(dk_acc[2 * dp + 1], da, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dSᵀ is complete; step s's Q_i, dO_i, L_i, D_i are no longer read
    if constexpr (kStages == 1) {
      if (s + 1 < n_steps) load_step(s + 1, 0);
      cp_async_commit();
    }

    // dQ_i += dS K_j: warp (wm, wn) computes rows 32wm .. 32wm + 31 and columns wn·kDqCols ..
    // of the Br × D product. A = dS (queries × keys): dSᵀ as stored, ldmatrix.trans; B = K_j
    // (keys × D) as stored, ldmatrix.trans.
    {
      float dq[2][kDqCols / 8][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        uint32_t a[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) ldmatrix_x4_trans(a[mi], (a_ds ^ (mi << 5)) + kk * 16 * kRowS);
#pragma unroll
        for (int np = 0; np < kDqCols / 16; ++np) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, (b_k ^ (np << 5)) + kk * 16 * kRow);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) {
            mma_16816<T>(dq[mi][2 * np], a[mi], kb[0], kb[1]);
            mma_16816<T>(dq[mi][2 * np + 1], a[mi], kb[2], kb[3]);
          }
        }
      }
      float* dst = dq_acc + (int64_t(b) * p.heads_q + h) * Nq * D;
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = q0 + 32 * wm + 16 * mi + g + 8 * r;
          if (row < Nq) {
#pragma unroll
            for (int n = 0; n < kDqCols / 8; ++n) {
              const int col = wn * kDqCols + 8 * n + 2 * t4;
              // snippet-begin: dq-atomic
              atomic_add_f32x2(dst + int64_t(row) * D + col, dq[mi][n][2 * r], dq[mi][n][2 * r + 1]);
              // snippet-end: dq-atomic
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing may be in flight into shared memory when the block exits

  // Epilogue: the warp's 16 rows of dK (times scale) and dV, 16-bit stores.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key0 + g + 8 * r;
    if (key < Nk) {
      T* dk_row = dk + (kv_base + key) * D + 2 * t4;
      T* dv_row = dv + (kv_base + key) * D + 2 * t4;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        *reinterpret_cast<uint32_t*>(dk_row + 8 * n) = pack2<T>(scale * dk_acc[n][2 * r], scale * dk_acc[n][2 * r + 1]);
        *reinterpret_cast<uint32_t*>(dv_row + 8 * n) = pack2<T>(dv_acc[n][2 * r], dv_acc[n][2 * r + 1]);
      }
    }
  }
}

// ---- (3) dQ = scale · accumulator, rounded to T -------------------------------------------------
template <class T>
__global__ void __launch_bounds__(256)
    bwd_dq_kernel(const float* __restrict__ dq_acc, T* __restrict__ dq, int64_t n4, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(dq_acc)[i];
    uint2 out;
    // snippet-begin: dq-scale
    out.x = pack2<T>(scale * a.x, scale * a.y);
    out.y = pack2<T>(scale * a.z, scale * a.w);
    // snippet-end: dq-scale
    reinterpret_cast<uint2*>(dq)[i] = out;
  }
}

template <class T, int D, int kWarps, int kStages>
void launch_main(const T* q, const T* k, const T* v, const T* d_o, const float* lse, const float* delta, float* dq_acc,
                 T* dk, T* dv, const course::AttentionParams& p, cudaStream_t stream) {
  using C = BwdConfig<T, D, kWarps, kStages>;
  auto kernel = bwd_mma_kernel<T, D, kWarps, kStages>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  const dim3 grid((p.seq_k + C::kBc - 1) / C::kBc, p.heads_kv, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, d_o, lse, delta, dq_acc, dk, dv, p, p.softmax_scale());
  CUDA_CHECK_LAUNCH();
}

template <class T, int D>
void launch_all(const T* q, const T* k, const T* v, const T* o, const T* d_o, const float* lse, T* dq, T* dk, T* dv,
                float* workspace, const course::AttentionParams& p, cudaStream_t stream) {
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.seq_q;
  float* dq_acc = workspace;            // [B, Hq, Nq, D]
  float* delta = workspace + rows * D;  // [B, Hq, Nq]

  // The tile configuration first, so that nothing is launched if none fits.
  const size_t limit = size_t(course::smem_limit_per_block());
  const bool big = BwdConfig<T, D, 8, 2>::kSmemBytes <= limit;
  if (!big && BwdConfig<T, D, 4, 1>::kSmemBytes > limit)
    throw std::runtime_error("flash_attention_mma_backward: needs " +
                             std::to_string(BwdConfig<T, D, 4, 1>::kSmemBytes) +
                             " bytes of shared memory per block, the limit is " + std::to_string(limit));

  const int64_t prep_blocks = (rows * 8 + 255) / 256;
  bwd_prep_kernel<T, D><<<dim3(unsigned(prep_blocks)), 256, 0, stream>>>(o, d_o, delta, dq_acc, rows);
  CUDA_CHECK_LAUNCH();
  if (big)
    launch_main<T, D, 8, 2>(q, k, v, d_o, lse, delta, dq_acc, dk, dv, p, stream);
  else
    launch_main<T, D, 4, 1>(q, k, v, d_o, lse, delta, dq_acc, dk, dv, p, stream);
  const int64_t n4 = rows * D / 4;
  const int64_t dq_blocks = (n4 + 255) / 256 < 65536 ? (n4 + 255) / 256 : 65536;
  bwd_dq_kernel<T><<<dim3(unsigned(dq_blocks)), 256, 0, stream>>>(dq_acc, dq, n4, p.softmax_scale());
  CUDA_CHECK_LAUNCH();
}

template <class T>
void backward_impl(const T* q, const T* k, const T* v, const T* o, const T* d_o, const float* lse, T* dq, T* dk, T* dv,
                   float* workspace, const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "flash_attention_mma_backward";
  course::require_attention_tensors(q, k, v, o, p, fn);
  const char* names[4] = {"d_o", "dq", "dk", "dv"};
  const void* ptrs[4] = {d_o, dq, dk, dv};
  for (int i = 0; i < 4; ++i) {
    course::require_not_null(ptrs[i], fn, names[i]);
    course::require_aligned(ptrs[i], 16, fn, names[i]);
  }
  course::require_not_null(lse, fn, "lse");
  course::require_aligned(lse, 4, fn, "lse");
  course::require_not_null(workspace, fn, "workspace");
  course::require_aligned(workspace, 16, fn, "workspace");
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");
  if (p.head_dim == 64)
    launch_all<T, 64>(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
  else
    launch_all<T, 128>(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

}  // namespace

size_t flash_attention_mma_backward_workspace_bytes(const course::AttentionParams& p) {
  const size_t rows = size_t(p.batch) * size_t(p.heads_q) * size_t(p.seq_q);
  const size_t bytes = 4 * rows * (size_t(p.head_dim) + 1);
  return (bytes + 255) / 256 * 256;
}

void flash_attention_mma_backward(const __half* q, const __half* k, const __half* v, const __half* o, const __half* d_o,
                                  const float* lse, __half* dq, __half* dk, __half* dv, float* workspace,
                                  const course::AttentionParams& p, cudaStream_t stream) {
  backward_impl(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

void flash_attention_mma_backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  const __nv_bfloat16* o, const __nv_bfloat16* d_o, const float* lse, __nv_bfloat16* dq,
                                  __nv_bfloat16* dk, __nv_bfloat16* dv, float* workspace,
                                  const course::AttentionParams& p, cudaStream_t stream) {
  backward_impl(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}
