// WRONG ON PURPOSE: one thread per element, rounded up to whole blocks, and no `if (i < n)`.
// The last block's extra threads read past a and b and write past c. The test's guard region
// after c catches the stray writes ("out-of-bounds write ... element [n + k]").
#include "01_vector_add.h"
#include "check_args.h"
#include "cuda_check.h"

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];  // BUG: no bounds check
}

void vector_add(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  course::require_not_null(a, "vector_add", "a");
  course::require_not_null(b, "vector_add", "b");
  course::require_not_null(c, "vector_add", "c");
  course::require_non_negative(n, "vector_add", "n");
  if (n == 0) return;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  vector_add_kernel<<<unsigned(blocks), threads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}
