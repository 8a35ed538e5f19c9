// Tests for day06/01_naive_attention: a shape grid (1, odd sizes, 2048), Nq != Nk both ways under
// a causal mask (bottom-right alignment, rows that see no key), grouped heads (GQA, MQA), odd
// head dims, and logits of ±1e3 that overflow exp() unless the row max is subtracted.
#include <string>
#include <vector>

#include "01_naive_attention.h"
#include "gpu_test.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

struct Case {
  int b, hq, hkv, nq, nk, d;
  bool causal;
  const char* why;
};

AttentionParams make_params(const Case& c) {
  return AttentionParams::make(c.b, c.hq, c.hkv, c.nq, c.nk, c.d, c.causal);
}

// Runs naive_attention with a freshly poisoned workspace and compares O with the CPU reference.
void check_naive(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v) {
  auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
  DeviceBuffer<float> d_o(size_t(p.o_elems()));
  DeviceBuffer<float> d_ws(naive_attention_workspace_bytes(p) / sizeof(float));
  d_o.poison();
  d_ws.poison();  // the kernels must write every score they read back
  naive_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), d_ws.data(), p);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  COURSE_CHECK_OUTPUT(d_o, course::ref::attention(q, k, v, p), dims, course::Tolerance::fp32());
  const std::string ws_damage = d_ws.guard_damage();
  INFO("workspace guard: " << ws_damage);
  CHECK(ws_damage.empty());  // the kernels stay inside B·Hq·Nq·Nk scores
}

void run_grid(const std::string& name, const std::vector<Case>& cases, float scale = 0.f, bool exact_qk = false) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    AttentionParams p = make_params(c);
    p.scale = scale;
    const uint64_t seed = course::case_seed(name, int64_t(idx));
    INFO("B=" << c.b << " Hq=" << c.hq << " Hkv=" << c.hkv << " Nq=" << c.nq << " Nk=" << c.nk << " D=" << c.d
              << (c.causal ? " causal" : "") << " scale=" << p.softmax_scale() << " (" << c.why << "), seed = " << seed
              << " (set COURSE_SEED to vary)");
    // exact_qk: multiples of 1/16, so every logit is exact in fp32 (large-logit cases)
    const auto q = exact_qk ? course::random_normal_sixteenths(size_t(p.q_elems()), seed)
                            : course::random_normal(size_t(p.q_elems()), seed);
    const auto k = exact_qk ? course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1)
                            : course::random_normal(size_t(p.kv_elems()), seed + 1);
    check_naive(p, q, k, course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

}  // namespace

TEST_CASE("naive_attention: small and odd shapes", "[day06][naive_attention][quick]") {
  run_grid("naive_small", {
                              {1, 1, 1, 1, 1, 64, false, "one query, one key"},
                              {1, 1, 1, 1, 1, 64, true, "one query, one key, causal"},
                              {2, 3, 3, 17, 17, 32, true, "batch and heads > 1"},
                              {1, 2, 2, 67, 67, 64, false, "odd length"},
                              {1, 1, 1, 40, 50, 3, false, "odd head_dim"},
                          });
}

TEST_CASE("naive_attention: Nq != Nk, causal alignment is bottom-right", "[day06][naive_attention][quick]") {
  run_grid("naive_nq_ne_nk", {
                                 {1, 2, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
                                 {1, 2, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key and must be zero"},
                                 {1, 1, 1, 130, 1, 32, true, "only the last query row sees the single key"},
                                 {2, 2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
                             });
}

TEST_CASE("naive_attention: grouped heads (GQA, MQA)", "[day06][naive_attention][quick]") {
  run_grid("naive_gqa", {
                            {2, 4, 2, 67, 67, 128, true, "GQA, 2 query heads per KV head"},
                            {1, 8, 1, 5, 200, 16, false, "MQA, one KV head"},
                            {1, 12, 4, 33, 70, 64, true, "GQA 3:1, Nq < Nk"},
                        });
}

TEST_CASE("naive_attention: long sequences", "[day06][naive_attention]") {
  run_grid("naive_long", {
                             {2, 2, 2, 1000, 1000, 64, true, "non-multiple, causal"},
                             {1, 2, 2, 2048, 2048, 64, false, "2048, no mask"},
                             {1, 2, 1, 2048, 2048, 128, true, "2048, causal, GQA"},
                         });
}

// Logits of about ±1e3 (scale 64 on dot products of std ~8): exp() overflows float unless the
// row max is subtracted first. Q and K hold multiples of 1/16 and the scale is a power of two,
// so every logit is exact in fp32 and only the softmax arithmetic is under test.
TEST_CASE("naive_attention: logits of magnitude 1e3 stay finite and exact", "[day06][naive_attention][quick]") {
  run_grid("naive_magnitude",
           {{1, 2, 2, 150, 150, 64, false, "large logits"}, {1, 2, 2, 150, 150, 64, true, "large logits, causal"}},
           64.f, true);
}

TEST_CASE("naive_attention: workspace size is B·Hq·Nq·Nk floats", "[day06][naive_attention][quick]") {
  const AttentionParams p = make_params({3, 4, 2, 5, 7, 64, false, ""});
  CHECK(naive_attention_workspace_bytes(p) == size_t(3) * 4 * 5 * 7 * sizeof(float));
}

TEST_CASE("naive_attention rejects bad arguments before launching anything", "[day06][naive_attention][args][quick]") {
  const AttentionParams good = make_params({1, 2, 2, 8, 8, 64, false, ""});
  DeviceBuffer<float> x_buf(size_t(good.q_elems())), o(size_t(good.o_elems()));
  DeviceBuffer<float> ws(naive_attention_workspace_bytes(good) / sizeof(float));
  x_buf.fill_zero();
  o.poison();
  const float* x = x_buf.data();
  float* w = ws.data();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", naive_attention(nullptr, x, x, o.data(), w, good));
  COURSE_CHECK_INVALID_ARGUMENT("k", naive_attention(x, nullptr, x, o.data(), w, good));
  COURSE_CHECK_INVALID_ARGUMENT("v", naive_attention(x, x, nullptr, o.data(), w, good));
  COURSE_CHECK_INVALID_ARGUMENT("o", naive_attention(x, x, x, nullptr, w, good));
  COURSE_CHECK_INVALID_ARGUMENT("workspace", naive_attention(x, x, x, o.data(), nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("batch", naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q",
                                naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.heads_q = -1; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv",
                                naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.heads_kv = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k", naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.seq_k = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.head_dim = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("window", naive_attention(x, x, x, o.data(), w, with([](auto& p) { p.window = 4; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float y : o.download()) CHECK(course::is_poison_f32(y));  // nothing was written
}
