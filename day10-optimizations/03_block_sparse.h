// Day 10 · Exercise 03 · block-sparse attention (fp32) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V,  where query i may see key j only if the 64 × 64 block
//   (i / 64, j / 64) is listed in the layout; inside a listed block p.causal still applies
//   (bottom-right, key j visible iff j <= i + off, off = Nk − Nq).
//
// Layout: BSR (block compressed sparse rows), the convention of FlashInfer's block-sparse API
// and of FlexAttention's kv_num_blocks / kv_indices: query block r attends to the key blocks
// col_idx[row_ptr[r] .. row_ptr[r + 1]), strictly ascending. Blocks are 64 × 64
// (kBlockSparseBlock; the last query / key block of a sequence may be partial). ONE layout is
// shared by every (batch, head): the BigBird / Longformer patterns are the same for all heads.
// Builders: common/block_sparse_layouts.h.
//
// The layout is passed twice: `layout` on the host, which the launcher validates, and
// `row_ptr` / `col_idx` on the device (int32, the same arrays uploaded), which the kernel
// reads. Rows whose list is empty output zeros. Layouts, GQA and alignment as
// flash_attention_tuned (01): [B,H,N,D], head_dim 32, 64 or 128, 16-byte aligned pointers;
// p.window must be -1.
//
// Throws std::invalid_argument naming the field before any launch: q, k, v, o, row_ptr,
// col_idx (null device arrays), batch, heads_q, heads_kv, seq_q, seq_k, head_dim, window, and
// for the host layout block_m, block_n (must be 64), row_ptr (size ceil(Nq/64) + 1, from 0,
// non-decreasing, ending at col_idx.size()), col_idx (ids outside [0, ceil(Nk/64)), unsorted or
// duplicate ids in a row: rejected, not silently fixed).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_params.h"
#include "reference.h"  // course::ref::BlockSparseLayout

constexpr int kBlockSparseBlock = 64;

void block_sparse_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                            const course::ref::BlockSparseLayout& layout, const int32_t* row_ptr,
                            const int32_t* col_idx, cudaStream_t stream = 0);

// ---- The BSR row walk: the kernel's index helpers, for host and device. The kernel calls them;
// the tests tagged [index] check their host copies on the CPU (no GPU needed) against brute
// force over small random layouts. Writing their bodies in 03_block_sparse.cu is the exercise.

// Where a query tile's key blocks are listed: the tile whose first row is q0 (0 <= q0 < Nq, a
// tile lies inside one 64-row query block) attends to the key blocks
// col_idx[first], col_idx[first + 1], ..., col_idx[first + count − 1] of the layout whose
// row_ptr is given. count >= 0; count == 0 means the rows see no key (they output zeros).
struct BsrRowRange {
  int first;  // index into col_idx of the first listed key block
  int count;  // how many key blocks are listed
};
__host__ __device__ BsrRowRange bsr_row_range(const int32_t* row_ptr, int q0);

// The first key of the t-th key tile a query tile visits, 0 <= t < row.count · kSub, where the
// kernel's tiles hold tile_keys keys (tile_keys divides 64, kSub = 64 / tile_keys): the listed
// blocks in the order col_idx lists them, each as kSub consecutive tiles from its first key.
// row: what bsr_row_range returned for the query tile.
__host__ __device__ int bsr_tile_key0(const int32_t* col_idx, BsrRowRange row, int t, int tile_keys);

// Whether the key tile [kv0, kv0 + tile_keys) needs the per-element mask for the query tile
// whose rows start at q0 (q0 < seq_q), with off = seq_k − seq_q: true iff some row i >= q0 of
// the tile cannot see some key j of the tile, because j >= seq_k or (causal) j > i + off.
// False ("full") lets the tile run unmasked, exactly like a tile of dense attention. The answer
// does not depend on the tile's height: a row sees every key that the rows above it see.
__host__ __device__ bool bsr_tile_needs_mask(int q0, int kv0, int tile_keys, int seq_k, int off, bool causal);
