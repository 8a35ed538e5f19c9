// Tests for day11/01_kv_block_manager: the paged KV cache's bookkeeping, on the CPU.
//
// The test keeps its own model of what the manager must hold (Model below): for every block its
// owner (a sequence or the free pool), for every sequence its token count and the table it was
// seen to hold. After each operation the manager is compared with the model:
//   * counts: free blocks, tokens, has(), and a table of exactly ceil(tokens / block_size) blocks
//     (the model's own ceil, not the manager's blocks_for_tokens);
//   * ownership: every table entry is a block id in [0, num_blocks), no block is in two tables,
//     and free + owned = num_blocks (nothing leaked);
//   * stability: an append only adds blocks at the end of the table (a block already holding
//     K/V never moves), and every block it adds was free before;
//   * all or nothing: a failed append changes nothing at all, and the model predicts exactly
//     when an append fails (too few free blocks, or a table wider than max_blocks_per_seq);
//   * slot_of: block_table[t / bs] · bs + t % bs for every token, all slots distinct.
// Which physical block the manager hands out is its own choice: only ownership is checked.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "01_kv_block_manager.h"
#include "catch_compat.h"
#include "check_invalid_argument.h"
#include "random.h"

using serving::blocks_for_tokens;
using serving::KvBlockManager;

namespace {

std::string table_str(const std::vector<int32_t>& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.size(); ++i) s += (i ? ", " : "") + std::to_string(t[i]);
  return s + "]";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The test's own account of the state. Every check returns "" or the first difference found,
// worded for the learner.
struct Model {
  int num_blocks, block_size, max_blocks;
  std::map<int, int> tokens;                  // seq -> tokens
  std::map<int, std::vector<int32_t>> table;  // seq -> the table the manager was seen to hold

  Model(int nb, int bs, int mb) : num_blocks(nb), block_size(bs), max_blocks(mb) {}

  int owned_blocks() const {
    int n = 0;
    for (const auto& kv : table) n += int(kv.second.size());
    return n;
  }
  int free_blocks() const { return num_blocks - owned_blocks(); }
  int tokens_of(int seq) const {
    const auto it = tokens.find(seq);
    return it == tokens.end() ? 0 : it->second;
  }
  // Does append(seq, n) fit? The blocks the new length needs beyond those held must be free, and
  // the new length must fit a table of max_blocks blocks.
  bool fits(int seq, int n) const {
    const int64_t len = int64_t(tokens_of(seq)) + n;
    if (len > INT_MAX) return false;
    const int64_t need = ceil_div(len, block_size);
    if (need > max_blocks) return false;
    const auto it = table.find(seq);
    const int64_t held = it == table.end() ? 0 : int64_t(it->second.size());
    return need - held <= free_blocks();
  }

