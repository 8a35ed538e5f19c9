// Device-side conversions between fp32 and the two 16-bit element types, for kernels written once
// as a template over __half and __nv_bfloat16: one definition instead of one per exercise. Both
// directions round to nearest even (the `_rn` intrinsics), the rounding the CPU reference assumes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace course {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace course
