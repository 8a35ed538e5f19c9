// The CPU reference forward (model/reference_model.h) against closed forms and invariances:
// zero layers leave lm_head · rmsnorm(embed) ⊙ final_norm; a one-token sequence attends only to
// itself; uniform scores average the visible values of the right KV head; the attention matches
// the course's tested attention reference on RoPE'd projections; the SwiGLU block in closed
// form; causality; RoPE's relative-position invariance; and the speed that makes it a usable
// oracle.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "fp16_host.h"
#include "reference.h"
#include "reference_model.h"
#include "reference_rope.h"
#include "test_util.h"
#include "weights.h"

using serving::HostWeights;
using serving::ModelConfig;
using serving::ReferenceModel;
using serving::ReferenceOptions;
using serving::ReferenceTrace;

using serving_test::to_double;

namespace {

// rmsnorm(x) ⊙ w in double.
std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w, double eps) {
  double ss = 0;
  for (double e : x) ss += e * e;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// W [out, in] · x.
std::vector<double> matvec(const std::vector<double>& W, const std::vector<double>& x) {
  const size_t in = x.size(), out = W.size() / in;
  std::vector<double> y(out, 0.0);
  for (size_t o = 0; o < out; ++o) {
    for (size_t i = 0; i < in; ++i) y[o] += W[o * in + i] * x[i];
  }
  return y;
}

std::vector<double> row(const std::vector<double>& m, size_t r, size_t cols) {
  return std::vector<double>(m.begin() + r * cols, m.begin() + (r + 1) * cols);
}

void zero(std::vector<uint16_t>& v) { std::fill(v.begin(), v.end(), uint16_t{0}); }

void check_close(const std::vector<float>& got, const std::vector<double>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + 1e-3);
    if (e > worst) worst = e, at = i;
  }
  INFO(what << ": worst relative error " << worst << " at " << at << " (got " << got[at] << ", want " << want[at]
            << ")");
  CHECK(worst <= tol);
}

// A model whose layers do nothing unless a test gives them weights.
HostWeights zero_layers(ModelConfig c, uint64_t seed) {
  HostWeights w = serving::random_weights(c, seed);
  for (auto& l : w.layers) {
    for (auto* m : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) zero(*m);
  }
  return w;
}

}  // namespace

TEST_CASE("reference: zero layers give lm_head · rmsnorm(embed[token]) ⊙ final_norm", "[day11][model][reference]") {
  for (bool tied : {false, true}) {
    INFO("tied " << tied);
    ModelConfig c = ModelConfig::tiny();
    c.tie_word_embeddings = tied;
    const HostWeights w = zero_layers(c, 11);
    const std::vector<int32_t> tokens = {3, 200, 383, 3, 0};
    const std::vector<float> logits = ReferenceModel(w).forward(tokens);
    const std::vector<double> E = to_double(w.embed), out = to_double(w.output_matrix()), fn = to_double(w.final_norm);
    std::vector<double> want;
    for (int32_t t : tokens) {
      const std::vector<double> h = rmsnorm(row(E, t, c.hidden_size), fn, c.rms_norm_eps);
      for (double x : matvec(out, h)) want.push_back(x);
    }
    check_close(logits, want, 1e-6, "logits");
    // Same token, same position-independent logits: rows 0 and 3.
    for (int v = 0; v < c.vocab_size; ++v) CHECK(logits[v] == logits[3 * c.vocab_size + v]);
  }
}

TEST_CASE("reference: one token attends only to itself (attention output = its v)", "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  const HostWeights w = serving::random_weights(c, 21);
  ReferenceTrace trace;
  const int32_t token = 77;
  ReferenceModel(w).forward({token}, {}, &trace);
  REQUIRE(trace.attn.size() == size_t(c.num_layers));
  // Layer 0: h = rmsnorm(embed[token]) ⊙ input_norm, v = Wv·h; head hd reads KV head hd / 2.
  const std::vector<double> h =
      rmsnorm(row(to_double(w.embed), token, c.hidden_size), to_double(w.layers[0].input_norm), c.rms_norm_eps);
  const std::vector<double> v = matvec(to_double(w.layers[0].v), h);
  const int D = c.head_dim, group = c.num_heads / c.num_kv_heads;
  for (int hd = 0; hd < c.num_heads; ++hd) {
    for (int d = 0; d < D; ++d) { CHECK(std::fabs(trace.attn[0][hd * D + d] - v[(hd / group) * D + d]) <= 1e-12); }
  }
}

