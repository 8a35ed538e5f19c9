// The CPU reference: the single source of truth every GPU test compares against.
//
// Straightforward loops, accumulated in double, rounded to float once at the end. It is slow
// on purpose-free grounds: nothing here is clever, so it is easy to trust (and it is tested
// against closed forms in common/tests/test_reference.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include "attention_params.h"

namespace course::ref {

// c = a + b, element-wise (day 01's first exercise).
std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b);

// C[M, N] = A[M, K] · B[N, K]^T  (both operands row-major; the shape of Q·K^T).
std::vector<float> matmul_abt(const std::vector<float>& a, const std::vector<float>& b, int m,
                              int n, int k);

// Per-row statistics of x[rows, cols].
std::vector<float> row_max(const std::vector<float>& x, int rows, int cols);
std::vector<float> row_sum(const std::vector<float>& x, int rows, int cols);
// Row-wise softmax, computed as exp(x - max) / sum exp(x - max).
std::vector<float> softmax_rows(const std::vector<float>& x, int rows, int cols);

// O = softmax(scale · Q·K^T + mask) · V with the semantics of attention_params.h.
std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const AttentionParams& p);

// Decode attention over a paged KV cache (PagedParams in attention_params.h).
std::vector<float> paged_decode_attention(const std::vector<float>& q,
                                          const std::vector<float>& k_cache,
                                          const std::vector<float>& v_cache,
                                          const std::vector<int32_t>& block_table,
                                          const std::vector<int32_t>& context_lens,
                                          const PagedParams& p);

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

}  // namespace course::ref
