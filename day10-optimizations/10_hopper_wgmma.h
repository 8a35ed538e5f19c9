// Day 10 · Exercise 10 · FlashAttention-3-style forward on Hopper (wgmma, TMA, warp specialization) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   in 16-bit precision, the function of exercise 05,
//   written with Hopper's own instructions: warpgroup matrix products (wgmma.mma_async) reading
//   shared memory through descriptors, tiles brought in by the copy engine (TMA,
//   cp.async.bulk.tensor) and counted by mbarriers, one producer warpgroup feeding the consumer
//   warpgroups (warp specialization, setmaxnreg), the softmax of one key tile run while the
//   tensor cores multiply the previous one, and the consumers taking turns (ping-pong).
//
// Precision: Q, K, V and O are fp16 (__half) or bf16 (__nv_bfloat16), one overload each. S, the
// softmax statistics (m, ℓ) and O accumulate in fp32; P is rounded to the 16-bit type because it
// is the A operand of P·V, while ℓ sums P in fp32 (as FlashAttention-2/3 do; exercise 05 sums the
// rounded P instead). O is rounded (to nearest even) once.
//
// Layouts and mask semantics: common/attention_params.h ([B, H, N, D] row-major, bottom-right
// causal alignment, rows that see no key output zeros). Any Hq that is a multiple of Hkv (query
// head h reads KV head h / (Hq/Hkv)), any Nq, Nk >= 1 (tails and Nq != Nk included), causal or
// not, head_dim 64 or 128, p.window == -1. q, k, v and o must be 16-byte aligned (the copy
// engine's rule for a tensor's base address; any cudaMalloc pointer is).
// Throws std::invalid_argument naming the field (q, k, v, o, lse, batch, heads_q, heads_kv, seq_q,
// seq_k, head_dim, window) before any launch. Needs sm_90 (a Hopper GPU: H100, H200, GH200);
// the code is built for the architecture-specific target sm_90a only.
//
// Log-sum-exp, as exercise 05 writes it (a caller may switch between the two kernels): the
// overloads with `float* lse` also write, per query row, L_i = m_i + ln ℓ_i, the natural log of
// Σ_j exp(scale · q_i·k_j) over the keys the row sees (−inf for a row that sees none), fp32
// [B, Hq, Nq], 4-byte aligned. lse may be null: then nothing is written and the call is the one
// without it. Here ℓ sums the unrounded P (Precision, above): L carries no rounding of P, unlike
// exercise 05's. Exercise 12 (ring attention) merges its partial outputs by it.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_params.h"

// ---------------------------------------------------------------------------------------------
// Index helpers, callable on the host and the device. The kernel calls them; the test checks
// them on the CPU, without a GPU, against the PTX ISA's tables (its "[index]" cases).
//
// A consumer warpgroup is 4 warps, 128 threads t = 0..127 (t = 32·warp + lane). An m64nNk16
// wgmma leaves its 64 × N fp32 result D spread over them, N/2 elements d[i] per thread.

// The row (0..63) of the warpgroup's 64 × N tile that element i of thread t holds.
__host__ __device__ int wgmma_acc_row(int t, int i);

// The column (0..N-1) that element i of thread t holds.
__host__ __device__ int wgmma_acc_col(int t, int i);

// P as the A operand of the k-step kk of O += P·V (keys 16kk .. 16kk + 15 of the tile): each
// thread passes four 32-bit registers j = 0..3 of two 16-bit values. Returns i such that
// register j packs the thread's own S-accumulator elements i (low half) and i + 1 (high half).
__host__ __device__ int wgmma_p_a_index(int kk, int j);

// The 64-bit shared-memory matrix descriptor of a wgmma operand stored with the 128-byte swizzle:
// start address, leading-dimension and stride-dimension byte offsets (each given in bytes, a
// multiple of 16), the swizzle mode, base offset 0.
__host__ __device__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes);

// ---------------------------------------------------------------------------------------------
// The staircase of the chapter, one rung per idea, for the bench (`make bench`, family
// prefill_fp16 / prefill_bf16). kPingPong is what flash_attention_wgmma runs.
enum class WgmmaStep {
  kSerial = 1,      // one K/V stage (K and V released apart: K_{j+1} loads while P_ij·V_j runs)
  kTwoStages = 2,   // a ring of two stages: the next tiles load while this one is multiplied
  kOverlapped = 3,  // + the softmax of tile j runs while the tensor cores compute S_j and P_{j-1}·V_{j-1}
  kPingPong = 4,    // + the consumers take turns on the tensor cores (named barriers); 3 consumers at D = 64
};

void flash_attention_wgmma(const __half* q, const __half* k, const __half* v, __half* o,
                           const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                           const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_wgmma(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                           const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                           float* lse, const course::AttentionParams& p, cudaStream_t stream = 0);

// One rung of the staircase (same contract, same checks).
void flash_attention_wgmma_step(WgmmaStep step, const __half* q, const __half* k, const __half* v, __half* o,
                                const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_wgmma_step(WgmmaStep step, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                __nv_bfloat16* o, const course::AttentionParams& p, cudaStream_t stream = 0);
