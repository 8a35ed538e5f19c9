// The paged-cache builder is what makes the paged tests able to fail: every token a kernel may
// read must be finite and every slot it must not read must be NaN, the physical blocks must be
// shuffled (so logical == physical is wrong) and no two sequences may share a block.
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "catch_compat.h"
#include "paged_cache.h"

namespace {

// Element (token t of sequence b, KV head hk, column d) of the cache, through the block table.
float token_elem(const course::PagedCache& pc, const std::vector<float>& cache, int b, int t, int hk, int d) {
  const course::PagedParams& p = pc.p;
  const int phys = pc.table[size_t(b) * p.max_blocks_per_seq + t / p.block_size];
  const size_t row = (size_t(phys) * p.heads_kv + hk) * p.block_size + t % p.block_size;
  return cache[row * p.head_dim + d];
}

}  // namespace

TEST_CASE("paged cache: live tokens are finite, everything else is NaN", "[paged_cache]") {
  const std::vector<int32_t> lens{0, 1, 15, 16, 17, 40};
  const int bs = 16, hkv = 2, d = 8;
  const course::PagedCache pc = course::build_paged_cache(lens, 4, hkv, d, bs, 1234);
  const course::PagedParams& p = pc.p;
  REQUIRE(p.batch == int(lens.size()));
  REQUIRE(p.max_blocks_per_seq == 3 + 1);  // the longest sequence (40 tokens) + one spare column
  REQUIRE(pc.k.size() == size_t(p.cache_elems()));

  size_t finite = 0;
  for (float x : pc.k) finite += std::isfinite(x) ? 1 : 0;
  size_t tokens = 0;
  for (int32_t n : lens) tokens += size_t(n);
  // Exactly the live tokens are finite: a kernel reading any other slot gets NaN.
  CHECK(finite == tokens * hkv * d);
  for (int b = 0; b < p.batch; ++b)
    for (int t = 0; t < lens[size_t(b)]; ++t)
      for (int hk = 0; hk < hkv; ++hk) {
        CHECK(std::isfinite(token_elem(pc, pc.k, b, t, hk, 0)));
        CHECK(std::isfinite(token_elem(pc, pc.v, b, t, hk, d - 1)));
      }
  // The slot right after the last token of a partly filled block is NaN.
  CHECK(std::isnan(token_elem(pc, pc.k, 4, 17, 0, 0)));
  CHECK(std::isnan(token_elem(pc, pc.v, 2, 15, 1, 0)));
}

TEST_CASE("paged cache: blocks are shuffled and never shared", "[paged_cache]") {
  const std::vector<int32_t> lens{64, 64, 64, 64};
  const course::PagedCache pc = course::build_paged_cache(lens, 1, 1, 4, 8, 99);
  const course::PagedParams& p = pc.p;
  std::set<int32_t> owned;
  bool identity = true;
  for (int b = 0; b < p.batch; ++b)
    for (int lb = 0; lb < 8; ++lb) {
      const int32_t phys = pc.table[size_t(b) * p.max_blocks_per_seq + lb];
      REQUIRE(phys >= 0);
      REQUIRE(phys < p.num_blocks);
      CHECK(owned.insert(phys).second);  // no block belongs to two (sequence, position) pairs
      identity = identity && phys == b * 8 + lb;
    }
  CHECK_FALSE(identity);  // logical block numbers used as physical ones would read wrong tokens
  // Entries past a sequence's blocks point at a block nobody owns (all NaN).
  const int32_t spare = pc.table[size_t(0) * p.max_blocks_per_seq + 8];
  CHECK(owned.count(spare) == 0);
}

TEST_CASE("permuted_block_table draws distinct blocks", "[paged_cache]") {
  const std::vector<int32_t> t = course::permuted_block_table(3, 5, 20, 7);
  REQUIRE(t.size() == 15);
  CHECK(std::set<int32_t>(t.begin(), t.end()).size() == 15);
  CHECK_THROWS_AS(course::permuted_block_table(3, 5, 14, 7), std::invalid_argument);
}
