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

// Tree reduction inside one warp, through registers. After the step with offset o, lane i holds
// the combination of lanes i .. i + 2o - 1; after offsets 16, 8, 4, 2, 1 lane 0 holds all 32.
// (__shfl_down_sync from a lane past 31 returns the caller's own value: the upper lanes end up
// with partial garbage, which is fine because only lane 0's result is used.)
// snippet-begin: warp-tree
__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(kFullMask, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
}
// snippet-end: warp-tree

__global__ void row_reduce_kernel(const float* x, float* row_max, float* row_sum, int cols) {
  const float* row = x + int64_t(blockIdx.x) * cols;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // Start from the identities: max(-inf, v) = v and 0 + v = v. A thread with no element of
  // this row (cols < 256) then contributes nothing, and an all-negative row keeps its true max.
  // snippet-begin: thread-fold
  float m = -INFINITY;
  float s = 0.f;
  // Block-stride loop: in each step the 256 threads read 256 consecutive floats (coalesced).
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = row[c];
    m = fmaxf(m, v);
    s += v;
  }
  // snippet-end: thread-fold
  m = warp_max(m);
  s = warp_sum(s);

  // One partial per warp goes through shared memory to warp 0.
  __shared__ float warp_m[kWarps], warp_s[kWarps];
  // snippet-begin: block-stage
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  // The barrier orders "every warp stored its partial" before "warp 0 reads all of them".
  __syncthreads();
  if (warp == 0) {
    m = lane < kWarps ? warp_m[lane] : -INFINITY;  // lanes without a partial bring the identity
    s = lane < kWarps ? warp_s[lane] : 0.f;
    m = warp_max(m);
    s = warp_sum(s);
    if (lane == 0) {
      row_max[blockIdx.x] = m;
      row_sum[blockIdx.x] = s;
    }
  }
  // snippet-end: block-stage
}

void row_reduce(const float* x, float* row_max, float* row_sum, int rows, int cols, cudaStream_t stream) {
  course::require_not_null(x, "row_reduce", "x");
  course::require_not_null(row_max, "row_reduce", "row_max");
  course::require_not_null(row_sum, "row_reduce", "row_sum");
  course::require_non_negative(rows, "row_reduce", "rows");
  course::require_positive(cols, "row_reduce", "cols");
  if (rows == 0) return;

  // One block per row: gridDim.x may be up to 2^31 - 1, so every int row count fits.
  // snippet-begin: blocks
  const int blocks = rows;
  // snippet-end: blocks
  row_reduce_kernel<<<blocks, kThreads, 0, stream>>>(x, row_max, row_sum, cols);
  CUDA_CHECK_LAUNCH();
}
