// Day 06 · Exercise 05 · flash backward: FlashAttention-2's backward pass in fp32, one thread per row of dK_j or dV_j.
// Lesson: day06-attention/05_flash_backward/README.md. Test: make test EX=05_flash_backward
//
// Two kernels. The first computes D_i = rowsum(dO_i ∘ O_i) for every query row (one thread per
// row). The second is FlashAttention-2's backward with the key tile outside: one thread block
// owns one key tile K_j, V_j (Bc keys) of one (batch, KV head) and walks over the query tiles
// Q_i, dO_i (Br rows each) of every query head of the group, staged in shared memory. Its 2·Bc
// threads form two sides: thread c of the V side owns row c of dV_j, thread c of the K side row
// c of dK_j, D floats in registers each, like O_i in exercise 02. Per query tile the V side
// recomputes P_ij from L_i, the K side computes dP_ij and dS_ij, each side adds its column of
// the tile to its row, and all threads add dS_ij K_j to dQ_i with atomics.
// YOUR TASK: TODO(1)..TODO(8), the algorithm. The tile loader, the dot-product, axpy and atomic
// helpers, the shared-memory layout, the four barriers, the register arrays, the thread mapping
// of dQ and the launcher are given.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "05_flash_backward.h"
#include "check_attention_args.h"
#include "cuda_check.h"
#include "fp32_tile.cuh"

// The query tiles [first, end) that the key tile starting at k0 meets (the header's contract). The
// kernel calls it on the device, the [index] tests on the host; defined here, in the kernel's
// translation unit, so nvcc inlines it.
__host__ __device__ FlashBackwardTiles flash_backward_query_tiles(int k0, int seq_q, int seq_k, bool causal, int br) {
  // TODO(1) (≈ 3 lines): the query tiles that see key k0, the tile's first key
  //          (lesson: "05 · Which query tiles a key tile meets").
  return {0, 0};  // TODO(1): replace (no query tile at all until then)
}

namespace {

constexpr int Bc = 32;            // keys per K_j / V_j tile: the block's tile
constexpr int Br = 16;            // query rows per Q_i / dO_i tile
constexpr int kThreads = 2 * Bc;  // threads 0..Bc-1: the V side, Bc..2·Bc-1: the K side
static_assert(Bc % 32 == 0, "each side must be whole warps, so that `v_side` never splits a warp");

// Shared memory in floats:
//   K_j, V_j     [Bc][D + 4]   thread c of a side reads row c: the pad of 4 floats puts
//                              consecutive rows in different banks (as Q_i in exercise 02)
//   Q_i, dO_i    [Br][D]       every thread of a side reads the same row at once: broadcast
//   P_ij, dS_ij  [Br][Bc + 4]  written and read by columns (thread c: column c), dS_ij also by
//                              rows (dQ): the pad puts the rows a warp reads at once in
//                              different banks
//   L_i, D_i     [Br]
template <int D>
constexpr size_t smem_bytes() {
  return sizeof(float) * size_t(2 * Bc * (D + 4) + 2 * Br * D + 2 * Br * (Bc + 4) + 2 * Br);
}

// The tile loader (rows past n become zeros, coalesced float4 copies) is in fp32_tile.cuh.
using day06::load_tile;

// x[r] = row · T[r] for the Br rows of the tile T ([Br][D]): the thread's own row (D floats)
// against rows that every thread of its side reads at the same time (a broadcast). One float4
// of `row` serves Br · 4 FMAs, one float4 of T serves 4.
template <int D>
__device__ void column_dots(float (&x)[Br], const float* row, const float* T) {
#pragma unroll
  for (int r = 0; r < Br; ++r) x[r] = 0.f;
  for (int d = 0; d < D; d += 4) {
    const float4 a = *reinterpret_cast<const float4*>(row + d);
#pragma unroll
    for (int r = 0; r < Br; ++r) {
      const float4 b = *reinterpret_cast<const float4*>(T + r * D + d);  // broadcast
      x[r] = fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, fmaf(a.w, b.w, x[r]))));
    }
  }
}

// dst[0..3] += v with fp32 atomics: other blocks add to the same dQ rows in an order nobody
// fixes. Hopper has a 16-byte atomic add (CUDA >= 12.1); other GPUs do four 4-byte ones.
__device__ void atomic_add4(float* dst, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1))
  atomicAdd(reinterpret_cast<float4*>(dst), v);
#else
  atomicAdd(dst, v.x);
  atomicAdd(dst + 1, v.y);
  atomicAdd(dst + 2, v.z);
  atomicAdd(dst + 3, v.w);
#endif
}

