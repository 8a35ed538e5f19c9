// CPU reference of KV-cache compression (declared in reference_kv_compress.h).
//
// Written as plainly as the rest of the reference: every window row's softmax in double over the
// keys it sees, summed into the scores of its KV head; the pool is a loop over neighbours; the
// selection sorts the candidates by (score descending, index ascending) and takes the first k.
#include "reference_kv_compress.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "parallel.h"

namespace course::ref {

std::vector<double> kv_observation_scores(const std::vector<float>& q_window, const std::vector<float>& k_cache,
                                          const std::vector<int32_t>& block_table,
                                          const std::vector<int32_t>& context_lens, const PagedParams& p, int window) {
  if (p.batch < 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.head_dim <= 0 ||
      p.block_size <= 0 || window <= 0 || int(context_lens.size()) != p.batch ||
      block_table.size() != size_t(p.batch) * p.max_blocks_per_seq ||
      q_window.size() != size_t(p.batch) * p.heads_q * window * p.head_dim || k_cache.size() != size_t(p.cache_elems()))
    throw std::invalid_argument("ref::kv_observation_scores: inconsistent PagedParams or sizes");
  const int D = p.head_dim, bs = p.block_size, W = window, G = p.group_size();
  const int64_t T = int64_t(p.max_blocks_per_seq) * bs;
  for (int32_t len : context_lens)  // checked here: an exception must not escape a worker thread
    if (len < 0 || len > T)
      throw std::invalid_argument("ref::kv_observation_scores: context length outside the block table");
  const double scale = p.softmax_scale();

  // Per query head: Σ over its W rows of the row's softmax, then summed over the group in order.
  std::vector<double> per_head(size_t(p.batch) * p.heads_q * T, 0.0);
  parallel_for(int64_t(p.batch) * p.heads_q, [&](int64_t bh) {
    const int b = int(bh / p.heads_q), h = int(bh % p.heads_q), hk = p.kv_head_of(h);
    const int len = context_lens[size_t(b)];
    double* acc = &per_head[size_t(bh) * T];
    std::vector<double> s;
    for (int i = 0; i < W; ++i) {
      const int last = len - W + i;  // the row's own position: it sees keys 0 .. last
      if (last < 0) continue;
      const float* q = &q_window[(size_t(bh) * W + i) * D];
      s.assign(size_t(last) + 1, 0.0);
      double m = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= last; ++j) {
        const int block = block_table[size_t(b) * p.max_blocks_per_seq + j / bs];
        const float* k = &k_cache[((size_t(block) * p.heads_kv + hk) * bs + j % bs) * D];
        double dot = 0.0;
        for (int d = 0; d < D; ++d) dot += double(q[d]) * double(k[d]);
        s[size_t(j)] = scale * dot;
        m = std::max(m, s[size_t(j)]);
      }
      double l = 0.0;
      for (int j = 0; j <= last; ++j) l += std::exp(s[size_t(j)] - m);
      for (int j = 0; j <= last; ++j) acc[j] += std::exp(s[size_t(j)] - m) / l;
    }
  });
  std::vector<double> scores(size_t(p.batch) * p.heads_kv * T, 0.0);
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      double* out = &scores[(size_t(b) * p.heads_kv + hk) * T];
      for (int g = 0; g < G; ++g) {
        const double* in = &per_head[(size_t(b) * p.heads_q + hk * G + g) * T];
        for (int64_t j = 0; j < T; ++j) out[j] += in[j];
      }
    }
  return scores;
}

std::vector<double> kv_max_pool(const double* scores, int len, int pool_kernel) {
  if (pool_kernel < 1 || pool_kernel % 2 == 0)
    throw std::invalid_argument("ref::kv_max_pool: pool_kernel must be odd and >= 1");
  const int r = (pool_kernel - 1) / 2;
  std::vector<double> pooled(size_t(std::max(len, 0)));
  for (int j = 0; j < len; ++j) {
    double v = -std::numeric_limits<double>::infinity();
    for (int jj = std::max(0, j - r); jj <= std::min(len - 1, j + r); ++jj) v = std::max(v, scores[jj]);
    pooled[size_t(j)] = v;
  }
  return pooled;
}

std::vector<int32_t> kv_select(const double* pooled, int len, int n_sink, int n_recent, int budget) {
  if (len < 0 || n_sink < 0 || n_recent < 0 || budget < 1 || n_sink + n_recent > budget)
    throw std::invalid_argument("ref::kv_select: needs len >= 0, n_sink, n_recent >= 0, n_sink + n_recent <= budget");
  std::vector<int32_t> kept;
  if (len <= budget) {
    kept.resize(size_t(len));
    std::iota(kept.begin(), kept.end(), 0);
    return kept;
  }
  std::vector<int32_t> cand;
  for (int j = n_sink; j < len - n_recent; ++j) cand.push_back(j);
  const size_t k = size_t(budget - n_sink - n_recent);
  std::sort(cand.begin(), cand.end(), [&](int32_t a, int32_t b) {
    if (pooled[a] != pooled[b]) return pooled[a] > pooled[b];
    return a < b;  // the tie rule: the lower token index first
  });
  cand.resize(k);
  for (int j = 0; j < n_sink; ++j) kept.push_back(j);
  kept.insert(kept.end(), cand.begin(), cand.end());
  for (int j = len - n_recent; j < len; ++j) kept.push_back(j);
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<int32_t> kv_compress_kept(const std::vector<float>& q_window, const std::vector<float>& k_cache,
                                      const std::vector<int32_t>& block_table, const std::vector<int32_t>& context_lens,
                                      const PagedParams& p, const KvSelectParams& c, std::vector<double>* pooled_out) {
  const std::vector<double> scores = kv_observation_scores(q_window, k_cache, block_table, context_lens, p, c.window);
  const int64_t T = int64_t(p.max_blocks_per_seq) * p.block_size;
  std::vector<int32_t> kept(size_t(p.batch) * p.heads_kv * c.budget, -1);
  if (pooled_out) pooled_out->assign(size_t(p.batch) * p.heads_kv * T, 0.0);
  for (int b = 0; b < p.batch; ++b) {
    const int len = context_lens[size_t(b)];
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const size_t row = size_t(b) * p.heads_kv + hk;
      std::vector<double> pooled(size_t(len), 0.0);
      if (len > c.budget) pooled = kv_max_pool(&scores[row * T], len, c.pool_kernel);
      if (pooled_out) std::copy(pooled.begin(), pooled.end(), pooled_out->begin() + int64_t(row) * T);
      const std::vector<int32_t> sel = kv_select(pooled.data(), len, c.n_sink, c.n_recent, c.budget);
      std::copy(sel.begin(), sel.end(), kept.begin() + int64_t(row) * c.budget);
    }
  }
  return kept;
}

}  // namespace course::ref
