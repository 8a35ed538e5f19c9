// Day 10 · Exercise 04 · fp16 flash attention on tensor cores: WMMA products, fp32 scores and softmax.
// Lesson: day10-optimizations/04_fp16_wmma/README.md. Test: make test EX=04_fp16_wmma
//
// Exercise 01's algorithm with the two matrix products moved onto the tensor cores. One thread
// block owns a query tile Q_i (BR rows) of one (batch, query head) and walks over key tiles
// K_j, V_j (BC = 64 rows each). Each warp owns 16 query rows, and everything a warp computes
// stays in that warp:
//
//   * S_ij = Q_i K_jᵀ with nvcuda::wmma 16×16×16 products into fp32 accumulator fragments
//     (K_j read as a column-major B operand: the transpose costs nothing), stored to the
//     warp's slice of shared memory;
//   * the online softmax runs in fp32 on that slice, two lanes per row; P_ij is rounded to fp16
//     into a second slice, the rescale factor α of each row into a third;
//   * O_i (fp32) stays in accumulator fragments for the whole loop. The fragment's element
//     layout is unspecified, so the kernel asks the hardware once which row each element holds
//     (a "row map") and multiplies by α of that row; then O_i += P_ij V_j with WMMA.
// K_{j+1} and V_{j+1} are copied with cp.async while tile j is computed (two stages), one
// barrier per tile. Smaller GPUs get one stage and, at D = 128, 32-row tiles.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>

#include "04_fp16_wmma.h"
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

namespace wmma = nvcuda::wmma;

constexpr int kWmma = 16;  // WMMA tile: m = n = k = 16

using AccFrag = wmma::fragment<wmma::accumulator, kWmma, kWmma, kWmma, float>;
using RowAFrag = wmma::fragment<wmma::matrix_a, kWmma, kWmma, kWmma, __half, wmma::row_major>;
using RowBFrag = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, __half, wmma::row_major>;
using ColBFrag = wmma::fragment<wmma::matrix_b, kWmma, kWmma, kWmma, __half, wmma::col_major>;
constexpr int kAccElems = AccFrag::num_elements;  // fp32 values of a 16×16 tile one lane holds

// BR query rows per block (16 per warp), BC keys per tile, Stages K/V buffers.
template <int D_, int BR_, int Stages_>
struct WmmaConfig {
  static constexpr int D = D_, BR = BR_, BC = 64, kStages = Stages_;
  static constexpr int kWarps = BR / kWmma;
  static constexpr int kThreads = 32 * kWarps;
  // Leading dimensions (elements). WMMA loads read 16-byte pieces of 8 consecutive rows at once;
  // with a row stride of D halves (a multiple of 128 bytes) all 8 land on the same banks. One
  // extra 16-byte piece per row (8 halves, 4 floats) shifts each row by one bank group.
  static constexpr int LDQ = D + 8, LDKV = D + 8, LDS = BC + 4, LDP = BC + 8;
  static constexpr size_t kQBytes = sizeof(__half) * BR * LDQ;
  static constexpr size_t kKVBytes = sizeof(__half) * kStages * BC * LDKV;  // K (or V), all stages
  static constexpr size_t kSBytes = sizeof(float) * BR * LDS;
  static constexpr size_t kPBytes = sizeof(__half) * BR * LDP;
  static constexpr size_t kSmemBytes = kQBytes + 2 * kKVBytes + kSBytes + kPBytes + sizeof(float) * BR;
  // WMMA pointers must be 32-byte aligned: every region starts at a multiple of 32 bytes.
  static_assert(kQBytes % 32 == 0 && kKVBytes % 32 == 0 && kSBytes % 32 == 0 && kPBytes % 32 == 0,
                "shared-memory regions must keep 32-byte alignment");
  static_assert(D % kWmma == 0 && BC % kWmma == 0 && BC % 4 == 0 && D % BC == 0, "tiles split into 16×16 pieces");
};

