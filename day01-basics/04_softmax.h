// Day 01 · Exercise 04 · softmax — the contract.
//
//   y[r, c] = exp(x[r, c] - m_r) / ℓ_r,   m_r = max_c x[r, c],   ℓ_r = Σ_c exp(x[r, c] - m_r)
//
// Two launchers, same result: softmax_safe (three passes over each row: max, exp-sum,
// normalise) and softmax_online (one pass computing m and ℓ together with rescaling, then the
// normalising pass). x, y: [rows, cols] fp32, row-major, device pointers; y may alias x.
// Any rows >= 0 and cols >= 1; must stay finite for logits of magnitude 1e4. Throws
// std::invalid_argument naming the field (x, y, rows, cols) before any launch.
#pragma once
#include <cuda_runtime.h>

void softmax_safe(const float* x, float* y, int rows, int cols, cudaStream_t stream = 0);
void softmax_online(const float* x, float* y, int rows, int cols, cudaStream_t stream = 0);
