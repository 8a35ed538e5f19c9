// Day 06 · Exercise 02 · flash attention: the tiled online softmax in fp32, one thread per query row.
// Lesson: day06-attention/02_flash_attention/README.md. Test: make test EX=02_flash_attention
//
// One thread block owns one query tile Q_i (Br rows) of one (batch, head) and walks over the key
// tiles K_j, V_j (Bc keys each), staged in shared memory. Each of its Br threads owns one whole
// query row: its scores S_ij (Bc of them), its running max m_i and sum ℓ_i, and its output row
// O_i (D floats) all live in that thread's registers, so the softmax needs no communication.
// The Nq × Nk score matrix never exists: per query row only Bc scores at a time.
// YOUR TASK: TODO(1)..TODO(5), the algorithm itself. The tile loader, the shared-memory layout,
// the two barriers, the register arrays, the log-sum-exp output and the launcher are given.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "02_flash_attention.h"
#include "check_attention_args.h"
#include "cuda_check.h"
#include "fp32_tile.cuh"

namespace {

constexpr int Br = 64;  // query rows per block = threads per block (one row each)
constexpr int Bc = 32;  // keys per K_j / V_j tile

// Shared memory in floats: Q_i [Br][D + 4], K_j [Bc][D], V_j [Bc][D]. Thread r reads row r of
// Q_i; the pad of 4 floats puts consecutive rows in different banks (no 8-way conflict at D=64).
// K_j and V_j are read by all threads at the same address at once (a broadcast): no pad needed.
template <int D>
constexpr size_t smem_bytes() {
  return sizeof(float) * size_t(Br * (D + 4) + 2 * Bc * D);
}

// The tile loader (rows past n become zeros, coalesced float4 copies) is in fp32_tile.cuh.
using day06::load_tile;

// Grid: (query tiles, heads, batch). Block: Br threads.
template <int D>
__global__ void __launch_bounds__(Br)
    flash_attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                           float* __restrict__ o, float* __restrict__ lse, int seq_q, int seq_k, float scale,
                           bool causal) {
  extern __shared__ float4 smem4[];              // float4: 16-byte alignment for the tile copies
  float* Q_i = reinterpret_cast<float*>(smem4);  // [Br][D + 4]
  float* K_j = Q_i + Br * (D + 4);               // [Bc][D]
  float* V_j = K_j + Bc * D;                     // [Bc][D]

  const int64_t bh = int64_t(blockIdx.z) * gridDim.y + blockIdx.y;  // b·H + h
  const float* q_bh = q + bh * seq_q * D;
  const float* k_bh = k + bh * seq_k * D;
  const float* v_bh = v + bh * seq_k * D;
  const int q0 = blockIdx.x * Br;  // first query row of the tile
  const int r = threadIdx.x;       // this thread's row of Q_i
  const int i = q0 + r;            // ... and its query position (may be >= seq_q in the last tile)
  const int off = seq_k - seq_q;   // bottom-right causal alignment: i sees keys <= i + off
  const float* q_row = Q_i + r * (D + 4);

  load_tile<D>(Q_i, D + 4, q_bh, q0, Br, seq_q);

  int Tc = (seq_k + Bc - 1) / Bc;  // key tiles to visit
  // TODO(1) (≈ 4 lines): causal: visit only the tiles up to the one holding the last key that
  //          the tile's last real row may see; none if that key is before 0
  //          (lesson: "02 · Causal: whole-tile skipping").

  float m_i = -INFINITY;  // running max of this row's scores
  float l_i = 0.f;        // running sum of exp(score - m_i)
  float O_i[D];           // running Σ exp(score - m_i) · v, not yet divided by l_i
#pragma unroll
  for (int d = 0; d < D; ++d) O_i[d] = 0.f;

  for (int j = 0; j < Tc; ++j) {
    // snippet-begin: load-tiles
    const int k0 = j * Bc;  // first key of the tile
    load_tile<D>(K_j, D, k_bh, k0, Bc, seq_k);
    load_tile<D>(V_j, D, v_bh, k0, Bc, seq_k);
    __syncthreads();  // K_j and V_j (and, before the first tile, Q_i) are complete: other threads wrote them
    // snippet-end: load-tiles

    float S_ij[Bc];
    // TODO(2) (≈ 12 lines): this row's scores S_ij against the Bc keys of the tile, scaled, and
    //          -INFINITY for a key past seq_k or hidden by the causal mask; read Q_i and K_j as
    //          float4 (lesson: "02 · Scores and masks").

    float P_ij[Bc];
    // TODO(3) (≈ 12 lines): the online-softmax step for this tile (lesson: "02 · The online
    //          softmax"): the new running max, P_ij, and l_i and O_i re-expressed against the new
    //          max. A row that has seen no visible key yet must not compute -inf - (-inf).

    // TODO(4) (≈ 8 lines): add this tile's P_ij V_j to O_i, reading V_j as float4 (lesson: "02 · The online softmax").
    __syncthreads();  // every thread is done reading K_j and V_j before the next tile overwrites them
  }

  // TODO(5) (≈ 6 lines): a real row (i < seq_q) writes O_i / l_i to its row of o, or zeros when
  //          l_i == 0 (the row saw no key) (lesson: "02 · Epilogue").

  // The row's log-sum-exp, for the backward pass (exercise 05), when the caller asks for it:
  // L_i = m_i + ln ℓ_i of the scaled scores, −∞ for a row that saw no key.
  if (lse != nullptr && i < seq_q) lse[bh * seq_q + i] = l_i > 0.f ? m_i + logf(l_i) : -INFINITY;
}

template <int D>
void launch(const float* q, const float* k, const float* v, float* o, float* lse, const course::AttentionParams& p,
            cudaStream_t stream) {
  // More than the default 48 KiB of dynamic shared memory (D = 128: 65 KiB) must be asked for.
  CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(smem_bytes<D>())));
  const dim3 grid((p.seq_q + Br - 1) / Br, p.heads_q, p.batch);
  flash_attention_kernel<D>
      <<<grid, Br, smem_bytes<D>(), stream>>>(q, k, v, o, lse, p.seq_q, p.seq_k, p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void flash_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                     cudaStream_t stream, float* lse) {
  const char* fn = "flash_attention";
  course::require_attention_tensors(q, k, v, o, p, fn);
  course::require(p.heads_kv == p.heads_q, fn, "heads_kv", "must equal heads_q (grouped heads are exercise 03)");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are day 10)");

  switch (p.head_dim) {
    case 32:
      launch<32>(q, k, v, o, lse, p, stream);
      break;
    case 64:
      launch<64>(q, k, v, o, lse, p, stream);
      break;
    default:
      launch<128>(q, k, v, o, lse, p, stream);
      break;
  }
}
