// Host builders and the validity check for block-sparse layouts (block_sparse_layouts.h).
#include "block_sparse_layouts.h"

#include <algorithm>
#include <iterator>

#include "check_args.h"

namespace course::sparse {

int tiles_of(int n, int block) { return (n + block - 1) / block; }

namespace {

// Builds a layout from a predicate keep(r, c) over the tile grid, row by row (so col_idx comes
// out sorted and unique).
template <class Keep>
BlockSparseLayout from_predicate(int seq_q, int seq_k, int block, Keep keep) {
  if (seq_q <= 0 || seq_k <= 0 || block <= 0) throw std::invalid_argument("sparse: sizes must be positive");
  BlockSparseLayout l;
  l.block_m = l.block_n = block;
  const int tm = tiles_of(seq_q, block), tn = tiles_of(seq_k, block);
  l.row_ptr.push_back(0);
  for (int r = 0; r < tm; ++r) {
    for (int c = 0; c < tn; ++c)
      if (keep(r, c)) l.col_idx.push_back(c);
    l.row_ptr.push_back(int32_t(l.col_idx.size()));
  }
  return l;
}

// splitmix64: a tiny generator whose output is the same everywhere.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

BlockSparseLayout local_band(int seq_q, int seq_k, int radius, int block) {
  const int shift = tiles_of(seq_k, block) - tiles_of(seq_q, block);
  return from_predicate(seq_q, seq_k, block,
                        [&](int r, int c) { return c >= r + shift - radius && c <= r + shift + radius; });
}

BlockSparseLayout global_blocks(int seq_q, int seq_k, int g, int block) {
  return from_predicate(seq_q, seq_k, block, [&](int r, int c) { return r < g || c < g; });
}

BlockSparseLayout random_blocks(int seq_q, int seq_k, int per_row, uint64_t seed, int block) {
  const int tm = tiles_of(seq_q, block), tn = tiles_of(seq_k, block);
  std::vector<char> kept(size_t(tm) * tn, 0);
  uint64_t state = seed;
  for (int r = 0; r < tm; ++r) {
    // Partial Fisher-Yates over the tn columns: per_row distinct ones.
    std::vector<int> cols(static_cast<size_t>(tn));
    for (int c = 0; c < tn; ++c) cols[size_t(c)] = c;
    for (int e = 0; e < std::min(per_row, tn); ++e) {
      const int pick = e + int(splitmix64(state) % uint64_t(tn - e));
      std::swap(cols[size_t(e)], cols[size_t(pick)]);
      kept[size_t(r) * tn + size_t(cols[size_t(e)])] = 1;
    }
  }
  return from_predicate(seq_q, seq_k, block, [&](int r, int c) { return kept[size_t(r) * tn + size_t(c)] != 0; });
}

BlockSparseLayout union_of(const BlockSparseLayout& a, const BlockSparseLayout& b) {
  if (a.block_m != b.block_m || a.block_n != b.block_n || a.row_ptr.size() != b.row_ptr.size())
    throw std::invalid_argument("sparse::union_of: layouts over different grids");
  BlockSparseLayout u;
  u.block_m = a.block_m;
  u.block_n = a.block_n;
  u.row_ptr.push_back(0);
  for (size_t r = 0; r + 1 < a.row_ptr.size(); ++r) {
    const auto a0 = a.col_idx.begin() + a.row_ptr[r], a1 = a.col_idx.begin() + a.row_ptr[r + 1];
    const auto b0 = b.col_idx.begin() + b.row_ptr[r], b1 = b.col_idx.begin() + b.row_ptr[r + 1];
    std::set_union(a0, a1, b0, b1, std::back_inserter(u.col_idx));  // sorted inputs, sorted unique output
    u.row_ptr.push_back(int32_t(u.col_idx.size()));
  }
  return u;
}

BlockSparseLayout bigbird(int seq_q, int seq_k, int radius, int g, int per_row, uint64_t seed, int block) {
  return union_of(union_of(local_band(seq_q, seq_k, radius, block), global_blocks(seq_q, seq_k, g, block)),
                  random_blocks(seq_q, seq_k, per_row, seed, block));
}

BlockSparseLayout causal_trim(const BlockSparseLayout& layout, int seq_q, int seq_k) {
  const int off = seq_k - seq_q;
  BlockSparseLayout t;
  t.block_m = layout.block_m;
  t.block_n = layout.block_n;
  t.row_ptr.push_back(0);
  for (size_t r = 0; r + 1 < layout.row_ptr.size(); ++r) {
    // The last row of the query block sees the most keys: up to q_last + off.
    const int q_last = std::min(int(r + 1) * layout.block_m, seq_q) - 1;
    for (int e = layout.row_ptr[r]; e < layout.row_ptr[r + 1]; ++e)
      if (layout.col_idx[size_t(e)] * layout.block_n <= q_last + off) t.col_idx.push_back(layout.col_idx[size_t(e)]);
    t.row_ptr.push_back(int32_t(t.col_idx.size()));
  }
  return t;
}

double density(const BlockSparseLayout& layout, int seq_q, int seq_k) {
  return double(layout.col_idx.size()) /
         (double(tiles_of(seq_q, layout.block_m)) * double(tiles_of(seq_k, layout.block_n)));
}

void check_layout(const BlockSparseLayout& l, int seq_q, int seq_k, int block, const char* fn) {
  require(l.block_m == block, fn, "block_m",
          "must be " + std::to_string(block) + " (got " + std::to_string(l.block_m) + ")");
  require(l.block_n == block, fn, "block_n",
          "must be " + std::to_string(block) + " (got " + std::to_string(l.block_n) + ")");
  const int tm = tiles_of(seq_q, block), tn = tiles_of(seq_k, block);
  require(int64_t(l.row_ptr.size()) == int64_t(tm) + 1, fn, "row_ptr",
          "must have ceil(seq_q / block_m) + 1 = " + std::to_string(tm + 1) + " entries (got " +
              std::to_string(l.row_ptr.size()) + ")");
  require(l.row_ptr[0] == 0, fn, "row_ptr", "must start at 0");
  // Below, a message is built only when a check fails: the launcher runs this on every call, and
  // building one message per entry (thousands of strings) took about 1 ms on the host, as long
  // as the kernel itself at 10 % density. (It also read col_idx[-1] for the first entry.)
  for (int r = 0; r < tm; ++r)
    if (l.row_ptr[size_t(r)] > l.row_ptr[size_t(r) + 1])
      throw_invalid_argument(fn, "row_ptr", "must not decrease (row " + std::to_string(r) + ")");
  require(size_t(l.row_ptr[size_t(tm)]) == l.col_idx.size(), fn, "row_ptr",
          "must end at col_idx.size() = " + std::to_string(l.col_idx.size()));
  for (int r = 0; r < tm; ++r)
    for (int e = l.row_ptr[size_t(r)]; e < l.row_ptr[size_t(r) + 1]; ++e) {
      const int c = l.col_idx[size_t(e)];
      if (!(c >= 0 && c < tn))
        throw_invalid_argument(fn, "col_idx",
                               "holds key block " + std::to_string(c) + " of row " + std::to_string(r) +
                                   ", outside [0, " + std::to_string(tn) + ")");
      if (!(e == l.row_ptr[size_t(r)] || l.col_idx[size_t(e) - 1] < c))
        throw_invalid_argument(fn, "col_idx",
                               "must be strictly ascending within a row (row " + std::to_string(r) + " has " +
                                   std::to_string(l.col_idx[size_t(e) - 1]) + " then " + std::to_string(c) +
                                   ": unsorted or duplicate)");
    }
}

}  // namespace course::sparse