  // Compares the manager with the model. Also checks that no block is in two tables.
  std::string check(const KvBlockManager& kv) const {
    if (kv.num_free_blocks() != free_blocks())
      return "num_free_blocks() = " + std::to_string(kv.num_free_blocks()) + ", expected " +
             std::to_string(free_blocks()) + " (" + std::to_string(num_blocks) + " blocks, " +
             std::to_string(owned_blocks()) + " held by sequences)";
    std::vector<int> owner(size_t(num_blocks), -1);
    for (const auto& kv_t : tokens) {
      const int seq = kv_t.first;
      if (!kv.has(seq)) return "has(" + std::to_string(seq) + ") is false for a sequence that holds tokens";
      if (kv.num_tokens(seq) != kv_t.second)
        return "num_tokens(" + std::to_string(seq) + ") = " + std::to_string(kv.num_tokens(seq)) + ", expected " +
               std::to_string(kv_t.second);
      const std::vector<int32_t>& t = kv.block_table(seq);
      const auto want = ceil_div(kv_t.second, block_size);
      if (int64_t(t.size()) != want)
        return "block_table(" + std::to_string(seq) + ") has " + std::to_string(t.size()) + " blocks for " +
               std::to_string(kv_t.second) + " tokens at block_size " + std::to_string(block_size) +
               ", expected ceil(" + std::to_string(kv_t.second) + " / " + std::to_string(block_size) +
               ") = " + std::to_string(want) + ": " + table_str(t);
      const std::vector<int32_t>& seen = table.at(seq);
      if (t.size() < seen.size() || !std::equal(seen.begin(), seen.end(), t.begin()))
        return "block_table(" + std::to_string(seq) + ") = " + table_str(t) + " changed blocks it already held " +
               table_str(seen) + " (an append may only add blocks at the end)";
      for (size_t i = 0; i < t.size(); ++i) {
        const int32_t b = t[i];
        if (b < 0 || b >= num_blocks)
          return "block_table(" + std::to_string(seq) + ")[" + std::to_string(i) + "] = " + std::to_string(b) +
                 " is not a block of a pool of " + std::to_string(num_blocks);
        if (owner[size_t(b)] != -1)
          return "block " + std::to_string(b) + " is in the tables of sequences " + std::to_string(owner[size_t(b)]) +
                 " and " + std::to_string(seq) + ": two sequences would write their K/V into the same slots";
        owner[size_t(b)] = seq;
      }
    }
    return "";
  }
};

// Appends through the manager and the model; "" when both agree.
std::string append_both(KvBlockManager& kv, Model& m, int seq, int n) {
  const bool expect = m.fits(seq, n);
  const std::string what = "append(" + std::to_string(seq) + ", " + std::to_string(n) + ") with " +
                           std::to_string(m.tokens_of(seq)) + " tokens held and " + std::to_string(m.free_blocks()) +
                           " free blocks";
  if (kv.can_append(seq, n) != expect)
    return "can_append: " + what + " returned " + (expect ? "false" : "true") + ", expected " +
           (expect ? "true" : "false");
  const bool got = kv.append(seq, n);
  if (got != expect)
    return what + " returned " + (got ? "true" : "false") + ", expected " + (expect ? "true" : "false");
  if (!got) {
    if (m.tokens.count(seq) == 0 && kv.has(seq))
      return what + " failed but registered the sequence: has(" + std::to_string(seq) + ") is true";
    const std::string s = m.check(kv);
    return s.empty() ? "" : "after the failed " + what + " (it must change nothing): " + s;
  }
  // A success: the new table is the old one plus blocks that were free before.
  std::set<int32_t> owned;
  for (const auto& e : m.table)
    if (e.first != seq) owned.insert(e.second.begin(), e.second.end());
  const std::vector<int32_t> t = kv.block_table(seq);
  const std::vector<int32_t> seen = m.table.count(seq) ? m.table[seq] : std::vector<int32_t>{};
  if (t.size() < seen.size() || !std::equal(seen.begin(), seen.end(), t.begin()))
    return what + ": block_table(" + std::to_string(seq) + ") = " + table_str(t) + " changed blocks it already held " +
           table_str(seen) + " (an append may only add blocks at the end)";
  for (size_t i = seen.size(); i < t.size(); ++i)
    if (owned.count(t[i]))
      return what + " gave the sequence block " + std::to_string(t[i]) + ", which another sequence holds";
  m.tokens[seq] += n;
  m.table[seq] = t;
  const std::string s = m.check(kv);
  return s.empty() ? "" : "after " + what + ": " + s;
}

std::string free_both(KvBlockManager& kv, Model& m, int seq) {
  kv.free(seq);
  m.tokens.erase(seq);
  m.table.erase(seq);
  if (kv.has(seq)) return "after free(" + std::to_string(seq) + "): has() is still true";
  if (kv.num_tokens(seq) != 0)
    return "after free(" + std::to_string(seq) + "): num_tokens() = " + std::to_string(kv.num_tokens(seq)) +
           ", expected 0";
  const std::string s = m.check(kv);
  return s.empty() ? "" : "after free(" + std::to_string(seq) + "): " + s;
}

// Every token's slot: block_table[t / bs] · bs + t % bs, and no slot used twice.
std::string check_slots(const KvBlockManager& kv, const Model& m) {
  std::map<int64_t, std::pair<int, int>> used;
  for (const auto& e : m.tokens) {
    const std::vector<int32_t>& t = kv.block_table(e.first);
    for (int tok = 0; tok < e.second; ++tok) {
      const int64_t want = int64_t(t[size_t(tok / m.block_size)]) * m.block_size + tok % m.block_size;
      const int64_t got = kv.slot_of(e.first, tok);
      if (got != want)
        return "slot_of(" + std::to_string(e.first) + ", " + std::to_string(tok) + ") = " + std::to_string(got) +
               ", expected block_table[" + std::to_string(tok / m.block_size) + "] · " + std::to_string(m.block_size) +
               " + " + std::to_string(tok % m.block_size) + " = " + std::to_string(want) + " (block table " +
               table_str(t) + ")";
      const auto ins = used.emplace(got, std::make_pair(e.first, tok));
      if (!ins.second)
        return "slot " + std::to_string(got) + " holds token " + std::to_string(ins.first->second.second) +
               " of sequence " + std::to_string(ins.first->second.first) + " and token " + std::to_string(tok) +
               " of sequence " + std::to_string(e.first);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("blocks_for_tokens: ceil at the block edges", "[day11][01_kv_block_manager]") {
  // 0 tokens need no block; bs - 1 and bs tokens one; bs + 1 two (a floor gives 0 for 1..bs-1
  // tokens and drops the partial last block).
  for (int bs : {1, 2, 3, 4, 16, 64, 1000}) {
    INFO("block_size = " << bs);
    CHECK(blocks_for_tokens(0, bs) == 0);
    CHECK(blocks_for_tokens(1, bs) == 1);
    if (bs > 1) CHECK(blocks_for_tokens(bs - 1, bs) == 1);
    CHECK(blocks_for_tokens(bs, bs) == 1);
    CHECK(blocks_for_tokens(bs + 1, bs) == 2);
    CHECK(blocks_for_tokens(2 * bs, bs) == 2);
    CHECK(blocks_for_tokens(2 * bs + 1, bs) == 3);
    if (bs > 1) CHECK(blocks_for_tokens(10 * bs - 1, bs) == 10);
  }
  // Exact up to INT_MAX = 2^31 - 1: tokens + bs - 1 would pass it.
  CHECK(blocks_for_tokens(INT_MAX, 16) == 134217728);  // 2^27: the last block holds 15 tokens
  CHECK(blocks_for_tokens(INT_MAX - 15, 16) == 134217727);
  CHECK(blocks_for_tokens(INT_MAX, 1) == INT_MAX);
  CHECK(blocks_for_tokens(INT_MAX, INT_MAX) == 1);
  CHECK(blocks_for_tokens(INT_MAX - 1, INT_MAX) == 1);
}

TEST_CASE("KvBlockManager: the lesson's worked example", "[day11][01_kv_block_manager]") {
  // The steps of 01_kv_block_manager/03-a-worked-example.md: the counts, tables and slots must
  // be those of the page (block ids are the manager's choice: ownership is what is checked).
  KvBlockManager kv(8, 4, 4);
  Model m(8, 4, 4);
  CHECK(kv.num_blocks() == 8);
  CHECK(kv.block_size() == 4);
  CHECK(kv.max_blocks_per_seq() == 4);
  CHECK(kv.num_free_blocks() == 8);
  REQUIRE(append_both(kv, m, 0, 6) == "");  // A: 6 tokens, 2 blocks
  REQUIRE(append_both(kv, m, 1, 3) == "");  // B: 3 tokens, 1 block
  REQUIRE(append_both(kv, m, 2, 9) == "");  // C: 9 tokens, 3 blocks
  CHECK(kv.num_free_blocks() == 2);
  REQUIRE(append_both(kv, m, 0, 1) == "");  // A: 7 tokens, still 2 blocks
  REQUIRE(append_both(kv, m, 1, 1) == "");  // B: 4 tokens, its one block is full
  REQUIRE(append_both(kv, m, 1, 1) == "");  // B: 5 tokens, a second block
  CHECK(kv.num_free_blocks() == 1);
  REQUIRE(append_both(kv, m, 0, 6) == "");  // A: 13 tokens would need 2 more blocks: fails
  CHECK(kv.num_tokens(0) == 7);
  CHECK(kv.num_free_blocks() == 1);
  REQUIRE(check_slots(kv, m) == "");
  REQUIRE(free_both(kv, m, 2) == "");  // C done: its 3 blocks come back
  CHECK(kv.num_free_blocks() == 4);
  REQUIRE(append_both(kv, m, 0, 6) == "");  // A: now it fits (4 blocks, the table's limit)
  CHECK(kv.block_table(0).size() == 4);
  CHECK(kv.num_free_blocks() == 2);
  REQUIRE(check_slots(kv, m) == "");
}

TEST_CASE("KvBlockManager: appends that cross block boundaries", "[day11][01_kv_block_manager]") {
  // One token at a time and in chunks: a new block exactly when the last one is full. A manager
  // that sizes an append by its own tokens (ceil(new / bs) more blocks) over-allocates here.
  for (int bs : {1, 3, 4, 16}) {
    INFO("block_size = " << bs);
    KvBlockManager kv(64, bs, 64);
    Model m(64, bs, 64);
    for (int i = 0; i < 2 * bs + 2; ++i) REQUIRE(append_both(kv, m, 5, 1) == "");
    REQUIRE(append_both(kv, m, 6, bs - 1) == "");  // one block, one slot left
    REQUIRE(append_both(kv, m, 6, 1) == "");       // exactly full
    REQUIRE(append_both(kv, m, 6, 0) == "");       // nothing new
    REQUIRE(append_both(kv, m, 6, 1) == "");       // the next block
    REQUIRE(append_both(kv, m, 6, bs + 1) == "");  // fills it and opens one more
    REQUIRE(append_both(kv, m, 7, 2 * bs + 1) == "");
    REQUIRE(append_both(kv, m, 7, bs - 1) == "");
    REQUIRE(check_slots(kv, m) == "");
  }
}

TEST_CASE("KvBlockManager: all or nothing when the pool runs out", "[day11][01_kv_block_manager]") {
  KvBlockManager kv(4, 4, 8);
  Model m(4, 4, 8);
  REQUIRE(append_both(kv, m, 1, 10) == "");  // 3 blocks, 2 free slots in the last one
  const std::vector<int32_t> before = kv.block_table(1);
  // A new sequence asking for 2 blocks with 1 free: false, not registered, nothing taken.
  CHECK_FALSE(kv.can_append(2, 5));
  CHECK_FALSE(kv.append(2, 5));
  CHECK_FALSE(kv.has(2));
  CHECK(kv.num_tokens(2) == 0);
  CHECK(kv.num_free_blocks() == 1);
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.block_table(2));
  // An existing sequence asking for more than the pool has: its table and length unchanged.
  CHECK_FALSE(kv.append(1, 7));  // 17 tokens need 5 blocks, 3 held + 1 free
  CHECK(kv.num_tokens(1) == 10);
  CHECK(kv.block_table(1) == before);
  CHECK(kv.num_free_blocks() == 1);
  REQUIRE(m.check(kv) == "");
  // What does fit still fits: the 2 slots left in its last block, then the last free block.
  REQUIRE(append_both(kv, m, 1, 2) == "");
  CHECK(kv.num_free_blocks() == 1);
  REQUIRE(append_both(kv, m, 2, 4) == "");
  CHECK(kv.num_free_blocks() == 0);
  // An empty pool: any append that needs a block fails, one that needs none succeeds.
  REQUIRE(append_both(kv, m, 3, 1) == "");
  CHECK_FALSE(kv.has(3));
  REQUIRE(append_both(kv, m, 1, 1) == "");
  REQUIRE(append_both(kv, m, 2, 0) == "");
  REQUIRE(check_slots(kv, m) == "");
}

TEST_CASE("KvBlockManager: max_blocks_per_seq caps one sequence's table", "[day11][01_kv_block_manager]") {
  // The engine's block table has max_blocks_per_seq columns: no sequence may hold more, however
  // many blocks are free.
  KvBlockManager kv(32, 4, 3);
  Model m(32, 4, 3);
  CHECK_FALSE(kv.can_append(1, 13));  // 4 blocks > 3
  CHECK_FALSE(kv.append(1, 13));
  CHECK_FALSE(kv.has(1));
  CHECK(kv.num_free_blocks() == 32);
  REQUIRE(append_both(kv, m, 1, 12) == "");  // exactly 3 blocks
  REQUIRE(append_both(kv, m, 1, 1) == "");   // a 4th: fails, 29 blocks free or not
  CHECK(kv.num_tokens(1) == 12);
  CHECK(kv.block_table(1).size() == 3);
  REQUIRE(append_both(kv, m, 2, 11) == "");
  REQUIRE(append_both(kv, m, 2, 1) == "");
  REQUIRE(append_both(kv, m, 2, 1) == "");
  // A length past INT_MAX never fits, even with a table wide enough for it.
  KvBlockManager wide(4, 1 << 30, 4);
  Model mw(4, 1 << 30, 4);
  REQUIRE(append_both(wide, mw, 0, INT_MAX) == "");
  CHECK_FALSE(wide.can_append(0, 1));
  CHECK_FALSE(wide.append(0, 1));
  CHECK(wide.num_tokens(0) == INT_MAX);
  REQUIRE(mw.check(wide) == "");
}

TEST_CASE("KvBlockManager: free returns every block and forgets the sequence", "[day11][01_kv_block_manager]") {
  KvBlockManager kv(16, 4, 16);
  Model m(16, 4, 16);
  REQUIRE(append_both(kv, m, 10, 17) == "");  // 5 blocks
  REQUIRE(append_both(kv, m, 11, 4) == "");   // 1 block
  REQUIRE(append_both(kv, m, 12, 0) == "");   // registered, no block
  CHECK(kv.has(12));
  CHECK(kv.block_table(12).empty());
  REQUIRE(free_both(kv, m, 10) == "");
  CHECK(kv.num_free_blocks() == 15);
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.block_table(10));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.slot_of(10, 0));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.free(10));  // freed once: unknown now
  REQUIRE(free_both(kv, m, 12) == "");
  REQUIRE(free_both(kv, m, 11) == "");
  CHECK(kv.num_free_blocks() == 16);
  // A freed id starts again at 0 tokens, with a fresh table.
  REQUIRE(append_both(kv, m, 10, 3) == "");
  CHECK(kv.num_tokens(10) == 3);
  CHECK(kv.block_table(10).size() == 1);
  REQUIRE(check_slots(kv, m) == "");
}

