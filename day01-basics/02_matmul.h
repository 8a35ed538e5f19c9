// Day 01 · Exercise 02 · matmul C = A·Bᵀ — the contract.
//
//   C[M, N] = A[M, K] · B[N, K]ᵀ      all fp32, row-major, device pointers
//
// Bᵀ rather than B because that is the shape of the attention scores S = Q·Kᵀ: both operands
// are stored with the reduction dimension (K here, head_dim there) contiguous.
// Two launchers, same contract: the naive kernel (one thread per C element, operands straight
// from global memory) and the shared-memory tiled kernel. Any M, N, K >= 0 (C is untouched
// when M or N is 0; K = 0 gives zeros). Throws std::invalid_argument naming the field
// (a, b, c, m, n, k) before any launch.
#pragma once
#include <cuda_runtime.h>

void matmul_naive(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream = 0);
void matmul_tiled(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t stream = 0);
