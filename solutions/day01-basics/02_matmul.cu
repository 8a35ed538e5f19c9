// Day 01 · Exercise 02 · matmul C = A·Bᵀ: one thread per output, then shared-memory tiles.
// Lesson: day01-basics/02_matmul/README.md. Test: make test EX=02_matmul
#include <cstdint>

#include "02_matmul.h"
#include "check_args.h"
#include "cuda_check.h"

namespace {

// 32 = one warp across a tile row, so every tile row is loaded as one 128-byte coalesced
// transaction; 32×32 threads = 1024, the most a block may hold.
constexpr int kTile = 32;
// Naive kernel block: 32 consecutive columns per warp, 8 rows per block.
constexpr int kNaiveX = 32, kNaiveY = 8;
constexpr int kMaxGridY = 65535;  // the y dimension of a grid is limited to 65535 blocks

// Checks shared by both launchers: pointers, signs, and the grid's y limit (rows go on y).
void check_matmul_args(const char* who, const float* a, const float* b, const float* c, int m, int n, int k,
                       int rows_per_block) {
  course::require_not_null(a, who, "a");
  course::require_not_null(b, who, "b");
  course::require_not_null(c, who, "c");
  course::require_non_negative(m, who, "m");
  course::require_non_negative(n, who, "n");
  course::require_non_negative(k, who, "k");
  course::require((int64_t(m) + rows_per_block - 1) / rows_per_block <= kMaxGridY, who, "m",
                  "is too large for one grid (at most 65535 row blocks)");
}

}  // namespace

__global__ void matmul_naive_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // Thread (row, col) owns C[row, col]. x varies fastest within a warp, so it indexes columns:
  // the warp's 32 threads share A's row (one broadcast load) and write 32 adjacent C entries.
  // snippet-begin: naive-thread
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;  // the last blocks overhang C when m, n are not multiples
  const float* a_row = a + int64_t(row) * k;
  const float* b_row = b + int64_t(col) * k;  // row `col` of B is column `col` of Bᵀ
  float acc = 0.f;
  for (int t = 0; t < k; ++t) acc += a_row[t] * b_row[t];
  c[int64_t(row) * n + col] = acc;
  // snippet-end: naive-thread
}

void matmul_naive(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  check_matmul_args("matmul_naive", a, b, c, m, n, k, kNaiveY);
  if (m == 0 || n == 0) return;  // an empty C: nothing to launch

  const dim3 block(kNaiveX, kNaiveY);
  // snippet-begin: naive-grid
  const dim3 grid((n + kNaiveX - 1) / kNaiveX, (m + kNaiveY - 1) / kNaiveY);
  // snippet-end: naive-grid
  matmul_naive_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_CHECK_LAUNCH();
}

__global__ void matmul_tiled_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // The block computes the kTile×kTile tile of C at (row0, col0). Each step stages a
  // kTile-wide slice of the reduction dimension: A_tile = A[row0.., t0..], B_tile = B[col0.., t0..].
  // Every staged float is then read kTile times from shared memory instead of from HBM.
  __shared__ float a_tile[kTile][kTile];
  // +1 column of padding: the inner loop reads b_tile[tx][t], a column walk across the warp.
  // Without padding those 32 addresses are kTile floats apart: all in one bank, 32-way conflict.
  __shared__ float b_tile[kTile][kTile + 1];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;

  float acc = 0.f;
  for (int t0 = 0; t0 < k; t0 += kTile) {
    // Both loads: the warp (fixed ty, tx = 0..31) reads 32 consecutive floats of one row, one
    // coalesced transaction. Outside A, B or past k: store 0, which adds nothing to the sum.
    // snippet-begin: tile-step
    const int a_row = row0 + ty, b_row = col0 + ty, t = t0 + tx;
    a_tile[ty][tx] = (a_row < m && t < k) ? a[int64_t(a_row) * k + t] : 0.f;
    b_tile[ty][tx] = (b_row < n && t < k) ? b[int64_t(b_row) * k + t] : 0.f;
    // Barrier 1: every thread reads elements that OTHER warps wrote; wait until the tiles are full.
    __syncthreads();
    for (int tt = 0; tt < kTile; ++tt) acc += a_tile[ty][tt] * b_tile[tx][tt];
    // Barrier 2: the next iteration overwrites the tiles; wait until every warp is done reading.
    __syncthreads();
    // snippet-end: tile-step
  }
  // snippet-begin: tile-store
  const int row = row0 + ty, col = col0 + tx;
  if (row < m && col < n) c[int64_t(row) * n + col] = acc;  // edge tiles overhang C
  // snippet-end: tile-store
}

void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  check_matmul_args("matmul_tiled", a, b, c, m, n, k, kTile);
  if (m == 0 || n == 0) return;

  const dim3 block(kTile, kTile);
  // snippet-begin: tiled-grid
  const dim3 grid((n + kTile - 1) / kTile, (m + kTile - 1) / kTile);
  // snippet-end: tiled-grid
  matmul_tiled_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_CHECK_LAUNCH();
}
