// Day 06 · Exercise 01 · naive attention: three kernels and an Nq × Nk scratch matrix per head.
// Lesson: day06-attention/01_naive_attention/README.md. Test: make test EX=01_naive_attention
//
//   scores_kernel   S = scale · Q·Kᵀ, causal mask -> -inf     writes B·Hq·Nq·Nk floats
//   softmax_kernel  P = softmax(S), row by row, in place      reads S twice, writes P once
//   pv_kernel       O = P·V                                    reads P once more
// Every element of S crosses HBM four times; that traffic, not the arithmetic, sets the speed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "01_naive_attention.h"
#include "check_args.h"
#include "cuda_check.h"

namespace {

constexpr int kThreads = 256;  // a multiple of the warp size; 8 warps per block for the reductions

// The shape of the problem as the kernels see it (AttentionParams' helpers are host-only).
struct Shape {
  int heads_q, group, seq_q, seq_k, d;  // group = Hq / Hkv query heads per KV head
  // Row index bh = b·Hq + h of Q/O -> row index b·Hkv + h/G of K/V.
  __device__ int64_t kv_head(int64_t bh) const { return bh / heads_q * (heads_q / group) + (bh % heads_q) / group; }
};

// Grid size for a grid-stride loop over `n` items: enough blocks to fill the GPU, no more.
int grid_for(int64_t n, int per_block) {
  int device = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return int(std::max<int64_t>(1, std::min<int64_t>((n + per_block - 1) / per_block, int64_t(sms) * 32)));
}

// One thread per score. The flat index runs over [B, Hq, Nq, Nk] with the key j fastest, so a
// warp writes 32 consecutive scores (coalesced) and reads one Q row (the same for all lanes).
__global__ void scores_kernel(const float* __restrict__ q, const float* __restrict__ k, float* __restrict__ s, Shape sh,
                              int64_t total, float scale, bool causal) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    // TODO(2) (≈ 12 lines): the score s[idx]: recover the key j, the query i and the (batch, head)
    //          pair from the flat index (lesson: "01 · Layouts and the flat index"); -INFINITY if
    //          the causal mask hides key j from query i (lesson: "Causal alignment"), otherwise the
    //          scaled dot product of query row i with key row j of the KV head this head reads.
  }
}

// Block-wide reduction (max or sum) through warp shuffles and one shared slot per warp.
template <bool kMax>
__device__ float block_reduce(float x, float* slots) {
  for (int w = 16; w >= 1; w /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, w);
    x = kMax ? fmaxf(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // the slots may still be read by the previous reduction
  if (lane == 0) slots[warp] = x;
  __syncthreads();  // every warp's partial is in place
  x = slots[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w) x = kMax ? fmaxf(x, slots[w]) : x + slots[w];
  return x;
}

// One block per row of S: max, then sum of exp(x - max), then P = exp(x - max) / sum in place.
// Subtracting the max keeps every exponent <= 0, so nothing overflows even at logits of 1e4.
__global__ void softmax_kernel(float* __restrict__ s, int64_t rows, int seq_k) {
  __shared__ float slots[kThreads / 32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float* x = s + row * seq_k;
    // TODO(3) (≈ 12 lines): replace row x[0 .. seq_k) by its softmax, in place and without overflow,
    //          with the block's threads sharing the row and block_reduce combining their max and
    //          their sum; a row that saw no key becomes zeros, never NaN (lesson: "01 · Softmax
    //          without overflow").
  }
}

// One thread per output element, d fastest: a warp reads one row of P (broadcast) and 32
// consecutive values of each V row (coalesced).
__global__ void pv_kernel(const float* __restrict__ p, const float* __restrict__ v, float* __restrict__ o, Shape sh,
                          int64_t total) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    // TODO(4) (≈ 7 lines): the output o[idx]: recover its column d and its row from the flat index,
    //          then the sum over all keys of the row's probabilities times column d of V, in the
    //          KV head this row's query head reads (lesson: "01 · O = P·V").
  }
}

}  // namespace

size_t naive_attention_workspace_bytes(const course::AttentionParams& p) {
  if (p.batch <= 0 || p.heads_q <= 0 || p.seq_q <= 0 || p.seq_k <= 0) return 0;
  return 0;  // TODO(1) (≈ 1 line): the workspace size in bytes, one float per score (lesson: "01 · The N² buffer")
}

void naive_attention(const float* q, const float* k, const float* v, float* o, float* workspace,
                     const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "naive_attention";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k, fn, "k");
  course::require_not_null(v, fn, "v");
  course::require_not_null(o, fn, "o");
  course::require_not_null(workspace, fn, "workspace");
  course::require_positive(p.batch, fn, "batch");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_q % p.heads_kv == 0, fn, "heads_kv", "must divide heads_q");
  course::require_positive(p.seq_q, fn, "seq_q");
  course::require_positive(p.seq_k, fn, "seq_k");
  course::require_positive(p.head_dim, fn, "head_dim");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are day 10)");

  const Shape sh{p.heads_q, p.group_size(), p.seq_q, p.seq_k, p.head_dim};
  const int64_t rows = int64_t(p.batch) * p.heads_q * p.seq_q;
  const int64_t n_scores = rows * p.seq_k;
  scores_kernel<<<grid_for(n_scores, kThreads), kThreads, 0, stream>>>(q, k, workspace, sh, n_scores, p.softmax_scale(),
                                                                       p.causal);
  CUDA_CHECK_LAUNCH();
  softmax_kernel<<<grid_for(rows, 1), kThreads, 0, stream>>>(workspace, rows, p.seq_k);
  CUDA_CHECK_LAUNCH();
  pv_kernel<<<grid_for(rows * p.head_dim, kThreads), kThreads, 0, stream>>>(workspace, v, o, sh, rows * p.head_dim);
  CUDA_CHECK_LAUNCH();
}
