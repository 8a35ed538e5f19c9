// The two 16-bit element types of the tensor-core exercises, as one traits struct each, so a test
// or a bench family can be written once as a template and run for both:
//   T          the CUDA type (__half, __nv_bfloat16)
//   round      fp32 values rounded to the type (what the kernel sees), host side
//   bits       the same values as raw 16-bit patterns, for DeviceBuffer<uint16_t>
//   decode     raw patterns back to fp32 (the poison pattern maps to the fp32 poison)
//   tolerance  the type's bounds for compare() (common/compare.h)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "compare.h"
#include "device_buffer.h"
#include "fp16_host.h"

namespace course {

struct Fp16Type {
  using T = __half;
  static constexpr const char* name = "fp16";
  static std::vector<float> round(const std::vector<float>& x) { return round_to_half(x); }
  static float round1(float x) { return round_to_half(x); }
  static std::vector<uint16_t> bits(const std::vector<float>& x) { return to_half_bits(x); }
  static std::vector<float> decode(const std::vector<uint16_t>& b) { return half_bits_to_float(b); }
  static Tolerance tolerance() { return Tolerance::fp16(); }
};

struct Bf16Type {
  using T = __nv_bfloat16;
  static constexpr const char* name = "bf16";
  static std::vector<float> round(const std::vector<float>& x) { return round_to_bf16(x); }
  static float round1(float x) { return round_to_bf16(x); }
  static std::vector<uint16_t> bits(const std::vector<float>& x) { return to_bf16_bits(x); }
  static std::vector<float> decode(const std::vector<uint16_t>& b) { return bf16_bits_to_float(b); }
  static Tolerance tolerance() { return Tolerance::bf16(); }
};

// A DeviceBuffer of raw 16-bit patterns as the launcher's element type.
template <class Ty>
const typename Ty::T* as_t(const DeviceBuffer<uint16_t>& b) {
  return reinterpret_cast<const typename Ty::T*>(b.data());
}
template <class Ty>
typename Ty::T* as_t(DeviceBuffer<uint16_t>& b) {
  return reinterpret_cast<typename Ty::T*>(b.data());
}

}  // namespace course
