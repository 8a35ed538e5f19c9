// Day 10 · Exercise 05 · FlashAttention-2 on mma.sync: fp16/bf16 tensor cores, S and P in registers
// Lesson: day10-optimizations/05_fp16_mma/README.md. Test: make test EX=05_fp16_mma
//
// One thread block = Br = 64 query rows of one (batch, head); 4 warps, each owns 16 rows, so
// every softmax row lives inside one warp (in the 4 lanes of a quad) and no statistic ever
// crosses a warp. The block walks the key tiles K_j, V_j (Bc = 64 keys) through a cp.async
// pipeline of kStages shared-memory stages; per tile each warp computes its 16×64 slice of S_ij
// with mma.sync.m16n8k16 (Q fragments held in registers, K fragments by ldmatrix), updates the
// online softmax on the accumulator fragments, re-packs P_ij into A-operand fragments without
// touching shared memory and adds P_ij·V_j (V fragments by ldmatrix.trans).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "05_fp16_mma.h"
#include "arch/exp2.cuh"
#include "check_attention_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"
#include "arch/ldmatrix_lanes.h"
#include "arch/sm80.cuh"
#include "smem_limit.h"

// ---- index helpers (05_fp16_mma.h): the m16n8k16 fragment layouts, host and device -----------
// Defined here, in the kernel's translation unit, so that nvcc inlines them into the kernel:
// with the constant n, e, kk of the unrolled loops they fold into the same instructions as the
// arithmetic written in place. `make test EX=05_fp16_mma` checks them even without a GPU.
__host__ __device__ int mma_acc_row(int lane, int e, int warp_row0) {
  // TODO(1) (≈ 2 lines): the query row, and in mma_acc_key below the key, that element e of an
  //   accumulator fragment held by `lane` stands for, as the header states them (lesson: "The
  //   accumulator fragment, lane by lane").
  return warp_row0;  // TODO(1): replace (wrong for most lanes and elements, but harmless)
}

__host__ __device__ int mma_acc_key(int lane, int n, int e, int k0) {
  return k0;  // TODO(1): replace (wrong for most lanes and elements, but harmless)
}

__host__ __device__ MmaAccPair mma_p_a_source(int kk, int j) {
  // TODO(2) (≈ 2 lines): which two of the lane's accumulator elements become register j of P_ij's
  //   A fragment at k-step kk (lesson: "P stays in registers").
  return {0, 0};  // TODO(2): replace (always s[0][0] and s[0][1]: wrong, but inside s)
}

namespace {

using course::arch::cp_async_commit;
using course::arch::cp_async_wait;
using course::arch::kLog2e;

constexpr int kBr = 64;    // query rows per block
constexpr int kBc = 64;    // keys per tile
constexpr int kWarps = 4;  // each warp owns 16 of the kBr rows
constexpr int kThreads = 32 * kWarps;

// ---- shared-memory layout: rows of D 16-bit values, XOR-swizzled in 16-byte chunks ----------
// ldmatrix reads one 16-byte chunk from each of 8 rows. Unswizzled, a row is 128 or 256 bytes,
// so those 8 chunks sit in the same 4 banks: an 8-way conflict. Storing logical chunk c of row r
// at physical chunk c ^ (r mod 8) spreads any 8 consecutive rows over all 32 banks.
// snippet-begin: swizzle
template <int D>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);  // element offset (8 elements per chunk)
}
// snippet-end: swizzle

// Copies kRows rows of D 16-bit values starting at row `row0` of a [n, D] matrix into a
// swizzled kBr/kBc-row tile, every thread of the block issuing its share of 16-byte cp.async's
// (common/arch/sm80.cuh, the same swizzle as above); rows at or past n are zero-filled (read nothing).
template <int D, int kRows, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* gmem, int row0, int n) {
  course::arch::sm80::load_tile<D, kRows, kThreads>(tile, gmem, row0, n);
}

