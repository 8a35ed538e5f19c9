// The KV-compression reference (reference_kv_compress.cpp) checked on the CPU against closed
// forms: uniform attention gives harmonic sums, every row's softmax sums to one, a dominant key
// takes a row's whole weight, GQA is the sum over the group, the paged lookup equals a gathered
// dense cache, and the selection keeps sinks, recent window and the best candidates with the
// lower index winning ties. The caches come from common/paged_cache.h, so every slot a
// reference must not read holds NaN.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "catch_compat.h"
#include "paged_cache.h"
#include "random.h"
#include "reference_kv_compress.h"

namespace ref = course::ref;

namespace {

// One window row per query head and sequence: [B, Hq, W, D] of normal values.
std::vector<float> window_queries(const course::PagedParams& p, int w, uint64_t seed) {
  return course::random_normal(size_t(p.batch) * p.heads_q * w * p.head_dim, seed);
}

int64_t width(const course::PagedParams& p) { return int64_t(p.max_blocks_per_seq) * p.block_size; }

}  // namespace

TEST_CASE("kv scores: q = 0 gives every visible key 1/count in each row (harmonic sums)", "[reference][kv_compress]") {
  const std::vector<int32_t> lens{1, 5, 17, 40, 0};
  for (int w : {1, 3, 8}) {
    const course::PagedCache pc = course::build_paged_cache(lens, 4, 2, 16, 8, course::case_seed("kvref_uniform", w));
    const auto& p = pc.p;
    const std::vector<float> q(size_t(p.batch) * p.heads_q * w * p.head_dim, 0.f);
    const auto s = ref::kv_observation_scores(q, pc.k, pc.table, pc.lens, p, w);
    const int G = p.group_size();
    for (int b = 0; b < p.batch; ++b)
      for (int hk = 0; hk < p.heads_kv; ++hk)
        for (int j = 0; j < width(p); ++j) {
          const int len = lens[size_t(b)];
          double expect = 0.0;  // Σ over rows i that see j (j <= len − w + i) of 1 / (len − w + i + 1), times G
          for (int i = 0; i < w; ++i)
            if (len - w + i >= 0 && j <= len - w + i) expect += G / double(len - w + i + 1);
          const double got = s[(size_t(b) * p.heads_kv + hk) * width(p) + j];
          INFO("w=" << w << " b=" << b << " hk=" << hk << " j=" << j << " len=" << len);
          REQUIRE(std::isfinite(got));
          CHECK(std::fabs(got - expect) <= 1e-12 * (1.0 + expect));
        }
  }
}

TEST_CASE("kv scores: each row's softmax sums to one, so a KV head's scores sum to G x (rows that see a key)",
          "[reference][kv_compress]") {
  const std::vector<int32_t> lens{3, 16, 33, 100};
  const int w = 8;
  const course::PagedCache pc = course::build_paged_cache(lens, 6, 2, 32, 16, course::case_seed("kvref_mass", 0));
  const auto& p = pc.p;
  const auto q = window_queries(p, w, course::case_seed("kvref_mass_q", 0));
  const auto s = ref::kv_observation_scores(q, pc.k, pc.table, pc.lens, p, w);
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const int len = lens[size_t(b)];
      double sum = 0.0;
      for (int j = 0; j < width(p); ++j) sum += s[(size_t(b) * p.heads_kv + hk) * width(p) + j];
      const int rows = std::min(w, len);  // rows with len − w + i >= 0
      INFO("b=" << b << " hk=" << hk << " len=" << len);
      CHECK(std::fabs(sum - double(p.group_size()) * rows) <= 1e-9);
      for (int j = len; j < width(p); ++j) CHECK(s[(size_t(b) * p.heads_kv + hk) * width(p) + j] == 0.0);
    }
}

