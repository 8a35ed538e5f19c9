// Day 10 · Exercise 06 · split-KV decode (flash-decoding) — the contract.
//
// The decode step of day 06's exercise 04 (one new query token per sequence over a paged KV
// cache), in fp16 as serving engines store it, and split along the context so that a handful of
// sequences still keeps every SM busy:
//   q, o               __half [B, Hq, D]
//   k_cache, v_cache   __half [num_blocks, Hkv, block_size, D]
//   block_table        int32 [B, max_blocks_per_seq]   logical block -> physical block
//   context_lens       int32 [B]                       tokens in each sequence's cache
// Token t of sequence b is in physical block block_table[b][t / block_size] at slot
// t % block_size; slots at or past context_lens[b] hold garbage (NaN in the tests) and never
// influence the output; a sequence with context length 0 outputs zeros. Query head h reads KV
// head h / (Hq / Hkv). Scale: PagedParams::softmax_scale(). Scores, softmax statistics and the
// partial outputs are fp32; only q, the cache and o are fp16.
// head_dim 32, 64 or 128; any block_size >= 1; context lengths may differ across the batch and
// must not exceed max_blocks_per_seq · block_size (not checked: they live on the device).
//
// Splits. The context window [0, max_blocks_per_seq · block_size) is cut into num_splits equal
// chunks of split_len = ceil(window / num_splits) tokens. Pass 1 launches one block per
// (sequence, KV head, split) and leaves the partial (m, ℓ, O) of every split that holds at least
// one token in `workspace`; pass 2 merges them with the log-sum-exp rule. With one split pass 1
// writes o itself, there is no pass 2 and no workspace.
// The automatic split count (SplitKvOptions::num_splits == 0) aims for two pass-1 blocks per SM:
//   base   = B · Hkv · ceil(G / 8)                  blocks with one split (8 heads per block)
//   wanted = 2 · SMs                                (cudaDevAttrMultiProcessorCount)
//   splits = round(wanted / base), at least 1, at most min(ceil(window / 256), 1024)
// (132 SMs, 8 KV heads, G = 4: B = 1 → 33 splits, B = 16 → 2, B >= 23 → 1.)
// One block per SM leaves each of its schedulers a single warp, too few to issue the dot
// products as fast as HBM delivers K and V; a third or fourth block per SM measured no faster
// and each split adds a partial to write and merge; splits shorter than 256 tokens spend more
// on that than they gain. Why, with numbers: day10-optimizations/06_split_kv_decode/
// 08-choosing-split-sizes.md ("Choosing split sizes").
//
// All pointers are device pointers; block_table and context_lens are read on the device only.
// `workspace` must hold split_kv_decode_workspace_bytes(p, opt) bytes (it may be null when that
// is 0); both functions must see the same p, opt and current device. Throws
// std::invalid_argument naming the field (q, k_cache, v_cache, block_table, context_lens, o,
// workspace, batch, heads_q, heads_kv, head_dim, block_size, num_blocks, max_blocks_per_seq,
// num_splits) before any launch.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "attention_params.h"

struct SplitKvOptions {
  // 0: the launcher chooses (the rule above). n in [1, 1024]: exactly n splits, whatever the GPU;
  // the tests use it to check the merge with 1, 2, 3, 7 and many splits (also more splits than
  // tokens, so some are empty) independently of the SM count. Not for production use.
  int num_splits = 0;
};

// The tokens of one split (index helper: pass 1 calls it, the [index] tests check it on the CPU).
// Split `split` (0-based) of a sequence with `len` tokens, when every split is `split_len` tokens
// long (split_len >= 1, the rule above), covers [begin, end): its chunk
// [split · split_len, (split + 1) · split_len) of the window, cut at len. Splits 0, 1, 2, ...
// tile [0, len) in order, each non-empty one starting where the previous one ends; a split whose
// chunk starts at or past len is empty (end <= begin): exactly those with split · split_len >= len,
// all but the first ceil(len / split_len). Needs split >= 0, split_len >= 1, len >= 0 and
// split · split_len <= INT_MAX (true for every split of a window that fits an int); the chunk's
// end (split + 1) · split_len may pass INT_MAX, the range is still exact.
struct SplitKvRange {
  int begin, end;
};
__host__ __device__ SplitKvRange split_kv_split_range(int split, int split_len, int len);

// The number of splits split_kv_decode will use for p (the rule above, or opt.num_splits).
int split_kv_decode_num_splits(const course::PagedParams& p, const SplitKvOptions& opt = {});

// Bytes of scratch space for the partials: B · Hq · num_splits · (D + 2) floats, 0 for one split.
size_t split_kv_decode_workspace_bytes(const course::PagedParams& p, const SplitKvOptions& opt = {});

void split_kv_decode(const __half* q, const __half* k_cache, const __half* v_cache, const int32_t* block_table,
                     const int32_t* context_lens, __half* o, float* workspace, const course::PagedParams& p,
                     cudaStream_t stream = 0, const SplitKvOptions& opt = {});
