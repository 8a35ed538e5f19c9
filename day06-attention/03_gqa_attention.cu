// Day 06 · Exercise 03 · grouped-query attention (prefill): K_j/V_j tiles shared by a whole group.
// Lesson: day06-attention/README.md, section "03 · GQA". Test: make test EX=03_gqa_attention
//
// YOUR TASK: fill in the TODO(1)..TODO(8) markers. Everything else (thread layout, shared
// tiles, launcher checks) is given; exercise 02's flash-attention kernel is the template for
// the loop body.
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
  const int i = 0;  // TODO(2): the query position of packed row r = i·G + g (Lesson "03 · GQA" › "Packing the group")
  const int h = 0;  // TODO(2): its query head: head g of KV head hk's group, so that h / G == hk
  const int diag = seq_k - seq_q;        // bottom-right alignment: key j visible iff j <= i + diag

  // Keys past the last visible key of the block's LAST row are never needed: whole-tile skipping.
  int kv_end = seq_k;
  // TODO(3): when causal, stop at the last key the block's LAST packed row can see (careful: that
  //          row's query POSITION, not its packed index), never past seq_k (Lesson "03 · GQA" › "Causal with packed rows").

  const float4* k_head = reinterpret_cast<const float4*>(k) + (size_t(b) * heads_kv + hk) * seq_k * kVecs;
  const float4* v_head = reinterpret_cast<const float4*>(v) + (size_t(b) * heads_kv + hk) * seq_k * kVecs;
  const size_t q_row = ((size_t(b) * heads_q + h) * seq_q + i) * kVecs;

  // Lane `part` owns float4 columns part, part + 4, part + 8, ...: the 4 lanes of a row then read
  // 4 neighbouring float4s of a K_j row (64 contiguous bytes), free of shared-memory bank conflicts.
  // Q_i is pre-scaled by scale·log2(e) so the softmax can use exp2 directly.
  float4 q_i[kMyVecs], o_i[kMyVecs];
  for (int c = 0; c < kMyVecs; ++c) {
    // TODO(4): load float4 column part + c·4 of this row of Q (zeros when !active), multiplied by
    //          scale_log2, into q_i[c]; start o_i[c] at zero (Lesson "03 · GQA" › "TODO walk-through").
  }
  float m_i = -INFINITY, l_i = 0.f;  // running max (log2 units) and running sum of this row

  for (int j0 = 0; j0 < kv_end; j0 += kKeysPerTile) {
    // The whole block loads K_j and V_j once, coalesced; rows past seq_k become zeros.
    for (int e = threadIdx.x; e < kKeysPerTile * kVecs; e += kThreads) {
      // TODO(5): element e is float4 e % kVecs of tile row e / kVecs, key j = j0 + e / kVecs: copy it
      //          from k_head / v_head into k_tile / v_tile, zeros for j >= seq_k (Lesson "03 · GQA" › "One tile, G heads").
    }
    __syncthreads();  // the tile is complete before any row reads it

    // TODO(6): S_ij for the kKeysPerTile keys of the tile: each of the row's 4 lanes dots its own
    //          float4 columns of q_i with k_tile[jj], __shfl_xor_sync sums the 4 lanes; keys that are
    //          masked (j >= seq_k, causal j > i + diag) or rows that are !active get -inf (Lesson "03 · GQA" › "TODO walk-through").
    // TODO(7): online softmax, as in exercise 02 but in log2 units (exp2f): new max m_new, rescale
    //          l_i and o_i by exp2f(m_i - m_new), add p = exp2f(s - m_new) and p·v_tile[jj]; a row
    //          that has seen only -inf must not compute -inf - (-inf) (Lesson "03 · GQA" › "TODO walk-through").
    __syncthreads();  // every row is done with this tile before the next one overwrites it
  }

  // O_i = O_i / ℓ_i; a row that saw no key (ℓ_i = 0) writes zeros, never 0/0.
  // TODO(8): active rows write O_i / ℓ_i to o at q_row (zeros when ℓ_i == 0) (Lesson "03 · GQA" › "TODO walk-through").
}

template <int D>
void launch(const float* q, const float* k, const float* v, float* o,
            const course::AttentionParams& p, cudaStream_t stream) {
  // One block per (64 packed rows, KV head, batch): the G heads of a group share each block.
  const long long rows = (long long)p.seq_q * p.group_size();
  const dim3 grid(1, p.heads_kv, p.batch);  // TODO(1): x must cover all `rows` packed rows, kRowsPerBlock per block
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