// ---- fragments -------------------------------------------------------------------------------
// The PTX wrappers (ldmatrix.x4 and its .trans form, mma.sync m16n8k16, two floats packed into one
// 16-bit pair) live in common/arch/sm80.cuh, shared with exercise 09 (the backward pass); the lesson
// explains each ("ldmatrix: fragments straight from shared memory").
using course::arch::sm80::ldmatrix_a_source;
using course::arch::sm80::ldmatrix_b_source;
using course::arch::sm80::ldmatrix_b_trans_source;
using course::arch::sm80::ldmatrix_x4;
using course::arch::sm80::ldmatrix_x4_trans;
using course::arch::sm80::mma_16816;
using course::arch::sm80::pack2;

template <class T, int D, int kStages>
struct MmaConfig {
  static constexpr int kChunksPerRow = D * int(sizeof(T)) / 16;  // 16-byte chunks: one cp.async, one ldmatrix row
  static constexpr size_t kSmemBytes = size_t(kBr + 2 * kStages * kBc) * D * sizeof(T);

  static_assert(kChunksPerRow % 8 == 0, "the swizzle permutes groups of 8 chunks: D must be a multiple of 64");
  static_assert(kBr == 16 * kWarps, "each warp owns the 16 query rows of one m16n8k16 A tile");
  static_assert(kBc % 16 == 0, "P·V steps over the keys 16 at a time (the k of m16n8k16)");
  static_assert(kBr * kChunksPerRow % kThreads == 0 && kBc * kChunksPerRow % kThreads == 0,
                "a tile's 16-byte copies split evenly over the block's threads");
  static_assert(
      kSmemBytes <= size_t(course::arch::sm80::kMaxSmemPerBlock),
      "Q_i and the K/V stages must fit an A100's opt-in shared memory (smaller GPUs: launch_deepest_fitting)");
};

template <class T, int D, int kStages>
__global__ void __launch_bounds__(kThreads)
    flash_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                     float* __restrict__ lse, course::AttentionParams p, float scale) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* Ks = Qs + kBr * D;            // kStages tiles of kBc × D
  T* Vs = Ks + kStages * kBc * D;  // kStages tiles of kBc × D

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t4 = lane % 4;  // fragment row group and column pair of this lane
  // Causal blocks differ in cost (the last query rows see the most keys): start the heavy ones
  // first so that the light ones fill the tail of the grid.
  const int q_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = q_block * kBr;
  const int h = blockIdx.y, b = blockIdx.z;
  const int Nq = p.seq_q, Nk = p.seq_k, off = Nk - Nq;
  const T* Qg = q + (int64_t(b) * p.heads_q + h) * Nq * D;
  const int h_kv = h / (p.heads_q / p.heads_kv);  // GQA: a group of query heads shares K, V
  const T* Kg = k + (int64_t(b) * p.heads_kv + h_kv) * Nk * D;
  const T* Vg = v + (int64_t(b) * p.heads_kv + h_kv) * Nk * D;

  // Keys this block needs: all of them, or under the causal mask those up to the last row's
  // diagonal; whole tiles past it are never loaded. n_tiles = 0: every row sees nothing.
  const int q_last = min(q0 + kBr, Nq) - 1;
  const int k_end = p.causal ? min(Nk, q_last + off + 1) : Nk;
  const int n_tiles = k_end > 0 ? (k_end + kBc - 1) / kBc : 0;

  // Pipeline prologue: Q, then the first kStages-1 K/V tiles, one commit group each (empty
  // groups past the end keep the group arithmetic of cp_async_wait uniform).
  load_tile<D, kBr>(Qs, Qg, q0, Nq);
  cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles) {
      load_tile<D, kBc>(Ks + s * kBc * D, Kg, s * kBc, Nk);
      load_tile<D, kBc>(Vs + s * kBc * D, Vg, s * kBc, Nk);
    }
    cp_async_commit();
  }

  // Q_i fragments (A operand), kept in registers for the whole key loop.
  cp_async_wait<kStages - 1>();
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4(qf[kk],
                Qs + swizzled<D>(warp * 16 + ldmatrix_a_source(lane).row, 2 * kk + ldmatrix_a_source(lane).chunk));

  // Row statistics of rows g and g+8 of this warp's 16. Each lane of a quad holds the same m.
  // ℓ is an accumulator fragment like O's, of the product P·(a column of ones): the tensor core
  // adds each row's 64 rounded probabilities, so ℓ sums exactly the P that multiplies V.
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_acc[4] = {};  // elements 0,1: ℓ of row g; 2,3: ℓ of row g+8 (all columns are equal)
  const uint32_t ones = pack2<T>(1.f, 1.f);
  float acc[D / 8][4] = {};             // O_i: 16 × D per warp, fragment n covers columns 8n..8n+7
  const int row0 = q0 + warp * 16 + g;  // the rows of fragment elements 0,1 (row0) and 2,3 (row0+8)

  for (int j = 0; j < n_tiles; ++j) {
    // Tile j has landed (at most kStages-2 younger groups in flight), and every warp is done
    // with tile j-1, whose stage the prefetch below overwrites.
    // snippet-begin: pipeline
    cp_async_wait<kStages - 2>();
    __syncthreads();
    {
      const int jn = j + kStages - 1, st = jn % kStages;
      if (jn < n_tiles) {
        load_tile<D, kBc>(Ks + st * kBc * D, Kg, jn * kBc, Nk);
        load_tile<D, kBc>(Vs + st * kBc * D, Vg, jn * kBc, Nk);
      }
      cp_async_commit();
    }
    // snippet-end: pipeline
    const T* Kt = Ks + (j % kStages) * kBc * D;
    const T* Vt = Vs + (j % kStages) * kBc * D;
    const int k0 = j * kBc;

    // S_ij = Q_i K_jᵀ: 16 × 64 per warp as 8 accumulator fragments of 16 × 8. B = Kᵀ is
    // "column-major", i.e. K's rows as stored: ldmatrix without .trans.
    float s[kBc / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t kf[4];
        ldmatrix_x4(kf,
                    Kt + swizzled<D>(np * 16 + ldmatrix_b_source(lane).row, 2 * kk + ldmatrix_b_source(lane).chunk));
        mma_16816<T>(s[2 * np], qf[kk], kf[0], kf[1]);
        mma_16816<T>(s[2 * np + 1], qf[kk], kf[2], kf[3]);
      }
    }

    // Scale; mask keys past Nk and, under the causal mask, keys past each row's diagonal. Only
    // tiles that reach past the block's first diagonal or past Nk need it.
    const bool needs_mask = k0 + kBc > Nk || (p.causal && k0 + kBc - 1 > q0 + off);
