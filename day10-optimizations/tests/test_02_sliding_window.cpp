// Tests for day10/02_sliding_window.
//
// Prefill (sliding_window_attention): shape grids around the tile sizes (1, below a tile, 67,
// 1000, 2048), Nq != Nk both ways, GQA/MQA, w = 0, w >= Nk (must equal plain causal, checked
// against the causal reference), and two properties the reference comparison alone would not
// pin down:
//   * the count: with Q = 0 every visible key gets the same weight, and with V row j = one-hot
//     of (j mod D) the output row shows exactly which keys were seen: w + 1 of them once
//     i + off >= w (the off-by-one that shipped in real libraries);
//   * band skipping: K and V rows in tiles wholly before every row's band are NaN. A kernel that
//     touches such a tile gets NaN even when it masks it (0 · NaN = NaN in P·V).
// Decode (ring_decode_attention): a batch of sequences at different positions, some not yet
// wrapped (their unwritten slots hold NaN), some wrapped several times, GQA, w = 0.
// Index helpers ("[index]", CPU only, no GPU needed): window_band_tiles, window_tile_is_full and
// ring_window_slots against brute force over every small input, straight from the contract's
// definition of which key a query sees and which slot a token lives in.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "02_sliding_window.h"
#include "gpu_test.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;
using course::RingCacheParams;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int b, h, nq, nk, d, w;
  const char* why;
  int h_kv = 0;  // 0: MHA (Hkv = Hq)
};

AttentionParams params_of(const Case& c) {
  return AttentionParams::make(c.b, c.h, c.h_kv > 0 ? c.h_kv : c.h, c.nq, c.nk, c.d, true, c.w);
}

std::string describe(const Case& c, uint64_t seed) {
  return "B=" + std::to_string(c.b) + " Hq=" + std::to_string(c.h) +
         " Hkv=" + std::to_string(c.h_kv > 0 ? c.h_kv : c.h) + " Nq=" + std::to_string(c.nq) +
         " Nk=" + std::to_string(c.nk) + " D=" + std::to_string(c.d) + " w=" + std::to_string(c.w) + " (" + c.why +
         "), seed = " + std::to_string(seed) + " (set COURSE_SEED to vary)";
}

// Runs the kernel on q, k, v and compares O with `expected`.
void check_window(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v, const std::vector<float>& expected) {
  auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
  DeviceBuffer<float> d_o(size_t(p.o_elems()));
  d_o.poison();
  sliding_window_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), p);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  COURSE_CHECK_OUTPUT(d_o, expected, dims, course::Tolerance::fp32());
}

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    INFO(describe(c, seed));
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    const auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    const auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    check_window(p, q, k, v, course::ref::attention(q, k, v, p));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Index helpers, on the CPU. The brute force is the contract itself: query i sees key j iff
// 0 <= j < Nk and i + off − w <= j <= i + off; token t of a ring of `cap` slots is in slot t % cap.
namespace {

bool sees(int i, int j, int off, int w) { return j >= i + off - w && j <= i + off; }

// The query tiles the kernel forms: rows q0 .. q_last, q0 a multiple of br.
template <class Fn>
void for_each_query_tile(int seq_q, int br, Fn fn) {
  for (int q0 = 0; q0 < seq_q; q0 += br) fn(q0, std::min(q0 + br, seq_q) - 1);
}

}  // namespace

