// Day 06 · Exercise 01 · naive attention — the contract.
//
//   S = scale · Q·Kᵀ (+ causal mask)      [B, Hq, Nq, Nk], written to `workspace`
//   P = softmax(S) row by row              in place in `workspace`
//   O = P·V                                [B, Hq, Nq, D]
//
// Layouts and mask semantics: common/attention_params.h (dense [B, H, N, D], GQA head mapping
// h -> h / (Hq/Hkv), bottom-right causal alignment, a row with no visible key outputs zeros).
// Any Nq, Nk >= 1 and any head_dim >= 1; p.window must be -1 (sliding windows are day 10).
// `workspace` is a device buffer of at least naive_attention_workspace_bytes(p) bytes: the
// launcher allocates nothing, so the bench times only the kernels.
// Throws std::invalid_argument naming the field (q, k, v, o, workspace, batch, heads_q,
// heads_kv, seq_q, seq_k, head_dim, window) before any launch.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "attention_params.h"

size_t naive_attention_workspace_bytes(const course::AttentionParams& p);

void naive_attention(const float* q, const float* k, const float* v, float* o, float* workspace,
                     const course::AttentionParams& p, cudaStream_t stream = 0);
