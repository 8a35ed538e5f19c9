// Day 10 · Exercise 01 · flash attention tuned (fp32) — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   without ever materialising the Nq × Nk matrix,
//   the same function as day 06's flash_attention / gqa_attention, written for speed.
//
// Layouts and mask semantics: common/attention_params.h. Any Hq that is a multiple of Hkv (MHA,
// GQA, MQA: query head h reads KV head h / (Hq/Hkv)), any Nq, Nk >= 1 (including Nq != Nk and
// sizes that are not tile multiples), causal or not, head_dim 32, 64 or 128; p.window must be -1
// (windows are exercise 02). q, k, v and o must be 16-byte aligned (tiles are copied as float4;
// any cudaMalloc pointer is). Throws std::invalid_argument naming the field (q, k, v, o, batch,
// heads_q, heads_kv, seq_q, seq_k, head_dim, window) before any launch.
//
// The tile configuration is the first of a per-head-dim list whose shared memory fits
// course::smem_limit_per_block() (set COURSE_SMEM_LIMIT to see what a smaller GPU runs).
#pragma once
#include <cuda_runtime.h>

#include "attention_params.h"

void flash_attention_tuned(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                           cudaStream_t stream = 0);