TEST_CASE("window_band_tiles: exactly the key tiles that hold a key some row sees", "[index][quick]") {
  int checked = 0, failed = 0;
  std::string first_failure;
  for (int bc : {1, 3, 4, 8})
    for (int br : {1, 4, 7})
      for (int seq_q = 1; seq_q <= 20; ++seq_q)
        for (int seq_k = 1; seq_k <= 20; ++seq_k)
          for (int w = 0; w <= seq_k; ++w)  // the launcher clamps w to seq_k
            for_each_query_tile(seq_q, br, [&](int q0, int q_last) {
              const int off = seq_k - seq_q, n_tiles = (seq_k + bc - 1) / bc;
              std::vector<bool> want(size_t(n_tiles), false);  // tile t holds a key some row sees
              int want_count = 0;
              for (int t = 0; t < n_tiles; ++t) {
                for (int j = t * bc; j < std::min((t + 1) * bc, seq_k) && !want[size_t(t)]; ++j)
                  for (int i = q0; i <= q_last; ++i)
                    if (sees(i, j, off, w)) {
                      want[size_t(t)] = true;
                      break;
                    }
                want_count += want[size_t(t)];
              }
              const WindowTiles got = window_band_tiles(q0, q_last, off, w, seq_k, bc);
              bool ok = got.count == want_count;
              for (int t = 0; ok && t < got.count; ++t) {
                const int tile = got.first + t;
                ok = tile >= 0 && tile < n_tiles && want[size_t(tile)];
              }
              ++checked;
              if (!ok && failed++ == 0) {
                int lo = -1, hi = -1;
                for (int t = 0; t < n_tiles; ++t)
                  if (want[size_t(t)]) hi = t, lo = lo < 0 ? t : lo;
                first_failure =
                    "window_band_tiles(q0=" + std::to_string(q0) + ", q_last=" + std::to_string(q_last) +
                    ", off=" + std::to_string(off) + ", w=" + std::to_string(w) + ", seq_k=" + std::to_string(seq_k) +
                    ", bc=" + std::to_string(bc) + ") returned {first " + std::to_string(got.first) + ", count " +
                    std::to_string(got.count) + "}, expected " +
                    (want_count == 0
                         ? std::string("count 0 (no row sees a key)")
                         : "{first " + std::to_string(lo) + ", count " + std::to_string(hi - lo + 1) + "}") +
                    " (Nq=" + std::to_string(seq_q) + ", Nk=" + std::to_string(seq_k) + ")";
              }
            });
  INFO(failed << " of " << checked << " inputs wrong; first: " << first_failure);
  CHECK(failed == 0);
}

TEST_CASE("window_tile_is_full: full exactly when every row sees every key of the tile", "[index][quick]") {
  int checked = 0, failed = 0;
  std::string first_failure;
  for (int bc : {1, 3, 4, 8})
    for (int br : {1, 4, 7})
      for (int seq_q = 1; seq_q <= 16; ++seq_q)
        for (int seq_k = 1; seq_k <= 16; ++seq_k)
          for (int w = 0; w <= seq_k; ++w)
            for_each_query_tile(seq_q, br, [&](int q0, int q_last) {
              const int off = seq_k - seq_q;
              for (int kv0 = 0; kv0 < seq_k; kv0 += bc) {
                bool want = true;  // every (row, key) pair of the tile is visible; keys past seq_k count too
                for (int i = q0; i <= q_last && want; ++i)
                  for (int j = kv0; j < kv0 + bc && want; ++j) want = sees(i, j, off, w);
                const bool got = window_tile_is_full(kv0, q0, q_last, off, w, bc);
                ++checked;
                if (got != want && failed++ == 0)
                  first_failure = "window_tile_is_full(kv0=" + std::to_string(kv0) + ", q0=" + std::to_string(q0) +
                                  ", q_last=" + std::to_string(q_last) + ", off=" + std::to_string(off) +
                                  ", w=" + std::to_string(w) + ", bc=" + std::to_string(bc) + ") returned " +
                                  (got ? "true" : "false") + ", expected " + (want ? "true" : "false") +
                                  (want ? " (every row sees every key: no mask needed)"
                                        : " (some row misses some key: the mask is needed)");
              }
            });
  INFO(failed << " of " << checked << " inputs wrong; first: " << first_failure);
  CHECK(failed == 0);
}