// Stage rows [row0, row0 + ROWS) of a [n_rows, D] fp16 matrix into shared memory (leading
// dimension LD); rows past n_rows become zeros (zero keys are masked; zero values times P = 0
// add nothing; zero queries produce rows that are never stored). 16 bytes = 8 halves per copy,
// consecutive threads on consecutive pieces of a row: coalesced.
template <class C, int ROWS, int LD>
__device__ __forceinline__ void load_tile(__half* dst, const __half* src, int row0, int n_rows) {
  constexpr int kChunksPerRow = C::D / 8;
  for (int idx = threadIdx.x; idx < ROWS * kChunksPerRow; idx += C::kThreads) {
    const int r = idx / kChunksPerRow, c8 = (idx % kChunksPerRow) * 8;
    const bool valid = row0 + r < n_rows;
    const __half* from = valid ? src + int64_t(row0 + r) * C::D + c8 : src;
    copy16(reinterpret_cast<float*>(dst + r * LD + c8), reinterpret_cast<const float*>(from), valid);
  }
}

// Two floats rounded to fp16 and packed into 32 bits (a store of 8 halves is one uint4).
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&h);
}

template <class C>
__global__ void __launch_bounds__(C::kThreads)
    flash_wmma_kernel(const __half* __restrict__ q, const __half* __restrict__ k, const __half* __restrict__ v,
                      __half* __restrict__ o, int heads, int group, int seq_q, int seq_k, float scale, bool causal) {
  constexpr int D = C::D, BR = C::BR, BC = C::BC, LDQ = C::LDQ, LDKV = C::LDKV, LDS = C::LDS, LDP = C::LDP;
  extern __shared__ __align__(128) unsigned char smem[];
  __half* Qs = reinterpret_cast<__half*>(smem);                               // Q_i [BR][LDQ]
  __half* Ks = reinterpret_cast<__half*>(smem + C::kQBytes);                  // K_j [kStages][BC][LDKV]
  __half* Vs = reinterpret_cast<__half*>(smem + C::kQBytes + C::kKVBytes);    // V_j, same shape
  float* Ss = reinterpret_cast<float*>(smem + C::kQBytes + 2 * C::kKVBytes);  // S_ij [BR][LDS]
  __half* Ps = reinterpret_cast<__half*>(Ss + BR * LDS);                      // P_ij [BR][LDP], fp16
  float* alpha_s = reinterpret_cast<float*>(Ps + BR * LDP);                   // α of each row, this tile

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // The warp's private slices: rows warp·16 .. warp·16 + 15 of S, P and α. Only __syncwarp()
  // orders accesses to them; no other warp ever touches them.
  float* S_w = Ss + warp * kWmma * LDS;
  __half* P_w = Ps + warp * kWmma * LDP;
  float* alpha_w = alpha_s + warp * kWmma;

  // Reverse order: under a causal mask the last query tiles have the most keys.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const int64_t bh = int64_t(blockIdx.z) * heads + blockIdx.y;  // (batch, query head)
  const int64_t bh_kv = bh / group;                             // its KV head (GQA)
  const __half* q_bh = q + bh * seq_q * D;
  const __half* k_bh = k + bh_kv * seq_k * D;
  const __half* v_bh = v + bh_kv * seq_k * D;
  __half* o_bh = o + bh * seq_q * D;
  const int off = seq_k - seq_q;  // bottom-right alignment: row i sees keys j <= i + off

  // Causal: stop after the tile holding the last key the tile's last real row can see.
  int n_kv_tiles = (seq_k + BC - 1) / BC;
  if (causal) {
    const int last_key = min(q0 + BR, seq_q) - 1 + off;
    n_kv_tiles = last_key < 0 ? 0 : min(n_kv_tiles, last_key / BC + 1);
  }

  // Which row of the 16×16 tile does element e of an accumulator fragment hold? The layout is
  // unspecified (and differs between GPU generations), so ask: load a tile whose every element
  // is its own row index and read the fragment back.
  for (int idx = lane; idx < kWmma * kWmma; idx += 32) S_w[(idx / kWmma) * LDS + idx % kWmma] = float(idx / kWmma);
  __syncwarp();
  AccFrag row_map;
  wmma::load_matrix_sync(row_map, S_w, LDS, wmma::mem_row_major);
  int row_of[kAccElems];
#pragma unroll
  for (int e = 0; e < kAccElems; ++e) row_of[e] = int(row_map.x[e]);
  __syncwarp();  // every lane has read the map before S_w is overwritten

  AccFrag o_acc[D / kWmma];  // O_i, unnormalised: 16 rows × D columns per warp, fp32
#pragma unroll
  for (int f = 0; f < D / kWmma; ++f) wmma::fill_fragment(o_acc[f], 0.f);

  // The softmax step works on rows: lanes 2r and 2r+1 share row r of the warp's 16, each
  // holding the row's running max m_i and its own part of ℓ_i.
  const int r = lane / 2, half_id = lane % 2;
  const int i = q0 + warp * kWmma + r;  // query index of this lane's row
  float m_i = -INFINITY, l_i = 0.f;

  load_tile<C, BR, LDQ>(Qs, q_bh, q0, seq_q);
  if (C::kStages == 2 && n_kv_tiles > 0) {
    load_tile<C, BC, LDKV>(Ks, k_bh, 0, seq_k);
    load_tile<C, BC, LDKV>(Vs, v_bh, 0, seq_k);
  }
  cp_async_commit();

  for (int j = 0; j < n_kv_tiles; ++j) {
    const int kv0 = j * BC;
    const int stage = C::kStages == 2 ? j % 2 : 0;
    const __half* Kt = Ks + stage * BC * LDKV;
    const __half* Vt = Vs + stage * BC * LDKV;
    if constexpr (C::kStages == 1) {
      // (A) one buffer: every warp must be done with K_{j-1}, V_{j-1} before they are replaced.
      if (j > 0) __syncthreads();
      load_tile<C, BC, LDKV>(Ks, k_bh, kv0, seq_k);
      load_tile<C, BC, LDKV>(Vs, v_bh, kv0, seq_k);
      cp_async_commit();
    }
    cp_async_wait<0>();
    // (B) K_j, V_j (and Q_i) have landed for every thread's copies. With two stages, every warp
    //     has also finished tile j-1, so its buffer may now receive tile j+1.
    __syncthreads();
    if constexpr (C::kStages == 2) {
      if (j + 1 < n_kv_tiles) {
        load_tile<C, BC, LDKV>(Ks + (1 - stage) * BC * LDKV, k_bh, kv0 + BC, seq_k);
        load_tile<C, BC, LDKV>(Vs + (1 - stage) * BC * LDKV, v_bh, kv0 + BC, seq_k);
      }
      cp_async_commit();
    }

    // S_ij = Q_i K_jᵀ for the warp's 16 rows: BC/16 accumulator tiles, D/16 steps of k.
    // TODO(1) (≈ 20 lines): S_ij = Q_i K_jᵀ on the tensor cores (lesson: "Row-major, column-major, and why Kᵀ is free").
    //   The warp's 16 rows of Q_i against all BC keys of K_j, summed over D in fp32 accumulator
    //   fragments (one per 16 keys), with K_j read as Kᵀ straight from shared memory (no copy);
    //   then S_ij stored into the warp's slice S_w and visible to every lane of the warp (lesson:
    //   "Who owns which tiles").

    // Row r: this lane reads columns 4t + 2·half_id and 4t + 2·half_id + 1 (a float2 per step:
    // 16 lanes of 8 rows cover all 32 banks). Masks: keys past seq_k, and causal keys j > i + off;
    // only tiles that straddle one of the boundaries test every element.
    const bool need_mask = kv0 + BC > seq_k || (causal && kv0 + BC - 1 > q0 + off);
    // TODO(2) (≈ 35 lines): the online-softmax step of row r in fp32 (lesson: "The online softmax in shared memory").
    //   This lane's half of row r in S_w, scaled and masked in problem coordinates (keys past
    //   seq_k; causal, keys above the diagonal); the row's tile max over both of its lanes; the
    //   new running max with the empty-row rule; α and P as in exercise 01 (exp2); P rounded to
    //   fp16 into P_w, ℓ_i grown by the ROUNDED P, the running max updated, the row's α into
    //   alpha_w; then P_w and alpha_w visible to every lane of the warp (lesson: "A worked
    //   example: one row, two key tiles").

    // TODO(3) (≈ 18 lines): O_i ← diag(α) O_i + P_ij V_j (lesson: "Where O lives: fragments and a row map").
    //   Every element of every O fragment scaled by the α of its own row (the row map says which
    //   row), then the warp's 16 rows of P_ij times V_j on the tensor cores, summed over the BC
    //   keys into the O fragments (lesson: "Who owns which tiles").
  }
  cp_async_wait<0>();

  // Epilogue: ℓ_i = the two lanes' sums; a row that saw no key has ℓ_i = 0 and O_i = 0 and is
  // written as zeros. O goes through the warp's S slice (BC columns at a time) because only
  // there do we know which lane holds which element; each lane then writes 32 halves of its row.
  const float l = l_i + __shfl_xor_sync(0xffffffffu, l_i, 1);
  const float inv_l = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int c0 = 0; c0 < D; c0 += BC) {
    __syncwarp();  // the previous pass (or the last softmax) has finished reading S_w
#pragma unroll
    for (int f = 0; f < BC / kWmma; ++f)
      wmma::store_matrix_sync(S_w + f * kWmma, o_acc[c0 / kWmma + f], LDS, wmma::mem_row_major);
    __syncwarp();
    if (i < seq_q) {
#pragma unroll
      for (int u = 0; u < BC / 2; u += 8) {
        const int c = half_id * (BC / 2) + u;
        const float4 a = *reinterpret_cast<const float4*>(&S_w[r * LDS + c]);
        const float4 b = *reinterpret_cast<const float4*>(&S_w[r * LDS + c + 4]);
        *reinterpret_cast<uint4*>(&o_bh[int64_t(i) * D + c0 + c]) =
            make_uint4(pack_half2(a.x * inv_l, a.y * inv_l), pack_half2(a.z * inv_l, a.w * inv_l),
                       pack_half2(b.x * inv_l, b.y * inv_l), pack_half2(b.z * inv_l, b.w * inv_l));
      }
    }
  }
}

