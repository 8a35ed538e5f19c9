// Day 11 · Exercise 01 · KV block manager — the contract.
//
// The bookkeeping of a paged KV cache (the pages of day 06's exercise 04 and day 10's 06, seen
// from the host). The cache on the GPU is a pool of num_blocks physical blocks of block_size
// token slots each (k_cache, v_cache: [num_blocks, Hkv, block_size, D]); a sequence owns a list
// of them, its block table:
//   block_table(seq)   int32 [blocks held], logical block i -> physical block block_table(seq)[i]
//   token t of seq     physical block block_table(seq)[t / block_size], slot t % block_size,
//                      i.e. the flat slot slot_of(seq, t) = block_table[t / bs] · bs + t % bs
// Every physical block belongs to at most one sequence or to the free pool, never to both, and a
// sequence of n tokens holds exactly blocks_for_tokens(n, block_size) blocks (the last one
// partly filled). Which physical block a sequence gets is the manager's choice: callers, the
// engine and the tests rely on ownership and counts, never on particular block ids.
// A sequence id is any int the caller chooses (the engine uses request ids).
//
// Plain host C++ (no CUDA): the scheduler (exercise 02) reserves pages through it, and the
// engine copies block_table(seq) into the int32 [B, max_blocks_per_seq] table its kernels read
// and uses slot_of for the cache-write kernel's slot mapping.
//
// Errors: std::invalid_argument whose message names the field ("... argument 'seq' ..."), thrown
// before anything changes: a failed call leaves the manager as it was.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace serving {

// Blocks needed for `tokens` tokens at `block_size` tokens per block (ceil; 0 for 0 tokens),
// exact for every tokens up to INT_MAX. Throws invalid_argument naming tokens (< 0) or
// block_size (< 1).
int blocks_for_tokens(int tokens, int block_size);

class KvBlockManager {
 public:
  // num_blocks physical blocks of block_size token slots each; max_blocks_per_seq columns per
  // block table. Throws std::invalid_argument naming the field (num_blocks, block_size,
  // max_blocks_per_seq) when one is < 1.
  KvBlockManager(int num_blocks, int block_size, int max_blocks_per_seq);
  int num_blocks() const;
  int block_size() const;
  int max_blocks_per_seq() const;
  int num_free_blocks() const;
  // seq holds blocks or tokens: a successful append registered it (even one of 0 tokens) and no
  // free forgot it since.
  bool has(int seq) const;
  int num_tokens(int seq) const;  // 0 for an unknown seq
  // Would append(seq, new_tokens) succeed now? (seq may be unknown: it starts at 0 tokens)
  // new_tokens < 0 throws invalid_argument("new_tokens"), as append does.
  bool can_append(int seq, int new_tokens) const;
  // Room for new_tokens more tokens of seq (an unknown seq starts at 0 tokens): takes the blocks
  // the new length needs from the free pool and appends them to seq's block table. All or
  // nothing: when the free blocks do not suffice, or the table would exceed max_blocks_per_seq
  // (or the length INT_MAX tokens), returns false and changes nothing (an unknown seq stays
  // unknown). new_tokens < 0 throws invalid_argument("new_tokens").
  bool append(int seq, int new_tokens);
  // Every block of seq back to the free pool; seq forgotten. Unknown seq: invalid_argument("seq").
  void free(int seq);
  // seq's block table, blocks_for_tokens(num_tokens(seq)) entries; valid until the next append
  // or free of seq. Unknown seq: invalid_argument("seq").
  const std::vector<int32_t>& block_table(int seq) const;
  // Physical slot of token `token` of seq: block_table[token / bs] * bs + token % bs
  // (the slot mapping the engine's cache-write kernel uses). Unknown seq: invalid_argument("seq");
  // token outside [0, num_tokens): invalid_argument("token").
  int64_t slot_of(int seq, int token) const;

 private:
  struct Sequence {
    int num_tokens = 0;
    std::vector<int32_t> table;  // logical block i -> physical block table[i]
  };
  // The entry of a sequence the manager holds; invalid_argument("seq") naming `fn` otherwise.
  const Sequence& find(int seq, const char* fn) const;
  // How many blocks append(seq, new_tokens) must take from the pool, or -1 when the new length
  // cannot fit seq's table at all (more than max_blocks_per_seq blocks or INT_MAX tokens).
  int blocks_to_add(int seq, int new_tokens) const;

  int num_blocks_, block_size_, max_blocks_per_seq_;
  // The free pool as a stack: append takes blocks from the back, free pushes them back there.
  std::vector<int32_t> free_blocks_;
  std::unordered_map<int, Sequence> seqs_;  // the sequences that hold blocks or tokens
};

}  // namespace serving
