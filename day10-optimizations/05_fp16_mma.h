// Day 10 · Exercise 05 · FlashAttention-2 on mma.sync (fp16 and bf16) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   in 16-bit precision on the tensor cores, with PTX
//   mma.sync.m16n8k16, ldmatrix, cp.async and S/P kept in registers: exercise 04's function,
//   written the way FlashAttention-2 writes it.
//
// Precision: Q, K, V and O are fp16 (__half) or bf16 (__nv_bfloat16), one overload each. The
// scores S = Q·Kᵀ, the softmax statistics (row max m, row sum ℓ) and the output accumulator O
// live in fp32; only the probabilities P are rounded to the 16-bit type, because they are the A
// operand of the P·V product (ℓ sums the same ROUNDED P, so a row's weights add up to 1 to fp32 accuracy).
// O is rounded to the 16-bit type (round to nearest even) once, when it is written.
//
// Layouts and mask semantics: common/attention_params.h ([B, H, N, D] row-major, bottom-right
// causal alignment, rows that see no key output zeros). Any Hq that is a multiple of Hkv (query
// head h reads KV head h / (Hq/Hkv)), any Nq, Nk >= 1 (Nq != Nk and tails included), causal or
// not, head_dim 64 or 128; p.window must be -1. q, k, v and o must be 16-byte aligned (tiles are
// copied in 16-byte pieces; any cudaMalloc pointer is).
// Throws std::invalid_argument naming the field (q, k, v, o, lse, batch, heads_q, heads_kv, seq_q,
// seq_k, head_dim, window) before any launch. Needs sm_80 (mma.sync with bf16, cp.async).
//
// Log-sum-exp for the backward pass (exercise 09): the overloads with `float* lse` also write,
// per query row, L_i = m_i + ln ℓ_i, the natural log of Σ_j exp(scale · q_i·k_j) over the keys
// the row sees (−inf for a row that sees none), fp32 [B, Hq, Nq], 4-byte aligned. lse may be null:
// then nothing is written and the call is the one without it. An overload rather than a defaulted
// trailing parameter: the outputs o and lse stay side by side, a caller who wants L need not
// spell out the stream, and every existing call (q, k, v, o, p[, stream]) compiles unchanged.
//
// The K/V pipeline depth (3 stages, else 2) is the deepest whose shared memory fits
// course::smem_limit_per_block(); if not even 2 stages fit, std::runtime_error.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention_params.h"

// ---------------------------------------------------------------------------------------------
// Index helpers: the m16n8k16 fragment layouts as pure index arithmetic, callable on the host and
// the device. The kernel calls them; the test checks them on the CPU, without a GPU, against the
// PTX ISA's fragment tables for every lane and element (its "[index]" cases). A warp's lane is
// lane = 4·g + t4: g = lane / 4 (the group, 0..7), t4 = lane % 4 (the thread in the group, 0..3).
//
// Accumulator fragment n (n >= 0) of a warp is the 16 × 8 block of S_ij of the warp's 16 query
// rows warp_row0 .. warp_row0 + 15 and the 8 keys k0 + 8n .. k0 + 8n + 7, held as the m16n8k16
// C/D operand: four fp32 elements e = 0..3 per lane.

// The query row of element e (0..3) of an accumulator fragment, as held by `lane` (0..31).
__host__ __device__ int mma_acc_row(int lane, int e, int warp_row0);

// The key of element e (0..3) of accumulator fragment n, as held by `lane` (0..31).
__host__ __device__ int mma_acc_key(int lane, int n, int e, int k0);

// Two accumulator elements of one lane: s[n][e] and s[n][e + 1].
struct MmaAccPair {
  int n;  // the accumulator fragment
  int e;  // 0 or 2: element e goes into the low 16 bits, element e + 1 into the high 16 bits
};

// At k-step kk (kk >= 0) the P·V product takes P_ij's keys 16kk .. 16kk + 15 as an m16n8k16 A
// operand: four 32-bit registers j = 0..3 per lane, two 16-bit values each. Returns the pair of
// the lane's own accumulator elements that register j packs (same for every lane): their
// (row, key) are exactly the two (row, key) the A layout assigns to that lane's register j.
__host__ __device__ MmaAccPair mma_p_a_source(int kk, int j);

void flash_attention_mma(const __half* q, const __half* k, const __half* v, __half* o, const course::AttentionParams& p,
                         cudaStream_t stream = 0);
void flash_attention_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                         const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_mma(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                         const course::AttentionParams& p, cudaStream_t stream = 0);
void flash_attention_mma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                         float* lse, const course::AttentionParams& p, cudaStream_t stream = 0);