TEST_CASE("KvBlockManager: blocks are reused after free", "[day11][01_kv_block_manager]") {
  // Fill the pool, free the oldest sequence, and the next sequence must get exactly its blocks
  // (they are the only free ones), with nothing lost over many rounds.
  KvBlockManager kv(12, 2, 12);
  Model m(12, 2, 12);
  REQUIRE(append_both(kv, m, 0, 7) == "");  // 4 blocks
  REQUIRE(append_both(kv, m, 1, 8) == "");  // 4 blocks
  REQUIRE(append_both(kv, m, 2, 8) == "");  // 4 blocks: the pool is empty
  CHECK(kv.num_free_blocks() == 0);
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    const int old_id = round, seq = round + 3;  // the oldest live sequence, a new one
    const std::vector<int32_t> freed = kv.block_table(old_id);
    REQUIRE(free_both(kv, m, old_id) == "");
    CHECK(kv.num_free_blocks() == int(freed.size()));
    REQUIRE(append_both(kv, m, seq, 2 * int(freed.size())) == "");
    const std::vector<int32_t> got = kv.block_table(seq);
    CHECK(std::set<int32_t>(got.begin(), got.end()) == std::set<int32_t>(freed.begin(), freed.end()));
    CHECK(kv.num_free_blocks() == 0);
  }
  REQUIRE(check_slots(kv, m) == "");
}