TEST_CASE("ring_window_slots: slots 0 .. n-1 hold exactly the window", "[index][quick]") {
  int checked = 0, failed = 0;
  std::string first_failure;
  for (int cap = 1; cap <= 16; ++cap)
    for (int len = -2; len <= 5 * cap + 3; ++len) {
      // Write tokens 0 .. len − 1 into the ring as a model would; -1 = never written.
      std::vector<int> token_in(size_t(cap), -1);
      for (int t = 0; t < len; ++t) token_in[size_t(t % cap)] = t;
      const int w = cap - 1, oldest = std::max(0, len - 1 - w);
      int want = 0;  // slots 0 .. want − 1 hold window tokens, and no later slot does
      while (want < cap && token_in[size_t(want)] >= oldest) ++want;
      bool later = false;
      for (int s = want; s < cap; ++s) later = later || token_in[size_t(s)] >= oldest;
      if (later)
        FAIL("brute force: a window token sits past slot " << want << " (len=" << len << ", cap=" << cap << ")");
      const int got = ring_window_slots(len, cap);
      ++checked;
      if (got != want && failed++ == 0)
        first_failure = "ring_window_slots(len=" + std::to_string(len) + ", capacity=" + std::to_string(cap) +
                        ") returned " + std::to_string(got) + ", expected " + std::to_string(want) +
                        " (w=" + std::to_string(w) + ": tokens " + std::to_string(oldest) + " .. " +
                        std::to_string(len - 1) +
                        (len > cap ? ", the ring has wrapped)" : ", the ring has not wrapped)");
    }
  INFO(failed << " of " << checked << " inputs wrong; first: " << first_failure);
  CHECK(failed == 0);
}

TEST_CASE("sliding_window_attention: small shapes", "[day10][sliding_window][quick]") {
  run_grid("window_small", {
                               {1, 1, 1, 1, 64, 0, "one query, one key, w = 0"},
                               {1, 1, 1, 1, 32, 5, "one query, one key, w > Nk"},
                               {2, 3, 17, 17, 32, 5, "below one tile"},
                               {1, 2, 67, 67, 64, 0, "w = 0: each query sees only its own key"},
                               {1, 2, 67, 67, 128, 1, "w = 1, tails"},
                               {1, 2, 67, 67, 64, 30, "band inside one tile"},
                               {1, 1, 200, 200, 64, 63, "band of 64 keys, several tiles"},
                               {1, 1, 200, 200, 128, 64, "band of 65 keys: one more than a tile"},
                           });
}

TEST_CASE("sliding_window_attention: Nq != Nk, the window is measured from i + off", "[day10][sliding_window][quick]") {
  run_grid("window_nq_ne_nk", {
                                  {1, 2, 64, 333, 64, 40, "chunked prefill: row i sees keys i + 229 .. i + 269"},
                                  {1, 2, 1, 150, 32, 10, "decode step: one query, the last 11 keys"},
                                  {1, 2, 300, 100, 64, 30, "Nq > Nk: rows 0..199 see no key and must be zero"},
                                  {1, 1, 130, 1, 32, 0, "only the last query row sees the single key"},
                                  {2, 2, 100, 37, 128, 5, "Nq > Nk, D = 128"},
                                  {1, 1, 70, 1000, 64, 100, "the whole query block far right of key 0"},
                              });
}

TEST_CASE("sliding_window_attention: grouped heads (GQA, MQA)", "[day10][sliding_window][quick]") {
  run_grid("window_gqa", {
                             {2, 8, 67, 67, 64, 16, "GQA 8/2, tails", 2},
                             {1, 8, 100, 100, 32, 7, "MQA 8/1", 1},
                             {2, 12, 33, 150, 128, 50, "GQA 12/4, Nq < Nk, D = 128", 4},
                         });
}

TEST_CASE("sliding_window_attention: tile boundaries and long sequences", "[day10][sliding_window]") {
  run_grid("window_grid", {
                              {2, 2, 1000, 1000, 128, 100, "non-multiple, D = 128"},
                              {3, 2, 1000, 1000, 32, 255, "non-multiple, D = 32"},
                              {1, 2, 1000, 1000, 64, 999, "w = N - 1: every row sees every earlier key"},
                              {1, 2, 511, 1537, 128, 300, "chunked prefill over many tiles"},
                              {2, 4, 2048, 2048, 64, 256, "N = 2048, w = 256"},
                              {1, 2, 2048, 2048, 128, 1000, "N = 2048, w = 1000, D = 128"},
                              {1, 4, 2048, 2048, 64, 64, "w = 64 exactly one tile"},
                          });
}

