// The softmax's exponential in base 2: exp(x) = 2^(x·log2 e), with the scale folded into one
// multiply (or an fma) per score, and 2^x the special-function unit's one instruction.
#pragma once
#include <cuda_runtime.h>

namespace course::arch {

constexpr float kLog2e = 1.4426950408889634f;  // log2(e), rounded to float

// 2^x as the special-function unit computes it (about 2 ulp), subnormal results flushed to 0.
// exp2f(x) is the same instruction wrapped in a range check that rescales around it so that
// subnormal results come out right (a compare and two multiplies more per call): probabilities
// below 2^-126 are 0 for attention anyway (a sum that holds the maximum's own term, 1, cannot
// feel them), and the softmax is where a tensor-core kernel's instruction slots go.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace course::arch
