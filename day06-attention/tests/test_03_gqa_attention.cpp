// Tests for day06/03_gqa_attention: head ratios from MHA (G = 1) through GQA to MQA (Hkv = 1),
// checked against the one CPU reference. Ratios with Hkv > 1 AND G > 1 catch a wrong query-head
// → KV-head mapping (h % Hkv instead of h / G); causal shapes with G > 1 catch a mask computed
// on the packed row index instead of the query position; Nq > Nk causal shapes have rows that
// see no key (zeros expected); every G > 1 shape catches a grid that covers Nq instead of G·Nq
// packed rows (the rows left out keep the NaN poison).
#include <string>
#include <vector>

#include "03_gqa_attention.h"
#include "gpu_test.h"
#include "reference.h"

namespace {

struct Shape {
  int batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  bool causal;
};

std::string describe(const Shape& s) {
  return "B=" + std::to_string(s.batch) + " Hq=" + std::to_string(s.heads_q) + " Hkv=" + std::to_string(s.heads_kv) +
         " Nq=" + std::to_string(s.seq_q) + " Nk=" + std::to_string(s.seq_k) + " D=" + std::to_string(s.head_dim) +
         (s.causal ? " causal" : " full");
}

course::AttentionParams params_of(const Shape& s) {
  return course::AttentionParams::make(s.batch, s.heads_q, s.heads_kv, s.seq_q, s.seq_k, s.head_dim, s.causal);
}

// One launch into a NaN-poisoned, guarded output and a comparison with the reference.
void check_inputs(const course::AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                  const std::vector<float>& v) {
  auto d_q = course::to_device(q), d_k = course::to_device(k), d_v = course::to_device(v);
  course::DeviceBuffer<float> d_o(size_t(p.o_elems()));
  d_o.poison();
  gqa_attention(d_q.data(), d_k.data(), d_v.data(), d_o.data(), p);
  COURSE_CHECK_OUTPUT(d_o, course::ref::attention(q, k, v, p),
                      course::Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}},
                      course::Tolerance::fp32());
}

// Fresh normal(0, 1) inputs from `seed`.
void check_shape(const Shape& s, uint64_t seed) {
  const course::AttentionParams p = params_of(s);
  INFO(describe(s) << ", seed = " << seed << " (set COURSE_SEED to vary)");
  check_inputs(p, course::random_normal(size_t(p.q_elems()), seed),
               course::random_normal(size_t(p.kv_elems()), seed + 1),
               course::random_normal(size_t(p.kv_elems()), seed + 2));
}

void check_shapes(const std::vector<Shape>& shapes, const std::string& name) {
  for (size_t idx = 0; idx < shapes.size(); ++idx) check_shape(shapes[idx], course::case_seed(name, int64_t(idx)));
}

}  // namespace

TEST_CASE("gqa_attention: small GQA and MQA shapes", "[day06][gqa_attention][quick]") {
  check_shapes(
      {
          {1, 8, 2, 33, 47, 64, true},   // G = 4, Nq < Nk, below one tile
          {2, 8, 1, 5, 70, 32, false},   // MQA
          {1, 4, 4, 17, 17, 128, true},  // MHA
          {2, 6, 2, 40, 20, 32, true},   // G = 3, Nq > Nk: rows 0..19 see no key -> zeros
      },
      "gqa_quick");
}

TEST_CASE("gqa_attention: head ratios MHA / GQA / MQA over a shape grid", "[day06][gqa_attention]") {
  check_shapes(
      {
          {2, 8, 8, 67, 67, 64, false},      // MHA (G = 1)
          {2, 8, 2, 67, 200, 64, true},      // GQA-4, Nq < Nk
          {1, 8, 1, 1, 1000, 128, true},     // MQA, one query row (decode-like)
          {1, 32, 8, 300, 1000, 64, false},  // Llama-style 32/8
          {3, 12, 4, 1000, 67, 32, true},    // G = 3 (rows span tiles unevenly), Nq > Nk:
                                             // the first 933 rows see no key -> zeros
          {1, 40, 40, 129, 129, 32, true},   // many heads, MHA
          {2, 8, 8, 1, 1, 32, false},        // sizes 1
          {2, 6, 3, 67, 1000, 128, false},   // G = 2, D = 128
      },
      "gqa_grid");
}

