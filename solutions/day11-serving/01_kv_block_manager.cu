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
  // snippet-begin: blocks-for-tokens
  return tokens / block_size + (tokens % block_size != 0 ? 1 : 0);  // never forms tokens + block_size - 1
  // snippet-end: blocks-for-tokens
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
  // snippet-begin: blocks-to-add
  if (new_tokens > INT_MAX - held_tokens) return -1;  // the new length would not fit an int
  const int needed = blocks_for_tokens(held_tokens + new_tokens, block_size_);
  if (needed > max_blocks_per_seq_) return -1;  // wider than a row of the engine's block table
  return needed - held_blocks;                  // the last held block may still have room
  // snippet-end: blocks-to-add
}

bool KvBlockManager::can_append(int seq, int new_tokens) const {
  course::require_non_negative(new_tokens, "KvBlockManager::can_append", "new_tokens");
  const int add = blocks_to_add(seq, new_tokens);
  return add >= 0 && add <= num_free_blocks();
}

bool KvBlockManager::append(int seq, int new_tokens) {
  course::require_non_negative(new_tokens, "KvBlockManager::append", "new_tokens");
  // snippet-begin: append
  const int add = blocks_to_add(seq, new_tokens);
  if (add < 0 || add > num_free_blocks()) return false;  // decided before anything changes
  Sequence& s = seqs_[seq];                              // registers a new sequence, now that it fits
  for (int i = 0; i < add; ++i) {
    s.table.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  s.num_tokens += new_tokens;
  return true;
  // snippet-end: append
}

void KvBlockManager::free(int seq) {
  const Sequence& s = find(seq, "KvBlockManager::free");
  // snippet-begin: free
  for (auto it = s.table.rbegin(); it != s.table.rend(); ++it) free_blocks_.push_back(*it);
  seqs_.erase(seq);  // s dangles from here on
  // snippet-end: free
}

const std::vector<int32_t>& KvBlockManager::block_table(int seq) const {
  return find(seq, "KvBlockManager::block_table").table;
}

int64_t KvBlockManager::slot_of(int seq, int token) const {
  const Sequence& s = find(seq, "KvBlockManager::slot_of");
  course::require(
      token >= 0 && token < s.num_tokens, "KvBlockManager::slot_of", "token",
      "must be in [0, num_tokens) = [0, " + std::to_string(s.num_tokens) + ") (got " + std::to_string(token) + ")");
  // snippet-begin: slot-of
  const int32_t block = s.table[size_t(token / block_size_)];  // logical block -> physical block
  return int64_t(block) * block_size_ + token % block_size_;
  // snippet-end: slot-of
}

}  // namespace serving
