// Day 01 · Exercise 03 · row max and row sum: warp shuffles, then a block reduction.
// Lesson: day01-basics/03_reduction/README.md. Test: make test EX=03_reduction
#include <cmath>
#include <cstdint>

#include "03_reduction.h"
#include "check_args.h"
#include "cuda_check.h"

namespace {

// One block per row. 256 threads = 8 warps: enough loads in flight to stream a long row, and
// few enough partial results that one warp can combine them in a single shuffle round.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes take part in every shuffle

}  // namespace

__device__ float warp_max(float v) {
  // TODO(1) (≈ 1 line): lane 0 ends up with the max of the 32 lanes' values, exchanged through
  //          registers in a tree of shuffles (lesson: "Warp shuffles").
  return v;
}

__device__ float warp_sum(float v) {
  // TODO(2) (≈ 1 line): the same tree, adding instead of taking the max (lesson: "Warp shuffles").
  return v;
}

__global__ void row_reduce_kernel(const float* x, float* row_max, float* row_sum, int cols) {
  const float* row = x + int64_t(blockIdx.x) * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  float m = 0.f;  // TODO(3) (≈ 1 line): is 0 the right starting value for a max? (lesson: "Identities")
  float s = 0.f;
  // TODO(4) (≈ 5 lines): this thread folds every column of the row that falls to it into m and s
  //          (lesson: "Block-stride loops").
  m = warp_max(m);
  s = warp_sum(s);

  __shared__ float warp_m[kWarps], warp_s[kWarps];
  // TODO(5) (≈ 5 lines): lane 0 of each warp stores the warp's partials in warp_m[warp], warp_s[warp]; then
  //          the block waits until all are stored (lesson: "Block reduction through shared memory").
  // TODO(6) (≈ 10 lines): warp 0 loads the kWarps partials (identities in the lanes beyond kWarps), reduces
  //          them with warp_max / warp_sum, and lane 0 writes row_max[blockIdx.x], row_sum[blockIdx.x]
  //          (lesson: "Block reduction through shared memory").
}

void row_reduce(const float* x, float* row_max, float* row_sum, int rows, int cols, cudaStream_t stream) {
  course::require_not_null(x, "row_reduce", "x");
  course::require_not_null(row_max, "row_reduce", "row_max");
  course::require_not_null(row_sum, "row_reduce", "row_sum");
  course::require_non_negative(rows, "row_reduce", "rows");
  course::require_positive(cols, "row_reduce", "cols");
  if (rows == 0) return;

  const int blocks = 1;  // TODO(7) (≈ 1 line): one block per row (lesson: "Block reduction through shared memory").
  row_reduce_kernel<<<blocks, kThreads, 0, stream>>>(x, row_max, row_sum, cols);
  CUDA_CHECK_LAUNCH();
}