TEST_CASE("reference: uniform scores average the visible values of the query head's KV head",
          "[day11][model][reference]") {
  // q = 0 makes every score 0: token t's output is the mean of v_0..v_t of KV head h / (Hq/Hkv).
  // A key past t in the average (no causal mask) or KV head h % Hkv fails this.
  const ModelConfig c = ModelConfig::tiny();
  HostWeights w = serving::random_weights(c, 31);
  zero(w.layers[0].q);
  const std::vector<int32_t> tokens = {5, 9, 250, 1};
  ReferenceTrace trace;
  ReferenceModel(w).forward(tokens, {}, &trace);
  const int D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, H = c.hidden_size;
  std::vector<std::vector<double>> v;
  for (int32_t t : tokens) {
    v.push_back(matvec(to_double(w.layers[0].v),
                       rmsnorm(row(to_double(w.embed), t, H), to_double(w.layers[0].input_norm), c.rms_norm_eps)));
  }
  for (int t = 0; t < 4; ++t) {
    for (int hd = 0; hd < Hq; ++hd) {
      const int g = hd / (Hq / Hkv);
      for (int d = 0; d < D; ++d) {
        double mean = 0;
        for (int j = 0; j <= t; ++j) mean += v[j][g * D + d];
        mean /= t + 1;
        REQUIRE(std::fabs(trace.attn[0][(t * Hq + hd) * D + d] - mean) <= 1e-12);
      }
    }
  }
}

TEST_CASE("reference: attention equals the course's attention reference on RoPE'd q, k", "[day11][model][reference]") {
  // Layer 0 rebuilt from the course's tested pieces: projections here, RoPE from
  // common/reference_rope (NeoX), causal GQA attention from common/reference.
  const ModelConfig c = ModelConfig::tiny();
  const HostWeights w = serving::random_weights(c, 41);
  const std::vector<int32_t> tokens = {1, 100, 7, 7, 300, 42, 9};
  const int T = 7, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads, H = c.hidden_size;
  ReferenceTrace trace;
  ReferenceOptions opt;
  opt.first_position = 3;
  ReferenceModel(w).forward(tokens, opt, &trace);
  // Projections, laid out [1, heads, T, D] for the course's references.
  std::vector<float> q(size_t(Hq) * T * D), k(size_t(Hkv) * T * D), v(size_t(Hkv) * T * D);
  for (int t = 0; t < T; ++t) {
    const auto h = rmsnorm(row(to_double(w.embed), tokens[t], H), to_double(w.layers[0].input_norm), c.rms_norm_eps);
    const auto qt = matvec(to_double(w.layers[0].q), h), kt = matvec(to_double(w.layers[0].k), h),
               vt = matvec(to_double(w.layers[0].v), h);
    for (int hd = 0; hd < Hq; ++hd) {
      for (int d = 0; d < D; ++d) q[(size_t(hd) * T + t) * D + d] = float(qt[hd * D + d]);
    }
    for (int hd = 0; hd < Hkv; ++hd) {
      for (int d = 0; d < D; ++d) {
        k[(size_t(hd) * T + t) * D + d] = float(kt[hd * D + d]);
        v[(size_t(hd) * T + t) * D + d] = float(vt[hd * D + d]);
      }
    }
  }
  course::ref::RopeSpec spec;
  spec.layout = course::ref::RopeSpec::Layout::kNeox;
  spec.base = c.rope_theta;
  std::vector<int32_t> pos(T);
  for (int t = 0; t < T; ++t) pos[t] = 3 + t;
  const auto qr = course::ref::rope(q, pos, 1, Hq, T, D, spec);
  const auto kr = course::ref::rope(k, pos, 1, Hkv, T, D, spec);
  const auto o = course::ref::attention(qr, kr, v, course::AttentionParams::make(1, Hq, Hkv, T, T, D, true));
  std::vector<double> want(size_t(T) * Hq * D);
  std::vector<float> got(want.size());
  for (int t = 0; t < T; ++t) {
    for (int hd = 0; hd < Hq; ++hd) {
      for (int d = 0; d < D; ++d) {
        want[(size_t(t) * Hq + hd) * D + d] = o[(size_t(hd) * T + t) * D + d];
        got[(size_t(t) * Hq + hd) * D + d] = float(trace.attn[0][(size_t(t) * Hq + hd) * D + d]);
      }
    }
  }
  check_close(got, want, 1e-4, "attention output");  // the course's references round to fp32
}

