// Day 10 · Exercise 04 · fp16 flash attention on tensor cores (WMMA) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   in half precision, on tensor cores, without ever
//   materialising the Nq × Nk matrix: the function of exercise 01, with fp16 tensors.
//
// Precision: Q, K, V and O are IEEE fp16 (__half). The scores S = Q·Kᵀ, the softmax statistics
// (row max m, row sum ℓ) and the output accumulator O all live in fp32; only the probabilities
// P are rounded to fp16, because the P·V product on the tensor cores takes 16-bit operands (as in
// FlashAttention-2). O is rounded to fp16 once, when it is written.
//
// Layouts and mask semantics: common/attention_params.h ([B, H, N, D] row-major, bottom-right
// causal alignment, rows that see no key output zeros). Any Hq that is a multiple of Hkv (query
// head h reads KV head h / (Hq/Hkv)), any Nq, Nk >= 1 (Nq != Nk and non-multiples of the tiles
// included), causal or not, head_dim 64 or 128; p.window must be -1. q, k, v and o must be
// 16-byte aligned (tiles are copied in 16-byte pieces; any cudaMalloc pointer is).
// Throws std::invalid_argument naming the field (q, k, v, o, batch, heads_q, heads_kv, seq_q,
// seq_k, head_dim, window) before any launch. Needs sm_70 (tensor cores) or newer.
//
// The tile configuration is the first of a per-head-dim list whose shared memory fits
// course::smem_limit_per_block() (set COURSE_SMEM_LIMIT to see what a smaller GPU runs).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention_params.h"

void flash_attention_wmma(const __half* q, const __half* k, const __half* v, __half* o,
                          const course::AttentionParams& p, cudaStream_t stream = 0);
