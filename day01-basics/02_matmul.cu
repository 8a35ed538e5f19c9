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
  // TODO(1) (≈ 8 lines): this thread computes C[row, col], the dot product of row `row` of A with
  //          row `col` of B: col from the x coordinates, row from the y ones. A thread outside C
  //          (the last blocks overhang it) does nothing. Form offsets in int64_t: row·k can exceed
  //          2^31 (lesson: "The naive kernel: one thread per output").
}

void matmul_naive(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  check_matmul_args("matmul_naive", a, b, c, m, n, k, kNaiveY);
  if (m == 0 || n == 0) return;  // an empty C: nothing to launch

  const dim3 block(kNaiveX, kNaiveY);
  const dim3 grid(1, 1);  // TODO(2) (≈ 1 line): enough blocks to cover n columns (x) and m rows (y), rounded
  //                        up (lesson: "The naive kernel: one thread per output").
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
    // TODO(3) (≈ 3 lines): thread (ty, tx) stages ONE element of this slice of A in a_tile and one of
    //          B in b_tile, or 0 where that element lies outside A, B or past k
    //          (lesson: "Tiles in shared memory" and "Edge tiles").
    // TODO(4) (≈ 1 line): make the whole block wait until both tiles are complete (lesson: "The two barriers").
    // TODO(5) (≈ 1 line): add this slice's part of the dot product to acc (lesson: "Tiles in shared memory").
    // TODO(6) (≈ 1 line): make the whole block wait again before the next iteration overwrites the tiles
    //          (lesson: "The two barriers").
  }
  // TODO(7) (≈ 2 lines): write acc to this thread's element of C, if that element exists (lesson: "Edge tiles").
}

void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream) {
  check_matmul_args("matmul_tiled", a, b, c, m, n, k, kTile);
  if (m == 0 || n == 0) return;

  const dim3 block(kTile, kTile);
  const dim3 grid(1, 1);  // TODO(8) (≈ 1 line): one block per kTile×kTile tile of C: x over n, y over m
  //                        (lesson: "Tiles in shared memory").
  matmul_tiled_kernel<<<grid, block, 0, stream>>>(a, b, c, m, n, k);
  CUDA_CHECK_LAUNCH();
}