TEST_CASE("reference: RoPE is NeoX rotate_half with theta^(-2i/D)", "[day11][model][reference]") {
  std::vector<double> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(1.0 + i);
  std::vector<double> y = x;
  serving::reference_rope_neox(y.data(), 64, 0.0, 10000.0);
  CHECK(y == x);  // position 0: identity
  for (double pos : {1.0, 17.0, 1000.0}) {
    y = x;
    serving::reference_rope_neox(y.data(), 64, pos, 500000.0);
    // Pair i = (i, i + 32) rotated by pos · 500000^(-i/32).
    for (int i = 0; i < 32; ++i) {
      const double a = pos * std::pow(500000.0, -2.0 * i / 64);
      CHECK(std::fabs(y[i] - (x[i] * std::cos(a) - x[i + 32] * std::sin(a))) < 1e-12);
      CHECK(std::fabs(y[i + 32] - (x[i] * std::sin(a) + x[i + 32] * std::cos(a))) < 1e-12);
    }
  }
}

TEST_CASE("reference: SwiGLU block in closed form", "[day11][model][reference]") {
  // One layer, attention zeroed: x1 = x + Wdown (silu(Wgate h) ⊙ Wup h), h = rmsnorm(x) ⊙ post_norm.
  // Swapping gate and up, or another activation, fails it.
  ModelConfig c = ModelConfig::tiny();
  c.num_layers = 1;
  HostWeights w = serving::random_weights(c, 51);
  for (auto* m : {&w.layers[0].q, &w.layers[0].k, &w.layers[0].v, &w.layers[0].o}) zero(*m);
  // Larger gate weights, so that silu's curvature matters.
  for (auto& b : w.layers[0].gate) b = course::float_to_half_bits(30.0f * course::half_bits_to_float(b));
  const int32_t token = 123;
  const int H = c.hidden_size;
  const std::vector<double> x = row(to_double(w.embed), token, H);
  const std::vector<double> h = rmsnorm(x, to_double(w.layers[0].post_norm), c.rms_norm_eps);
  const std::vector<double> g = matvec(to_double(w.layers[0].gate), h), u = matvec(to_double(w.layers[0].up), h);
  std::vector<double> a(g.size());
  for (size_t i = 0; i < g.size(); ++i) a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  const std::vector<double> m = matvec(to_double(w.layers[0].down), a);
  std::vector<double> x1(H);
  for (int i = 0; i < H; ++i) x1[i] = x[i] + m[i];
  const std::vector<double> want = matvec(to_double(w.lm_head), rmsnorm(x1, to_double(w.final_norm), c.rms_norm_eps));
  check_close(ReferenceModel(w).forward({token}), want, 1e-6, "logits");
}

TEST_CASE("reference: causal (a prefix's logits do not change when tokens are appended)", "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  const ReferenceModel m(serving::random_weights(c, 61));
  const std::vector<int32_t> prefix = {256, 'T', 'h', 'e', ' '};
  std::vector<int32_t> longer = prefix;
  for (int32_t t : {int32_t{'c'}, int32_t{'a'}, int32_t{'t'}, 383, 0}) longer.push_back(t);
  const std::vector<float> a = m.forward(prefix), b = m.forward(longer);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::fabs(a[i] - b[i]) <= 1e-6 * (1 + std::fabs(a[i])));
  // ... while the appended tokens' own rows differ from one another.
  CHECK(std::vector<float>(b.end() - c.vocab_size, b.end()) !=
        std::vector<float>(b.end() - 2 * c.vocab_size, b.end() - c.vocab_size));
}

