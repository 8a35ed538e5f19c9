// The fp32 tile loader day 06's tiled kernels share (02_flash_attention, 05_flash_backward).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace day06 {

// Copies rows [row0, row0 + rows) of a [n, D] matrix into a tile with leading dimension ld
// (floats); rows at or past n become zeros. Consecutive threads copy consecutive float4s of a
// row, so a warp reads whole 128-byte lines (coalesced).
template <int D>
__device__ void load_tile(float* tile, int ld, const float* src, int row0, int rows, int n) {
  for (int e = threadIdx.x; e < rows * (D / 4); e += blockDim.x) {
    const int r = e / (D / 4), c4 = e % (D / 4);
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (row0 + r < n) x = reinterpret_cast<const float4*>(src + int64_t(row0 + r) * D)[c4];
    reinterpret_cast<float4*>(tile + r * ld)[c4] = x;
  }
}

}  // namespace day06
