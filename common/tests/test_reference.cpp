// The CPU reference checked against closed forms and hand-computed cases. Every GPU test
// trusts this file's subject, so each property below is one a wrong reference would break.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "catch_compat.h"
#include "compare.h"
#include "random.h"
#include "reference.h"

using course::AttentionParams;
using course::PagedParams;
namespace ref = course::ref;

namespace {

bool near(double a, double b, double tol = 1e-6) { return std::fabs(a - b) <= tol * (1.0 + std::fabs(b)); }

std::vector<float> randn(size_t n, int64_t idx, float stddev = 1.f) {
  return course::random_normal(n, course::case_seed("reference", idx), 0.f, stddev);
}

AttentionParams make(int b, int hq, int hkv, int nq, int nk, int d, bool causal = false, int window = -1) {
  return AttentionParams::make(b, hq, hkv, nq, nk, d, causal, window);
}

// Max |a - b| over two equally sized vectors.
double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

TEST_CASE("matmul_abt matches a hand-computed product", "[reference][matmul]") {
  // A = [[1,2,3],[4,5,6]], B = [[1,0,1],[0,1,0]] -> C = A·B^T = [[4,2],[10,5]]
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{1, 0, 1, 0, 1, 0};
  const auto c = ref::matmul_abt(a, b, 2, 2, 3);
  CHECK(c == std::vector<float>{4, 2, 10, 5});
}

TEST_CASE("matmul_abt with K = 0 gives zeros and handles non-square shapes", "[reference][matmul]") {
  CHECK(ref::matmul_abt({}, {}, 2, 3, 0) == std::vector<float>(6, 0.f));
  const auto a = randn(5 * 7, 1), b = randn(3 * 7, 2);
  const auto c = ref::matmul_abt(a, b, 5, 3, 7);
  double dot = 0;
  for (int t = 0; t < 7; ++t) dot += double(a[4 * 7 + t]) * b[2 * 7 + t];
  CHECK(near(c[4 * 3 + 2], dot));
}

TEST_CASE("row_max and row_sum match hand-computed rows", "[reference][reduction]") {
  const std::vector<float> x{1, -2, 3, -4, -5, -6};  // 2 rows x 3 cols
  CHECK(ref::row_max(x, 2, 3) == std::vector<float>{3, -4});
  CHECK(ref::row_sum(x, 2, 3) == std::vector<float>{2, -15});
  CHECK(ref::row_max(x, 3, 2) == std::vector<float>{1, 3, -5});
}

TEST_CASE("softmax of [0, ln2, ln4] is [1/7, 2/7, 4/7]", "[reference][softmax]") {
  const std::vector<float> x{0.f, std::log(2.f), std::log(4.f)};
  const auto s = ref::softmax_rows(x, 1, 3);
  CHECK(near(s[0], 1.0 / 7, 1e-6));
  CHECK(near(s[1], 2.0 / 7, 1e-6));
  CHECK(near(s[2], 4.0 / 7, 1e-6));
}

TEST_CASE("softmax is invariant to shifting a row and sums to one", "[reference][softmax]") {
  const int rows = 4, cols = 33;
  auto x = randn(rows * cols, 3, 3.f);
  auto shifted = x;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) shifted[r * cols + c] += 100.f * (r + 1);
  const auto a = ref::softmax_rows(x, rows, cols), b = ref::softmax_rows(shifted, rows, cols);
  CHECK(max_diff(a, b) < 1e-5);
  for (int r = 0; r < rows; ++r) {
    double s = 0;
    for (int c = 0; c < cols; ++c) s += a[r * cols + c];
    CHECK(near(s, 1.0, 1e-6));
  }
}

