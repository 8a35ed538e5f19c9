// Day 01 · Exercise 04 · row softmax: the safe three-pass version, then online softmax.
// Lesson: day01-basics/04_softmax/README.md. Test: make test EX=04_softmax
#include <cmath>
#include <cstdint>

#include "04_softmax.h"
#include "check_args.h"
#include "cuda_check.h"

namespace {

// One block of 256 threads (8 warps) per row, as in exercise 03.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

}  // namespace

// ---- Given: block-wide reductions from exercise 03, in "all-reduce" form -------------------
// __shfl_xor_sync pairs lane i with lane i ^ offset, so after the five steps EVERY lane holds
// the result (a butterfly), not only lane 0: every thread of the row needs m and ℓ.
__device__ float warp_allreduce_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ float warp_allreduce_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Every thread of the block gets the block's max (sum). `scratch` holds kWarps floats.
__device__ float block_allreduce_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_allreduce_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // all partials stored before any warp reads them
  v = warp_allreduce_max(lane < kWarps ? scratch[lane] : -INFINITY);
  __syncthreads();  // all warps have read scratch before the caller reuses it
  return v;
}

__device__ float block_allreduce_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_allreduce_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = warp_allreduce_sum(lane < kWarps ? scratch[lane] : 0.f);
  __syncthreads();
  return v;
}

// ---- Safe softmax: three passes over the row ------------------------------------------------
__global__ void softmax_safe_kernel(const float* x, float* y, int cols) {
  // y may alias x. That is safe here because thread t reads and writes only the columns
  // t, t + blockDim.x, ...: every element is read before it is overwritten, by the same thread.
  const float* x_row = x + int64_t(blockIdx.x) * cols;
  float* y_row = y + int64_t(blockIdx.x) * cols;
  __shared__ float scratch[kWarps];

  // snippet-begin: safe-passes
  // Pass 1: m = max_c x_c. Subtracting it makes every exponent <= 0, so exp() cannot overflow.
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, x_row[c]);
  m = block_allreduce_max(m, scratch);
  // Pass 2: ℓ = Σ_c exp(x_c - m) >= 1 (the max term contributes exp(0) = 1): no 0/0 later.
  float l = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) l += expf(x_row[c] - m);
  l = block_allreduce_sum(l, scratch);
  // Pass 3: normalise. One division per row, then multiplications.
  const float inv_l = 1.f / l;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y_row[c] = expf(x_row[c] - m) * inv_l;
  // snippet-end: safe-passes
}

// ---- Online softmax: m and ℓ in one pass -------------------------------------------------------
// The running state of a row segment: m = max of the values seen, l = Σ exp(x_t - m) over them.
// Invariant (FlashAttention's m, ℓ): l is always the sum RELATIVE TO THE CURRENT m.
struct MaxSum {
  float m;
  float l;
};

// Fold one more value into the state. If x raises the max, every term already in l was computed
// relative to the old max and must be rescaled by exp(m_old - m_new) <= 1.
__device__ MaxSum online_update(MaxSum st, float x) {
  // snippet-begin: online-update
  const float m_new = fmaxf(st.m, x);
  st.l = st.l * expf(st.m - m_new) + expf(x - m_new);  // first value: 0 · exp(-inf) + 1
  st.m = m_new;
  // snippet-end: online-update
  return st;
}

// Merge two states over disjoint segments: the same rescaling, applied to both sides.
__device__ MaxSum online_merge(MaxSum a, MaxSum b) {
  // snippet-begin: online-merge
  const float m = fmaxf(a.m, b.m);
  // Both empty (threads that saw no column when cols < 256): keep (-inf, 0). Without this
  // test, exp(-inf - (-inf)) = exp(NaN) poisons the whole row.
  if (m == -INFINITY) return a;
  a.l = a.l * expf(a.m - m) + b.l * expf(b.m - m);
  a.m = m;
  // snippet-end: online-merge
  return a;
}

// Given: merge the states of all 32 lanes (butterfly: every lane gets the result), then of all
// warps of the block through shared memory, with online_merge as the combining rule.
__device__ MaxSum warp_merge(MaxSum st) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(kFullMask, st.m, offset), __shfl_xor_sync(kFullMask, st.l, offset)};
    st = online_merge(st, other);
  }
  return st;
}

__device__ MaxSum block_merge(MaxSum st, float* scratch_m, float* scratch_l) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  st = warp_merge(st);
  if (lane == 0) {
    scratch_m[warp] = st.m;
    scratch_l[warp] = st.l;
  }
  __syncthreads();  // every warp's state is stored before any warp reads them
  st = lane < kWarps ? MaxSum{scratch_m[lane], scratch_l[lane]} : MaxSum{-INFINITY, 0.f};
  // No second barrier: the kernel below never writes scratch_m / scratch_l again.
  return warp_merge(st);
}

__global__ void softmax_online_kernel(const float* x, float* y, int cols) {
  const float* x_row = x + int64_t(blockIdx.x) * cols;
  float* y_row = y + int64_t(blockIdx.x) * cols;
  __shared__ float scratch_m[kWarps], scratch_l[kWarps];

  // snippet-begin: online-passes
  // Pass 1: each thread folds its columns into (m, ℓ); then the block merges the 256 states.
  MaxSum st{-INFINITY, 0.f};
  for (int c = threadIdx.x; c < cols; c += blockDim.x) st = online_update(st, x_row[c]);
  st = block_merge(st, scratch_m, scratch_l);
  // Pass 2: normalise (same as the safe kernel's pass 3).
  const float inv_l = 1.f / st.l;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y_row[c] = expf(x_row[c] - st.m) * inv_l;
  // snippet-end: online-passes
}

// ---- Launchers ------------------------------------------------------------------------------
namespace {

void check_softmax_args(const char* who, const float* x, const float* y, int rows, int cols) {
  course::require_not_null(x, who, "x");
  course::require_not_null(y, who, "y");
  course::require_non_negative(rows, who, "rows");
  course::require_positive(cols, who, "cols");
}

}  // namespace

void softmax_safe(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  check_softmax_args("softmax_safe", x, y, rows, cols);
  if (rows == 0) return;
  softmax_safe_kernel<<<rows, kThreads, 0, stream>>>(x, y, cols);  // one block per row
  CUDA_CHECK_LAUNCH();
}

void softmax_online(const float* x, float* y, int rows, int cols, cudaStream_t stream) {
  check_softmax_args("softmax_online", x, y, rows, cols);
  if (rows == 0) return;
  softmax_online_kernel<<<rows, kThreads, 0, stream>>>(x, y, cols);
  CUDA_CHECK_LAUNCH();
}
