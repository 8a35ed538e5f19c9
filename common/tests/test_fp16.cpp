// The host fp16 conversion models what __float2half_rn does on the GPU; the fp16 exercises'
// references depend on it rounding exactly the same way.
#include <cmath>
#include <cstdint>

#include "catch_compat.h"
#include "fp16_host.h"
#include "poison.h"

using course::float_to_half_bits;
using course::half_bits_to_float;

TEST_CASE("exactly representable values convert both ways", "[fp16]") {
  CHECK(float_to_half_bits(1.f) == 0x3C00);
  CHECK(float_to_half_bits(-2.f) == 0xC000);
  CHECK(float_to_half_bits(0.f) == 0x0000);
  CHECK(float_to_half_bits(65504.f) == 0x7BFF);               // largest finite half
  CHECK(float_to_half_bits(std::ldexp(1.f, -24)) == 0x0001);  // smallest subnormal
  CHECK(std::fabs(half_bits_to_float(0x3555) - 0.33325195f) < 1e-7f);
  CHECK(half_bits_to_float(0x0001) == std::ldexp(1.f, -24));
  CHECK(half_bits_to_float(0x03FF) == std::ldexp(1023.f, -24));
}

TEST_CASE("rounding is to nearest, ties to even", "[fp16]") {
  // Spacing of halves in [1, 2) is 2^-10. 1 + 2^-11 is a tie -> even (1.0);
  // 1 + 3·2^-11 is a tie -> even (1 + 2^-9 = 0x3C02).
  CHECK(float_to_half_bits(1.f + std::ldexp(1.f, -11)) == 0x3C00);
  CHECK(float_to_half_bits(1.f + 3 * std::ldexp(1.f, -11)) == 0x3C02);
  CHECK(float_to_half_bits(1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20)) == 0x3C01);
  // Subnormal tie: 1.5 * 2^-24 -> 2 * 2^-24 (even), 2.5 * 2^-24 -> 2 * 2^-24.
  CHECK(float_to_half_bits(1.5f * std::ldexp(1.f, -24)) == 0x0002);
  CHECK(float_to_half_bits(2.5f * std::ldexp(1.f, -24)) == 0x0002);
  CHECK(float_to_half_bits(std::ldexp(1.f, -26)) == 0x0000);
}

TEST_CASE("overflow, infinity and NaN", "[fp16]") {
  CHECK(float_to_half_bits(65520.f) == 0x7C00);  // rounds up past the largest finite value
  CHECK(float_to_half_bits(-1e6f) == 0xFC00);
  CHECK(float_to_half_bits(INFINITY) == 0x7C00);
  CHECK(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
}

TEST_CASE("every finite half survives a round trip through float", "[fp16]") {
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;  // inf / NaN
    if (float_to_half_bits(half_bits_to_float(uint16_t(h))) != h) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("the fp16 poison pattern maps to the fp32 poison pattern", "[fp16][poison]") {
  const auto f = course::half_bits_to_float(std::vector<uint16_t>{course::kPoisonF16Bits, 0x3C00});
  CHECK(course::is_poison_f32(f[0]));
  CHECK(f[1] == 1.f);
}

// bf16 keeps the top half of an fp32: the conversion must round to nearest even (as
// __float2bfloat16_rn does), not truncate; the bf16 kernels' tests depend on it.
TEST_CASE("bf16 rounds to nearest, ties to even", "[fp16][bf16]") {
  using course::bf16_bits_to_float;
  using course::float_to_bf16_bits;
  CHECK(float_to_bf16_bits(1.f) == 0x3F80);
  CHECK(float_to_bf16_bits(-2.f) == 0xC000);
  CHECK(bf16_bits_to_float(0x3F80) == 1.f);
  // Spacing in [1, 2) is 2^-7: 1 + 2^-8 is a tie -> even (1.0); 1 + 3·2^-8 -> 1 + 2^-6 (0x3F82).
  CHECK(float_to_bf16_bits(1.f + std::ldexp(1.f, -8)) == 0x3F80);
  CHECK(float_to_bf16_bits(1.f + 3 * std::ldexp(1.f, -8)) == 0x3F82);
  // Just above a tie rounds up, where truncation would keep 0x3F80.
  CHECK(float_to_bf16_bits(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)) == 0x3F81);
  CHECK(float_to_bf16_bits(1.99f) == 0x3FFF);    // 1.9921875 is the nearest bf16; truncation gives 0x3FFE
  CHECK(float_to_bf16_bits(3.4e38f) == 0x7F80);  // above the largest finite bf16 (~3.39e38): inf
  CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  CHECK(course::round_to_bf16(0.1f) == 0.10009765625f);
  const auto f = course::bf16_bits_to_float(std::vector<uint16_t>{course::kPoisonF16Bits, 0x3F80});
  CHECK(course::is_poison_f32(f[0]));
  CHECK(f[1] == 1.f);
}