template <class C>
void launch(const __half* q, const __half* k, const __half* v, __half* o, const course::AttentionParams& p,
            cudaStream_t stream) {
  const auto kernel = flash_wmma_kernel<C>;
  // Above 48 KiB of shared memory a kernel must opt in.
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  const dim3 grid((p.seq_q + C::BR - 1) / C::BR, p.heads_q, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, o, p.heads_q, p.group_size(), p.seq_q, p.seq_k,
                                                       p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

// Launches the first configuration whose shared memory fits this GPU (the last is the fallback).
template <class First, class... Rest>
void launch_first_fitting(int smem_limit, const __half* q, const __half* k, const __half* v, __half* o,
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

void flash_attention_wmma(const __half* q, const __half* k, const __half* v, __half* o,
                          const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "flash_attention_wmma";
  course::require_attention_tensors(q, k, v, o, p, fn);
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");

  const int smem_limit = course::smem_limit_per_block();
  if (p.head_dim == 64) {  // WmmaConfig<D, BR, stages>: 72 KiB; 53 KiB
    launch_first_fitting<WmmaConfig<64, 64, 2>, WmmaConfig<64, 64, 1>>(smem_limit, q, k, v, o, p, stream);
  } else {  // 111 KiB; 77 KiB; 56 KiB
    launch_first_fitting<WmmaConfig<128, 64, 2>, WmmaConfig<128, 64, 1>, WmmaConfig<128, 32, 1>>(smem_limit, q, k, v, o,
                                                                                                 p, stream);
  }
}
