// Day 11 · Exercise 03 · fused residual add + RMSNorm: one read of the residual stream, the row kept in registers, an fp32 block reduction, Hugging Face's rounding order.
// Lesson: day11-serving/03_fused_add_rmsnorm/README.md. Test: make test EX=03_fused_add_rmsnorm
//
// The operation moves 8 bytes per element of a row (x and residual read, residual and out
// written, 2 bytes each; the weight once per call) and does ~5 FLOPs on them: a copy with a
// reduction in the middle. Its figure of merit is the fraction of copy bandwidth it reaches,
// and the design follows from it:
//   * one block per row, its hidden / 8 vectors of 16 bytes dealt round-robin to the threads
//     (rmsnorm_partition): every load and store is a coalesced 16-byte access;
//   * pass 1 loads x, residual and the weight together (all loads of a thread in flight at
//     once), forms r, writes it back and keeps it, rounded, in registers; the sum of squares
//     is taken in fp32;
//   * one block reduction (warp shuffles, then one shared slot per warp and one barrier);
//   * pass 2 normalises from the registers and writes out: nothing is read from memory twice.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "03_fused_add_rmsnorm.h"
#include "check_args.h"
#include "cuda_check.h"
#include "half_convert.cuh"

namespace {

constexpr int kElemsPerVec = 8;       // 16 bytes of a 16-bit type: one LDG.128 / STG.128
constexpr int kMaxThreads = 1024;     // threads per block: the most CUDA allows
constexpr int kMaxVecsPerThread = 2;  // 1024 threads · 2 vectors · 8 = 16384, the contract's largest hidden
constexpr int kWarp = 32;

}  // namespace

RmsnormPartition rmsnorm_partition(int hidden) {
  const int vectors = hidden / kElemsPerVec;
  // TODO(1) (≈ 3 lines): the fewest vectors per thread (1 or 2) that fit the block's 1024
  //          threads, then the fewest whole warps that cover the row's vectors with that many
  //          each (lesson: "One block per row").
  // snippet-begin: partition
  const int per_thread = (vectors + kMaxThreads - 1) / kMaxThreads;
  const int needed = (vectors + per_thread - 1) / per_thread;
  return {(needed + kWarp - 1) / kWarp * kWarp, per_thread};
  // snippet-end: partition
}

