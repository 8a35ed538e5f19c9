// Tests for day10/03_block_sparse: BSR layouts from common/block_sparse_layouts.h (band, global,
// random, BigBird, causal-trimmed) over shapes with tails (1, 67, 1000), Nq != Nk both ways,
// causal inside the listed blocks, GQA, batch and heads sharing one layout, against
// course::ref::block_sparse_attention. Plus:
//   * empty rows: query blocks with no listed block output exact zeros (the output starts as NaN);
//   * only listed blocks are read: K and V rows of every block no row lists are NaN, so touching
//     one (even masked: 0 · NaN = NaN in P·V) fails;
//   * the launcher rejects bad layouts (unsorted, duplicate, out-of-range col_idx; row_ptr of the
//     wrong size or shape) naming the field, before launching anything;
//   * [index]: the index helpers of the header (bsr_row_range, bsr_tile_key0, bsr_tile_needs_mask)
//     on the CPU, no GPU needed, against brute force over small random block masks and every
//     (row, key) pair of small tiles.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "03_block_sparse.h"
#include "block_sparse_layouts.h"
#include "gpu_test.h"
#include "random.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;
using course::ref::BlockSparseLayout;
namespace sparse = course::sparse;

namespace {

constexpr int kB = kBlockSparseBlock;

void check_sparse(const AttentionParams& p, const BlockSparseLayout& layout, const std::vector<float>& q,
                  const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& expected) {
  auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
  auto d_row_ptr = course::to_device(layout.row_ptr), d_col_idx = course::to_device(layout.col_idx);
  DeviceBuffer<float> d_o(size_t(p.o_elems()));
  d_o.poison();
  block_sparse_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), p, layout, d_row_ptr.data(), d_col_idx.data());
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  COURSE_CHECK_OUTPUT(d_o, expected, dims, course::Tolerance::fp32());
}

enum class Pattern { All, Band, Global, Random, BigBird, Empty };

BlockSparseLayout make_layout(Pattern pat, int nq, int nk, bool causal, uint64_t seed) {
  BlockSparseLayout l;
  switch (pat) {
    case Pattern::All:
      l = sparse::global_blocks(nq, nk, sparse::tiles_of(nq, kB));
      break;
    case Pattern::Band:
      l = sparse::local_band(nq, nk, 1);
      break;
    case Pattern::Global:
      l = sparse::global_blocks(nq, nk, 1);
      break;
    case Pattern::Random:
      l = sparse::random_blocks(nq, nk, 2, seed);
      break;
    case Pattern::BigBird:
      l = sparse::bigbird(nq, nk, 1, 1, 1, seed);
      break;
    case Pattern::Empty:
      l = sparse::global_blocks(nq, nk, 0);
      break;
  }
  return causal ? sparse::causal_trim(l, nq, nk) : l;
}

const char* name_of(Pattern pat) {
  static const char* names[] = {"all blocks", "band r=1", "global g=1", "random 2/row", "BigBird", "no blocks"};
  return names[int(pat)];
}

struct Case {
  int b, h, nq, nk, d;
  bool causal;
  Pattern pat;
  const char* why;
  int h_kv = 0;  // 0: MHA
};

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = AttentionParams::make(c.b, c.h, c.h_kv > 0 ? c.h_kv : c.h, c.nq, c.nk, c.d, c.causal);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    const BlockSparseLayout layout = make_layout(c.pat, c.nq, c.nk, c.causal, seed);
    INFO("B=" << c.b << " Hq=" << c.h << " Hkv=" << p.heads_kv << " Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d
              << (c.causal ? " causal" : "") << ", layout " << name_of(c.pat) << " (" << layout.col_idx.size()
              << " blocks, density " << sparse::density(layout, c.nq, c.nk) << "; " << c.why << "), seed = " << seed
              << " (set COURSE_SEED to vary)");
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    const auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    const auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    check_sparse(p, layout, q, k, v, course::ref::block_sparse_attention(q, k, v, p, layout));
  }
}

}  // namespace