TEST_CASE("softmax stays finite at logits of +-1e4", "[reference][softmax]") {
  const std::vector<float> x{1e4f, -1e4f, 1e4f - 1.f, 0.f};
  const auto s = ref::softmax_rows(x, 1, 4);
  for (float v : s) CHECK(std::isfinite(v));
  CHECK(near(s[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-6));
  CHECK(s[1] == 0.f);
}

TEST_CASE("attention with uniform scores is the mean of V (prefix mean when causal)", "[reference][attention]") {
  const int n = 9, d = 4;
  const std::vector<float> q(n * d, 0.f);  // Q = 0 -> every score is 0 -> uniform weights
  const auto k = randn(n * d, 4), v = randn(n * d, 5);
  const auto o = ref::attention(q, k, v, make(1, 1, 1, n, n, d));
  const auto oc = ref::attention(q, k, v, make(1, 1, 1, n, n, d, true));
  for (int t = 0; t < d; ++t) {
    double total = 0, prefix = 0;
    for (int j = 0; j < n; ++j) total += v[j * d + t];
    CHECK(near(o[3 * d + t], total / n));
    for (int i = 0; i < n; ++i) {
      prefix += v[i * d + t];
      CHECK(near(oc[i * d + t], prefix / (i + 1)));
    }
  }
}

TEST_CASE("one dominant logit selects that row of V", "[reference][attention]") {
  const int n = 6, d = 8, hot = 4;
  std::vector<float> q(d, 0.f), k(n * d, 0.f);
  q[0] = 1.f;
  k[hot * d + 0] = 1000.f;  // score 1000·scale for key `hot`, 0 for the rest
  const auto v = randn(n * d, 6);
  const auto o = ref::attention(q, k, v, make(1, 1, 1, 1, n, d));
  for (int t = 0; t < d; ++t) CHECK(near(o[t], v[hot * d + t]));
}

TEST_CASE("GQA equals MHA with the KV heads repeated", "[reference][attention][gqa]") {
  const int b = 2, hq = 6, hkv = 2, n = 11, d = 8, g = hq / hkv;
  const auto p = make(b, hq, hkv, n, n, d, true);
  const auto q = randn(p.q_elems(), 7), k = randn(p.kv_elems(), 8), v = randn(p.kv_elems(), 9);
  std::vector<float> k_rep, v_rep;  // [b, hq, n, d] with head h holding KV head h / g
  for (int bb = 0; bb < b; ++bb)
    for (int h = 0; h < hq; ++h) {
      const size_t src = (size_t(bb) * hkv + h / g) * n * d;
      k_rep.insert(k_rep.end(), k.begin() + src, k.begin() + src + n * d);
      v_rep.insert(v_rep.end(), v.begin() + src, v.begin() + src + n * d);
    }
  const auto gqa = ref::attention(q, k, v, p);
  const auto mha = ref::attention(q, k_rep, v_rep, make(b, hq, hq, n, n, d, true));
  CHECK(max_diff(gqa, mha) == 0.0);
}

TEST_CASE("causal mask is bottom-right aligned when Nq != Nk", "[reference][attention][causal]") {
  const int nq = 3, nk = 7, d = 4;
  const auto q = randn(nq * d, 10), k = randn(nk * d, 11), v = randn(nk * d, 12);
  const auto causal = ref::attention(q, k, v, make(1, 1, 1, nq, nk, d, true));
  const auto full = ref::attention(q, k, v, make(1, 1, 1, nq, nk, d, false));
  // The last query sees every key, so its row equals the unmasked one...
  for (int t = 0; t < d; ++t) CHECK(causal[2 * d + t] == full[2 * d + t]);
  // ...and query 0 sees keys 0..4 only: recompute it as an unmasked problem over 5 keys.
  const std::vector<float> k5(k.begin(), k.begin() + 5 * d), v5(v.begin(), v.begin() + 5 * d);
  const std::vector<float> q0(q.begin(), q.begin() + d);
  const auto row0 = ref::attention(q0, k5, v5, make(1, 1, 1, 1, 5, d));
  for (int t = 0; t < d; ++t) CHECK(near(causal[t], row0[t]));
}

TEST_CASE("a query row that sees no key outputs zeros, not NaN", "[reference][attention][causal]") {
  // Nq > Nk with causal: rows i < Nq - Nk see no key at all.
  const int nq = 5, nk = 2, d = 4;
  const auto q = randn(nq * d, 13), k = randn(nk * d, 14), v = randn(nk * d, 15);
  const auto o = ref::attention(q, k, v, make(1, 1, 1, nq, nk, d, true));
  for (int i = 0; i < nq - nk; ++i)
    for (int t = 0; t < d; ++t) CHECK(o[i * d + t] == 0.f);
  for (float x : o) CHECK(std::isfinite(x));
}

TEST_CASE("a window as wide as the sequence equals plain causal", "[reference][attention][window]") {
  const int n = 17, d = 8;
  const auto q = randn(n * d, 16), k = randn(n * d, 17), v = randn(n * d, 18);
  const auto causal = ref::attention(q, k, v, make(1, 1, 1, n, n, d, true));
  CHECK(max_diff(ref::attention(q, k, v, make(1, 1, 1, n, n, d, true, n)), causal) == 0.0);
  // Window 0: each query sees only its own key, so O row i = V row i.
  const auto diag = ref::attention(q, k, v, make(1, 1, 1, n, n, d, true, 0));
  CHECK(max_diff(diag, v) < 1e-7);
}

TEST_CASE("attention stays finite and correct at logits of +-1e4", "[reference][attention]") {
  const int n = 5, d = 2;
  std::vector<float> q{100.f, 0.f}, k(n * d, 0.f);
  const auto v = randn(n * d, 19);
  for (int j = 0; j < n; ++j) k[j * d] = (j == 3 ? 141.5f : -141.5f);  // logits ~ +-1e4
  auto p = make(1, 1, 1, 1, n, d);
  p.scale = 1.f / std::sqrt(2.f);
  const auto o = ref::attention(q, k, v, p);
  for (int t = 0; t < d; ++t) CHECK(near(o[t], v[3 * d + t]));
}

TEST_CASE("paged decode equals dense attention over the gathered sequence", "[reference][paged]") {
  PagedParams p;
  p.batch = 3;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.head_dim = 8;
  p.block_size = 4;
  p.max_blocks_per_seq = 5;
  p.num_blocks = 16;
  const std::vector<int32_t> lens{1, 9, 20};
  // Random permutation of physical blocks handed out to the sequences.
  std::vector<int32_t> perm(p.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  course::Rng rng(course::case_seed("reference-paged", 0));
  for (int i = p.num_blocks - 1; i > 0; --i) std::swap(perm[i], perm[rng.uniform_int(0, i)]);
  std::vector<int32_t> table(p.batch * p.max_blocks_per_seq, -1);
  int next = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int blk = 0; blk * p.block_size < lens[b]; ++blk) table[b * p.max_blocks_per_seq + blk] = perm[next++];
  // Cache full of NaN: only slots that belong to a sequence get real values.
  std::vector<float> kc(p.cache_elems(), NAN), vc(p.cache_elems(), NAN);
  const auto q = randn(p.q_elems(), 20);
  for (int b = 0; b < p.batch; ++b) {
    const int n = lens[b];
    const auto kd = randn(size_t(p.heads_kv) * n * p.head_dim, 21 + b);
    const auto vd = randn(size_t(p.heads_kv) * n * p.head_dim, 31 + b);
    for (int h = 0; h < p.heads_kv; ++h)
      for (int t = 0; t < n; ++t)
        for (int x = 0; x < p.head_dim; ++x) {
          const int blk = table[b * p.max_blocks_per_seq + t / p.block_size];
          const size_t dst = ((size_t(blk) * p.heads_kv + h) * p.block_size + t % p.block_size) * p.head_dim + x;
          const size_t src = (size_t(h) * n + t) * p.head_dim + x;
          kc[dst] = kd[src];
          vc[dst] = vd[src];
        }
    // Dense reference for this sequence: one query token attending to all n keys.
    std::vector<float> qb(q.begin() + size_t(b) * p.heads_q * p.head_dim,
                          q.begin() + size_t(b + 1) * p.heads_q * p.head_dim);
    const auto dense = ref::attention(qb, kd, vd, make(1, p.heads_q, p.heads_kv, 1, n, p.head_dim));
    const auto paged = ref::paged_decode_attention(q, kc, vc, table, lens, p);
    for (size_t i = 0; i < dense.size(); ++i) {
      CHECK(std::isfinite(paged[size_t(b) * p.heads_q * p.head_dim + i]));
      CHECK(near(paged[size_t(b) * p.heads_q * p.head_dim + i], dense[i]));
    }
  }
}

TEST_CASE("block-sparse with every tile kept equals dense; with none, zeros", "[reference][sparse]") {
  const int n = 37, d = 8;
  auto p = make(1, 2, 2, n, n, d, true);
  const auto q = randn(p.q_elems(), 40), k = randn(p.kv_elems(), 41), v = randn(p.kv_elems(), 42);
  ref::BlockSparseLayout all{16, 16, {}, {}}, none{16, 16, {}, {}};
  const int tiles = (n + 15) / 16;
  for (int r = 0; r <= tiles; ++r) {
    all.row_ptr.push_back(r * tiles);
    none.row_ptr.push_back(0);
  }
  for (int r = 0; r < tiles; ++r)
    for (int c = 0; c < tiles; ++c) all.col_idx.push_back(c);
  CHECK(max_diff(ref::block_sparse_attention(q, k, v, p, all), ref::attention(q, k, v, p)) == 0.0);
  for (float x : ref::block_sparse_attention(q, k, v, p, none)) CHECK(x == 0.f);
}

TEST_CASE("the reference rejects inconsistent parameters", "[reference]") {
  const std::vector<float> x(64, 0.f);
  CHECK_THROWS_AS(ref::attention(x, x, x, make(1, 3, 2, 2, 2, 4)), std::invalid_argument);
}

TEST_CASE("random_normal_sixteenths gives dot products that are exact in fp32", "[random]") {
  const auto a = course::random_normal_sixteenths(128, 1, 4.f), b = course::random_normal_sixteenths(128, 2, 4.f);
  float forward = 0.f, backward = 0.f;
  double exact = 0.0;
  for (int t = 0; t < 128; ++t) {
    CHECK(a[t] * 16.f == std::trunc(a[t] * 16.f));
    forward += a[t] * b[t];
    backward += a[127 - t] * b[127 - t];
    exact += double(a[t]) * b[t];
  }
  CHECK(forward == backward);  // summation order does not matter: nothing was rounded
  CHECK(double(forward) == exact);
}
