// Day 11 · Exercise 03 · fused residual add + RMSNorm — the contract.
//
// Every Llama-style layer adds a sublayer's output x to the residual stream and normalises the
// sum before the next sublayer (twice per layer, plus once before the LM head):
//   x, residual, out   T [tokens, hidden], row-major, contiguous
//   weight             T [hidden]
// with T = __half or __nv_bfloat16 (one overload each). Per row, arithmetic in fp32:
//   fused_add_rmsnorm:  r_j = rd(residual_j + x_j)                     written back into residual
//                       out_j = rd( rd(r_j · rsqrt(mean_k(r_k²) + eps)) · weight_j )
//   rmsnorm:            the same with r = in (nothing is added, nothing written back)
// where rd(·) rounds to T (nearest even) and mean_k(r_k²) is taken over the `hidden` ROUNDED
// values r_k, summed in fp32. This is the order of Hugging Face's LlamaRMSNorm: normalise in
// fp32, round to the input dtype, multiply by the weight (lesson: "Rounding where Hugging Face
// rounds"). The tests accept an inverse RMS computed to within 1e-4 relative (rsqrtf, any fp32
// summation order) and nothing looser: every output must be one of the at most two values that
// rounding r_j · inv allows.
//
// Limits: hidden a multiple of 8 in [8, 16384]; tokens >= 0 (0: nothing is launched); eps > 0
// and finite. All pointers are device pointers, 16-byte aligned (cudaMalloc gives 256). `out`
// may not overlap x, residual (or in): it is checked, as is weight not overlapping out or
// residual. x == residual is allowed (each element is read before it is written, by the same
// thread). Throws std::invalid_argument naming the field (x, residual, weight, out, in, tokens,
// hidden, eps) before any launch. The launcher allocates nothing and only enqueues on `stream`.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// How a row is split among the threads of its block (one block per row): the row's hidden / 8
// vectors of 16 bytes are dealt out round-robin, vector v to thread v % threads, as its
// (v / threads)-th vector. threads is a multiple of 32 and at most 1024; vectors_per_thread is
// the fewest (1 or 2) that cover the row with 1024 threads, and threads the fewest multiples of
// 32 that then cover it: threads · vectors_per_thread · 8 >= hidden (lesson: "One block per
// row"). Host only; needs 8 <= hidden <= 16384, hidden % 8 == 0 (the [index] tests check it).
struct RmsnormPartition {
  int threads;
  int vectors_per_thread;
};
RmsnormPartition rmsnorm_partition(int hidden);

void fused_add_rmsnorm(const __half* x, __half* residual, const __half* weight, __half* out, int tokens, int hidden,
                       float eps, cudaStream_t stream = 0);
void fused_add_rmsnorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight, __nv_bfloat16* out,
                       int tokens, int hidden, float eps, cudaStream_t stream = 0);
void rmsnorm(const __half* in, const __half* weight, __half* out, int tokens, int hidden, float eps,
             cudaStream_t stream = 0);
void rmsnorm(const __nv_bfloat16* in, const __nv_bfloat16* weight, __nv_bfloat16* out, int tokens, int hidden,
             float eps, cudaStream_t stream = 0);
