// Day 01 · Exercise 01 · vector add: thread indexing, the grid-stride loop, bounds checks.
// Lesson: day01-basics/01_vector_add/README.md. Test: make test EX=01_vector_add
#include <algorithm>

#include "01_vector_add.h"
#include "check_args.h"
#include "cuda_check.h"

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int64_t n) {
  // Consecutive threads take consecutive elements, so each warp reads 32 adjacent floats:
  // one 128-byte transaction per operand (coalesced).
  // snippet-begin: grid-stride
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) { c[i] = a[i] + b[i]; }
  // snippet-end: grid-stride
}

void vector_add(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  course::require_not_null(a, "vector_add", "a");
  course::require_not_null(b, "vector_add", "b");
  course::require_not_null(c, "vector_add", "c");
  course::require_non_negative(n, "vector_add", "n");
  if (n == 0) return;  // a launch with zero blocks is an error, and there is no work anyway

  const int threads = 256;  // a multiple of the warp size (32); see the lesson for why 256
  // snippet-begin: grid-size
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough blocks to fill every SM several times over; beyond that, extra blocks only add
  // scheduling overhead and the grid-stride loop does the remaining work.
  const int64_t wanted = (n + threads - 1) / threads;
  const int blocks = int(std::min<int64_t>(wanted, int64_t(sms) * 32));
  // snippet-end: grid-size
  vector_add_kernel<<<blocks, threads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}
