// Reads a GPU output back and judges it: synchronise (so a fault inside the kernel surfaces
// here, as an exception), download, check both guard regions, compare() with the reference.
// Used by the test harness (gpu_test.h) and by the bench's pre-timing check alike.
#pragma once
#include <cstdint>
#include <vector>

#include "compare.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "fp16_host.h"

namespace course {

inline CompareResult check_device_output(const DeviceBuffer<float>& out, const std::vector<float>& ref,
                                         const Dims& dims, const Tolerance& tol = Tolerance::fp32()) {
  CUDA_CHECK(cudaDeviceSynchronize());
  return compare(out.download(), ref, dims, tol, out.guard_damage());
}

// fp16 outputs travel as raw bits (uint16_t); the poison pattern maps to the fp32 one so
// unwritten elements are still reported as such.
inline CompareResult check_device_output(const DeviceBuffer<uint16_t>& out, const std::vector<float>& ref,
                                         const Dims& dims, const Tolerance& tol) {
  CUDA_CHECK(cudaDeviceSynchronize());
  return compare(half_bits_to_float(out.download()), ref, dims, tol, out.guard_damage());
}

}  // namespace course
