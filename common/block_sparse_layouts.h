// Block-sparse layouts (day 10 · 03) in BSR form, course::ref::BlockSparseLayout: query block r
// attends to key blocks col_idx[row_ptr[r] .. row_ptr[r+1]), ascending. One layout serves every
// (batch, head). Used by the tests, the bench and the lesson; implemented in
// block_sparse_layouts.cpp and tested in common/tests/test_block_sparse_layouts.cpp.
//
// Every builder takes the problem's Nq, Nk and the block size (square blocks, block × block)
// and returns a valid layout: row_ptr of ceil(Nq/block) + 1 entries from 0, col_idx sorted
// and unique in each row, every id in [0, ceil(Nk/block)).
// Block-diagonal alignment is bottom-right, like the causal mask: query block r lines up with
// key block r + (tiles_n - tiles_m).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference.h"

namespace course::sparse {

using ref::BlockSparseLayout;

int tiles_of(int n, int block);  // ceil(n / block)

// Band: query block r sees key blocks diag(r) - radius .. diag(r) + radius (clipped).
BlockSparseLayout local_band(int seq_q, int seq_k, int radius, int block = 64);
// Global tokens: the first g query blocks see every key block, and every query block sees the
// first g key blocks.
BlockSparseLayout global_blocks(int seq_q, int seq_k, int g, int block = 64);
// Random: each query block sees per_row distinct key blocks drawn from `seed` (deterministic on
// every platform: its own generator, no std distribution).
BlockSparseLayout random_blocks(int seq_q, int seq_k, int per_row, uint64_t seed, int block = 64);
// The union of two layouts over the same grid (BigBird = band ∪ global ∪ random).
BlockSparseLayout union_of(const BlockSparseLayout& a, const BlockSparseLayout& b);
BlockSparseLayout bigbird(int seq_q, int seq_k, int radius, int g, int per_row, uint64_t seed, int block = 64);
// Drops the key blocks that lie entirely above the causal diagonal of their query block (no row
// of the block can see any of their keys). The causal mask then applies inside the rest.
BlockSparseLayout causal_trim(const BlockSparseLayout& layout, int seq_q, int seq_k);

// Kept blocks / all blocks of the grid.
double density(const BlockSparseLayout& layout, int seq_q, int seq_k);

// Throws std::invalid_argument naming the field ('block_m', 'block_n', 'row_ptr', 'col_idx')
// when the layout is not valid for an Nq × Nk problem: block_m/block_n not `block`, row_ptr of
// the wrong size, not starting at 0, decreasing, or not ending at col_idx.size(); a col_idx out
// of [0, ceil(Nk/block_n)), or not strictly ascending within its row (unsorted or duplicate).
void check_layout(const BlockSparseLayout& layout, int seq_q, int seq_k, int block, const char* launcher);

}  // namespace course::sparse
