// Global -> shared memory copies that do not pass through registers (cp.async, sm_80+).
//
// cp.async hands the copy to the memory system and the threads go on computing; the data is only
// guaranteed to be in shared memory after cp_async_wait<N>() (at most N committed groups still in
// flight) AND a __syncthreads() (so every thread sees every other thread's copies).
// valid == false writes zeros and reads nothing: padding rows past the end of a matrix.
//
// copy16 (fp32 tiles) also compiles below sm_80, as an ordinary synchronous load, so that the
// fp32 exercises still run on Turing (docs/colab.md); the 16-bit tensor-core kernels need sm_80
// anyway and call cp_async16 / cp_async4, which have no fallback.
#pragma once
#include <cuda_runtime.h>

#include "smem_address.cuh"

namespace course::arch {

__device__ __forceinline__ void copy16(float* smem, const float* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = smem_u32(smem);
  const int src_bytes = valid ? 16 : 0;  // a zero-byte source fills the 16 bytes with zeros
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
#else
  *reinterpret_cast<float4*>(smem) = valid ? *reinterpret_cast<const float4*>(gmem) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// 16 bytes, any element type (.cg: cached in L2 only, the tile is read once per block).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}

// 4 bytes (one float of a per-row statistic; .ca: 4-byte copies cannot bypass L1).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 4 : 0));
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

}  // namespace course::arch
