// Day 10 · Exercise 03 · block-sparse attention (fp32): visit only the listed key blocks, mask only partial ones.
// Lesson: day10-optimizations/03_block_sparse/README.md. Test: make test EX=03_block_sparse
//
// Exercise 01's tile machinery (flash_fp32_tiles.cuh) walks whatever key tiles it is given; here
// they come from a BSR layout: query block r visits key blocks col_idx[row_ptr[r] ..
// row_ptr[r + 1]). Nothing scans the dense row of Nk keys, so the work is proportional to the
// number of listed blocks. A listed block that the causal diagonal (or the end of the keys)
// cuts is "partial" and pays for the per-element test; every other listed block is "full" and
// runs exactly like a tile of dense attention (FlexAttention's full / partial blocks).
#include <cuda_runtime.h>

#include <cstdint>

#include "03_block_sparse.h"
#include "block_sparse_layouts.h"
#include "check_args.h"
#include "flash_fp32_tiles.cuh"
#include "smem_limit.h"

// ---- The BSR row walk (declared, with their contracts, in 03_block_sparse.h). Defined here, in
// the kernel's translation unit, so that nvcc inlines them into the kernel: no call, no stack
// frame, the registers of the same lines written inside it. The [index] tests call their host
// copies.

// Where the list of key blocks of the query tile starting at row q0 lies in col_idx.
__host__ __device__ BsrRowRange bsr_row_range(const int32_t* row_ptr, int q0) {
  BsrRowRange row{0, 0};  // empty: the row sees no key
  // snippet-begin: bsr-row
  const int r = q0 / kBlockSparseBlock;  // the query block this tile lies in
  row.first = row_ptr[r];
  row.count = row_ptr[r + 1] - row.first;  // may be 0: the row outputs zeros
  // snippet-end: bsr-row
  return row;
}

// The first key of the t-th key tile the query tile visits: the listed blocks in col_idx order,
// each walked as 64 / tile_keys consecutive tiles.
__host__ __device__ int bsr_tile_key0(const int32_t* col_idx, BsrRowRange row, int t, int tile_keys) {
  int kv0 = 0;
  // snippet-begin: bsr-tile
  const int k_sub = kBlockSparseBlock / tile_keys;  // tiles per listed block
  kv0 = col_idx[row.first + t / k_sub] * kBlockSparseBlock + (t % k_sub) * tile_keys;
  // snippet-end: bsr-tile
  return kv0;
}

// Full or partial: whether some row of the query tile cannot see some key of the key tile.
__host__ __device__ bool bsr_tile_needs_mask(int q0, int kv0, int tile_keys, int seq_k, int off, bool causal) {
  bool partial = kv0 + tile_keys > seq_k;  // keys past seq_k: the short last key block
  // snippet-begin: bsr-partial
  partial = partial || (causal && kv0 + tile_keys - 1 > q0 + off);
  // snippet-end: bsr-partial
  return partial;
}

