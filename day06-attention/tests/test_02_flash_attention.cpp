// Tests for day06/02_flash_attention: a shape grid around the tile sizes (1, below a tile,
// non-multiples, 2048), Nq != Nk both ways under a causal mask (bottom-right alignment, rows that
// see no key), head_dim 32/64/128, batch and heads > 1, and logits of ±1e3. Every shape runs
// twice: without the optional lse output (O only) and with it (O and the per-row log-sum-exp L,
// against common/reference_backward.h's attention_forward_lse).
#include <cmath>
#include <string>
#include <vector>

#include "02_flash_attention.h"
#include "gpu_test.h"
#include "reference.h"
#include "reference_backward.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

AttentionParams make_params(int b, int h, int nq, int nk, int d, bool causal) {
  return AttentionParams::make(b, h, h, nq, nk, d, causal);
}

// L against the reference. compare() rejects every infinity, so the rows that see no key (L = −inf
// in the reference) are checked apart: they must hold exactly −inf; then both sides hold 0 there
// and compare() judges the rest (poison, NaN, tolerance, guards) as for any output.
void check_lse(const DeviceBuffer<float>& d_lse, std::vector<float> ref, const AttentionParams& p) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out = d_lse.download();
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}};
  int64_t not_minus_inf = 0;
  std::string first;
  for (size_t r = 0; r < ref.size(); ++r) {
    if (ref[r] != -INFINITY) continue;
    if (out[r] == -INFINITY) {
      out[r] = 0.f;
    } else if (not_minus_inf++ == 0) {
      first = course::format_index(dims, int64_t(r)) + " holds " +
              (course::is_poison_f32(out[r]) ? std::string("<never written>") : std::to_string(out[r]));
    }
    ref[r] = 0.f;
  }
  if (not_minus_inf > 0)
    FAIL_CHECK("lse: " << not_minus_inf << " rows that see no key must hold -inf; the first, " << first);
  const course::CompareResult r = course::compare(out, ref, dims, course::Tolerance::fp32(), d_lse.guard_damage());
  if (!r.ok) FAIL_CHECK("lse: " << r.report);
}

// Runs flash_attention on q, k, v and compares O with the CPU reference: once without the lse
// output, once with it (and L compared too).
void check_flash(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v) {
  auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
  DeviceBuffer<float> d_o(size_t(p.o_elems()));
  d_o.poison();
  flash_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), p);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  const std::vector<float> ref = course::ref::attention(q, k, v, p);
  COURSE_CHECK_OUTPUT(d_o, ref, dims, course::Tolerance::fp32());

  DeviceBuffer<float> d_o2(size_t(p.o_elems())), d_lse(size_t(p.batch) * p.heads_q * p.seq_q);
  d_o2.poison();
  d_lse.poison();
  flash_attention(d_q.data(), d_k.data(), d_v.data(), d_o2.data(), p, 0, d_lse.data());
  INFO("with the lse output");
  COURSE_CHECK_OUTPUT(d_o2, ref, dims, course::Tolerance::fp32());
  check_lse(d_lse, course::ref::attention_forward_lse(q, k, v, p).lse, p);
}

struct Case {
  int b, h, nq, nk, d;
  bool causal;
  const char* why;
};

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = make_params(c.b, c.h, c.nq, c.nk, c.d, c.causal);
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    INFO("B=" << c.b << " H=" << c.h << " Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d << (c.causal ? " causal" : "")
              << " (" << c.why << "), seed = " << seed << " (set COURSE_SEED to vary)");
    check_flash(p, course::random_normal(size_t(p.q_elems()), seed),
                course::random_normal(size_t(p.kv_elems()), seed + 1),
                course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

}  // namespace

TEST_CASE("flash_attention: small shapes", "[day06][flash_attention][quick]") {
  run_grid("flash_small", {
                              {1, 1, 1, 1, 64, false, "one query, one key"},
                              {1, 1, 1, 1, 64, true, "one query, one key, causal"},
                              {2, 3, 17, 17, 32, true, "below one tile"},
                              {1, 2, 67, 67, 64, false, "not a tile multiple"},
                              {1, 2, 67, 67, 128, true, "not a tile multiple, causal"},
                              {1, 1, 5, 200, 64, false, "short query, keys over several tiles"},
                          });
}

