// Which row and 16-byte chunk of a 16 × 16 block of 16-bit values each lane hands to
// ldmatrix.x4, for the three ways the m16n8k16 kernels (05, 09) load their operands. Pure index
// arithmetic, callable on the host and the device: the [index] cases of exercise 05's test check
// every lane against the PTX ISA's fragment tables (common/mma_layout_check.h) on the CPU.
//
// ldmatrix.x4: lanes 8i .. 8i+7 give the addresses of rows 0..7 of 8 × 8 matrix i; afterwards
// register i of lane l holds row l/4, columns 2(l%4), 2(l%4)+1 of matrix i (with .trans: of its
// transpose). So the order in which the lanes name the four 8 × 8 quarters decides which operand
// registers they become.
#pragma once
#include <cuda_runtime.h>

namespace course::arch::sm80 {

struct LdmatrixSource {
  int row;    // 0..15: the row of the 16-row block this lane addresses
  int chunk;  // 0 or 1: the left or right 8 columns (one 16-byte chunk) of the block's 16
};

// The A operand (16 × 16, row-major as stored: Q in Q·Kᵀ, P in P·V): quarters top-left,
// bottom-left, top-right, bottom-right become registers a0a1, a2a3, a4a5, a6a7.
__host__ __device__ inline LdmatrixSource ldmatrix_a_source(int lane) {
  return {(lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4};
}

// Two B operands side by side, stored n-major (16 n × 16 k: K's rows in Q·Kᵀ), loaded without
// .trans: quarters (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) become
// b0b1 and b2b3 of n-fragment 0, then of n-fragment 1.
__host__ __device__ inline LdmatrixSource ldmatrix_b_source(int lane) {
  return {(lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1};
}

// Two B operands side by side, stored k-major (16 k × 16 n: V's rows are keys in P·V), loaded
// with .trans: quarters (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) become
// b0b1 and b2b3 of n-fragment 0, then of n-fragment 1. The same lanes as the A operand's: the
// transpose swaps what the rows and columns stand for, not which lane names which row.
__host__ __device__ inline LdmatrixSource ldmatrix_b_trans_source(int lane) {
  return {(lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4};
}

}  // namespace course::arch::sm80
