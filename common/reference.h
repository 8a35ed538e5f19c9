// The CPU reference: the single source of truth every GPU test compares against.
//
// Straightforward loops, accumulated in double, rounded to float once at the end. It is slow
// on purpose-free grounds: nothing here is clever, so it is easy to trust (and it is tested
// against closed forms in common/tests/test_reference.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "attention_params.h"

namespace course {

// Shape of a rolling KV cache (day 10 · 02): the last window + 1 tokens of every sequence.
struct RingCacheParams {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int window = 0;     // w: a query sees itself and the w tokens before it; w + 1 slots
  float scale = 0.f;  // 0 means 1/sqrt(D)

  int capacity() const { return window + 1; }
  float softmax_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(float(head_dim)); }
  int group_size() const { return heads_q / heads_kv; }
  int kv_head_of(int h) const { return h / group_size(); }
  int64_t q_elems() const { return int64_t(batch) * heads_q * head_dim; }
  int64_t cache_elems() const { return int64_t(batch) * heads_kv * capacity() * head_dim; }
};

}  // namespace course

namespace course::ref {

// c = a + b, element-wise (day 01's first exercise).
std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b);

// C[M, N] = A[M, K] · B[N, K]^T  (both operands row-major; the shape of Q·K^T).
std::vector<float> matmul_abt(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k);

// Per-row statistics of x[rows, cols].
std::vector<float> row_max(const std::vector<float>& x, int rows, int cols);
std::vector<float> row_sum(const std::vector<float>& x, int rows, int cols);
// Row-wise softmax, computed as exp(x - max) / sum exp(x - max).
std::vector<float> softmax_rows(const std::vector<float>& x, int rows, int cols);

// O = softmax(scale · Q·K^T + mask) · V with the semantics of attention_params.h.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const AttentionParams& p);

// Decode attention over a paged KV cache (PagedParams in attention_params.h).
std::vector<float> paged_decode_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                          const std::vector<float>& v_cache, const std::vector<int32_t>& block_table,
                                          const std::vector<int32_t>& context_lens, const PagedParams& p);

// Block-sparse layout in CSR form over tiles of block_m queries × block_n keys: query tile r
// attends to key tiles col_idx[row_ptr[r] .. row_ptr[r+1]). The same layout is used for every
// (batch, head). Causal / window masks of the params still apply inside the kept tiles.
struct BlockSparseLayout {
  int block_m = 64;
  int block_n = 64;
  std::vector<int32_t> row_ptr;  // size ceil(Nq / block_m) + 1
  std::vector<int32_t> col_idx;  // key-tile indices, ascending within a row
};
std::vector<float> block_sparse_attention(const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const AttentionParams& p,
                                          const BlockSparseLayout& layout);

// Decode over a rolling (ring) KV cache of a sliding-window model (day 10 · 02; implemented in
// reference_window.cpp). One query token per sequence:
//   q, o: [B, Hq, D]   k_cache, v_cache: [B, Hkv, window + 1, D], token t in slot t % (window + 1)
//   seq_lens: int32 [B], tokens written so far (the query is token seq_lens[b] - 1); the query
//   sees tokens max(0, L - 1 - window) .. L - 1. Slots not yet written are never read.
std::vector<float> ring_decode_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                         const std::vector<float>& v_cache, const std::vector<int32_t>& seq_lens,
                                         const RingCacheParams& p);

}  // namespace course::ref
