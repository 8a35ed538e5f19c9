// The ring-cache decode reference (reference_window.cpp) checked on the CPU: against the dense
// windowed reference over the unrolled sequence, and against a closed form that counts the keys
// a query sees. Unwritten slots are NaN: reading one would show.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "catch_compat.h"
#include "random.h"
#include "reference.h"

using course::AttentionParams;
using course::RingCacheParams;
namespace ref = course::ref;

namespace {

RingCacheParams ring(int b, int hq, int hkv, int d, int w) {
  RingCacheParams p;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = d;
  p.window = w;
  return p;
}

// Writes the tokens of one sequence's KV head (rows [len, D]) into its ring: token t -> slot
// t % (w + 1), later tokens overwriting earlier ones.
void write_ring(std::vector<float>& cache, const RingCacheParams& p, int b, int h, const std::vector<float>& tokens,
                int len) {
  const int D = p.head_dim, cap = p.capacity();
  for (int t = 0; t < len; ++t)
    for (int d = 0; d < D; ++d)
      cache[((size_t(b) * p.heads_kv + h) * cap + size_t(t % cap)) * D + size_t(d)] = tokens[size_t(t) * D + size_t(d)];
}

}  // namespace

TEST_CASE("ring decode reference equals windowed attention over the whole sequence", "[reference][ring]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int D = 16, hq = 4, hkv = 2;
  for (int w : {0, 1, 5, 16}) {
    const std::vector<int32_t> lens{1, 3, w + 1, w + 2, 3 * (w + 1) + 2};
    const RingCacheParams p = ring(int(lens.size()), hq, hkv, D, w);
    const auto q = course::random_normal(size_t(p.q_elems()), course::case_seed("ring_ref", w));
    std::vector<float> kc(size_t(p.cache_elems()), nan), vc(size_t(p.cache_elems()), nan);
    std::vector<std::vector<float>> ks, vs;  // the unrolled sequences, [B][Hkv, len, D]
    for (int b = 0; b < p.batch; ++b) {
      const int len = lens[size_t(b)];
      ks.push_back(course::random_normal(size_t(hkv) * len * D, course::case_seed("ring_ref_k", w * 10 + b)));
      vs.push_back(course::random_normal(size_t(hkv) * len * D, course::case_seed("ring_ref_v", w * 10 + b)));
      for (int h = 0; h < hkv; ++h) {
        const std::vector<float> kt(ks.back().begin() + ptrdiff_t(h) * len * D,
                                    ks.back().begin() + ptrdiff_t(h + 1) * len * D);
        const std::vector<float> vt(vs.back().begin() + ptrdiff_t(h) * len * D,
                                    vs.back().begin() + ptrdiff_t(h + 1) * len * D);
        write_ring(kc, p, b, h, kt, len);
        write_ring(vc, p, b, h, vt, len);
      }
    }
    const auto out = ref::ring_decode_attention(q, kc, vc, lens, p);
    for (int b = 0; b < p.batch; ++b) {
      INFO("w=" << w << " sequence " << b << " of length " << lens[size_t(b)]);
      // The same query against the full sequence with the window mask: one query row, Nk = len.
      const AttentionParams dense = AttentionParams::make(1, hq, hkv, 1, lens[size_t(b)], D, true, w);
      const std::vector<float> qb(q.begin() + ptrdiff_t(b) * hq * D, q.begin() + ptrdiff_t(b + 1) * hq * D);
      const auto expect = ref::attention(qb, ks[size_t(b)], vs[size_t(b)], dense);
      for (int i = 0; i < hq * D; ++i) {
        const float y = out[size_t(b) * hq * D + size_t(i)];
        REQUIRE(std::isfinite(y));
        CHECK(std::fabs(y - expect[size_t(i)]) <= 1e-6f * (1.f + std::fabs(expect[size_t(i)])));
      }
    }
  }
}

// Q = 0: every visible token weighs 1/count. V of token t = one-hot of (t mod D): the output
// shows which tokens were seen. Exactly min(L, w + 1) of them, the newest.
TEST_CASE("ring decode reference sees exactly the newest min(L, w + 1) tokens", "[reference][ring]") {
  const int D = 32;
  for (int w : {0, 3, 10}) {
    for (int len : {1, 2, w + 1, w + 2, 5 * (w + 1) + 3}) {
      const RingCacheParams p = ring(1, 1, 1, D, w);
      std::vector<float> q(size_t(D), 0.f), kc(size_t(p.cache_elems()), std::numeric_limits<float>::quiet_NaN());
      std::vector<float> vc = kc, tk(size_t(len) * D, 0.5f), tv(size_t(len) * D, 0.f);
      for (int t = 0; t < len; ++t) tv[size_t(t) * D + size_t(t % D)] = 1.f;
      write_ring(kc, p, 0, 0, tk, len);
      write_ring(vc, p, 0, 0, tv, len);
      const auto out = ref::ring_decode_attention(q, kc, vc, {len}, p);
      const int count = std::min(len, w + 1);
      INFO("w=" << w << " L=" << len << ": expect tokens " << len - count << ".." << len - 1);
      for (int d = 0; d < D; ++d) {
        bool seen = false;
        for (int t = len - count; t < len; ++t) seen = seen || t % D == d;
        CHECK(std::fabs(out[size_t(d)] - (seen ? 1.f / float(count) : 0.f)) <= 1e-7f);
      }
    }
  }
}
