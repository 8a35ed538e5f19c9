// A paged KV cache built the hard way, on the host: what the paged-decode tests and the bench's
// reference check feed a kernel so that every classic paging mistake shows up in the output.
//
//   * The physical blocks of all sequences are a random permutation of the pool: a kernel that
//     uses the logical block number as the physical one reads someone else's tokens.
//   * Every slot at or past context_lens[b] in a sequence's last block, every physical block no
//     sequence owns, and every block_table entry past a sequence's last block (they point at an
//     unowned block) hold NaN (course::poison_f32()): a kernel that reads one element too many
//     returns NaN.
//
// Layout: common/attention_params.h (PagedParams): cache [num_blocks, Hkv, block_size, D],
// block_table [batch, max_blocks_per_seq].
#pragma once
#include <cstdint>
#include <vector>

#include "attention_params.h"

namespace course {

struct PagedCache {
  PagedParams p;               // batch, heads, head_dim, block_size, num_blocks, max_blocks_per_seq
  std::vector<float> k, v;     // p.cache_elems() each; N(0, 1) where a token lives, NaN elsewhere
  std::vector<int32_t> table;  // p.batch × p.max_blocks_per_seq physical block ids
  std::vector<int32_t> lens;   // context_lens, one per sequence (0 allowed)
};

// The shuffled, NaN-padded cache described above, for one sequence per entry of context_lens.
// max_blocks_per_seq is the longest sequence's block count plus `spare_columns`; the pool has
// `spare_blocks` blocks no sequence owns (at least 1: the unused table entries point there).
PagedCache build_paged_cache(const std::vector<int32_t>& context_lens, int heads_q, int heads_kv, int head_dim,
                             int block_size, uint64_t seed, int spare_columns = 1, int spare_blocks = 3);

// Only the block table, for caches too large to build on the host (the bench's timing inputs):
// batch × blocks_per_seq entries drawn without repetition from a random permutation of
// num_blocks >= batch · blocks_per_seq physical blocks.
std::vector<int32_t> permuted_block_table(int batch, int blocks_per_seq, int num_blocks, uint64_t seed);

}  // namespace course
