// Day 06 · Exercise 03 · grouped-query attention: one K_j/V_j tile in shared memory serves the G query heads of a group.
// Lesson: day06-attention/03_gqa_attention/README.md. Test: make test EX=03_gqa_attention
//
// Hq = G·Hkv query heads share Hkv KV heads; query head h reads KV head h / G. One thread block
// serves ONE KV head hk of one batch entry and Br "packed" rows: packed row r stands for query
// position i = r / G of query head hk·G + r % G (positions outer, the G heads inner). A block's
// Br rows are thus about Br / G positions of all G heads, and every K_j/V_j tile it stages in
// shared memory is used by all G heads at once: K and V stay [B, Hkv, Nk, D], never duplicated.
// The rest is exercise 02: one thread per (packed) row, S_ij, m_i, ℓ_i and O_i in its registers.
// YOUR TASK: TODO(1)..TODO(4), the packing. The per-row algorithm (02's TODOs) is given below.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "03_gqa_attention.h"
#include "check_attention_args.h"
#include "cuda_check.h"

namespace {

constexpr int Br = 64;  // packed rows per block = threads per block (one row each)
constexpr int Bc = 32;  // keys per K_j / V_j tile

// Q_i [Br][D + 4] (padded: thread r reads row r, see exercise 02), K_j [Bc][D], V_j [Bc][D].
template <int D>
constexpr size_t smem_bytes() {
  return sizeof(float) * size_t(Br * (D + 4) + 2 * Bc * D);
}

// Rows [row0, row0 + Bc) of one KV head ([n, D]) into a [Bc][D] tile, zeros past n; consecutive
// threads copy consecutive float4s of a row (coalesced).
template <int D>
__device__ void load_kv_tile(float* tile, const float* src, int row0, int n) {
  for (int e = threadIdx.x; e < Bc * (D / 4); e += blockDim.x) {
    const int r = e / (D / 4), c4 = e % (D / 4);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < n) x = reinterpret_cast<const float4*>(src + int64_t(row0 + r) * D)[c4];
    reinterpret_cast<float4*>(tile + r * D)[c4] = x;
  }
}

// S[c] = q_row · (row c of K_j), unscaled and unmasked (exercise 02, TODO 2).
template <int D>
__device__ void row_scores(const float* q_row, const float* K_j, float (&S)[Bc]) {
#pragma unroll
  for (int c = 0; c < Bc; ++c) S[c] = 0.f;
#pragma unroll
  for (int d = 0; d < D; d += 4) {
    const float4 qv = *reinterpret_cast<const float4*>(q_row + d);
#pragma unroll
    for (int c = 0; c < Bc; ++c) {
      const float4 kv = *reinterpret_cast<const float4*>(K_j + c * D + d);  // broadcast
      S[c] = fmaf(qv.x, kv.x, fmaf(qv.y, kv.y, fmaf(qv.z, kv.z, fmaf(qv.w, kv.w, S[c]))));
    }
  }
}

// One online-softmax step over a tile of masked scores S (exercise 02, TODOs 3 and 4): rescale
// ℓ_i and O_i to the new max, then O_i += P_ij · V_j. S is overwritten with P_ij.
template <int D>
__device__ void online_softmax_step(float (&S)[Bc], const float* V_j, float& m_i, float& l_i, float (&O_i)[D]) {
  float m_new = m_i;
#pragma unroll
  for (int c = 0; c < Bc; ++c) m_new = fmaxf(m_new, S[c]);
  const float m_sub = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: avoid -inf - -inf
  const float alpha = expf(m_i - m_sub);
  float row_sum = 0.f;
#pragma unroll
  for (int c = 0; c < Bc; ++c) {
    S[c] = expf(S[c] - m_sub);
    row_sum += S[c];
  }
  l_i = alpha * l_i + row_sum;
  m_i = m_new;
#pragma unroll
  for (int d = 0; d < D; ++d) O_i[d] *= alpha;
#pragma unroll
  for (int c = 0; c < Bc; ++c) {
#pragma unroll
    for (int d = 0; d < D; d += 4) {
      const float4 vv = *reinterpret_cast<const float4*>(V_j + c * D + d);  // broadcast
      O_i[d] = fmaf(S[c], vv.x, O_i[d]);
      O_i[d + 1] = fmaf(S[c], vv.y, O_i[d + 1]);
      O_i[d + 2] = fmaf(S[c], vv.z, O_i[d + 2]);
      O_i[d + 3] = fmaf(S[c], vv.w, O_i[d + 3]);
    }
  }
}

