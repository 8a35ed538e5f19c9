// Ampere tensor-core plumbing (mma.sync, ldmatrix, the swizzled shared-memory tile) shared by
// the 16-bit kernels: 05 (the forward pass on mma.sync), 09 (the backward pass) and 10 (which
// packs P the same way). 05's chapter explains the pieces ("ldmatrix: fragments straight from
// shared memory", "Swizzling from the bank arithmetic", "The cp.async pipeline"); 05 keeps its
// own copy of the swizzle formula, where the lesson shows it, and loads its tiles with load_tile.
//
// Needs sm_80: mma.sync with bf16 operands, ldmatrix, cp.async.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "ldmatrix_lanes.h"
#include "smem_address.cuh"

namespace course::arch::sm80 {

// The most dynamic shared memory a block may opt in to on an A100 (compute capability 8.0; 8.6
// and 8.9 allow 99 KB, which is why the launchers still compare with the device's own limit).
constexpr int kMaxSmemPerBlock = 163 * 1024;

// ---- shared memory: rows of kCols 16-bit values, XOR-swizzled in 16-byte chunks -------------
// Logical chunk c (8 values) of row r is stored at physical chunk c ^ (r mod 8): the 8 rows an
// ldmatrix matrix reads (or a column of 32-bit stores) then fall into 8 different bank groups.
// Returns the element offset of chunk `chunk` of row `row`. kCols: 64 or 128.
template <int kCols>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  static_assert(kCols % 64 == 0, "a swizzled row holds a multiple of 8 chunks");
  return row * kCols + ((chunk ^ (row & 7)) << 3);
}

// Copies rows row0 .. row0 + kRows - 1 of a [n, kCols] row-major matrix into a swizzled
// kRows × kCols tile, all kThreads threads of the block taking part; rows at or past n are
// zero-filled (nothing is read for them).
template <int kCols, int kRows, int kThreads, class T>
__device__ __forceinline__ void load_tile(T* tile, const T* gmem, int row0, int n) {
  constexpr int kChunks = kCols / 8;
  static_assert(kRows * kChunks % kThreads == 0, "the tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const int idx = threadIdx.x + i * kThreads;
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = row0 + r < n;
    const T* src = gmem + (valid ? int64_t(row0 + r) * kCols + c * 8 : 0);
    cp_async16(tile + swizzled<kCols>(r, c), src, valid);
  }
}

// ---- fragments -------------------------------------------------------------------------------
// ldmatrix.x4: lanes 8i .. 8i+7 give the row addresses of 8×8 matrix i; afterwards register i of
// lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix i (with .trans: of its transpose,
// i.e. rows 2(l%4) and 2(l%4)+1 of column l/4 as stored).
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// The same two loads, from a 32-bit shared-memory address (byte offset in the shared window).
// Kernels that compute their swizzled addresses as "a lane's base XOR a constant" use these.
__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 32 bits to a shared-memory address.
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

// *addr += a, *(addr + 1) += b, atomically (two fp32 reductions in global memory); addr must be
// 8-byte aligned. Hopper has a vector atomic that does both in one instruction.
__device__ __forceinline__ void atomic_add_f32x2(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(addr), make_float2(a, b));
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}

// c (16×8 fp32) += a (16×16, row-major) · b (16×8, column-major), 16-bit operands T.
template <class T>
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two fp32 values -> one register of two 16-bit values (lo in the low half), round to nearest even.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    r = *reinterpret_cast<const uint32_t*>(&h);
  }
  return r;
}

// One register of two 16-bit values -> two fp32 values (exact).
template <class T>
__device__ __forceinline__ float2 unpack2(uint32_t r) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&r));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&r));
  }
}

}  // namespace course::arch::sm80
