// Day 06 · Exercise 03 · grouped-query attention (prefill) — the contract.
//
//   Hq = G · Hkv query heads share Hkv key/value heads: query head h reads KV head h / G.
//   G = 1 is multi-head attention (MHA), Hkv = 1 is multi-query attention (MQA).
//
// K and V stay [B, Hkv, Nk, D] in memory (never duplicated per query head); one K_j/V_j tile in
// shared memory serves all G query heads of a group. Layouts and mask semantics:
// common/attention_params.h. Any Nq, Nk >= 1, causal or not, head_dim 32, 64 or 128, p.window
// must be -1. q, k, v and o must be 16-byte aligned (rows are copied as float4; any cudaMalloc
// pointer is). Throws std::invalid_argument naming the field (q, k, v, o, batch, heads_q,
// heads_kv, seq_q, seq_k, head_dim, window) before any launch; heads_kv is rejected when it does
// not divide heads_q.
//
// The simple kernel (one thread per (query head, query row), exercise 02's design);
// day10-optimizations/01_flash_tuned serves GQA at speed with the same head mapping.
#pragma once
#include <cuda_runtime.h>

#include "attention_params.h"

void gqa_attention(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p,
                   cudaStream_t stream = 0);