TEST_CASE("kv scores: a dominant key takes the whole weight of every row that sees it", "[reference][kv_compress]") {
  // Every window row of every head is the same vector u; key 5 is 40·u (logit ~ 40·|u|²/√D,
  // hundreds above the others), the others N(0, 1). Rows that see key 5 put ~all their weight on it.
  const std::vector<int32_t> lens{30};
  const int w = 4, D = 16;
  course::PagedCache pc = course::build_paged_cache(lens, 2, 1, D, 8, course::case_seed("kvref_dominant", 0));
  const auto& p = pc.p;
  const std::vector<float> u = course::random_normal(size_t(D), course::case_seed("kvref_dominant_u", 0));
  std::vector<float> q;
  for (int r = 0; r < p.heads_q * w; ++r) q.insert(q.end(), u.begin(), u.end());
  const int block = pc.table[0];  // token 5 is slot 5 of logical block 0
  for (int d = 0; d < D; ++d) pc.k[(size_t(block) * p.heads_kv * p.block_size + 5) * D + d] = 40.f * u[size_t(d)];
  const auto s = ref::kv_observation_scores(q, pc.k, pc.table, pc.lens, p, w);
  CHECK(std::fabs(s[5] - p.heads_q * w) <= 1e-6);  // all G·W rows see key 5 (5 <= 30 − 4)
  for (int j = 0; j < 30; ++j)
    if (j != 5) CHECK(s[size_t(j)] <= 1e-6);
}

TEST_CASE("kv scores: GQA sums the group (two identical query heads score twice one)", "[reference][kv_compress]") {
  const std::vector<int32_t> lens{37, 12};
  const int w = 5;
  const course::PagedCache one = course::build_paged_cache(lens, 1, 1, 32, 8, course::case_seed("kvref_gqa", 0));
  course::PagedParams two = one.p;
  two.heads_q = 2;
  const auto q1 = window_queries(one.p, w, course::case_seed("kvref_gqa_q", 0));
  std::vector<float> q2;  // [B, 2, W, D]: head 0 and head 1 both hold q1's head
  const size_t head = size_t(w) * one.p.head_dim;
  for (int b = 0; b < one.p.batch; ++b)
    for (int h = 0; h < 2; ++h)
      q2.insert(q2.end(), q1.begin() + ptrdiff_t(b * head), q1.begin() + ptrdiff_t((b + 1) * head));
  const auto s1 = ref::kv_observation_scores(q1, one.k, one.table, one.lens, one.p, w);
  const auto s2 = ref::kv_observation_scores(q2, one.k, one.table, one.lens, two, w);
  REQUIRE(s1.size() == s2.size());
  for (size_t i = 0; i < s1.size(); ++i) CHECK(std::fabs(s2[i] - 2.0 * s1[i]) <= 1e-12 * (1.0 + s2[i]));
}

TEST_CASE("kv scores: the paged lookup equals the same tokens in an unshuffled cache", "[reference][kv_compress]") {
  const std::vector<int32_t> lens{45, 7, 16};
  const int w = 6;
  const course::PagedCache pc = course::build_paged_cache(lens, 4, 2, 16, 4, course::case_seed("kvref_paged", 0));
  const auto& p = pc.p;
  // Logical block i of sequence b moved to physical block b · max_blocks + i, in order.
  course::PagedParams flat = p;
  flat.num_blocks = p.batch * p.max_blocks_per_seq;
  std::vector<float> k(size_t(flat.cache_elems()), 0.f);
  std::vector<int32_t> table(size_t(p.batch) * p.max_blocks_per_seq);
  const size_t block_elems = size_t(p.heads_kv) * p.block_size * p.head_dim;
  for (int b = 0; b < p.batch; ++b)
    for (int i = 0; i < p.max_blocks_per_seq; ++i) {
      const int32_t to = b * p.max_blocks_per_seq + i, from = pc.table[size_t(b) * p.max_blocks_per_seq + i];
      table[size_t(to)] = to;
      std::copy(pc.k.begin() + ptrdiff_t(from * block_elems), pc.k.begin() + ptrdiff_t((from + 1) * block_elems),
                k.begin() + ptrdiff_t(to * block_elems));
    }
  const auto q = window_queries(p, w, course::case_seed("kvref_paged_q", 0));
  const auto a = ref::kv_observation_scores(q, pc.k, pc.table, pc.lens, p, w);
  const auto b = ref::kv_observation_scores(q, k, table, pc.lens, flat, w);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    CHECK(a[i] == b[i]);
  }
}

TEST_CASE("kv max pool: kernel 1 is the identity; a spike spreads (k − 1) / 2 each way, clipped at the ends",
          "[reference][kv_compress]") {
  const std::vector<double> x{0.5, 0.1, 0.2, 3.0, 0.3, 0.0, 0.7};
  CHECK(ref::kv_max_pool(x.data(), 7, 1) == x);
  CHECK(ref::kv_max_pool(x.data(), 7, 3) == std::vector<double>{0.5, 0.5, 3.0, 3.0, 3.0, 0.7, 0.7});
  CHECK(ref::kv_max_pool(x.data(), 7, 5) == std::vector<double>{0.5, 3.0, 3.0, 3.0, 3.0, 3.0, 0.7});
  CHECK(ref::kv_max_pool(x.data(), 7, 15) == std::vector<double>(7, 3.0));
  CHECK(ref::kv_max_pool(x.data(), 0, 3).empty());
}