// ---- [index]: the BSR row walk on the CPU. The brute force never uses row_ptr arithmetic: it
// counts the cells of a random dense block mask, from which the BSR arrays are built.
namespace {

struct Mask {  // a dense n_rows × n_cols block mask and its BSR form
  int n_rows = 0, n_cols = 0;
  std::vector<std::vector<bool>> cell;
  std::vector<int32_t> row_ptr, col_idx;
};

Mask random_mask(int n_rows, int n_cols, double density, uint64_t seed) {
  course::Rng rng(seed);
  Mask m;
  m.n_rows = n_rows;
  m.n_cols = n_cols;
  m.cell.assign(size_t(n_rows), std::vector<bool>(size_t(n_cols), false));
  m.row_ptr.push_back(0);
  for (int r = 0; r < n_rows; ++r) {
    const bool empty_row = rng.uniform() < 0.2;  // some rows list nothing
    for (int c = 0; c < n_cols; ++c) {
      m.cell[size_t(r)][size_t(c)] = !empty_row && rng.uniform() < density;
      if (m.cell[size_t(r)][size_t(c)]) m.col_idx.push_back(c);
    }
    m.row_ptr.push_back(int32_t(m.col_idx.size()));
  }
  return m;
}

// Brute force: the block row holding query row q0, the number of listed cells before that row
// (its first entry in col_idx) and in it.
BsrRowRange brute_row(const Mask& m, int q0) {
  int block = 0;
  while ((block + 1) * kB <= q0) ++block;
  BsrRowRange row{0, 0};
  for (int r = 0; r < m.n_rows; ++r)
    for (int c = 0; c < m.n_cols; ++c)
      if (m.cell[size_t(r)][size_t(c)]) {
        if (r < block) ++row.first;
        if (r == block) ++row.count;
      }
  return row;
}

std::string describe(const Mask& m) {
  std::string s = std::to_string(m.n_rows) + " x " + std::to_string(m.n_cols) + " blocks, row_ptr = {";
  for (size_t i = 0; i < m.row_ptr.size(); ++i) s += (i ? ", " : "") + std::to_string(m.row_ptr[i]);
  s += "}, col_idx = {";
  for (size_t i = 0; i < m.col_idx.size(); ++i) s += (i ? ", " : "") + std::to_string(m.col_idx[i]);
  return s + "}";
}

std::vector<Mask> index_masks() {
  std::vector<Mask> out;
  int idx = 0;
  for (int n_rows : {1, 2, 3, 5})
    for (int n_cols : {1, 2, 4, 7})
      for (double density : {0.3, 0.7, 1.0})
        out.push_back(random_mask(n_rows, n_cols, density, course::case_seed("sparse_index", idx++)));
  return out;
}

}  // namespace

TEST_CASE("bsr_row_range: the col_idx entries of a query tile, against counting a random block mask",
          "[index][quick]") {
  int failures = 0;
  for (const Mask& m : index_masks())
    for (int q0 = 0; q0 < m.n_rows * kB && failures < 5; q0 += 16) {  // every tile start of 16-, 32- and 64-row tiles
      const BsrRowRange want = brute_row(m, q0);
      const BsrRowRange got = bsr_row_range(m.row_ptr.data(), q0);
      if (got.first != want.first || got.count != want.count) {
        ++failures;
        FAIL_CHECK("bsr_row_range(row_ptr, q0 = " << q0 << ") on " << describe(m) << ": returned first = " << got.first
                                                  << ", count = " << got.count << "; the tile lies in query block "
                                                  << q0 / kB << ", which lists " << want.count
                                                  << " key blocks starting at col_idx[" << want.first << "]");
      }
    }
  CHECK(failures == 0);
}