TEST_CASE("gqa_attention: long sequences (>= 1024, several hundred tiles)", "[day06][gqa_attention]") {
  check_shapes(
      {
          {1, 8, 2, 1100, 1100, 128, true},
          {1, 4, 1, 2048, 2048, 64, true},
          {2, 8, 4, 1024, 1500, 32, false},
      },
      "gqa_long");
}

// Logits of about ±1e3: exp() of them overflows float unless the running max is subtracted.
// Q and K are random_normal_sixteenths (multiples of 1/16, see common/random.h), so every dot
// product is exact in fp32, and p.scale = 64 is a power of two, so the logits are exact too:
// what is left is the kernel's softmax arithmetic, held to the ordinary fp32 tolerance. (With
// arbitrary inputs, merely rounding a logit near 1e3 to fp32 moves two nearly tied keys' weights
// beyond any fp32 tolerance: a property of fp32, not of the kernel.)
TEST_CASE("gqa_attention: large logits (|scores| ~1e3) stay finite and exact", "[day06][gqa_attention]") {
  const std::vector<Shape> shapes{{1, 8, 2, 200, 300, 64, true},  // G = 4, causal, Nq < Nk
                                  {1, 4, 1, 70, 70, 128, false},  // MQA, D = 128
                                  {2, 12, 4, 67, 67, 32, true}};  // G = 3, D = 32
  for (size_t idx = 0; idx < shapes.size(); ++idx) {
    course::AttentionParams p = params_of(shapes[idx]);
    p.scale = 64.f;  // dot products have std ~sqrt(D) = 6..11: logits spread over ±1e3 and beyond
    const uint64_t seed = course::case_seed("gqa_magnitude", int64_t(idx));
    INFO(describe(shapes[idx]) << ", scale = 64, Q and K in sixteenths, seed = " << seed
                               << " (set COURSE_SEED to vary)");
    check_inputs(p, course::random_normal_sixteenths(size_t(p.q_elems()), seed),
                 course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1),
                 course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

TEST_CASE("gqa_attention rejects bad arguments before launching anything", "[day06][gqa_attention][args][quick]") {
  const Shape s{1, 8, 2, 16, 16, 64, false};
  const course::AttentionParams good = params_of(s);
  course::DeviceBuffer<float> q(size_t(good.q_elems())), kv(size_t(good.kv_elems())), o(size_t(good.o_elems()));
  q.fill_zero();
  kv.fill_zero();
  o.poison();
  auto with = [&](auto edit) {
    course::AttentionParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", gqa_attention(nullptr, kv.data(), kv.data(), o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("k", gqa_attention(q.data(), nullptr, kv.data(), o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("v", gqa_attention(q.data(), kv.data(), nullptr, o.data(), good));
  COURSE_CHECK_INVALID_ARGUMENT("o", gqa_attention(q.data(), kv.data(), kv.data(), nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT(
      "k", gqa_attention(q.data(), kv.data() + 1, kv.data(), o.data(), good));  // not 16-byte aligned
  const float* qd = q.data();
  const float* kd = kv.data();
  float* od = o.data();
  COURSE_CHECK_INVALID_ARGUMENT("batch", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.heads_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.heads_kv = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.heads_kv = 3; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_q", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.seq_q = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_k", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.seq_k = -1; })));
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.head_dim = 48; })));
  COURSE_CHECK_INVALID_ARGUMENT("window", gqa_attention(qd, kd, kd, od, with([](auto& p) { p.window = 8; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (float x : o.download()) untouched = untouched && course::is_poison_f32(x);
  CHECK(untouched);  // nothing was written
}