// acc += a · x, component by component.
__device__ void axpy4(float4& acc, float a, float4 x) {
  acc.x = fmaf(a, x.x, acc.x);
  acc.y = fmaf(a, x.y, acc.y);
  acc.z = fmaf(a, x.z, acc.z);
  acc.w = fmaf(a, x.w, acc.w);
}

// Grid: ceil(rows / 256) blocks of 256 threads, one thread per query row (b, h, i); rows =
// B · Hq · Nq, and row r of o, d_o is floats [r · D, r · D + D).
template <int D>
__global__ void __launch_bounds__(256)
    flash_backward_delta_kernel(const float* __restrict__ o, const float* __restrict__ d_o, float* __restrict__ delta,
                                int64_t rows) {
  const int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // TODO(2) (≈ 10 lines): a real row (row < rows) writes D_i = rowsum(dO_i ∘ O_i) to delta[row],
  //          reading both rows as float4 (lesson: "05 · D_i instead of a row-wide sum").
}

// Grid: (key tiles, KV heads, batch). Block: 2·Bc threads.
template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                          const float* __restrict__ d_o, const float* __restrict__ lse, const float* __restrict__ delta,
                          float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv, int heads_q,
                          int seq_q, int seq_k, float scale, bool causal) {
  extern __shared__ float4 smem4[];              // float4: 16-byte alignment for the tile copies
  float* K_j = reinterpret_cast<float*>(smem4);  // [Bc][D + 4]
  float* V_j = K_j + Bc * (D + 4);               // [Bc][D + 4]
  float* Q_i = V_j + Bc * (D + 4);               // [Br][D]
  float* dO_i = Q_i + Br * D;                    // [Br][D]
  float* P_ij = dO_i + Br * D;                   // [Br][Bc + 4]
  float* dS_ij = P_ij + Br * (Bc + 4);           // [Br][Bc + 4]
  float* L_i = dS_ij + Br * (Bc + 4);            // [Br]
  float* D_i = L_i + Br;                         // [Br]

  const int G = heads_q / gridDim.y;                                // query heads per KV head
  const int64_t bk = int64_t(blockIdx.z) * gridDim.y + blockIdx.y;  // b·Hkv + hk
  const int k0 = blockIdx.x * Bc;                                   // first key of the tile
  const bool v_side = threadIdx.x < Bc;                             // V side: rows of dV_j; K side: rows of dK_j
  const int c = threadIdx.x % Bc;                                   // this thread's row of the key tile
  const int key = k0 + c;                                           // ... and its key position (may be >= seq_k)
  const int off = seq_k - seq_q;  // bottom-right causal alignment: i sees keys <= i + off

  load_tile<D>(K_j, D + 4, k + bk * seq_k * D, k0, Bc, seq_k);
  load_tile<D>(V_j, D + 4, v + bk * seq_k * D, k0, Bc, seq_k);

  float dKV[D];  // this thread's row of dV_j (V side) or of dK_j before the scale (K side)
#pragma unroll
  for (int d = 0; d < D; ++d) dKV[d] = 0.f;

  const FlashBackwardTiles tiles = flash_backward_query_tiles(k0, seq_q, seq_k, causal, Br);
  for (int g = 0; g < G; ++g) {
    const int64_t bh = int64_t(blockIdx.z) * heads_q + int64_t(blockIdx.y) * G + g;  // b·Hq + h
    const float* q_bh = q + bh * seq_q * D;
    const float* do_bh = d_o + bh * seq_q * D;
    float* dq_bh = dq + bh * seq_q * D;

    for (int t = tiles.first; t < tiles.end; ++t) {
      // snippet-begin: load-query-tile
      const int q0 = t * Br;  // first query row of the tile
      load_tile<D>(Q_i, D, q_bh, q0, Br, seq_q);
      load_tile<D>(dO_i, D, do_bh, q0, Br, seq_q);
      if (threadIdx.x < Br) {
        const int i = q0 + threadIdx.x;
        L_i[threadIdx.x] = i < seq_q ? lse[bh * seq_q + i] : 0.f;
        D_i[threadIdx.x] = i < seq_q ? delta[bh * seq_q + i] : 0.f;
      }
      __syncthreads();  // Q_i, dO_i, L_i, D_i (and, the first time, K_j, V_j) are complete: other threads wrote them
      // snippet-end: load-query-tile

      float x[Br];  // this thread's column of the tile: S_ij / scale (V side) or dP_ij (K side)
      // TODO(3) (≈ 2 lines): fill x with column_dots: the V side's key row of K_j against the rows
      //          of Q_i, the K side's row of V_j against the rows of dO_i (lesson: "05 · Two
      //          sides of a block").

      if (v_side) {
        // TODO(4) (≈ 6 lines): column c of P_ij into shared memory: recomputed from S and L_i
        //          where row i sees this key, 0 where it does not (a key past seq_k, a row past
        //          seq_q, the causal mask) (lesson: "05 · Recomputing P from L").
      }
      __syncthreads();  // P_ij is complete: the K side reads the columns the V side wrote

      if (!v_side) {
        // TODO(5) (≈ 3 lines): column c of dS_ij into shared memory, from P_ij, dP_ij (x) and D_i
        //          (lesson: "05 · dS from the softmax Jacobian").
      }
      __syncthreads();  // dS_ij is complete: every thread reads it (the K side its column, all of them rows for dQ)

      // TODO(6) (≈ 12 lines): add this tile's contribution to the thread's row: Σ over the Br rows
      //          of P_ij[r][c] · dO_i[r] (V side) or dS_ij[r][c] · Q_i[r] (K side), reading the
      //          tile rows as float4 (lesson: "05 · Two sides of a block").

      // dQ_i += scale · dS_ij K_j, [Br][D]: thread t owns the float4 column d of it, in the rows
      // r0, r0 + kRowStep, r0 + 2·kRowStep, ... (the lanes of a warp: consecutive columns).
      constexpr int kRowStep = kThreads / (D / 4);  // D = 128: 2, D = 64: 4, D = 32: 8
      const int d = 4 * (threadIdx.x % (D / 4)), r0 = threadIdx.x / (D / 4);
      float4 dQ_acc[Br / kRowStep];
      // TODO(7) (≈ 20 lines): this thread's float4s of dS_ij K_j (a float4 of K_j serves all its
      //          rows, a float4 of a dS_ij row four keys), then each real row (< seq_q) adds scale
      //          times its float4 to dq with atomic_add4 (lesson: "05 · Accumulating dQ: atomics
      //          or a second pass").
      __syncthreads();  // every thread is done with Q_i, dO_i, P_ij, dS_ij before the next tile overwrites them
    }
  }

  // TODO(8) (≈ 7 lines): a real key (key < seq_k) writes its row: dV_j (V side) to dv, scale · dK_j
  //          (K side) to dk (lesson: "05 · Two sides of a block").
}

