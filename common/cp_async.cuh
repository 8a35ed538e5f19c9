// 16-byte global -> shared memory copies, asynchronous where the hardware can do it.
//
// On sm_80+ `cp.async` hands the copy to the memory system and the threads go on computing;
// the data is only guaranteed to be in shared memory after cp_async_wait<N>() (at most N
// committed groups still in flight) AND a __syncthreads() (so every thread sees every other
// thread's copies). On older GPUs the same calls fall back to ordinary synchronous loads.
// valid == false writes zeros and reads nothing: padding rows past the end of a matrix.
#pragma once
#include <cuda_runtime.h>

__device__ __forceinline__ void copy16(float* smem, const float* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int src_bytes = valid ? 16 : 0;  // a zero-byte source fills the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
#else
  *reinterpret_cast<float4*>(smem) = valid ? *reinterpret_cast<const float4*>(gmem) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