namespace {

using course::from_float;  // fp32 -> 16 bits, nearest even (common/half_convert.cuh)
using course::to_float;

// Eight 16-bit elements, one 16-byte access: aligned so that a load or store of one is a single
// 128-bit instruction, and a plain array so that an unrolled loop keeps it in registers.
template <typename T>
struct alignas(16) Vec8 {
  T e[kElemsPerVec];
};

// The sum of v over the 32 lanes of a warp, returned to every lane.
__device__ __forceinline__ float warp_sum(float v) {
  // TODO(2) (≈ 3 lines): every lane adds the values of the other 31 lanes, through register
  //          shuffles, no shared memory (lesson: "The block reduction").
  // snippet-begin: warp-sum
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  // snippet-end: warp-sum
  return v;
}

// Grid: one block per row (blockIdx.x = token), blockDim.x = rmsnorm_partition(hidden).threads.
// Thread t owns the vectors t, t + blockDim.x, ... (kVecs of them at most) of its row. kAdd:
// the fused operation (residual += x, written back); without it, rmsnorm of x (residual unused).
template <typename T, int kVecs, bool kAdd>
__global__ void __launch_bounds__(kMaxThreads) add_rmsnorm_kernel(const T* x, T* residual, const T* __restrict__ weight,
                                                                  T* __restrict__ out, int hidden, float eps) {
  const int64_t row_start = int64_t(blockIdx.x) * hidden;  // element offset: tokens · hidden passes 2^31
  const int vectors = hidden / kElemsPerVec;
  const Vec8<T>* x_row = reinterpret_cast<const Vec8<T>*>(x + row_start);
  Vec8<T>* res_row = kAdd ? reinterpret_cast<Vec8<T>*>(residual + row_start) : nullptr;
  const Vec8<T>* w_vecs = reinterpret_cast<const Vec8<T>*>(weight);
  Vec8<T>* out_row = reinterpret_cast<Vec8<T>*>(out + row_start);

  Vec8<T> r[kVecs];    // this thread's vectors of r = rd(residual + x), rounded: what pass 2 normalises
  Vec8<T> w[kVecs];    // the weights of the same vectors, loaded in pass 1 so pass 2 reads nothing
  float sum_sq = 0.f;  // this thread's share of sum_k r_k², in fp32
  // TODO(3) (≈ 14 lines): pass 1 over this thread's vectors: load x (and the residual) and the
  //          weight, form r rounded to T, write it back into the residual (fused variant only),
  //          keep r and the weight in registers, and add the squares of the rounded r to sum_sq
  //          in fp32 (lesson: "Rounding where Hugging Face rounds" and "fp32 for the sum of
  //          squares").
  // snippet-begin: pass-1
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int v = int(threadIdx.x) + k * int(blockDim.x);
    if (v >= vectors) break;
    w[k] = w_vecs[v];
    const Vec8<T> a = x_row[v];
    if (kAdd) {
      const Vec8<T> b = res_row[v];
#pragma unroll
      for (int j = 0; j < kElemsPerVec; ++j) r[k].e[j] = from_float<T>(to_float(b.e[j]) + to_float(a.e[j]));
      res_row[v] = r[k];
    } else {
      r[k] = a;
    }
#pragma unroll
    for (int j = 0; j < kElemsPerVec; ++j) {
      const float f = to_float(r[k].e[j]);
      sum_sq = fmaf(f, f, sum_sq);
    }
  }
  // snippet-end: pass-1

  // One slot per warp; a block has at most 32 warps.
  __shared__ float warp_sums[kMaxThreads / kWarp];
  float inv_rms = 0.f;  // rsqrt(mean_k(r_k²) + eps), the same in every thread of the block
  // TODO(4) (≈ 8 lines): the block's sum of squares from every thread's sum_sq (warp by warp,
  //          then across the warps through warp_sums), and from it inv_rms (lesson: "The block
  //          reduction").
  // snippet-begin: reduction
  sum_sq = warp_sum(sum_sq);
  const int warp = int(threadIdx.x) / kWarp, warps = int(blockDim.x) / kWarp;
  if (threadIdx.x % kWarp == 0) warp_sums[warp] = sum_sq;
  __syncthreads();  // every warp's slot is written before any thread reads them
  float total = 0.f;
  for (int i = 0; i < warps; ++i) total += warp_sums[i];  // same order in every thread: one inv_rms
  inv_rms = rsqrtf(total / float(hidden) + eps);
  // snippet-end: reduction

  // TODO(5) (≈ 9 lines): pass 2 over the same vectors: normalise each r in fp32, round to T,
  //          multiply by the weight in fp32, round to T, and store the vector into out (lesson:
  //          "Rounding where Hugging Face rounds").
  // snippet-begin: pass-2
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int v = int(threadIdx.x) + k * int(blockDim.x);
    if (v >= vectors) break;
    Vec8<T> o;
#pragma unroll
    for (int j = 0; j < kElemsPerVec; ++j) {
      const T normed = from_float<T>(to_float(r[k].e[j]) * inv_rms);
      o.e[j] = from_float<T>(to_float(normed) * to_float(w[k].e[j]));
    }
    out_row[v] = o;
  }
  // snippet-end: pass-2
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether [a, a + bytes) and [b, b + bytes_b) share a byte.
bool overlap(const void* a, size_t bytes_a, const void* b, size_t bytes_b) {
  const uintptr_t pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return bytes_a > 0 && bytes_b > 0 && pa < pb + bytes_b && pb < pa + bytes_a;
}

