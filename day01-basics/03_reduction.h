// Day 01 · Exercise 03 · row reductions — the contract.
//
//   row_max[r] = max_c x[r, c]      row_sum[r] = Σ_c x[r, c]      x: [rows, cols] fp32, row-major
//
// One launch computes both (the two statistics softmax needs). Any rows >= 0 and
// cols >= 1 (cols from 1 to well over 10 000). Device pointers. Throws std::invalid_argument
// naming the field (x, row_max, row_sum, rows, cols) before any launch.
#pragma once
#include <cuda_runtime.h>

void row_reduce(const float* x, float* row_max, float* row_sum, int rows, int cols, cudaStream_t stream = 0);