template <int D>
void launch(const float* q, const float* k, const float* v, const float* o, const float* d_o, const float* lse,
            float* dq, float* dk, float* dv, float* workspace, const course::AttentionParams& p, cudaStream_t stream) {
  // dQ is accumulated with atomics by every key tile: it must start at zero.
  CUDA_CHECK(cudaMemsetAsync(dq, 0, sizeof(float) * size_t(p.q_elems()), stream));
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.seq_q;
  flash_backward_delta_kernel<D><<<unsigned((rows + 255) / 256), 256, 0, stream>>>(o, d_o, workspace, rows);
  CUDA_CHECK_LAUNCH();

  // More than the default 48 KiB of dynamic shared memory (D = 128: 54 KiB) must be asked for.
  CUDA_CHECK(cudaFuncSetAttribute(flash_backward_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(smem_bytes<D>())));
  const dim3 grid((p.seq_k + Bc - 1) / Bc, p.heads_kv, p.batch);
  flash_backward_kernel<D><<<grid, kThreads, smem_bytes<D>(), stream>>>(
      q, k, v, d_o, lse, workspace, dq, dk, dv, p.heads_q, p.seq_q, p.seq_k, p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

size_t flash_backward_workspace_bytes(const course::AttentionParams& p) {
  return sizeof(float) * size_t(p.batch) * size_t(p.heads_q) * size_t(p.seq_q);
}

void flash_backward(const float* q, const float* k, const float* v, const float* o, const float* d_o, const float* lse,
                    float* dq, float* dk, float* dv, float* workspace, const course::AttentionParams& p,
                    cudaStream_t stream) {
  const char* fn = "flash_backward";
  course::require_attention_tensors(q, k, v, o, p, fn);
  const char* names[4] = {"d_o", "dq", "dk", "dv"};
  const void* ptrs[4] = {d_o, dq, dk, dv};
  for (int t = 0; t < 4; ++t) {
    course::require_not_null(ptrs[t], fn, names[t]);
    course::require_aligned(ptrs[t], 16, fn, names[t]);
  }
  course::require_not_null(lse, fn, "lse");
  course::require_not_null(workspace, fn, "workspace");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are day 10)");

  switch (p.head_dim) {
    case 32:
      launch<32>(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
      break;
    case 64:
      launch<64>(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
      break;
    default:
      launch<128>(q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
      break;
  }
}
