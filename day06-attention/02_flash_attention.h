// Day 06 · Exercise 02 · flash attention (fp32, tiled online softmax) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   without ever materialising the Nq × Nk matrix.
//
// Layouts and mask semantics: common/attention_params.h. Multi-head only here:
// p.heads_q == p.heads_kv (grouped heads are exercise 03). Any Nq, Nk >= 1 (including
// Nq != Nk and sizes that are not tile multiples), causal or not, head_dim 32, 64 or 128;
// p.window must be -1. q, k, v and o must be 16-byte aligned (tiles are copied as float4; any
// cudaMalloc pointer is). Throws std::invalid_argument naming the field (q, k, v, o, batch,
// heads_q, heads_kv, seq_q, seq_k, head_dim, window) before any launch.
//
// lse (optional): fp32 [B, Hq, Nq], the row's log-sum-exp L_i = m_i + ln ℓ_i of the SCALED
// logits (natural log; −inf for a row that sees no key), what the backward pass (exercise 05)
// recomputes P from. nullptr (the default): not written, and the kernel does nothing more than
// without it. No alignment needed. It is a defaulted trailing parameter rather than an overload so
// that there stays one function to implement and every existing call compiles unchanged; a
// caller that wants it passes the stream too.
//
// This is the simple kernel (one thread per query row, plain loads); day10-optimizations/
// 01_flash_tuned (flash_attention_tuned) computes the same function, written for speed.
#pragma once
#include <cuda_runtime.h>

#include "attention_params.h"

void flash_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                     cudaStream_t stream = 0, float* lse = nullptr);