TEST_CASE("kv select: sinks + recent + the best candidates, the lower index winning ties", "[reference][kv_compress]") {
  // 12 tokens, budget 7: sinks {0, 1}, recent {10, 11}, 3 of the candidates 2 .. 9.
  //           token: 0    1    2    3    4    5    6    7    8    9    10   11
  const std::vector<double> s{0.0, 0.0, 0.4, 0.9, 0.4, 0.1, 0.4, 0.8, 0.2, 0.4, 0.0, 0.0};
  // 3 (0.9) and 7 (0.8) first, then one of the four 0.4s: the lowest index, 2.
  CHECK(ref::kv_select(s.data(), 12, 2, 2, 7) == std::vector<int32_t>{0, 1, 2, 3, 7, 10, 11});
  // No sinks, no recent window: the best 4 by score, ties to the lower index.
  CHECK(ref::kv_select(s.data(), 12, 0, 0, 4) == std::vector<int32_t>{2, 3, 4, 7});
  // Budget = sinks + recent: no candidate at all.
  CHECK(ref::kv_select(s.data(), 12, 2, 2, 4) == std::vector<int32_t>{0, 1, 10, 11});
  // len <= budget: everything, whatever the scores.
  CHECK(ref::kv_select(s.data(), 7, 2, 2, 7) == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(ref::kv_select(s.data(), 0, 2, 2, 7).empty());
  // Equal scores everywhere: the lowest candidates.
  const std::vector<double> flat(12, 1.0);
  CHECK(ref::kv_select(flat.data(), 12, 1, 3, 7) == std::vector<int32_t>{0, 1, 2, 3, 9, 10, 11});
}

TEST_CASE("kv compress reference: per-head kept lists, ascending, min(L, budget) long, -1 after",
          "[reference][kv_compress]") {
  const std::vector<int32_t> lens{0, 5, 40, 41, 300};
  const course::PagedCache pc = course::build_paged_cache(lens, 8, 2, 32, 16, course::case_seed("kvref_kept", 0));
  const auto& p = pc.p;
  ref::KvSelectParams c;
  c.window = 8;
  c.n_sink = 3;
  c.n_recent = 8;
  c.budget = 40;
  c.pool_kernel = 5;
  const auto q = window_queries(p, c.window, course::case_seed("kvref_kept_q", 0));
  std::vector<double> pooled;
  const auto kept = ref::kv_compress_kept(q, pc.k, pc.table, pc.lens, p, c, &pooled);
  REQUIRE(kept.size() == size_t(p.batch) * p.heads_kv * c.budget);
  bool heads_differ = false;
  for (int b = 0; b < p.batch; ++b) {
    const int len = lens[size_t(b)], n = std::min(len, c.budget);
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      const int32_t* row = &kept[(size_t(b) * p.heads_kv + hk) * c.budget];
      INFO("b=" << b << " hk=" << hk << " len=" << len);
      for (int r = 0; r < n; ++r) {
        CHECK(row[r] >= 0);
        CHECK(row[r] < len);
        if (r > 0) CHECK(row[r] > row[r - 1]);
      }
      for (int r = n; r < c.budget; ++r) CHECK(row[r] == -1);
      if (len <= c.budget) {
        for (int r = 0; r < n; ++r) CHECK(row[r] == r);
      } else {
        for (int j = 0; j < c.n_sink; ++j) CHECK(row[j] == j);
        for (int j = 0; j < c.n_recent; ++j) CHECK(row[c.budget - c.n_recent + j] == len - c.n_recent + j);
        if (hk > 0 && !std::equal(row, row + n, row - c.budget)) heads_differ = true;
      }
    }
  }
  CHECK(heads_differ);  // each KV head chooses for itself
  // The pooled scores of a compressed sequence are finite, its tail beyond L is 0.
  const int64_t T = width(p);
  for (int j = 0; j < 300; ++j) CHECK(std::isfinite(pooled[size_t(4 * p.heads_kv) * T + j]));
  CHECK(pooled[size_t(4 * p.heads_kv) * T + 300] == 0.0);
}