#pragma unroll
    for (int n = 0; n < kBc / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * scale;
        // TODO(3) (≈ 4 lines): when needs_mask, hide this element (x = -INFINITY) if its key is
        //   past the end of K or, under the causal mask, past its query row's diagonal; its row and
        //   key come from the helpers of TODO(1), given the warp's first row q0 + 16·warp (not
        //   row0, which already includes g) (lesson: "The causal mask in fragment coordinates").
        s[n][e] = x;
      }
    }

    // Online softmax on the fragments (exp2 with the scale applied first, lesson: "exp2 without losing digits").
    float alpha[2] = {1.f, 1.f};  // the factors by which O_i and ℓ_i shrink this tile (TODO 4)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // TODO(4) (≈ 22 lines): the online-softmax step of row r (r = 0: row0, r = 1: row0 + 8) on
      //   this lane's values of that row (lesson: "Row statistics in four lanes"): the row's new
      //   maximum over the whole quad, alpha[r] (how far the old maximum's weights shrink), the
      //   probabilities in place of the scores in s, the row's O fragments rescaled by alpha[r],
      //   m_row[r] updated. A row that has seen no key yet must come out 0, never NaN.
    }

    // ℓ_i shrinks by the same α as O_i before this tile's sums are added.
    l_acc[0] *= alpha[0];
    l_acc[1] *= alpha[0];
    l_acc[2] *= alpha[1];
    l_acc[3] *= alpha[1];

    // P_ij as A operand: k-step kk covers keys 16kk..16kk+15 = accumulator fragments 2kk and
    // 2kk+1, whose layouts are exactly the A layout's left and right 8 columns.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pa[4] = {};  // P_ij's A fragment for keys 16kk..16kk+15 (TODO 5)
      // TODO(5) (≈ 5 lines): fill pa, register by register, with the probabilities of this lane's
      //   accumulator elements that the helper of TODO(2) names, rounded to T (lesson: "P stays in
      //   registers").
      // ℓ_i += rowsum(P_ij): one mma against ones replaces 16 unpacks and adds per lane.
      mma_16816<T>(l_acc, pa, ones, ones);
      // O_i += P_ij V_j: B = V_j (keys × D) is row-major, ldmatrix.trans hands out its columns.
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, Vt + swizzled<D>(kk * 16 + ldmatrix_b_trans_source(lane).row,
                                               2 * dp + ldmatrix_b_trans_source(lane).chunk));
        mma_16816<T>(acc[2 * dp], pa, vf[0], vf[1]);
        mma_16816<T>(acc[2 * dp + 1], pa, vf[2], vf[3]);
      }
    }
  }
  cp_async_wait<0>();  // nothing may be in flight into shared memory when the block exits

  // Epilogue: O / ℓ (zeros for rows that saw nothing), 16-bit stores; with lse, also
  // L_i = m_i + ln ℓ_i (−inf for a row that saw nothing), written by the quad's lane t4 = 0.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = l_acc[2 * r];
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = row0 + r * 8;
    if (row < Nq) {
      T* out = o + ((int64_t(b) * p.heads_q + h) * Nq + row) * D + 2 * t4;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<uint32_t*>(out + n * 8) = pack2<T>(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv);
      if (lse != nullptr && t4 == 0)
        lse[(int64_t(b) * p.heads_q + h) * Nq + row] = l > 0.f ? m_row[r] + logf(l) : -INFINITY;
    }
  }
}

