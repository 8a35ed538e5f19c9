// Day 01 · Exercise 01 · vector add — the contract shared by skeleton, solution and tests.
//
//   c[i] = a[i] + b[i]   for 0 <= i < n
//
// a, b, c are device pointers to n floats (c may alias a or b). Any n >= 0 works, including
// sizes that are not a multiple of the block size and sizes larger than one grid covers.
// n == 0 launches nothing. The launcher only enqueues work on `stream` (it does not
// synchronise) and throws std::invalid_argument naming the argument, before any launch, for a
// null pointer or a negative n.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

void vector_add(const float* a, const float* b, float* c, int64_t n, cudaStream_t stream = 0);
