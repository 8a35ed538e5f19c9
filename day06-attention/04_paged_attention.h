// Day 06 · Exercise 04 · paged attention (decode) — the contract.
//
// One new query token per sequence attends to that sequence's cached keys and values, which
// live in fixed-size blocks scattered through a shared pool (vLLM's paged KV cache):
//   q, o               [B, Hq, D]
//   k_cache, v_cache   [num_blocks, Hkv, block_size, D]
//   block_table        int32 [B, max_blocks_per_seq]   logical block -> physical block
//   context_lens       int32 [B]                       tokens in each sequence's cache
// Token t of sequence b is in physical block block_table[b][t / block_size] at slot
// t % block_size. Slots at or past context_lens[b] (and blocks the sequence does not use) hold
// garbage and must never influence the output; a sequence with context length 0 outputs zeros.
// Query head h reads KV head h / (Hq / Hkv). Scale: PagedParams::softmax_scale().
// head_dim 32, 64 or 128; any block_size >= 1; context lengths may differ across the batch.
// All pointers are device pointers; block_table and context_lens are read on the device (the
// launcher does not copy them back). Throws std::invalid_argument naming the field (q, k_cache,
// v_cache, block_table, context_lens, o, batch, heads_q, heads_kv, head_dim, block_size,
// num_blocks, max_blocks_per_seq) before any launch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "attention_params.h"

// The index helper the kernel uses for every K/V load (tested on the CPU too, tag [index]).
// seq_blocks is the block-table row of the token's sequence b, block_table + b·max_blocks_per_seq:
// logical block j of the sequence is physical block seq_blocks[j]. Returns the offset, in
// elements from the start of k_cache (or v_cache), of element 0 of token t of that sequence in
// KV head hk: the token sits at slot t % block_size of physical block seq_blocks[t / block_size],
// in the [num_blocks, Hkv, block_size, D] layout above (D = head_dim), and its D elements follow
// contiguously. Needs t >= 0 inside the row's blocks and 0 <= hk < heads_kv; reads the one entry
// seq_blocks[t / block_size] and nothing else.
__host__ __device__ int64_t paged_attention_kv_offset(const int32_t* seq_blocks, int t, int hk, int heads_kv,
                                                      int block_size, int head_dim);

void paged_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* block_table,
                     const int32_t* context_lens, float* o, const course::PagedParams& p, cudaStream_t stream = 0);
