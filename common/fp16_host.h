// IEEE binary16 on the host, without the CUDA headers, so the CPU reference and the CPU tests
// can model exactly what a half-precision kernel sees: inputs rounded to fp16 once
// (round-to-nearest-even), everything after that accumulated in higher precision.
#pragma once
#include <cstdint>
#include <vector>

namespace course {

uint16_t float_to_half_bits(float f);  // round to nearest even; overflow -> inf; NaN stays NaN
float half_bits_to_float(uint16_t h);
inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }
std::vector<float> round_to_half(const std::vector<float>& v);
std::vector<uint16_t> to_half_bits(const std::vector<float>& v);
// Maps the fp16 poison pattern to the fp32 one, so compare() can count unwritten fp16 outputs.
std::vector<float> half_bits_to_float(const std::vector<uint16_t>& v);

// bfloat16: the top 16 bits of an fp32 (8 exponent bits, 7 stored mantissa bits), rounded to
// nearest even as __float2bfloat16_rn does, so a bf16 kernel's inputs can be modelled exactly.
uint16_t float_to_bf16_bits(float f);  // round to nearest even; overflow -> inf; NaN stays NaN
float bf16_bits_to_float(uint16_t h);
inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }
std::vector<float> round_to_bf16(const std::vector<float>& v);
std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v);
// Like half_bits_to_float: the 16-bit poison pattern maps to the fp32 one.
std::vector<float> bf16_bits_to_float(const std::vector<uint16_t>& v);

}  // namespace course
