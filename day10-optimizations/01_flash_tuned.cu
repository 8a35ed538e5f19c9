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

  // TODO(1) (≈ 4 lines): under a causal mask, visit only the key tiles this query tile can see:
  //          tiles that lie wholly above the diagonal for every row of the tile are skipped,
  //          and a tile whose rows see no key at all visits none (lesson: "Causal: whole-tile
  //          skipping").
  int n_kv_tiles = (seq_k + BC - 1) / BC;

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
    // TODO(2) (≈ 16 lines): this thread's block of S_ij (its kRowsPerThread rows against its
    //          kKeysPerThread keys) accumulated in s over the D columns, four columns per step:
    //          all the Q and K values of a step in registers first, then all their FMAs
    //          (lesson: "Register tiling").
    // (B) every thread is done reading K_j: the next tile may be copied over it.
    __syncthreads();
    if (j + 1 < n_kv_tiles) load_tile<C, BC, C::LDK>(Ks, k_bh, kv0 + BC, seq_k);
    cp_async_commit();  // possibly empty: keeps the group count the same every iteration

    // TODO(3) (≈ 10 lines): scale the scores and hide the keys a row must not see (past the end
    //          of K; causal, above the diagonal); only tiles that straddle one of those
    //          boundaries need the per-element test (lesson: "Masks and tails").
    // TODO(4) (≈ 20 lines): the online-softmax update of each of the thread's rows (lesson:
    //          "The online softmax across a team"): the tile's row max agreed by the team's 16
    //          lanes, the new running max, the correction of the old ℓ_i and O_i, P_ij in place
    //          of the scores with the exact exp2 (lesson: "exp2 without losing digits"), this
    //          thread's part of ℓ_i, O_i rescaled. A row that has seen only masked keys so far
    //          must stay finite.
    // TODO(5) (≈ 5 lines): this thread's P_ij into Ps, transposed (key-major), four rows of one
    //          key per float4 store (lesson: "Padded shared memory and bank conflicts").
    cp_async_wait<1>();  // V_j has landed (K_{j+1} may still be in flight)
    // (C) all of P_ij is written and all of V_j is visible to every thread.
    __syncthreads();

    // TODO(6) (≈ 25 lines): O_i += P_ij V_j: for each of the BC keys, this thread's
    //          kRowsPerThread probabilities from Ps and the kColsPerThread values of V_j in the
    //          output columns it owns, then all their products into o_acc (lesson: "Register
    //          tiling").
  }
  cp_async_wait<0>();

  // TODO(7) (≈ 20 lines): ℓ_i of each row from the team's 16 partial sums, then O_i / ℓ_i for
  //          every real row of the tile, at the output columns this thread owns; zeros for a
  //          row that saw no key (lesson: "Epilogue").
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