TEST_CASE("KvBlockManager: slot_of maps tokens through the block table", "[day11][01_kv_block_manager]") {
  // Interleaved appends give every sequence physical blocks out of logical order; slot_of must
  // go through the table (a slot from the logical block, t itself, collides across sequences).
  KvBlockManager kv(40, 4, 10);
  Model m(40, 4, 10);
  for (int step = 0; step < 9; ++step)
    for (int seq = 0; seq < 4; ++seq) REQUIRE(append_both(kv, m, seq, 1 + (step + seq) % 5) == "");
  REQUIRE(check_slots(kv, m) == "");
  COURSE_CHECK_INVALID_ARGUMENT("token", kv.slot_of(0, -1));
  COURSE_CHECK_INVALID_ARGUMENT("token", kv.slot_of(0, kv.num_tokens(0)));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.slot_of(99, 0));
  // Slots of a large pool pass INT_MAX: 600,000 blocks of 4096 slots are held, so some block id
  // is at least 599,999 and its slots start past 599,999 · 4096 > 2^31: 64-bit arithmetic.
  KvBlockManager big(1 << 20, 4096, 1 << 20);
  Model mb(1 << 20, 4096, 1 << 20);
  REQUIRE(append_both(big, mb, 0, 500000 * 4096) == "");
  REQUIRE(append_both(big, mb, 1, 100000 * 4096) == "");
  int64_t max_slot = 0;
  for (int seq = 0; seq < 2; ++seq) {
    const std::vector<int32_t> t = big.block_table(seq);
    for (size_t b = 0; b < t.size(); ++b) {
      const int tok = int(b) * 4096 + int(b % 4096);
      const int64_t got = big.slot_of(seq, tok), want = int64_t(t[b]) * 4096 + int64_t(b % 4096);
      if (got != want) {
        FAIL_CHECK("slot_of(" << seq << ", " << tok << ") = " << got << ", expected block_table[" << b << "] · 4096 + "
                              << b % 4096 << " = " << want);
        break;
      }
      max_slot = std::max(max_slot, got);
    }
  }
  CHECK(max_slot > int64_t(INT_MAX));
}