TEST_CASE("bsr_tile_key0: the key tiles a query tile visits, in order, against the listed blocks cut into tiles",
          "[index][quick]") {
  int failures = 0;
  for (const Mask& m : index_masks())
    for (int tile_keys : {16, 32, 64})
      for (int q0 = 0; q0 < m.n_rows * kB && failures < 5; q0 += 32) {
        // Brute force: every listed block of the row, left to right, cut into tiles of tile_keys keys.
        std::vector<int> want;
        const int r = q0 / kB;
        for (int c = 0; c < m.n_cols; ++c)
          if (m.cell[size_t(r)][size_t(c)])
            for (int key = c * kB; key < (c + 1) * kB; key += tile_keys) want.push_back(key);
        const BsrRowRange row = brute_row(m, q0);
        for (int t = 0; t < int(want.size()); ++t) {
          const int got = bsr_tile_key0(m.col_idx.data(), row, t, tile_keys);
          if (got != want[size_t(t)]) {
            ++failures;
            FAIL_CHECK("bsr_tile_key0(col_idx, {first = "
                       << row.first << ", count = " << row.count << "}, t = " << t << ", tile_keys = " << tile_keys
                       << ") on " << describe(m) << " (query tile at q0 = " << q0 << "): returned " << got
                       << ", expected " << want[size_t(t)] << " (tile " << t % (kB / tile_keys) << " of listed block "
                       << want[size_t(t)] / kB << ")");
            break;
          }
        }
      }
  CHECK(failures == 0);
}

TEST_CASE("bsr_tile_needs_mask: full and partial tiles, against a scan of every (row, key) pair", "[index][quick]") {
  const int lengths[] = {1, 2, 17, 31, 32, 33, 63, 64, 65, 100, 128, 129, 191, 200};
  int failures = 0;
  std::set<std::string> reported;
  for (bool square : {true, false})  // Nq == Nk first: the simplest failing case is reported first
    for (int seq_q : lengths)
      for (int seq_k : lengths)
        for (bool causal : {false, true})
          for (int tile_rows : {32, 64})
            for (int q0 = 0; q0 < seq_q && (seq_q == seq_k) == square; q0 += tile_rows)
              for (int tile_keys : {16, 32, 64})
                for (int kv0 = 0; kv0 < sparse::tiles_of(seq_k, kB) * kB; kv0 += tile_keys) {
                  // Brute force: the first (real row of the query tile, key of the key tile) pair
                  // that is hidden, if any.
                  const int off = seq_k - seq_q, last_row = std::min(q0 + tile_rows, seq_q) - 1;
                  int hidden_i = -1, hidden_j = -1;
                  for (int i = q0; i <= last_row && hidden_i < 0; ++i)
                    for (int j = kv0; j < kv0 + tile_keys && hidden_i < 0; ++j)
                      if (j >= seq_k || (causal && j > i + off)) hidden_i = i, hidden_j = j;
                  const bool want = hidden_i >= 0;
                  const bool got = bsr_tile_needs_mask(q0, kv0, tile_keys, seq_k, off, causal);
                  if (got != want && failures < 5) {
                    const std::string cause = hidden_j >= seq_k ? " (past seq_k)" : " (causal)";
                    const std::string why = want ? "row " + std::to_string(hidden_i) + " cannot see key " +
                                                       std::to_string(hidden_j) + cause + ": the tile must be masked"
                                                 : "every row sees every key of the tile: it is full";
                    std::ostringstream msg;
                    msg << "bsr_tile_needs_mask(q0 = " << q0 << ", kv0 = " << kv0 << ", tile_keys = " << tile_keys
                        << ", seq_k = " << seq_k << ", off = " << off << (causal ? ", causal" : ", not causal")
                        << ") for query rows " << q0 << ".." << last_row << " (seq_q = " << seq_q << "), keys " << kv0
                        << ".." << kv0 + tile_keys - 1 << ": returned " << (got ? "true" : "false") << ", but " << why;
                    if (reported.insert(msg.str()).second) {  // 32- and 64-row tiles can be the same rows
                      ++failures;
                      FAIL_CHECK(msg.str());
                    }
                  }
                }
  CHECK(failures == 0);
}

TEST_CASE("block_sparse_attention: small shapes and every pattern", "[day10][block_sparse][quick]") {
  run_grid("sparse_small", {
                               {1, 1, 1, 1, 64, false, Pattern::All, "one query, one key"},
                               {1, 1, 1, 1, 64, true, Pattern::All, "one query, one key, causal"},
                               {2, 3, 17, 17, 32, false, Pattern::All, "below one block: equals dense"},
                               {1, 2, 67, 67, 64, false, Pattern::Band, "tails: last blocks of 3 rows/keys"},
                               {1, 2, 67, 67, 128, true, Pattern::Band, "tails, causal"},
                               {1, 2, 200, 200, 64, false, Pattern::Global, "global block"},
                               {1, 2, 300, 300, 32, false, Pattern::Random, "random blocks"},
                               {1, 2, 300, 300, 128, true, Pattern::BigBird, "BigBird, causal-trimmed"},
                           });
}

