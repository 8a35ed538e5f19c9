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

// ---------------------------------------------------------------------------------------------
// Index helpers: the pure index arithmetic of the two kernels, callable on the host and the
// device. The kernels call them; the test checks them on the CPU, without a GPU, against brute
// force over every small input (its "[index]" cases). Notation as above: query rows i, keys j,
// off = Nk − Nq, window w ≥ 0; key tile t holds keys t·bc .. t·bc + bc − 1.

// A run of consecutive key tiles: first, first + 1, ..., first + count − 1.
struct WindowTiles {
  int first;  // the first key tile of the run
  int count;  // how many tiles; 0: none (then `first` means nothing)
};

// The key tiles that hold at least one key (j < seq_k) seen by at least one query row
// q0 .. q_last (q0 ≤ q_last): exactly the tiles a query tile must visit. Tiles outside the run
// hold no key any of those rows sees; count = 0 when no row sees any key.
__host__ __device__ WindowTiles window_band_tiles(int q0, int q_last, int off, int w, int seq_k, int bc);

// True iff every query row q0 .. q_last sees every key kv0 .. kv0 + bc − 1, i.e. the tile needs
// no per-element mask. Keys past seq_k are not this function's business (the caller treats a
// tail tile as partial on its own).
__host__ __device__ bool window_tile_is_full(int kv0, int q0, int q_last, int off, int w, int bc);

// Ring decode: a sequence of len tokens (the new one included) whose token t was written into
// slot t % capacity of a ring of capacity = w + 1 slots. Returns n such that the slots
// 0 .. n − 1 hold exactly the tokens the new token sees, max(0, len − 1 − w) .. len − 1, and no
// other slot does (0 when len ≤ 0).
__host__ __device__ int ring_window_slots(int len, int capacity);

void sliding_window_attention(const float* q, const float* k, const float* v, float* o,
                              const course::AttentionParams& p, cudaStream_t stream = 0);

void ring_decode_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* seq_lens,
                           float* o, const course::RingCacheParams& p, cudaStream_t stream = 0);