// A window at least as wide as the keys is no window: the output must equal PLAIN CAUSAL
// attention (checked against the causal reference, not the windowed one).
TEST_CASE("sliding_window_attention: w >= Nk equals causal attention", "[day10][sliding_window][quick]") {
  const std::vector<Case> cases{{1, 2, 67, 67, 64, 67, "w = Nk"},
                                {1, 2, 130, 130, 128, 100000, "w far beyond Nk"},
                                {1, 2, 50, 200, 32, 2147483647, "w = INT_MAX, Nq < Nk"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    AttentionParams causal = p;
    causal.window = -1;
    const uint64_t seed = course::case_seed("window_is_causal", int64_t(idx));
    INFO(describe(c, seed));
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    const auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    const auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    check_window(p, q, k, v, course::ref::attention(q, k, v, causal));
  }
}

// The count proof. Q = 0 makes every score 0, so each visible key gets weight 1/count; V row j is
// the one-hot vector of (j mod D). With w + 1 <= D the visible keys of a row are consecutive and
// have distinct residues, so output row i holds exactly `count` entries equal to 1/count, at the
// residues of keys max(0, i + off − w) .. i + off, and zeros elsewhere. Once i + off >= w,
// count = w + 1. A window "of w keys" (the `<` instead of `<=` at the far edge) fails here even
// where random data would hide it in the tolerance.
TEST_CASE("sliding_window_attention: each query sees exactly w + 1 keys", "[day10][sliding_window][quick]") {
  struct CountCase {
    int nq, nk, w;
  };
  const int D = 128;
  for (const CountCase& c : std::vector<CountCase>{{300, 300, 0},
                                                   {300, 300, 1},
                                                   {300, 300, 63},
                                                   {300, 300, 64},
                                                   {300, 300, 100},
                                                   {300, 300, 127},
                                                   {70, 400, 90},
                                                   {200, 120, 33}}) {
    const AttentionParams p = AttentionParams::make(1, 1, 1, c.nq, c.nk, D, true, c.w);
    INFO("Nq=" << c.nq << " Nk=" << c.nk << " D=" << D << " w=" << c.w << " (Q = 0, V = one-hot of key mod D)");
    std::vector<float> q(size_t(p.q_elems()), 0.f), k = course::random_normal(size_t(p.kv_elems()), 7);
    std::vector<float> v(size_t(p.kv_elems()), 0.f);
    for (int j = 0; j < c.nk; ++j) v[size_t(j) * D + size_t(j % D)] = 1.f;
    auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
    DeviceBuffer<float> d_o(size_t(p.o_elems()));
    d_o.poison();
    sliding_window_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), p);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> o = d_o.download();
    const int off = c.nk - c.nq;
    int bad_rows = 0, first_bad = -1, first_bad_count = 0;
    for (int i = 0; i < c.nq; ++i) {
      const int hi = i + off, lo = std::max(0, hi - c.w);
      const int count = hi < 0 ? 0 : hi - lo + 1;
      std::vector<float> expect(size_t(D), 0.f);
      for (int j = lo; j <= hi; ++j) expect[size_t(j % D)] = 1.f / float(count);
      int seen = 0;
      bool ok = true;
      for (int d = 0; d < D; ++d) {
        const float y = o[size_t(i) * D + size_t(d)];
        seen += y > 0.5f / float(std::max(count, 1));
        ok = ok && std::fabs(y - expect[size_t(d)]) <= 1e-6f;  // NaN fails too
      }
      if (!ok) {
        if (bad_rows++ == 0) first_bad = i, first_bad_count = seen;
      }
    }
    INFO("rows with the wrong set of keys: " << bad_rows << "; first: row " << first_bad << " saw " << first_bad_count
                                             << " keys, expected "
                                             << (first_bad < 0 ? 0 : std::min(first_bad + off, c.w) + 1));
    CHECK(bad_rows == 0);
    CHECK(d_o.guard_damage() == "");
  }
}

