// Day 10 · Exercise 08 · KV-cache compression (H2O / SnapKV) — the contract.
//
// After a long prompt the KV cache holds L tokens per sequence, and every decode step reads all
// of them. Compression keeps `budget` of them per sequence and KV head, chosen by the attention
// the last W prompt tokens (the observation window) paid to each cached key, and copies them
// into a new, smaller paged cache that exercise 06's split_kv_decode reads unchanged.
//
// Inputs (device pointers):
//   q_window          __half [B, Hq, W, D]   queries of the last W tokens: row i of sequence b is
//                                            the query of the token at position L − W + i
//   k_cache, v_cache  __half [num_blocks, Hkv, block_size, D]    exercise 06's paged layout:
//   block_table       int32 [B, max_blocks_per_seq]              token t of sequence b is slot
//   context_lens      int32 [B]                                  t % block_size of physical block
//                                                                block_table[b][t / block_size]
//   L = context_lens[b], 0 <= L <= max_blocks_per_seq · block_size (not checked: it lives on the
//   device). Slots at or past L hold garbage (NaN in the tests) and never influence anything.
// Outputs (device pointers), with out_blocks = kv_compress_out_blocks(p, c) = ceil(budget / block_size):
//   k_out, v_out      __half [B · out_blocks, Hkv, block_size, D]   the new pool
//   out_block_table   int32 [B, out_blocks]      entry (b, i) = b · out_blocks + i: block i of
//                                                sequence b is physical block b · out_blocks + i
//   out_context_lens  int32 [B]                  the new length, min(L, budget)
//   kept_indices      int32 [B, Hkv, budget]     for each (b, KV head): the positions of the kept
//                                                tokens, ascending; entries at or past the new
//                                                length are −1
// The token kept at rank r (kept_indices[b][hk][r]) becomes token r of the new cache: its K and V
// rows are copied bit for bit to slot r % block_size of block b · out_blocks + r / block_size.
// Slots at or past the new length are not written. Read the result with 06's launcher and
// kv_compress_out_params(p, c) (same heads, head_dim and block_size; the new pool and table).
//
// Which tokens. L <= budget: all of them, in order (no score is computed). L > budget:
//   sinks        [0, n_sink)                  always kept (attention sinks)
//   recent       [L − n_recent, L)            always kept (the recent window)
//   candidates   [n_sink, L − n_recent)       the budget − n_sink − n_recent of them with the
//                                             highest pooled score are kept
// so exactly min(L, budget) tokens are kept by every KV head. Each KV head chooses its own tokens
// (kept_indices differ across heads); all heads keep the same number, so one block table and
// one length per sequence serve every head.
//
// Scores (per sequence b and KV head hk; fp32 on the GPU). Window row i of query head h sees the
// keys j <= L − W + i (causal, bottom-right aligned: the window's last row is token L − 1) and
// gives each of them its softmax probability
//   P_{h,i}(j) = exp(s_{h,i,j}) / Σ_{j' <= L − W + i} exp(s_{h,i,j'}),   s = scale · q_{h,i} · k_j
// (scale: PagedParams::softmax_scale()). The key's score sums them over the G = Hq / Hkv query
// heads of the KV head (h = hk · G … hk · G + G − 1) and the W rows:
//   score(j) = Σ_h Σ_i P_{h,i}(j)
// then a max pool over neighbouring keys (SnapKV's clustering; pool_kernel = 1: none):
//   pooled(j) = max { score(j') : |j' − j| <= (pool_kernel − 1) / 2, 0 <= j' < L }
// Ties: candidates with equal pooled scores (equal as fp32 values) are ranked by token index,
// the lower index first. The kernels reduce in a fixed order (no atomics on floats), so the same
// inputs give the same kept tokens on every run.
//
// Limits: head_dim 32, 64 or 128; any block_size >= 1; window >= 1; n_sink, n_recent >= 0;
// n_sink + n_recent <= budget; window <= budget (so a sequence that is compressed, L > budget,
// holds all W window tokens); pool_kernel odd, 1 … 31. All pointers 16-byte aligned except the
// int32 arrays. `workspace` must hold kv_compress_workspace_bytes(p, c) bytes (fp32 statistics
// and scores). Throws std::invalid_argument naming the field (q_window, k_cache, v_cache,
// block_table, context_lens, k_out, v_out, out_block_table, out_context_lens, kept_indices,
// workspace, batch, heads_q, heads_kv, head_dim, block_size, num_blocks, max_blocks_per_seq,
// window, n_sink, n_recent, budget, pool_kernel) before any launch. Enqueues on `stream` only.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "attention_params.h"