TEST_CASE("flash_attention: Nq != Nk, causal alignment is bottom-right", "[day06][flash_attention][quick]") {
  run_grid("flash_nq_ne_nk", {
                                 {1, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
                                 {1, 2, 1, 150, 32, true, "one query sees every key (decode step)"},
                                 {1, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key and must be zero"},
                                 {1, 1, 130, 1, 32, true, "only the last query row sees the single key"},
                                 {2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
                             });
}

TEST_CASE("flash_attention: tile boundaries, head dims, batch and heads", "[day06][flash_attention]") {
  run_grid("flash_grid", {
                             {2, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
                             {3, 2, 1000, 1000, 32, false, "non-multiple, D=32"},
                             {1, 3, 64, 64, 64, true, "exactly one tile"},
                             {1, 1, 65, 129, 64, true, "one past a tile boundary, both ways"},
                             {1, 2, 511, 1537, 128, true, "chunked prefill over many tiles"},
                             {1, 1, 1, 2048, 128, false, "one query, 2048 keys: the running max must be rescaled"},
                         });
}

TEST_CASE("flash_attention: long sequences (2048)", "[day06][flash_attention]") {
  run_grid("flash_long", {
                             {2, 4, 2048, 2048, 64, false, "prefill, no mask"},
                             {2, 4, 2048, 2048, 64, true, "prefill, causal"},
                             {1, 2, 2048, 2048, 128, true, "prefill, causal, D=128"},
                             {1, 2, 2048, 1024, 32, true, "Nq > Nk, half the rows see nothing"},
                         });
}

// Logits of about ±1e3: exp() of them overflows float unless the running max is subtracted.
// Q and K hold multiples of 1/16, so every dot product is exact in fp32 (few mantissa bits, short
// sums), and p.scale = 64 is a power of two, so the logits themselves are exact: what is left is
// the kernel's softmax arithmetic. (With an arbitrary scale, merely rounding a logit near 1e3 to
// fp32 moves it by up to 3e-5, and two nearly tied keys then swap weight beyond the tolerance:
// a property of fp32, not of the kernel.)
TEST_CASE("flash_attention: logits of magnitude 1e3 stay finite and exact", "[day06][flash_attention][quick]") {
  const std::vector<Case> cases{{1, 2, 150, 150, 64, false, "large logits"},
                                {1, 2, 150, 150, 64, true, "large logits, causal"},
                                {1, 1, 40, 300, 64, true, "large logits, Nq < Nk"}};
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    AttentionParams p = make_params(c.b, c.h, c.nq, c.nk, c.d, c.causal);
    p.scale = 64.f;  // dot products have std ~8: logits spread over about ±1e3 and beyond
    const uint64_t seed = course::case_seed("flash_magnitude", int64_t(idx));
    INFO("B=" << c.b << " H=" << c.h << " Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d << (c.causal ? " causal" : "")
              << " scale=64 (" << c.why << "), seed = " << seed);
    const auto q = course::random_normal_sixteenths(size_t(p.q_elems()), seed);
    const auto k = course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1);
    check_flash(p, q, k, course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

TEST_CASE("flash_attention rejects bad arguments before launching anything", "[day06][flash_attention][args][quick]") {
  const AttentionParams good = make_params(1, 2, 8, 8, 64, false);
  DeviceBuffer<float> q(size_t(good.q_elems())), o(size_t(good.o_elems()));
  q.fill_zero();
  o.poison();
  const float* x = q.data();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention(nullptr, x, x, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("k", flash_attention(x, nullptr, x, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("v", flash_attention(x, x, nullptr, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention(x, x, x, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention(x + 1, x, x, o.data(), good));  // not 16-byte aligned
  COURSE_CHECK_INVALID_ARGUMENT("batch", flash_attention(x, x, x, o.data(), with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", flash_attention(x, x, x, o.data(), with([](auto& p) { p.heads_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", flash_attention(x, x, x, o.data(), with([](auto& p) { p.heads_kv = 1; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", flash_attention(x, x, x, o.data(), with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k", flash_attention(x, x, x, o.data(), with([](auto& p) { p.seq_k = -3; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", flash_attention(x, x, x, o.data(), with([](auto& p) { p.head_dim = 48; })));
  COURSE_CHECK_INVALID_ARGUMENT("window", flash_attention(x, x, x, o.data(), with([](auto& p) { p.window = 16; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float y : o.download()) CHECK(course::is_poison_f32(y));  // nothing was written
}
