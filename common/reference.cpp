#include "reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "parallel.h"

namespace course::ref {

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("ref::add: size mismatch");
  std::vector<float> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];  // one fp32 rounding, as on the GPU
  return c;
}

std::vector<float> matmul_abt(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k) {
  std::vector<float> c(size_t(m) * n);
  parallel_for(m, [&](int64_t i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int t = 0; t < k; ++t) acc += double(a[size_t(i) * k + t]) * double(b[size_t(j) * k + t]);
      c[size_t(i) * n + j] = float(acc);
    }
  });
  return c;
}

std::vector<float> row_max(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(rows);
  for (int r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < cols; ++c) m = std::max(m, x[size_t(r) * cols + c]);
    out[r] = m;
  }
  return out;
}

std::vector<float> row_sum(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(rows);
  for (int r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int c = 0; c < cols; ++c) s += x[size_t(r) * cols + c];
    out[r] = float(s);
  }
  return out;
}

std::vector<float> softmax_rows(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const float* row = &x[size_t(r) * cols];
    double m = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < cols; ++c) m = std::max(m, double(row[c]));
    double s = 0.0;
    for (int c = 0; c < cols; ++c) s += std::exp(double(row[c]) - m);
    for (int c = 0; c < cols; ++c) out[size_t(r) * cols + c] = float(std::exp(double(row[c]) - m) / s);
  }
  return out;
}

namespace {

// One query row against a set of (key, value) rows chosen by `visible`. Shared by the dense,
// paged and block-sparse references so the softmax and the empty-row rule exist once.
template <class KeyRow, class ValRow, class Visible>
void attend_row(const float* q, int n_keys, int d, double scale, KeyRow key_row, ValRow val_row, Visible visible,
                float* out, std::vector<double>& scores) {
  scores.assign(n_keys, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < n_keys; ++j) {
    if (!visible(j)) continue;
    const float* kj = key_row(j);
    double dot = 0.0;
    for (int t = 0; t < d; ++t) dot += double(q[t]) * double(kj[t]);
    scores[j] = scale * dot;
    m = std::max(m, scores[j]);
  }
  if (m == -std::numeric_limits<double>::infinity()) {  // no visible key: zeros, never NaN
    std::fill(out, out + d, 0.f);
    return;
  }
  std::vector<double> acc(d, 0.0);
  double l = 0.0;
  for (int j = 0; j < n_keys; ++j) {
    if (!visible(j)) continue;
    const double w = std::exp(scores[j] - m);
    l += w;
    const float* vj = val_row(j);
    for (int t = 0; t < d; ++t) acc[t] += w * double(vj[t]);
  }
  for (int t = 0; t < d; ++t) out[t] = float(acc[t] / l);
}

void check_attention_params(const AttentionParams& p) {
  if (p.batch < 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.seq_q < 0 || p.seq_k < 0 || p.head_dim <= 0 ||
      p.heads_q % p.heads_kv != 0)
    throw std::invalid_argument("ref::attention: inconsistent AttentionParams");
}

template <class Visible>
std::vector<float> dense_attention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const AttentionParams& p, Visible visible_ij) {
  check_attention_params(p);
  const int D = p.head_dim;
  const double scale = p.softmax_scale();
  std::vector<float> o(size_t(p.o_elems()));
  const int64_t rows = int64_t(p.batch) * p.heads_q;
  parallel_for(rows, [&](int64_t bh) {
    const int b = int(bh / p.heads_q), h = int(bh % p.heads_q);
    const size_t q_base = size_t(bh) * p.seq_q * D;
    const size_t kv_base = (size_t(b) * p.heads_kv + p.kv_head_of(h)) * p.seq_k * D;
    std::vector<double> scores;
    for (int i = 0; i < p.seq_q; ++i) {
      attend_row(
          &q[q_base + size_t(i) * D], p.seq_k, D, scale, [&](int j) { return &k[kv_base + size_t(j) * D]; },
          [&](int j) { return &v[kv_base + size_t(j) * D]; }, [&](int j) { return visible_ij(i, j); },
          &o[q_base + size_t(i) * D], scores);
    }
  });
  return o;
}

}  // namespace

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                             const AttentionParams& p) {
  return dense_attention(q, k, v, p, [&](int i, int j) { return p.key_visible(i, j); });
}

std::vector<float> block_sparse_attention(const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const AttentionParams& p,
                                          const BlockSparseLayout& layout) {
  const int tiles_m = (p.seq_q + layout.block_m - 1) / layout.block_m;
  if (int(layout.row_ptr.size()) != tiles_m + 1)
    throw std::invalid_argument("ref::block_sparse_attention: row_ptr must have ceil(Nq/block_m)+1 entries");
  // Expand the CSR layout into a dense tile mask once; the per-element test is then O(1).
  const int tiles_n = (p.seq_k + layout.block_n - 1) / layout.block_n;
  std::vector<char> kept(size_t(tiles_m) * tiles_n, 0);
  for (int r = 0; r < tiles_m; ++r)
    for (int e = layout.row_ptr[r]; e < layout.row_ptr[r + 1]; ++e) {
      const int c = layout.col_idx[e];
      if (c < 0 || c >= tiles_n) throw std::invalid_argument("ref::block_sparse_attention: col_idx out of range");
      kept[size_t(r) * tiles_n + c] = 1;
    }
  return dense_attention(q, k, v, p, [&](int i, int j) {
    return kept[size_t(i / layout.block_m) * tiles_n + j / layout.block_n] && p.key_visible(i, j);
  });
}

std::vector<float> paged_decode_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                          const std::vector<float>& v_cache, const std::vector<int32_t>& block_table,
                                          const std::vector<int32_t>& context_lens, const PagedParams& p) {
  if (p.heads_q % p.heads_kv != 0 || int(context_lens.size()) != p.batch ||
      block_table.size() != size_t(p.batch) * p.max_blocks_per_seq)
    throw std::invalid_argument("ref::paged_decode_attention: inconsistent PagedParams");
  const int D = p.head_dim, bs = p.block_size;
  for (int32_t len : context_lens)  // checked here: an exception must not escape a worker thread
    if (len < 0 || len > p.max_blocks_per_seq * bs)
      throw std::invalid_argument("ref::paged_decode_attention: context length outside the block table");
  std::vector<float> o(size_t(p.q_elems()));
  parallel_for(int64_t(p.batch) * p.heads_q, [&](int64_t bh) {
    const int b = int(bh / p.heads_q), h = int(bh % p.heads_q), hk = p.kv_head_of(h);
    const int len = context_lens[b];
    auto row = [&](const std::vector<float>& cache, int t) {
      const int block = block_table[size_t(b) * p.max_blocks_per_seq + t / bs];
      return &cache[((size_t(block) * p.heads_kv + hk) * bs + t % bs) * D];
    };
    std::vector<double> scores;
    attend_row(
        &q[size_t(bh) * D], len, D, p.softmax_scale(), [&](int t) { return row(k_cache, t); },
        [&](int t) { return row(v_cache, t); }, [](int) { return true; }, &o[size_t(bh) * D], scores);
  });
  return o;
}

}  // namespace course::ref