// Band skipping: every key row before the first visible key's 64-aligned tile is NaN in K and V
// (64 is a multiple of every key-tile size the launcher picks, so such rows lie in tiles that
// no row's band touches). A kernel that starts at key tile 0 multiplies P = 0 by V = NaN and
// fails; one that drops the first, partially visible tile misses keys and fails against the
// reference. (The band's other side cannot be poisoned: the last query row always sees the last
// key. Skipping there is the causal skip of exercise 01.)
TEST_CASE("sliding_window_attention: tiles before the band are never read", "[day10][sliding_window][quick]") {
  const std::vector<Case> cases{{1, 2, 100, 1000, 64, 50, "chunked prefill, band starts at key 850"},
                                {1, 2, 1, 5000, 128, 100, "decode step over 5000 keys"},
                                {2, 8, 130, 700, 64, 64, "GQA 8/2, band starts at key 506", 2},
                                {1, 1, 64, 4000, 32, 0, "w = 0"},
                                {1, 2, 200, 3000, 128, 700, "band wider than a tile"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed("window_skip", int64_t(idx));
    const int first_visible = std::max(0, p.diag_offset() - c.w);  // row 0's lowest key
    const int poisoned = first_visible / 64 * 64;
    INFO(describe(c, seed) << "; K/V rows 0.." << poisoned - 1 << " are NaN");
    const auto q = course::random_normal(size_t(p.q_elems()), seed);
    auto k = course::random_normal(size_t(p.kv_elems()), seed + 1);
    auto v = course::random_normal(size_t(p.kv_elems()), seed + 2);
    const auto expected = course::ref::attention(q, k, v, p);
    for (int bh = 0; bh < p.batch * p.heads_kv; ++bh)
      for (int j = 0; j < poisoned; ++j)
        for (int d = 0; d < c.d; ++d) {
          const size_t at = (size_t(bh) * c.nk + size_t(j)) * c.d + size_t(d);
          k[at] = kNaN;
          v[at] = kNaN;
        }
    REQUIRE(poisoned > 0);
    check_window(p, q, k, v, expected);
  }
}

TEST_CASE("sliding_window_attention rejects bad arguments before launching anything",
          "[day10][sliding_window][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 8, 8, 64, true, 3);
  DeviceBuffer<float> q(size_t(good.q_elems())), o(size_t(good.o_elems()));
  q.fill_zero();
  o.poison();
  const float* x = q.data();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", sliding_window_attention(nullptr, x, x, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("k", sliding_window_attention(x, nullptr, x, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("v", sliding_window_attention(x, x, nullptr, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("o", sliding_window_attention(x, x, x, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("k", sliding_window_attention(x, x + 1, x, o.data(), good));  // not 16-byte aligned
  COURSE_CHECK_INVALID_ARGUMENT("batch",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.heads_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.seq_k = -3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.head_dim = 48; })));
  COURSE_CHECK_INVALID_ARGUMENT("window",
                                sliding_window_attention(x, x, x, o.data(), with([](auto& p) { p.window = -1; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float y : o.download()) CHECK(course::is_poison_f32(y));  // nothing was written
}

// ---------------------------------------------------------------------------------------------
// Ring decode.
namespace {

// A ring cache as a model would leave it: token t of sequence b was written into slot
// t % (w + 1) of every KV head, later tokens over earlier ones; slots never written are NaN.
struct Ring {
  std::vector<float> q, k, v;
  std::vector<int32_t> lens;
};

Ring make_ring(const RingCacheParams& p, const std::vector<int32_t>& lens, uint64_t seed) {
  Ring r;
  r.lens = lens;
  r.q = course::random_normal(size_t(p.q_elems()), seed);
  r.k.assign(size_t(p.cache_elems()), kNaN);
  r.v.assign(size_t(p.cache_elems()), kNaN);
  const int D = p.head_dim, cap = p.capacity();
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads_kv; ++h) {
      const int len = lens[size_t(b)];
      const auto tk = course::random_normal(size_t(len) * D, seed + 1 + 2 * uint64_t(b * p.heads_kv + h));
      const auto tv = course::random_normal(size_t(len) * D, seed + 2 + 2 * uint64_t(b * p.heads_kv + h));
      for (int t = 0; t < len; ++t)
        for (int d = 0; d < D; ++d) {
          const size_t at = ((size_t(b) * p.heads_kv + h) * cap + size_t(t % cap)) * D + size_t(d);
          r.k[at] = tk[size_t(t) * D + size_t(d)];
          r.v[at] = tv[size_t(t) * D + size_t(d)];
        }
    }
  return r;
}

RingCacheParams ring_params(int b, int hq, int hkv, int d, int w) {
  RingCacheParams p;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = d;
  p.window = w;
  return p;
}

void check_ring(const RingCacheParams& p, const Ring& r) {
  auto d_q = course::to_device(r.q), d_k = course::to_device(r.k), d_v = course::to_device(r.v);
  auto d_lens = course::to_device(r.lens);
  DeviceBuffer<float> d_o(size_t(p.q_elems()));
  d_o.poison();
  ring_decode_attention(d_q.data(), d_k.data(), d_v.data(), d_lens.data(), d_o.data(), p);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"d", p.head_dim}};
  COURSE_CHECK_OUTPUT(d_o, course::ref::ring_decode_attention(r.q, r.k, r.v, r.lens, p), dims,
                      course::Tolerance::fp32());
}