namespace {

using flash_fp32::FlashConfig;
constexpr int kBlock = kBlockSparseBlock;

// One block per (query tile, query head, batch). The kernel's tile (BR × BC) divides the
// layout's 64 × 64 block: a query tile lies inside one query block, and each listed key block
// is kSub consecutive key tiles.
template <class C>
__global__ void __launch_bounds__(C::kThreads)
    block_sparse_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                        float* __restrict__ o, const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx,
                        int batch, int heads, int group, int seq_q, int seq_k, float scale, bool causal) {
  constexpr int BR = C::BR, BC = C::BC, D = C::D, kSub = kBlock / BC;
  static_assert(kBlock % BR == 0 && kBlock % BC == 0, "the kernel's tile must divide the layout's block");
  // A 1-D grid, query tile slowest: every (batch, head) of query tile 0 is launched before any
  // of tile 1. Row lengths differ wildly (BigBird's global rows list every block, band rows a
  // few); with the long rows of all heads starting first, none of them is left running alone
  // at the end of the grid.
  const int64_t n_bh = int64_t(batch) * heads;
  const int q0 = int(blockIdx.x / n_bh) * BR;
  const int64_t bh = blockIdx.x % n_bh;  // (batch, query head)
  const int64_t bh_kv = bh / group;      // GQA: query head h reads KV head h / G
  const int off = seq_k - seq_q;         // bottom-right alignment of the causal mask

  // The helpers above: this query tile's list of key blocks, the first key of its t-th key tile
  // (each listed block is kSub tiles of BC keys), and whether a tile needs the per-element mask.
  const BsrRowRange row = bsr_row_range(row_ptr, q0);
  auto tile_key0 = [=](int t) { return bsr_tile_key0(col_idx, row, t, BC); };
  auto needs_mask = [=](int kv0) { return bsr_tile_needs_mask(q0, kv0, BC, seq_k, off, causal); };
  auto visible = [=](int i, int key) { return !causal || key <= i + off; };

  flash_fp32::attend_tiles<C>(q + bh * seq_q * D, k + bh_kv * seq_k * D, v + bh_kv * seq_k * D, o + bh * seq_q * D, q0,
                              seq_q, seq_k, scale, row.count * kSub, tile_key0, needs_mask, visible);
}

template <class C>
void launch(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
            const int32_t* row_ptr, const int32_t* col_idx, cudaStream_t stream) {
  const auto kernel = block_sparse_kernel<C>;
  flash_fp32::allow_smem(kernel, C::kSmemBytes);
  const int64_t n_blocks = int64_t((p.seq_q + C::BR - 1) / C::BR) * p.batch * p.heads_q;
  kernel<<<unsigned(n_blocks), C::kThreads, C::kSmemBytes, stream>>>(
      q, k, v, o, row_ptr, col_idx, p.batch, p.heads_q, p.group_size(), p.seq_q, p.seq_k, p.softmax_scale(), p.causal);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void block_sparse_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                            const course::ref::BlockSparseLayout& layout, const int32_t* row_ptr,
                            const int32_t* col_idx, cudaStream_t stream) {
  const char* fn = "block_sparse_attention";
  flash_fp32::check_dense_args(q, k, v, o, p, fn);  // as exercise 01
  course::require_not_null(row_ptr, fn, "row_ptr");
  course::require_not_null(col_idx, fn, "col_idx");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");
  course::require(int64_t(p.seq_q / 32 + 1) * p.batch * p.heads_q < (int64_t(1) << 31), fn, "seq_q",
                  "times batch times heads_q is too large for one 1-D grid");
  // Sorted, unique, in-range ids are what make "visit each listed block once" correct: a
  // duplicate would be counted twice in the softmax, an out-of-range id would read past K.
  course::sparse::check_layout(layout, p.seq_q, p.seq_k, kBlock, fn);

  // Tiles that divide 64 × 64. At D = 128 a 64 × 64 tile needs 117 KiB: one block (4 warps) per
  // SM. 64 × 32 tiles (75 KiB) let three blocks share an SM, which hides the latency of the
  // scattered K/V tiles better; the bench (family block_sparse) shows the effect.
  const int smem_limit = course::smem_limit_per_block();
  auto go = [&](auto config) { launch<decltype(config)>(q, k, v, o, p, row_ptr, col_idx, stream); };
  switch (p.head_dim) {  // FlashConfig<D, BR, BC, kRowsPerThread>
    case 32:
      flash_fp32::with_first_fitting<FlashConfig<32, 64, 64, 8>>(smem_limit, go);
      break;
    case 64:
      flash_fp32::with_first_fitting<FlashConfig<64, 64, 64, 8>, FlashConfig<64, 64, 32, 8>>(smem_limit, go);
      break;
    default:
      flash_fp32::with_first_fitting<FlashConfig<128, 64, 32, 8>, FlashConfig<128, 32, 32, 4>>(smem_limit, go);
      break;
  }
}
