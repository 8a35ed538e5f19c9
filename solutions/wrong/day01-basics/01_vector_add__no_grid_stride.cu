// WRONG ON PURPOSE: the grid is capped (as it should be) but the kernel handles one element
// per thread instead of looping with a grid stride, so for large n the tail of c is never
// written. The test reports those elements as "never written" (still NaN-poisoned).
#include <algorithm>

#include "01_vector_add.h"
#include "check_args.h"
#include "cuda_check.h"

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];  // BUG: no loop; threads beyond the grid's reach are missing
}

void vector_add(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream) {
  course::require_not_null(a, "vector_add", "a");
  course::require_not_null(b, "vector_add", "b");
  course::require_not_null(c, "vector_add", "c");
  course::require_non_negative(n, "vector_add", "n");
  if (n == 0) return;
  const int threads = 256;
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int blocks = int(std::min<int64_t>((n + threads - 1) / threads, int64_t(sms) * 32));
  vector_add_kernel<<<blocks, threads, 0, stream>>>(a, b, c, n);
  CUDA_CHECK_LAUNCH();
}