TEST_CASE("block_sparse_attention: Nq != Nk, GQA, batch and heads share the layout", "[day10][block_sparse][quick]") {
  run_grid("sparse_shapes", {
                                {1, 2, 100, 1000, 64, true, Pattern::Band, "Nq < Nk, band at the bottom right, causal"},
                                {1, 2, 300, 100, 64, true, Pattern::Global, "Nq > Nk: rows 0..199 see no key"},
                                {2, 2, 100, 37, 128, false, Pattern::Random, "Nq > Nk, one key block"},
                                {2, 8, 130, 130, 64, true, Pattern::BigBird, "GQA 8/2", 2},
                                {1, 8, 150, 250, 32, false, Pattern::Random, "MQA 8/1", 1},
                                {3, 3, 67, 67, 64, false, Pattern::Band, "batch 3, heads 3, one layout"},
                            });
}

TEST_CASE("block_sparse_attention: tile boundaries and long sequences", "[day10][block_sparse]") {
  run_grid("sparse_grid", {
                              {2, 2, 1000, 1000, 128, true, Pattern::BigBird, "non-multiple, causal, D = 128"},
                              {1, 2, 1000, 1000, 32, false, Pattern::BigBird, "non-multiple, D = 32"},
                              {1, 2, 1000, 1000, 64, false, Pattern::All, "every block: equals dense"},
                              {1, 2, 2048, 2048, 64, true, Pattern::BigBird, "N = 2048, BigBird, causal"},
                              {1, 4, 2048, 2048, 128, false, Pattern::Random, "N = 2048, random"},
                              {1, 2, 511, 1537, 128, true, Pattern::Band, "chunked prefill"},
                          });
}

// Rows whose block list is empty (here: every second query block, and a layout with no block at
// all) must write zeros; the output starts as NaN, so a kernel that skips them shows.
TEST_CASE("block_sparse_attention: empty rows output zeros", "[day10][block_sparse][quick]") {
  for (int nq : {67, 300}) {
    const int nk = 300;
    const AttentionParams p = AttentionParams::make(1, 2, 2, nq, nk, 64, false);
    BlockSparseLayout every_other = sparse::local_band(nq, nk, 1), none = make_layout(Pattern::Empty, nq, nk, false, 0);
    // Keep only the blocks of even query rows.
    BlockSparseLayout kept{kB, kB, {0}, {}};
    for (size_t r = 0; r + 1 < every_other.row_ptr.size(); ++r) {
      if (r % 2 == 0)
        for (int e = every_other.row_ptr[r]; e < every_other.row_ptr[r + 1]; ++e)
          kept.col_idx.push_back(every_other.col_idx[size_t(e)]);
      kept.row_ptr.push_back(int32_t(kept.col_idx.size()));
    }
    const uint64_t seed = course::case_seed("sparse_empty", nq);
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    const auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    const auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    for (const BlockSparseLayout* l : {&kept, &none}) {
      INFO("Nq=" << nq << " Nk=" << nk << " D=64, " << (l == &none ? "no block at all" : "odd query blocks empty"));
      check_sparse(p, *l, q, k, v, course::ref::block_sparse_attention(q, k, v, p, *l));
    }
  }
}

