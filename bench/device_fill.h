// Filling large benchmark inputs on the GPU.
//
// Timing inputs are hundreds of MB to tens of GB; drawing them on the CPU (as the validation
// inputs are, with course::random_normal) would take longer than the benchmark. The values
// only need to be ordinary numbers (finite, no denormals, not all equal): a hash of the
// element index gives uniform values in [lo, hi) at memory speed.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace bench {

void fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
// fp16 values as raw bits (the roof GEMM's inputs).
void fill_uniform_half(uint16_t* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);

}  // namespace bench