// Validates (naming the field) and launches. residual == nullptr with kAdd false: rmsnorm, whose
// input is reported as 'in'.
template <typename T, bool kAdd>
void launch(const T* x, T* residual, const T* weight, T* out, int tokens, int hidden, float eps, cudaStream_t stream) {
  const char* fn = kAdd ? "fused_add_rmsnorm" : "rmsnorm";
  const char* x_name = kAdd ? "x" : "in";
  course::require_not_null(x, fn, x_name);
  if (kAdd) course::require_not_null(residual, fn, "residual");
  course::require_not_null(weight, fn, "weight");
  course::require_not_null(out, fn, "out");
  course::require(aligned16(x), fn, x_name, "must be 16-byte aligned");
  if (kAdd) course::require(aligned16(residual), fn, "residual", "must be 16-byte aligned");
  course::require(aligned16(weight), fn, "weight", "must be 16-byte aligned");
  course::require(aligned16(out), fn, "out", "must be 16-byte aligned");
  course::require_non_negative(tokens, fn, "tokens");
  course::require(
      hidden % kElemsPerVec == 0 && hidden >= kElemsPerVec && hidden <= kMaxThreads * kMaxVecsPerThread * kElemsPerVec,
      fn, "hidden", "must be a multiple of 8 in [8, 16384] (got " + std::to_string(hidden) + ")");
  course::require(std::isfinite(eps) && eps > 0.f, fn, "eps", "must be finite and > 0");
  const size_t row_bytes = size_t(hidden) * sizeof(T), bytes = size_t(tokens) * row_bytes;
  course::require(!overlap(out, bytes, x, bytes), fn, "out", std::string("must not overlap ") + x_name);
  course::require(!overlap(out, bytes, weight, row_bytes), fn, "out", "must not overlap weight");
  if (kAdd) {
    course::require(!overlap(out, bytes, residual, bytes), fn, "out", "must not overlap residual");
    course::require(!overlap(residual, bytes, weight, row_bytes), fn, "weight", "must not overlap residual");
    course::require(x == residual || !overlap(x, bytes, residual, bytes), fn, "residual",
                    "must be x itself or not overlap it");
  }
  if (tokens == 0) return;  // nothing to normalise: no launch

  const RmsnormPartition part = rmsnorm_partition(hidden);
  if (part.vectors_per_thread <= 1)
    add_rmsnorm_kernel<T, 1, kAdd>
        <<<unsigned(tokens), part.threads, 0, stream>>>(x, residual, weight, out, hidden, eps);
  else
    add_rmsnorm_kernel<T, kMaxVecsPerThread, kAdd>
        <<<unsigned(tokens), part.threads, 0, stream>>>(x, residual, weight, out, hidden, eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fused_add_rmsnorm(const __half* x, __half* residual, const __half* weight, __half* out, int tokens, int hidden,
                       float eps, cudaStream_t stream) {
  launch<__half, true>(x, residual, weight, out, tokens, hidden, eps, stream);
}

void fused_add_rmsnorm(const __nv_bfloat16* x, __nv_bfloat16* residual, const __nv_bfloat16* weight, __nv_bfloat16* out,
                       int tokens, int hidden, float eps, cudaStream_t stream) {
  launch<__nv_bfloat16, true>(x, residual, weight, out, tokens, hidden, eps, stream);
}

void rmsnorm(const __half* in, const __half* weight, __half* out, int tokens, int hidden, float eps,
             cudaStream_t stream) {
  launch<__half, false>(in, nullptr, weight, out, tokens, hidden, eps, stream);
}

void rmsnorm(const __nv_bfloat16* in, const __nv_bfloat16* weight, __nv_bfloat16* out, int tokens, int hidden,
             float eps, cudaStream_t stream) {
  launch<__nv_bfloat16, false>(in, nullptr, weight, out, tokens, hidden, eps, stream);
}
