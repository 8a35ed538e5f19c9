// The block-sparse layout builders and check (block_sparse_layouts.h) on the CPU, against
// counts worked out by hand, and the causal trimming against the reference: trimming must
// change no output.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "block_sparse_layouts.h"
#include "catch_compat.h"
#include "random.h"
#include "reference.h"

namespace sparse = course::sparse;
using course::AttentionParams;
using course::ref::BlockSparseLayout;

namespace {

std::vector<int> row(const BlockSparseLayout& l, int r) {
  return {l.col_idx.begin() + l.row_ptr[size_t(r)], l.col_idx.begin() + l.row_ptr[size_t(r) + 1]};
}

// "" if the check accepts the layout, else the exception text.
std::string problem(const BlockSparseLayout& l, int nq, int nk) {
  try {
    sparse::check_layout(l, nq, nk, 64, "test");
  } catch (const std::invalid_argument& e) { return e.what(); }
  return "";
}

}  // namespace

TEST_CASE("local_band: rows see diag - radius .. diag + radius, clipped", "[sparse][layout]") {
  const auto l = sparse::local_band(640, 640, 1);  // 10 × 10 blocks
  CHECK(problem(l, 640, 640) == "");
  CHECK(row(l, 0) == std::vector<int>{0, 1});
  CHECK(row(l, 4) == std::vector<int>{3, 4, 5});
  CHECK(row(l, 9) == std::vector<int>{8, 9});
  CHECK(l.col_idx.size() == 28);  // 8 rows of 3 + 2 rows of 2
  // Nq < Nk: bottom-right, the last query block lines up with the last key block.
  const auto c = sparse::local_band(100, 1000, 0);  // 2 query blocks, 16 key blocks
  CHECK(row(c, 0) == std::vector<int>{14});
  CHECK(row(c, 1) == std::vector<int>{15});
}

TEST_CASE("global_blocks: the first g blocks see all and are seen by all", "[sparse][layout]") {
  const auto l = sparse::global_blocks(640, 600, 2);  // 10 × 10 blocks, last key block partial
  CHECK(problem(l, 640, 600) == "");
  CHECK(row(l, 1).size() == 10);
  CHECK(row(l, 5) == std::vector<int>{0, 1});
  CHECK(l.col_idx.size() == 2 * 10 + 8 * 2);
}

TEST_CASE("random_blocks: per_row distinct blocks, reproducible from the seed", "[sparse][layout]") {
  const auto a = sparse::random_blocks(1000, 2000, 3, 42), b = sparse::random_blocks(1000, 2000, 3, 42);
  const auto c = sparse::random_blocks(1000, 2000, 3, 43);
  CHECK(problem(a, 1000, 2000) == "");
  CHECK(a.col_idx == b.col_idx);
  CHECK(a.col_idx != c.col_idx);
  for (int r = 0; r < 16; ++r) CHECK(row(a, r).size() == 3);
  const auto full = sparse::random_blocks(200, 200, 99, 1);  // more than the 4 blocks there are
  CHECK(full.col_idx.size() == 16);
}

TEST_CASE("union_of and bigbird: set union, sorted and unique", "[sparse][layout]") {
  const auto band = sparse::local_band(640, 640, 1), glob = sparse::global_blocks(640, 640, 1);
  const auto u = sparse::union_of(band, glob);
  CHECK(problem(u, 640, 640) == "");
  CHECK(row(u, 5) == std::vector<int>{0, 4, 5, 6});
  CHECK(row(u, 0).size() == 10);
  CHECK(sparse::union_of(band, band).col_idx == band.col_idx);
  const auto bb = sparse::bigbird(8192, 8192, 1, 1, 2, 7);
  CHECK(problem(bb, 8192, 8192) == "");
  const double d = sparse::density(bb, 8192, 8192);
  CHECK(d > 0.05);
  CHECK(d < 0.2);
  for (int r = 0; r < 128; ++r) {  // every row keeps its band and global block
    const auto cols = row(bb, r);
    const std::set<int> s(cols.begin(), cols.end());
    CHECK(s.count(0) == 1);
    CHECK(s.count(r) == 1);
  }
}

TEST_CASE("causal_trim drops exactly the blocks above the diagonal", "[sparse][layout]") {
  const auto all = sparse::global_blocks(640, 640, 10);  // every block
  const auto t = sparse::causal_trim(all, 640, 640);
  CHECK(t.col_idx.size() == 55);  // 10 · 11 / 2
  CHECK(row(t, 3) == std::vector<int>{0, 1, 2, 3});
  // Nq < Nk, not multiples of the block: the last query row sees key 999 (block 15).
  const auto t2 = sparse::causal_trim(sparse::global_blocks(100, 1000, 16), 100, 1000);
  CHECK(row(t2, 1).back() == 15);
  CHECK(row(t2, 0).back() == 15);  // query 63 sees keys <= 963, block 15 starts at 960
  const auto t3 = sparse::causal_trim(sparse::global_blocks(200, 1000, 16), 200, 1000);
  CHECK(row(t3, 0).back() == 13);  // query 63 sees keys <= 863: block 13 (832..) yes, 14 (896..) no
  // Trimming must not change the causal output: the dropped blocks held no visible key.
  for (int nq : {1, 67, 300}) {
    const int nk = 300;
    const AttentionParams p = AttentionParams::make(1, 1, 1, nq, nk, 16, true);
    const auto q = course::random_normal(size_t(p.q_elems()), 1), k = course::random_normal(size_t(p.kv_elems()), 2);
    const auto v = course::random_normal(size_t(p.kv_elems()), 3);
    const auto l = sparse::bigbird(nq, nk, 1, 1, 1, 5);
    const auto lt = sparse::causal_trim(l, nq, nk);
    INFO("Nq=" << nq << " Nk=" << nk);
    CHECK(lt.col_idx.size() <= l.col_idx.size());
    CHECK(course::ref::block_sparse_attention(q, k, v, p, lt) == course::ref::block_sparse_attention(q, k, v, p, l));
  }
}

TEST_CASE("check_layout names the broken field", "[sparse][layout]") {
  const auto good = sparse::local_band(200, 200, 1);  // 4 × 4
  REQUIRE(problem(good, 200, 200) == "");
  auto broken = [&](auto edit, const char* field) {
    BlockSparseLayout l = good;
    edit(l);
    const std::string why = problem(l, 200, 200);
    INFO(why);
    CHECK(why.find(std::string("'") + field + "'") != std::string::npos);
  };
  broken([](auto& l) { l.block_m = 32; }, "block_m");
  broken([](auto& l) { l.block_n = 128; }, "block_n");
  broken([](auto& l) { l.row_ptr.pop_back(); }, "row_ptr");
  broken([](auto& l) { l.row_ptr[0] = 1; }, "row_ptr");
  broken([](auto& l) { l.row_ptr.back() += 1; }, "row_ptr");
  broken([](auto& l) { std::swap(l.row_ptr[1], l.row_ptr[2]); }, "row_ptr");
  broken([](auto& l) { l.col_idx[0] = 4; }, "col_idx");  // block 4 of 4: out of range
  broken([](auto& l) { l.col_idx[0] = -1; }, "col_idx");
  broken([](auto& l) { std::swap(l.col_idx[0], l.col_idx[1]); }, "col_idx");  // unsorted
  broken([](auto& l) { l.col_idx[1] = l.col_idx[0]; }, "col_idx");            // duplicate
}