struct KvCompressParams {
  int window = 32;      // W: observation-window rows per query head
  int n_sink = 4;       // first tokens always kept
  int n_recent = 32;    // last tokens always kept
  int budget = 4096;    // tokens kept per sequence and KV head when L > budget
  int pool_kernel = 7;  // odd: the max pool's width in tokens (1: no pooling)
};

// ---------------------------------------------------------------------------------------------
// Index helpers: the kernels call them, the [index] tests check them on the CPU alone.

// What a sequence of `len` tokens keeps (needs len >= 0, n_sink, n_recent >= 0,
// n_sink + n_recent <= budget). Tokens [0, sink_end) and [recent_begin, len) are kept whatever
// their score; the candidates [sink_end, recent_begin) compete for `topk` places; `kept` tokens
// in all. len <= budget: {len, len, 0, len} (everything kept, no candidate). len > budget:
// {n_sink, len − n_recent, budget − n_sink − n_recent, budget}.
struct KvKeepPlan {
  int sink_end, recent_begin, topk, kept;
};
__host__ __device__ KvKeepPlan kv_keep_plan(int len, int n_sink, int n_recent, int budget);

// The keys [begin, end) whose score the max pool of key t takes: t's neighbours within
// (pool_kernel − 1) / 2 on each side, cut to [0, len). Needs 0 <= t < len, pool_kernel odd >= 1;
// t itself is always inside.
struct KvRange {
  int begin, end;
};
__host__ __device__ KvRange kv_pool_range(int t, int len, int pool_kernel);

// Where the token of rank r of sequence b goes in the new cache: physical block
// b · out_blocks + r / block_size, slot r % block_size (needs 0 <= r < out_blocks · block_size).
struct KvSlot {
  int block, slot;
};
__host__ __device__ KvSlot kv_dest_slot(int b, int rank, int out_blocks, int block_size);

// The row (in units of head_dim elements) of a pool [num_blocks, Hkv, block_size, D] that holds
// slot `slot` of KV head hk in physical block `block`: element d of it is at row · D + d.
__host__ __device__ long long kv_pool_row(int block, int hk, int slot, int heads_kv, int block_size);

// ---------------------------------------------------------------------------------------------

// ceil(budget / block_size): blocks per sequence of the new cache.
int kv_compress_out_blocks(const course::PagedParams& p, const KvCompressParams& c);

// The PagedParams of the new cache: p with num_blocks = B · out_blocks and
// max_blocks_per_seq = out_blocks.
course::PagedParams kv_compress_out_params(const course::PagedParams& p, const KvCompressParams& c);

// Bytes of fp32 scratch: per window row and 128-key tile a partial (m, ℓ), per window row its
// (m, 1/ℓ), and per (sequence, KV head) the scores and pooled scores of max_blocks_per_seq ·
// block_size keys.
size_t kv_compress_workspace_bytes(const course::PagedParams& p, const KvCompressParams& c);

void kv_compress(const __half* q_window, const __half* k_cache, const __half* v_cache, const int32_t* block_table,
                 const int32_t* context_lens, __half* k_out, __half* v_out, int32_t* out_block_table,
                 int32_t* out_context_lens, int32_t* kept_indices, void* workspace, const course::PagedParams& p,
                 const KvCompressParams& c, cudaStream_t stream = 0);