// Grid: (packed-row tiles, KV heads, batch). Block: Br threads.
template <int D>
__global__ void __launch_bounds__(Br)
    gqa_attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                         float* __restrict__ o, int heads_q, int seq_q, int seq_k, int group, float scale,
                         bool causal) {
  extern __shared__ float4 smem4[];              // float4: 16-byte alignment for the tile copies
  float* Q_i = reinterpret_cast<float*>(smem4);  // [Br][D + 4], packed rows
  float* K_j = Q_i + Br * (D + 4);               // [Bc][D]
  float* V_j = K_j + Bc * D;                     // [Bc][D]

  const int hk = blockIdx.y, b = blockIdx.z;  // this block's KV head and batch entry
  const int64_t kv_bh = int64_t(b) * gridDim.y + hk;
  const float* k_bh = k + kv_bh * seq_k * D;  // read by all G heads of the group
  const float* v_bh = v + kv_bh * seq_k * D;
  const int rows = seq_q * group;  // packed rows of (b, hk): Nq positions × G heads
  const int r0 = blockIdx.x * Br;  // first packed row of the tile
  const int r = threadIdx.x;       // this thread's row of Q_i
  const int off = seq_k - seq_q;   // bottom-right causal alignment
  float* q_row = Q_i + r * (D + 4);

  int i = 0;            // query position of packed row r0 + r
  int64_t qo_row = -1;  // its row of q and o, (b·Hq + h)·Nq + i; stays -1 past the last packed row
  // TODO(1) (≈ 5 lines): if packed row r0 + r exists (< rows), find its query position i and its
  //          row qo_row of q and o, the row of its own query head (lesson: "03 · Packing the group").

  // Each thread copies its own row of Q (scattered over G heads; once per block, so uncoalesced
  // reads cost little); zeros past the last packed row.
  for (int c4 = 0; c4 < D / 4; ++c4)
    reinterpret_cast<float4*>(q_row)[c4] =
        qo_row < 0 ? make_float4(0.f, 0.f, 0.f, 0.f) : reinterpret_cast<const float4*>(q + qo_row * D)[c4];

  int Tc = (seq_k + Bc - 1) / Bc;  // key tiles to visit
  // TODO(2) (≈ 5 lines): causal: visit only the tiles up to the one holding the last key that the
  //          tile's last real packed row may see, from its POSITION; none if that key is before 0
  //          (lesson: "03 · Causal with packed rows").

  float m_i = -INFINITY, l_i = 0.f;  // running max and sum of this row
  float O_i[D];                      // running Σ exp(score - m_i) · v
#pragma unroll
  for (int d = 0; d < D; ++d) O_i[d] = 0.f;

  for (int j = 0; j < Tc; ++j) {
    const int k0 = j * Bc;
    load_kv_tile<D>(K_j, k_bh, k0, seq_k);  // one copy of K_j, V_j for all G heads
    load_kv_tile<D>(V_j, v_bh, k0, seq_k);
    __syncthreads();  // K_j and V_j are complete (other threads wrote them); Q_i rows are each thread's own
    float S_ij[Bc];
    row_scores<D>(q_row, K_j, S_ij);
#pragma unroll
    for (int c = 0; c < Bc; ++c) {
      const int key = k0 + c;
      bool hidden = key >= seq_k;
      // TODO(3) (≈ 1 line): causal: also hide keys after this row's POSITION
      //          (lesson: "03 · Causal with packed rows").
      S_ij[c] = hidden ? -INFINITY : S_ij[c] * scale;
    }
    online_softmax_step<D>(S_ij, V_j, m_i, l_i, O_i);
    __syncthreads();  // every thread is done reading K_j and V_j before the next tile overwrites them
  }

  // TODO(4) (≈ 6 lines): a real packed row writes O_i / ℓ_i (zeros when ℓ_i == 0) to row qo_row of
  //          o, the row of its own query head (lesson: "03 · Epilogue: back to the heads").
}

template <int D>
void launch(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
            cudaStream_t stream) {
  // More than the default 48 KiB of dynamic shared memory (D = 128: 65 KiB) must be asked for.
  CUDA_CHECK(
      cudaFuncSetAttribute(gqa_attention_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<D>())));
  const int group = p.heads_q / p.heads_kv;
  const int64_t rows = int64_t(p.seq_q) * group;  // packed rows per (b, KV head)
  const dim3 grid(unsigned((rows + Br - 1) / Br), p.heads_kv, p.batch);
  gqa_attention_kernel<D><<<grid, Br, smem_bytes<D>(), stream>>>(q, k, v, o, p.heads_q, p.seq_q, p.seq_k, group,
                                                                 p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void gqa_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                   cudaStream_t stream) {
  const char* fn = "gqa_attention";
  course::require_attention_tensors(q, k, v, o, p, fn);
  course::require(int64_t(p.seq_q) * (p.heads_q / p.heads_kv) <= INT32_MAX, fn, "seq_q",
                  "times heads_q / heads_kv must fit in int (packed rows)");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are day 10)");

  switch (p.head_dim) {
    case 32:
      launch<32>(q, k, v, o, p, stream);
      break;
    case 64:
      launch<64>(q, k, v, o, p, stream);
      break;
    default:
      launch<128>(q, k, v, o, p, stream);
      break;
  }
}
