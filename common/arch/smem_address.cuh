// The 32-bit shared-memory address every PTX instruction that reads or writes shared memory
// (cp.async, ldmatrix, st.shared, mbarrier, TMA, wgmma descriptors) takes: the shared window is
// at most 228 KB, so its addresses fit 32 bits, and a 32-bit register is one register where a
// generic 64-bit pointer is two.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace course::arch {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace course::arch