template <class T, int D, int kStages>
void launch(const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
            cudaStream_t stream) {
  using C = MmaConfig<T, D, kStages>;
  auto kernel = flash_mma_kernel<T, D, kStages>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  const dim3 grid((p.seq_q + kBr - 1) / kBr, p.heads_q, p.batch);
  kernel<<<grid, kThreads, C::kSmemBytes, stream>>>(q, k, v, o, lse, p, p.softmax_scale());
  CUDA_CHECK_LAUNCH();
}

// The deepest K/V pipeline whose shared memory fits the block limit.
template <class T, int D>
void launch_deepest_fitting(const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
                            cudaStream_t stream) {
  const size_t limit = size_t(course::smem_limit_per_block());
  if (MmaConfig<T, D, 3>::kSmemBytes <= limit)
    launch<T, D, 3>(q, k, v, o, lse, p, stream);
  else if (MmaConfig<T, D, 2>::kSmemBytes <= limit)
    launch<T, D, 2>(q, k, v, o, lse, p, stream);
  else
    throw std::runtime_error("flash_attention_mma: needs " + std::to_string(MmaConfig<T, D, 2>::kSmemBytes) +
                             " bytes of shared memory per block, the limit is " + std::to_string(limit));
}

template <class T>
void flash_attention_mma_impl(const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
                              cudaStream_t stream) {
  const char* fn = "flash_attention_mma";
  course::require_attention_tensors(q, k, v, o, p, fn);
  if (lse != nullptr) course::require_aligned(lse, 4, fn, "lse");
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");
  if (p.head_dim == 64)
    launch_deepest_fitting<T, 64>(q, k, v, o, lse, p, stream);
  else
    launch_deepest_fitting<T, 128>(q, k, v, o, lse, p, stream);
}

}  // namespace

void flash_attention_mma(const __half* q, const __half* k, const __half* v, __half* o, const course::AttentionParams& p,
                         cudaStream_t stream) {
  flash_attention_mma_impl(q, k, v, o, static_cast<float*>(nullptr), p, stream);
}

void flash_attention_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                         const course::AttentionParams& p, cudaStream_t stream) {
  flash_attention_mma_impl(q, k, v, o, static_cast<float*>(nullptr), p, stream);
}

void flash_attention_mma(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                         const course::AttentionParams& p, cudaStream_t stream) {
  flash_attention_mma_impl(q, k, v, o, lse, p, stream);
}

void flash_attention_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                         float* lse, const course::AttentionParams& p, cudaStream_t stream) {
  flash_attention_mma_impl(q, k, v, o, lse, p, stream);
}