// Only listed blocks are read: K and V rows of every key block that no row lists are NaN. The
// expected output is computed on clean data (the listed blocks are unchanged).
TEST_CASE("block_sparse_attention: unlisted blocks are never read", "[day10][block_sparse][quick]") {
  struct Poison {
    int nq, nk, d;
    bool causal;
    Pattern pat;
  };
  for (const Poison& c : std::vector<Poison>{{300, 1000, 64, false, Pattern::Random},
                                             {130, 1000, 128, true, Pattern::Band},
                                             {130, 1000, 32, false, Pattern::Random}}) {
    const AttentionParams p = AttentionParams::make(1, 2, 2, c.nq, c.nk, c.d, c.causal);
    const uint64_t seed = course::case_seed("sparse_poison", c.nq + c.d);
    const BlockSparseLayout layout = make_layout(c.pat, c.nq, c.nk, c.causal, seed);
    const std::set<int> listed(layout.col_idx.begin(), layout.col_idx.end());
    const int tiles_n = sparse::tiles_of(c.nk, kB);
    INFO("Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d << (c.causal ? " causal" : "") << ", layout " << name_of(c.pat)
               << ": " << tiles_n - int(listed.size()) << " of " << tiles_n
               << " key blocks unlisted and NaN, seed = " << seed);
    REQUIRE(int(listed.size()) < tiles_n);
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    const auto expected = course::ref::block_sparse_attention(q, k, v, p, layout);
    for (int h = 0; h < p.heads_kv; ++h)
      for (int j = 0; j < c.nk; ++j)
        if (!listed.count(j / kB))
          for (int d = 0; d < c.d; ++d) {
            const size_t at = (size_t(h) * c.nk + size_t(j)) * c.d + size_t(d);
            k[at] = v[at] = std::numeric_limits<float>::quiet_NaN();
          }
    check_sparse(p, layout, q, k, v, expected);
  }
}

TEST_CASE("block_sparse_attention rejects bad arguments and bad layouts before launching anything",
          "[day10][block_sparse][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 200, 200, 64, false);
  const BlockSparseLayout layout = sparse::local_band(200, 200, 1);  // 4 × 4 blocks
  DeviceBuffer<float> q(size_t(good.q_elems())), o(size_t(good.o_elems()));
  auto rp = course::to_device(layout.row_ptr), ci = course::to_device(layout.col_idx);
  q.fill_zero();
  o.poison();
  const float* x = q.data();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  auto bad = [&](auto edit) {
    BlockSparseLayout l = layout;
    edit(l);
    return l;
  };
  auto call = [&](const AttentionParams& p, const BlockSparseLayout& l) {
    block_sparse_attention(x, x, x, o.data(), p, l, rp.data(), ci.data());
  };
  COURSE_CHECK_INVALID_ARGUMENT("q",
                                block_sparse_attention(nullptr, x, x, o.data(), good, layout, rp.data(), ci.data()));
  COURSE_CHECK_INVALID_ARGUMENT("o", block_sparse_attention(x, x, x, nullptr, good, layout, rp.data(), ci.data()));
  COURSE_CHECK_INVALID_ARGUMENT("v", block_sparse_attention(x, x, x + 1, o.data(), good, layout, rp.data(), ci.data()));
  COURSE_CHECK_INVALID_ARGUMENT("row_ptr", block_sparse_attention(x, x, x, o.data(), good, layout, nullptr, ci.data()));
  COURSE_CHECK_INVALID_ARGUMENT("col_idx", block_sparse_attention(x, x, x, o.data(), good, layout, rp.data(), nullptr));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", call(with([](auto& p) { p.heads_kv = 3; }), layout));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", call(with([](auto& p) { p.seq_q = 0; }), layout));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", call(with([](auto& p) { p.head_dim = 80; }), layout));
  COURSE_CHECK_INVALID_ARGUMENT("window", call(with([](auto& p) { p.window = 8; }), layout));
  COURSE_CHECK_INVALID_ARGUMENT("row_ptr", call(with([](auto& p) { p.seq_q = 300; }), layout));  // 5 query blocks now
  COURSE_CHECK_INVALID_ARGUMENT("block_m", call(good, bad([](auto& l) { l.block_m = 128; })));
  COURSE_CHECK_INVALID_ARGUMENT("row_ptr", call(good, bad([](auto& l) { l.row_ptr.back() = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("col_idx", call(good, bad([](auto& l) { l.col_idx[2] = 4; })));  // out of range
  COURSE_CHECK_INVALID_ARGUMENT("col_idx",
                                call(good, bad([](auto& l) { std::swap(l.col_idx[2], l.col_idx[3]); })));   // unsorted
  COURSE_CHECK_INVALID_ARGUMENT("col_idx", call(good, bad([](auto& l) { l.col_idx[3] = l.col_idx[2]; })));  // duplicate
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float y : o.download()) CHECK(course::is_poison_f32(y));  // nothing was written
}
