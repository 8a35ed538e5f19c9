// CPU reference of KV-cache compression in the manner of H2O / SnapKV (day 10 · 08): the score an
// observation window of queries gives every cached key, the max pool over neighbouring keys, and
// the tokens a compression keeps (sinks + recent window + top-k of the rest).
//
// Straightforward loops in double, like the rest of the reference; tested against closed forms
// in common/tests/test_reference_kv_compress.cpp. The selection is written as a sort (score
// descending, token index ascending) so that it shares no code with a radix select.
#pragma once
#include <cstdint>
#include <vector>

#include "attention_params.h"

namespace course::ref {

// The rule of a compression (the exercise's KvCompressParams, field for field).
struct KvSelectParams {
  int window = 32;      // W: observation-window rows per query head (the last W tokens)
  int n_sink = 4;       // the first n_sink tokens are always kept
  int n_recent = 32;    // the last n_recent tokens are always kept
  int budget = 4096;    // tokens kept per (sequence, KV head) when the sequence is longer
  int pool_kernel = 7;  // odd; max pool over pool_kernel neighbouring scores (1: no pooling)
};

// Observation scores of a paged cache (layout and PagedParams: common/attention_params.h).
//   q_window: [B, Hq, W, D], row i of sequence b is the query of the token at L − W + i
//             (L = context_lens[b]); it sees keys j <= L − W + i (a row with L − W + i < 0 sees
//             none and adds nothing).
//   score[b][hk][j] = Σ_{h in group(hk)} Σ_{i < W} softmax_j(scale · q[b][h][i] · k[b][hk][j])
// Returned as [B, Hkv, T] with T = max_blocks_per_seq · block_size; entries j >= L are 0. Slots
// at or past L are never read (they may hold NaN).
std::vector<double> kv_observation_scores(const std::vector<float>& q_window, const std::vector<float>& k_cache,
                                          const std::vector<int32_t>& block_table,
                                          const std::vector<int32_t>& context_lens, const PagedParams& p, int window);

// pooled[j] = max of scores[j'] over |j' − j| <= (pool_kernel − 1) / 2, 0 <= j' < len.
std::vector<double> kv_max_pool(const double* scores, int len, int pool_kernel);

// The kept tokens of one (sequence, KV head), ascending. len <= budget: all of [0, len).
// Otherwise [0, n_sink), [len − n_recent, len) and the budget − n_sink − n_recent candidates of
// [n_sink, len − n_recent) with the highest `pooled`, a tie going to the lower token index.
// Needs n_sink + n_recent <= budget.
std::vector<int32_t> kv_select(const double* pooled, int len, int n_sink, int n_recent, int budget);

// The whole selection: kept token indices [B, Hkv, budget], ascending within each (b, hk), −1 at
// and past min(L, budget). With `pooled_out`, also the pooled scores [B, Hkv, T] (0 where
// nothing was pooled: j >= L, and every j of a sequence with L <= budget).
std::vector<int32_t> kv_compress_kept(const std::vector<float>& q_window, const std::vector<float>& k_cache,
                                      const std::vector<int32_t>& block_table, const std::vector<int32_t>& context_lens,
                                      const PagedParams& p, const KvSelectParams& c,
                                      std::vector<double>* pooled_out = nullptr);

}  // namespace course::ref
