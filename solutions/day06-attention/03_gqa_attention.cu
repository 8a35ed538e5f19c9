// Day 06 · Exercise 03 · grouped-query attention (prefill): K_j/V_j tiles shared by a whole group.
// Lesson: day06-attention/README.md, section "03 · GQA". Test: make test EX=03_gqa_attention
//
// Hq = G·Hkv query heads share Hkv KV heads. One thread block works on ONE KV head and packs
// the G query heads of its group into a single stream of rows, r = i·G + g (query position i,
// head g of the group). A block takes 64 consecutive packed rows, so every K_j/V_j tile it
// loads into shared memory serves all G heads at once: K/V traffic is divided by G compared
// with running G separate heads. The rest is flash attention (exercise 02): tiled online
// softmax with running m_i, ℓ_i, O_i per row, bottom-right causal mask, whole-tile skipping.
#include <cmath>
#include <cstdint>

#include "03_gqa_attention.h"
#include "check_args.h"
#include "cuda_check.h"

namespace {

constexpr int kRowsPerBlock = 64;   // Br: packed (position, head) rows per block
constexpr int kThreadsPerRow = 4;   // a row's D columns are split over 4 neighbouring lanes
constexpr int kThreads = kRowsPerBlock * kThreadsPerRow;
constexpr int kKeysPerTile = 32;    // Bc: keys per K_j/V_j tile; the scores S_ij live in registers
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
__global__ void __launch_bounds__(kThreads, 2)  // <= 128 registers: two blocks (16 warps) per SM
gqa_attention_kernel(const float* __restrict__ q, const float* __restrict__ k,
                     const float* __restrict__ v, float* __restrict__ o, int heads_q,
                     int heads_kv, int seq_q, int seq_k, float scale_log2, bool causal) {
  constexpr int kVecs = D / 4;                      // float4s per row of Q, K, V, O
  constexpr int kMyVecs = kVecs / kThreadsPerRow;   // float4s of a row this thread owns
  // K_j and V_j of one tile (Bc × D each; 32 KiB together at D = 128), read by all 64 rows.
  __shared__ float4 k_tile[kKeysPerTile][kVecs];
  __shared__ float4 v_tile[kKeysPerTile][kVecs];

  const int group = heads_q / heads_kv;  // G
  const int hk = blockIdx.y, b = blockIdx.z;
  const int part = threadIdx.x % kThreadsPerRow;
  const int rows = seq_q * group;        // packed rows of this KV head
  const int first_row = blockIdx.x * kRowsPerBlock;
  const int r = first_row + threadIdx.x / kThreadsPerRow;
  const bool active = r < rows;
  const int i = r / group;               // query position of the packed row
  const int h = hk * group + r % group;  // its query head: h / G == hk
  const int diag = seq_k - seq_q;        // bottom-right alignment: key j visible iff j <= i + diag

  // Keys past the last visible key of the block's LAST row are never needed: whole-tile skipping.
  int kv_end = seq_k;
  if (causal) kv_end = min(seq_k, (min(first_row + kRowsPerBlock, rows) - 1) / group + diag + 1);

  const float4* k_head = reinterpret_cast<const float4*>(k) + (size_t(b) * heads_kv + hk) * seq_k * kVecs;
  const float4* v_head = reinterpret_cast<const float4*>(v) + (size_t(b) * heads_kv + hk) * seq_k * kVecs;
  const size_t q_row = ((size_t(b) * heads_q + h) * seq_q + i) * kVecs;

  // Lane `part` owns float4 columns part, part + 4, part + 8, ...: the 4 lanes of a row then read
  // 4 neighbouring float4s of a K_j row (64 contiguous bytes), free of shared-memory bank conflicts.
  // Q_i is pre-scaled by scale·log2(e) so the softmax can use exp2 directly.
  float4 q_i[kMyVecs], o_i[kMyVecs];
  for (int c = 0; c < kMyVecs; ++c) {
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (active) x = reinterpret_cast<const float4*>(q)[q_row + part + c * kThreadsPerRow];
    q_i[c] = make_float4(x.x * scale_log2, x.y * scale_log2, x.z * scale_log2, x.w * scale_log2);
    o_i[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float m_i = -INFINITY, l_i = 0.f;  // running max (log2 units) and running sum of this row

  for (int j0 = 0; j0 < kv_end; j0 += kKeysPerTile) {
    // The whole block loads K_j and V_j once, coalesced; rows past seq_k become zeros.
    for (int e = threadIdx.x; e < kKeysPerTile * kVecs; e += kThreads) {
      const int j = j0 + e / kVecs;
      const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
      k_tile[e / kVecs][e % kVecs] = j < seq_k ? k_head[size_t(j) * kVecs + e % kVecs] : zero;
      v_tile[e / kVecs][e % kVecs] = j < seq_k ? v_head[size_t(j) * kVecs + e % kVecs] : zero;
    }
    __syncthreads();  // the tile is complete before any row reads it

    // S_ij = Q_i·K_jᵀ for the 32 keys of the tile; masked keys get -inf.
    float s_ij[kKeysPerTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < kKeysPerTile; ++jj) {
      float dot = 0.f;
#pragma unroll
      for (int c = 0; c < kMyVecs; ++c) {
        const float4 kv = k_tile[jj][part + c * kThreadsPerRow];
        dot += q_i[c].x * kv.x + q_i[c].y * kv.y + q_i[c].z * kv.z + q_i[c].w * kv.w;
      }
      dot += __shfl_xor_sync(0xffffffffu, dot, 1);  // sum the 4 lanes of the row
      dot += __shfl_xor_sync(0xffffffffu, dot, 2);
      const int j = j0 + jj;
      const bool visible = active && j < seq_k && (!causal || j <= i + diag);
      s_ij[jj] = visible ? dot : -INFINITY;
      tile_max = fmaxf(tile_max, s_ij[jj]);
    }

    // Online softmax: rescale the old ℓ_i and O_i to the new max, then add this tile.
    const float m_new = fmaxf(m_i, tile_max);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: avoid -inf - -inf
    const float alpha = exp2f(m_i - m_use);
    l_i *= alpha;
    for (int c = 0; c < kMyVecs; ++c) {
      o_i[c].x *= alpha; o_i[c].y *= alpha; o_i[c].z *= alpha; o_i[c].w *= alpha;
    }
#pragma unroll
    for (int jj = 0; jj < kKeysPerTile; ++jj) {
      const float p = exp2f(s_ij[jj] - m_use);  // exp2(-inf) = 0 for masked keys
      l_i += p;
#pragma unroll
      for (int c = 0; c < kMyVecs; ++c) {
        const float4 vv = v_tile[jj][part + c * kThreadsPerRow];
        o_i[c].x += p * vv.x; o_i[c].y += p * vv.y; o_i[c].z += p * vv.z; o_i[c].w += p * vv.w;
      }
    }
    m_i = m_new;
    __syncthreads();  // every row is done with this tile before the next one overwrites it
  }

  // O_i = O_i / ℓ_i; a row that saw no key (ℓ_i = 0) writes zeros, never 0/0.
  if (!active) return;
  const float inv_l = l_i > 0.f ? 1.f / l_i : 0.f;
  float4* o_row = reinterpret_cast<float4*>(o) + q_row;
  for (int c = 0; c < kMyVecs; ++c)
    o_row[part + c * kThreadsPerRow] =
        make_float4(o_i[c].x * inv_l, o_i[c].y * inv_l, o_i[c].z * inv_l, o_i[c].w * inv_l);
}

template <int D>
void launch(const float* q, const float* k, const float* v, float* o,
            const course::AttentionParams& p, cudaStream_t stream) {
  // One block per (64 packed rows, KV head, batch): the G heads of a group share each block.
  const long long rows = (long long)p.seq_q * p.group_size();
  const dim3 grid(unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), p.heads_kv, p.batch);
  gqa_attention_kernel<D><<<grid, kThreads, 0, stream>>>(q, k, v, o, p.heads_q, p.heads_kv,
                                                          p.seq_q, p.seq_k,
                                                          p.softmax_scale() * kLog2e, p.causal);
  CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void gqa_attention(const float* q, const float* k, const float* v, float* o,
                   const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "gqa_attention";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k, fn, "k");
  course::require_not_null(v, fn, "v");
  course::require_not_null(o, fn, "o");
  // float4 loads need 16-byte aligned rows (cudaMalloc gives 256-byte alignment).
  course::require(aligned16(q), fn, "q", "must be 16-byte aligned");
  course::require(aligned16(k), fn, "k", "must be 16-byte aligned");
  course::require(aligned16(v), fn, "v", "must be 16-byte aligned");
  course::require(aligned16(o), fn, "o", "must be 16-byte aligned");
  course::require_positive(p.batch, fn, "batch");
  course::require(p.batch <= 65535, fn, "batch", "must be <= 65535 (grid z)");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_kv <= 65535, fn, "heads_kv", "must be <= 65535 (grid y)");
  course::require(p.heads_q % p.heads_kv == 0, fn, "heads_kv", "must divide heads_q");
  course::require_positive(p.seq_q, fn, "seq_q");
  course::require_positive(p.seq_k, fn, "seq_k");
  course::require((long long)p.seq_q * p.group_size() <= 0x7fffffffLL, fn, "seq_q",
                  "times heads_q / heads_kv must fit in int");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (no sliding window here)");

  switch (p.head_dim) {
    case 32: launch<32>(q, k, v, o, p, stream); break;
    case 64: launch<64>(q, k, v, o, p, stream); break;
    default: launch<128>(q, k, v, o, p, stream); break;
  }
}
