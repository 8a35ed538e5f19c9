// Hash-based uniform fill (see device_fill.h).
#include <cuda_fp16.h>

#include "cuda_check.h"
#include "device_fill.h"

namespace bench {

namespace {

__device__ inline float hash_uniform(uint64_t i, uint64_t seed) {
  // splitmix64 finaliser: consecutive indices give unrelated 64-bit values.
  uint64_t z = i + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (1.0f / 16777216.0f);  // top 24 bits -> [0, 1)
}

__global__ void fill_kernel(float* x, int64_t n, uint64_t seed, float lo, float span) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = lo + span * hash_uniform(uint64_t(i), seed);
}

__global__ void fill_half_kernel(__half* x, int64_t n, uint64_t seed, float lo, float span) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __float2half(lo + span * hash_uniform(uint64_t(i), seed));
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return int(blocks < 65536 ? blocks : 65536);
}

}  // namespace

void fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return;
  fill_kernel<<<grid_for(n), 256, 0, stream>>>(x, n, seed, lo, hi - lo);
  CUDA_CHECK_LAUNCH();
}

void fill_uniform_half(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  if (n <= 0) return;
  fill_half_kernel<<<grid_for(n), 256, 0, stream>>>(reinterpret_cast<__half*>(x), n, seed, lo, hi - lo);
  CUDA_CHECK_LAUNCH();
}

}  // namespace bench
