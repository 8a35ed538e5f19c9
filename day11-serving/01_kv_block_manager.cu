// Day 11 · Exercise 01 · KV block manager: a paged KV cache's bookkeeping on the host — block tables, a free pool, all-or-nothing appends.
// Lesson: day11-serving/01_kv_block_manager/README.md. Test: make test EX=01_kv_block_manager
//
// Host C++ (a CPU_ONLY exercise: this file is compiled by the host compiler). The GPU side of a
// paged cache is a pool of fixed-size blocks; this class decides which sequence owns which
// block. The engine asks it for room before every step (through the scheduler, exercise 02),
// copies the block tables to the GPU for the attention kernels and computes the cache-write
// slots with slot_of. Given: the members (a free stack and one entry per sequence), the argument
// checks, the accessors and can_append. You write the block count, the plan of an append, the
// append itself, free and the slot mapping.
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "01_kv_block_manager.h"
#include "check_args.h"

namespace serving {

int blocks_for_tokens(int tokens, int block_size) {
  course::require_non_negative(tokens, "blocks_for_tokens", "tokens");
  course::require_positive(block_size, "blocks_for_tokens", "block_size");
  // TODO(1) (≈ 1 line): the number of blocks that hold `tokens` tokens: a partly filled last block
  //          counts as a block, no tokens need no block, and the count is exact for every tokens up
  //          to INT_MAX (lesson: "Blocks for tokens").
  return 0;  // TODO(1): replace (no length needs a block until then)
}

KvBlockManager::KvBlockManager(int num_blocks, int block_size, int max_blocks_per_seq)
    : num_blocks_(num_blocks), block_size_(block_size), max_blocks_per_seq_(max_blocks_per_seq) {
  course::require_positive(num_blocks, "KvBlockManager", "num_blocks");
  course::require_positive(block_size, "KvBlockManager", "block_size");
  course::require_positive(max_blocks_per_seq, "KvBlockManager", "max_blocks_per_seq");
  // Block 0 on top of the stack, so a fresh manager hands out 0, 1, 2, ... in order (any order
  // would be correct; this one makes the lesson's worked example reproducible).
  free_blocks_.reserve(size_t(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
}

int KvBlockManager::num_blocks() const { return num_blocks_; }
int KvBlockManager::block_size() const { return block_size_; }
int KvBlockManager::max_blocks_per_seq() const { return max_blocks_per_seq_; }
int KvBlockManager::num_free_blocks() const { return int(free_blocks_.size()); }
bool KvBlockManager::has(int seq) const { return seqs_.count(seq) != 0; }

int KvBlockManager::num_tokens(int seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

const KvBlockManager::Sequence& KvBlockManager::find(int seq, const char* fn) const {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end())
    course::throw_invalid_argument(fn, "seq",
                                   "is not a sequence this manager holds (got " + std::to_string(seq) +
                                       "; append registers one, free forgets it)");
  return it->second;
}

int KvBlockManager::blocks_to_add(int seq, int new_tokens) const {
  const auto it = seqs_.find(seq);
  const int held_tokens = it == seqs_.end() ? 0 : it->second.num_tokens;
  const int held_blocks = it == seqs_.end() ? 0 : int(it->second.table.size());
  // TODO(2) (≈ 4 lines): how many blocks the new length held_tokens + new_tokens needs beyond the
  //          held_blocks seq already holds (its last block may have room left), or -1 when the new
  //          length cannot fit seq's table: more than max_blocks_per_seq_ blocks, or more tokens
  //          than an int holds (lesson: "Planning an append").
  return 0;  // TODO(2): replace (every append needs no block until then)
}

bool KvBlockManager::can_append(int seq, int new_tokens) const {
  course::require_non_negative(new_tokens, "KvBlockManager::can_append", "new_tokens");
  const int add = blocks_to_add(seq, new_tokens);
  return add >= 0 && add <= num_free_blocks();
}

bool KvBlockManager::append(int seq, int new_tokens) {
  course::require_non_negative(new_tokens, "KvBlockManager::append", "new_tokens");
  // TODO(3) (≈ 9 lines): reserve room for new_tokens more tokens of seq, all or nothing: decide
  //          first, from blocks_to_add and the free stack, whether the append fits, and return false
  //          with nothing changed (an unknown seq stays unknown) when it does not; otherwise
  //          register seq if it is new, move that many blocks from the top of the free stack to
  //          the end of its table, count the tokens and return true (lesson: "All or nothing").
  return false;  // TODO(3): replace (every append fails until then)
}

void KvBlockManager::free(int seq) {
  const Sequence& s = find(seq, "KvBlockManager::free");
  // TODO(4) (≈ 2 lines): every block of s.table back on the free stack (in reverse, the next
  //          append gets them back in the table's order, as in the worked example; any order is
  //          correct), then forget seq (lesson: "Freeing a sequence").
}

const std::vector<int32_t>& KvBlockManager::block_table(int seq) const {
  return find(seq, "KvBlockManager::block_table").table;
}

int64_t KvBlockManager::slot_of(int seq, int token) const {
  const Sequence& s = find(seq, "KvBlockManager::slot_of");
  course::require(
      token >= 0 && token < s.num_tokens, "KvBlockManager::slot_of", "token",
      "must be in [0, num_tokens) = [0, " + std::to_string(s.num_tokens) + ") (got " + std::to_string(token) + ")");
  // TODO(5) (≈ 2 lines): the flat slot of token `token` of seq: the physical block its logical
  //          block maps to, times the block size, plus its place inside the block; in 64 bits, as
  //          the slot of a large pool passes INT_MAX (lesson: "The slot of a token").
  return -1;  // TODO(5): replace (no slot until then)
}

}  // namespace serving