TEST_CASE("reference: RoPE makes attention depend on relative positions only", "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  const ReferenceModel m(serving::random_weights(c, 71));
  const std::vector<int32_t> tokens = {10, 20, 30, 40, 50, 60};
  ReferenceOptions shifted;
  shifted.first_position = 37;
  const std::vector<float> a = m.forward(tokens), b = m.forward(tokens, shifted);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(std::fabs(a[i] - b[i]) <= 1e-5 * (1 + std::fabs(a[i])));
  // Not trivially: the positions do change the logits when the order of tokens changes.
  const std::vector<float> r = m.forward({20, 10, 30, 40, 50, 60});
  CHECK(std::fabs(r[size_t(5) * c.vocab_size] - a[size_t(5) * c.vocab_size]) > 1e-6);
}

TEST_CASE("reference: fp16 rounding mode stays close to double; greedy agrees with forward",
          "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  const ReferenceModel m(serving::random_weights(c, 81));
  const std::vector<int32_t> tokens = {256, 'a', 'b', 'c', 'd'};
  ReferenceOptions r16;
  r16.round_fp16 = true;
  const std::vector<float> a = m.forward(tokens), b = m.forward(tokens, r16);
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    max_abs = std::max(max_abs, double(std::fabs(a[i])));
    max_diff = std::max(max_diff, double(std::fabs(a[i] - b[i])));
  }
  INFO("max |logit| " << max_abs << ", max fp16-mode difference " << max_diff);
  CHECK(max_diff > 0);                                     // the rounding happened
  CHECK(max_diff < 0.02 * max_abs);                        // ... and is a rounding, not a different model
  for (float x : b) CHECK(x == course::round_to_half(x));  // the logits themselves are fp16 values

  const std::vector<int32_t> gen = m.greedy(tokens, 6);
  REQUIRE(gen.size() == 6);
  std::vector<int32_t> all = tokens;
  all.insert(all.end(), gen.begin(), gen.end());
  const std::vector<float> l = m.forward(all);
  for (int n = 0; n < 6; ++n) {
    const float* rowp = l.data() + (tokens.size() - 1 + n) * c.vocab_size;
    int best = 0;
    for (int v = 1; v < c.vocab_size; ++v) {
      if (rowp[v] > rowp[best]) best = v;
    }
    CHECK(gen[n] == best);
  }
}

TEST_CASE("reference: bad input is refused", "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  HostWeights w = serving::random_weights(c, 91);
  const ReferenceModel m(w);
  SERVING_CHECK_INVALID(m.forward({1, 384}), "'token' 384", "outside the vocabulary [0, 384)");
  SERVING_CHECK_INVALID(m.forward({-1}), "'token' -1");
  CHECK(m.forward({}).empty());
  w.layers[2].up.pop_back();
  SERVING_CHECK_INVALID(ReferenceModel{w}, "tensor 'model.layers.2.mlp.up_proj.weight'");
  w.layers.pop_back();
  SERVING_CHECK_INVALID(ReferenceModel{w}, "3 layers, the config says 4");
}

TEST_CASE("reference: tiny model, 200 tokens, fast enough to be the engine's oracle", "[day11][model][reference]") {
  const ModelConfig c = ModelConfig::tiny();
  const ReferenceModel m(serving::random_weights(c, 101));
  std::vector<int32_t> tokens(200);
  for (int t = 0; t < 200; ++t) tokens[t] = (t * 37 + 11) % c.vocab_size;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<float> logits = m.forward(tokens);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("reference forward, tiny model, 200 tokens: %.2f s\n", s);
  REQUIRE(logits.size() == size_t(200) * c.vocab_size);
  for (float x : logits) REQUIRE(std::isfinite(x));
  CHECK(s < 20.0);  // typically well under 2 s; generous for a loaded CI machine
}