TEST_CASE("KvBlockManager: random operation sequences against a model", "[day11][01_kv_block_manager]") {
  // Seeded mixes of appends (0 tokens, one token, chunks, more than the pool holds) and frees of
  // live and unknown sequences, with the model checked after every operation.
  struct Shape {
    int num_blocks, block_size, max_blocks;
  };
  const Shape shapes[] = {{1, 1, 1}, {8, 4, 4}, {16, 1, 16}, {24, 3, 6}, {64, 16, 8}, {128, 5, 40}};
  for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); ++si) {
    const Shape sh = shapes[si];
    for (int rep = 0; rep < 4; ++rep) {
      const uint64_t seed = course::case_seed("kv_block_manager random", int64_t(si) * 16 + rep);
      INFO("num_blocks " << sh.num_blocks << ", block_size " << sh.block_size << ", max_blocks_per_seq "
                         << sh.max_blocks << ", seed " << seed);
      course::Rng rng(seed);
      KvBlockManager kv(sh.num_blocks, sh.block_size, sh.max_blocks);
      Model m(sh.num_blocks, sh.block_size, sh.max_blocks);
      std::string problem;
      for (int op = 0; op < 400 && problem.empty(); ++op) {
        const int seq = int(rng.uniform_int(0, 7));
        const double r = rng.uniform();
        if (r < 0.2) {
          if (m.tokens.count(seq))
            problem = free_both(kv, m, seq);
          else
            problem = course::invalid_argument_problem([&] { kv.free(seq); }, "seq");
        } else {
          const int cap = sh.max_blocks * sh.block_size;
          int n;
          if (r < 0.45)
            n = 1;  // a decode step
          else if (r < 0.5)
            n = 0;
          else if (r < 0.9)
            n = int(rng.uniform_int(1, std::max(1, cap / 2)));  // a prefill chunk
          else
            n = int(rng.uniform_int(cap / 2, cap + sh.block_size));  // often more than fits
          problem = append_both(kv, m, seq, n);
        }
        if (problem.empty() && op % 25 == 0) problem = check_slots(kv, m);
        if (!problem.empty()) problem = "operation " + std::to_string(op) + ": " + problem;
      }
      REQUIRE(problem == "");
      for (int seq = 0; seq < 8; ++seq)
        if (m.tokens.count(seq)) REQUIRE(free_both(kv, m, seq) == "");
      CHECK(kv.num_free_blocks() == sh.num_blocks);
    }
  }
}