struct RingCase {
  int hq, hkv, d, w;
  std::vector<int32_t> lens;  // one per sequence
  const char* why;
};

void run_ring(const std::string& name, const std::vector<RingCase>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const RingCase& c = cases[idx];
    const RingCacheParams p = ring_params(int(c.lens.size()), c.hq, c.hkv, c.d, c.w);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    std::string lens;
    for (int32_t l : c.lens) lens += std::to_string(l) + " ";
    INFO("Hq=" << c.hq << " Hkv=" << c.hkv << " D=" << c.d << " w=" << c.w << " (ring of " << c.w + 1
               << " slots), seq_lens = " << lens << "(" << c.why << "), seed = " << seed);
    check_ring(p, make_ring(p, c.lens, seed));
  }
}

}  // namespace

TEST_CASE("ring_decode_attention: sequences before and after wrap-around", "[day10][ring_decode][quick]") {
  run_ring("ring_small",
           {
               {2, 2, 64, 5, {1, 2, 5, 6, 7, 13, 20}, "not yet full, exactly full, wrapped once and more"},
               {8, 2, 64, 63, {1, 63, 64, 65, 100, 200, 1000}, "GQA 8/2, ring of one key tile"},
               {4, 4, 128, 100, {3, 101, 102, 250, 999}, "ring of 101 slots: two tiles, the second partial"},
               {8, 1, 32, 16, {17, 18, 40, 5}, "MQA 8/1"},
               {2, 1, 64, 0, {1, 2, 9}, "w = 0: one slot, the newest token only"},
               {32, 8, 128, 70, {71, 1, 300}, "Hq/Hkv = 32/8"},
           });
}

TEST_CASE("ring_decode_attention: a long window, 64 sequences", "[day10][ring_decode]") {
  std::vector<int32_t> lens;
  for (int b = 0; b < 64; ++b) lens.push_back(int32_t(1 + (b * 977) % 9000));  // some wrapped, some not
  run_ring("ring_long", {
                            {32, 8, 128, 4096, {1, 4096, 4097, 4098, 8193, 12000}, "Mistral-like window, D = 128"},
                            {4, 2, 64, 1000, lens, "64 sequences at spread positions"},
                        });
}

TEST_CASE("ring_decode_attention rejects bad arguments before launching anything",
          "[day10][ring_decode][args][quick]") {
  const RingCacheParams good = ring_params(2, 4, 2, 64, 7);
  DeviceBuffer<float> q(size_t(good.cache_elems())), o(size_t(good.q_elems()));
  DeviceBuffer<int32_t> lens(2);
  q.fill_zero();
  o.poison();
  const float* x = q.data();
  const int32_t* l = lens.data();
  auto with = [&](auto edit) {
    RingCacheParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", ring_decode_attention(nullptr, x, x, l, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("k_cache", ring_decode_attention(x, nullptr, x, l, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("v_cache", ring_decode_attention(x, x, nullptr, l, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("seq_lens", ring_decode_attention(x, x, x, nullptr, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("o", ring_decode_attention(x, x, x, l, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("v_cache", ring_decode_attention(x, x, x + 2, l, o.data(), good));  // misaligned
  COURSE_CHECK_INVALID_ARGUMENT("batch",
                                ring_decode_attention(x, x, x, l, o.data(), with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q",
                                ring_decode_attention(x, x, x, l, o.data(), with([](auto& p) { p.heads_q = -1; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                ring_decode_attention(x, x, x, l, o.data(), with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                ring_decode_attention(x, x, x, l, o.data(), with([](auto& p) { p.head_dim = 96; })));
  COURSE_CHECK_INVALID_ARGUMENT("window",
                                ring_decode_attention(x, x, x, l, o.data(), with([](auto& p) { p.window = -2; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float y : o.download()) CHECK(course::is_poison_f32(y));  // nothing was written
}
