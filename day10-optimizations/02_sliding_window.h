// Day 10 · Exercise 02 · sliding-window attention (fp32) — the contract.
//
// 1) Prefill with a sliding window (Mistral / Gemma local attention):
//      O = softmax(scale · Q·Kᵀ + mask) · V,  query i sees key j  iff  i + off − w ≤ j ≤ i + off
//    with off = Nk − Nq (bottom-right alignment) and w = p.window ≥ 0. Every query with
//    i + off ≥ w sees exactly w + 1 keys; this is FlashAttention-2's window_size = (w, 0), so a
//    window "of W tokens" is w = W − 1. w = 0: each query sees only its own key; w ≥ Nk: plain
//    causal. p.causal is ignored (the window is causal already). A row that sees no key (i + off
//    < 0) outputs zeros. Layouts, GQA and alignment as flash_attention_tuned (01): [B,H,N,D],
//    head_dim 32, 64 or 128, 16-byte aligned pointers. A query tile visits only the key tiles
//    that intersect its band, so the work is O(N·w), not O(N²).
//    Throws std::invalid_argument naming the field (q, k, v, o, batch, heads_q, heads_kv,
//    seq_q, seq_k, head_dim, window) before any launch.
//
// 2) Decode over a rolling (ring) KV cache: one new query token per sequence.
//      q, o:               [B, Hq, D]
//      k_cache, v_cache:   [B, Hkv, w + 1, D]   the last w + 1 tokens of each sequence;
//                                               token t lives in slot t % (w + 1)
//      seq_lens:           int32 [B] (device)   tokens written so far, the new one included;
//                                               the query is token seq_lens[b] − 1
//    Query head h reads KV head h / (Hq / Hkv) and sees tokens max(0, L − 1 − w) .. L − 1
//    (L = seq_lens[b]): min(L, w + 1) slots. Sequences may be at different positions; slots not
//    yet written (L < w + 1) hold garbage and must not be read. seq_lens[b] ≥ 1 is the caller's
//    promise (device memory is not validated; a row with L ≤ 0 outputs zeros).
//    Throws std::invalid_argument naming the field (q, k_cache, v_cache, seq_lens, o, batch,
//    heads_q, heads_kv, head_dim, window) before any launch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_params.h"
#include "reference.h"  // course::RingCacheParams

void sliding_window_attention(const float* q, const float* k, const float* v, float* o,
                              const course::AttentionParams& p, cudaStream_t stream = 0);

void ring_decode_attention(const float* q, const float* k_cache, const float* v_cache,
                           const int32_t* seq_lens, float* o, const course::RingCacheParams& p,
                           cudaStream_t stream = 0);