TEST_CASE("KvBlockManager: bad arguments throw invalid_argument naming the field", "[day11][01_kv_block_manager]") {
  COURSE_CHECK_INVALID_ARGUMENT("num_blocks", KvBlockManager(0, 16, 4));
  COURSE_CHECK_INVALID_ARGUMENT("num_blocks", KvBlockManager(-3, 16, 4));
  COURSE_CHECK_INVALID_ARGUMENT("block_size", KvBlockManager(8, 0, 4));
  COURSE_CHECK_INVALID_ARGUMENT("block_size", KvBlockManager(8, -16, 4));
  COURSE_CHECK_INVALID_ARGUMENT("max_blocks_per_seq", KvBlockManager(8, 16, 0));
  COURSE_CHECK_INVALID_ARGUMENT("tokens", blocks_for_tokens(-1, 4));
  COURSE_CHECK_INVALID_ARGUMENT("block_size", blocks_for_tokens(4, 0));
  KvBlockManager kv(8, 4, 4);
  Model m(8, 4, 4);
  REQUIRE(append_both(kv, m, 3, 5) == "");
  COURSE_CHECK_INVALID_ARGUMENT("new_tokens", kv.append(3, -1));
  COURSE_CHECK_INVALID_ARGUMENT("new_tokens", kv.append(4, -1));
  COURSE_CHECK_INVALID_ARGUMENT("new_tokens", kv.can_append(3, -1));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.free(4));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.block_table(4));
  COURSE_CHECK_INVALID_ARGUMENT("seq", kv.slot_of(4, 0));
  COURSE_CHECK_INVALID_ARGUMENT("token", kv.slot_of(3, 5));
  COURSE_CHECK_INVALID_ARGUMENT("token", kv.slot_of(3, -1));
  CHECK_FALSE(kv.has(4));
  CHECK(kv.num_tokens(4) == 0);
  REQUIRE(m.check(kv) == "");  // the rejected calls changed nothing
}
