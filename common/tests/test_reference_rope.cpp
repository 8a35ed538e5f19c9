// The RoPE reference (common/reference_rope.h) checked against hand-computed values and the
// properties that make RoPE what it is. Day 10 · 07_rope_yarn's GPU tests trust it.
//
// The "[precision]" case also measures what the lesson's precision table shows: the error of
// the naive fp32 angle float(m) · float(θ_i) at positions 10^3 .. 10^6 (run it with -s to print
// the table: build/bin/test_cpu_reference_rope "[precision]" -s).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "random.h"
#include "reference_rope.h"

using course::ref::RopeSpec;
namespace ref = course::ref;

namespace {

RopeSpec spec(RopeSpec::Layout layout, RopeSpec::Scaling scaling = RopeSpec::Scaling::kNone, double s = 1.0,
              double base = 10000.0, int L = 4096) {
  RopeSpec r;
  r.layout = layout;
  r.scaling = scaling;
  r.factor = s;
  r.base = base;
  r.original_max_position = L;
  return r;
}

std::vector<float> randn(size_t n, int64_t idx) {
  return course::random_normal(n, course::case_seed("reference_rope", idx));
}

double dot(const float* a, const float* b, int d) {
  double s = 0;
  for (int e = 0; e < d; ++e) s += double(a[e]) * b[e];
  return s;
}

}  // namespace

TEST_CASE("rope of a hand-computed example: D = 4, base 100, position 2, both layouts", "[reference][rope]") {
  // θ = (1, 0.1): angles 2 and 0.2 rad. x = (1, 2, 3, 4).
  // NeoX pairs (x0, x2) = (1, 3) by 2 rad and (x1, x3) = (2, 4) by 0.2 rad;
  // GPT-J pairs (x0, x1) = (1, 2) by 2 rad and (x2, x3) = (3, 4) by 0.2 rad.
  const std::vector<float> x{1, 2, 3, 4};
  const double c2 = std::cos(2.0), s2 = std::sin(2.0), c02 = std::cos(0.2), s02 = std::sin(0.2);
  const auto neox = ref::rope(x, {2}, 1, 1, 1, 4, spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kNone, 1.0, 100.0));
  const std::vector<double> want_neox{1 * c2 - 3 * s2, 2 * c02 - 4 * s02, 1 * s2 + 3 * c2, 2 * s02 + 4 * c02};
  const auto gptj = ref::rope(x, {2}, 1, 1, 1, 4, spec(RopeSpec::Layout::kGptj, RopeSpec::Scaling::kNone, 1.0, 100.0));
  const std::vector<double> want_gptj{1 * c2 - 2 * s2, 1 * s2 + 2 * c2, 3 * c02 - 4 * s02, 3 * s02 + 4 * c02};
  for (int e = 0; e < 4; ++e) {
    INFO("element " << e);
    CHECK(std::fabs(neox[size_t(e)] - want_neox[size_t(e)]) < 1e-6);
    CHECK(std::fabs(gptj[size_t(e)] - want_gptj[size_t(e)]) < 1e-6);
  }
  // The same numbers, rounded, as the lesson's worked example prints them.
  CHECK(std::fabs(neox[0] - (-3.14404)) < 1e-5);
  CHECK(std::fabs(neox[2] - (-0.33914)) < 1e-5);
  CHECK(std::fabs(gptj[0] - (-2.23474)) < 1e-5);
  CHECK(std::fabs(gptj[3] - 4.51628) < 1e-5);
}

TEST_CASE("rope at position 0 is the identity; GPT-J on x is NeoX on x with its pairs regrouped", "[reference][rope]") {
  const int B = 2, H = 3, N = 5, D = 64;
  const auto x = randn(size_t(B) * H * N * D, 1);
  const std::vector<int32_t> zeros(size_t(B) * N, 0);
  CHECK(ref::rope(x, zeros, B, H, N, D, spec(RopeSpec::Layout::kNeox)) == x);
  CHECK(ref::rope(x, zeros, B, H, N, D, spec(RopeSpec::Layout::kGptj)) == x);
  // Interleaved element 2i ↔ half-split element i, 2i + 1 ↔ i + D/2.
  std::vector<int32_t> pos(size_t(B) * N);
  for (size_t t = 0; t < pos.size(); ++t) pos[t] = int32_t(t * 977 + 3);
  std::vector<float> split(x.size());
  for (size_t row = 0; row < x.size() / D; ++row)
    for (int i = 0; i < D / 2; ++i) {
      split[row * D + i] = x[row * D + 2 * i];
      split[row * D + i + D / 2] = x[row * D + 2 * i + 1];
    }
  const auto gptj = ref::rope(x, pos, B, H, N, D, spec(RopeSpec::Layout::kGptj, RopeSpec::Scaling::kYarn, 8.0));
  const auto neox = ref::rope(split, pos, B, H, N, D, spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, 8.0));
  bool same = true;
  for (size_t row = 0; row < x.size() / D; ++row)
    for (int i = 0; i < D / 2; ++i)
      same =
          same && gptj[row * D + 2 * i] == neox[row * D + i] && gptj[row * D + 2 * i + 1] == neox[row * D + i + D / 2];
  CHECK(same);
}

TEST_CASE("rope preserves every row's norm (times mscale for YaRN)", "[reference][rope]") {
  const int B = 1, H = 4, N = 9, D = 128;
  const auto x = randn(size_t(B) * H * N * D, 2);
  std::vector<int32_t> pos(static_cast<size_t>(N));
  for (int n = 0; n < N; ++n) pos[size_t(n)] = n * 123457 - 50000;
  for (auto layout : {RopeSpec::Layout::kNeox, RopeSpec::Layout::kGptj}) {
    for (auto sc :
         {RopeSpec::Scaling::kNone, RopeSpec::Scaling::kLinear, RopeSpec::Scaling::kNtk, RopeSpec::Scaling::kYarn}) {
      const RopeSpec s = spec(layout, sc, 16.0);
      const double m = ref::rope_mscale(s);
      const auto y = ref::rope(x, pos, B, H, N, D, s);
      for (size_t row = 0; row < x.size() / D; ++row) {
        const double nx = std::sqrt(dot(&x[row * D], &x[row * D], D)), ny = std::sqrt(dot(&y[row * D], &y[row * D], D));
        INFO("scaling " << int(sc) << ", row " << row);
        CHECK(std::fabs(ny - m * nx) <= 1e-6 * nx);
      }
    }
  }
}

TEST_CASE("rope: q_m · k_n depends only on m − n (also 10^6 positions later)", "[reference][rope]") {
  const int D = 64, N = 8;
  const auto q = randn(size_t(N) * D, 3), k = randn(size_t(N) * D, 4);
  std::vector<int32_t> pos(static_cast<size_t>(N)), shifted(static_cast<size_t>(N));
  for (int n = 0; n < N; ++n) {
    pos[size_t(n)] = n * n * 31;
    shifted[size_t(n)] = pos[size_t(n)] + 1000003;
  }
  for (auto layout : {RopeSpec::Layout::kNeox, RopeSpec::Layout::kGptj}) {
    const RopeSpec s = spec(layout, RopeSpec::Scaling::kYarn, 4.0);
    const auto q0 = ref::rope(q, pos, 1, 1, N, D, s), k0 = ref::rope(k, pos, 1, 1, N, D, s);
    const auto q1 = ref::rope(q, shifted, 1, 1, N, D, s), k1 = ref::rope(k, shifted, 1, 1, N, D, s);
    for (int t = 0; t < N; ++t)
      for (int u = 0; u < N; ++u) {
        const double a = dot(&q0[size_t(t) * D], &k0[size_t(u) * D], D);
        const double b = dot(&q1[size_t(t) * D], &k1[size_t(u) * D], D);
        const double scale =
            std::sqrt(dot(&q[size_t(t) * D], &q[size_t(t) * D], D) * dot(&k[size_t(u) * D], &k[size_t(u) * D], D));
        INFO("t " << t << ", u " << u);
        CHECK(std::fabs(a - b) <= 1e-6 * scale);
      }
  }
}

TEST_CASE("YaRN with s = 1 is plain RoPE, bit for bit", "[reference][rope]") {
  const int B = 2, H = 2, N = 7, D = 32;
  const auto x = randn(size_t(B) * H * N * D, 5);
  std::vector<int32_t> pos(size_t(B) * N);
  for (size_t t = 0; t < pos.size(); ++t) pos[t] = int32_t(t * 100003);
  for (auto layout : {RopeSpec::Layout::kNeox, RopeSpec::Layout::kGptj}) {
    const auto plain = ref::rope(x, pos, B, H, N, D, spec(layout));
    for (auto sc : {RopeSpec::Scaling::kLinear, RopeSpec::Scaling::kNtk, RopeSpec::Scaling::kYarn})
      CHECK(ref::rope(x, pos, B, H, N, D, spec(layout, sc, 1.0)) == plain);
  }
  CHECK(ref::rope_mscale(spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, 1.0)) == 1.0);
  CHECK(std::fabs(ref::rope_mscale(spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, 16.0)) -
                  1.2772588722239781) < 1e-15);
}

TEST_CASE("rope_inv_freq against closed forms: base^(-2i/D), linear θ/s, NTK base·s^(D/(D-2)), YaRN's pair ramp",
          "[reference][rope]") {
  const int D = 128;
  const double s = 8.0, base = 10000.0;
  const int L = 4096;
  const auto plain = ref::rope_inv_freq(spec(RopeSpec::Layout::kNeox), D);
  const auto linear = ref::rope_inv_freq(spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kLinear, s), D);
  const auto ntk = ref::rope_inv_freq(spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kNtk, s), D);
  const auto yarn = ref::rope_inv_freq(spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, s, base, L), D);
  REQUIRE(plain.size() == size_t(D / 2));
  const double ntk_base = base * std::pow(s, double(D) / (D - 2));
  // The correction dimensions: pair d(32) turns 32 times within L, pair d(1) once. The deployed
  // ramp (released YaRN code, Hugging Face, vLLM) rounds them outwards to lo = ⌊20.94⌋ = 20 and
  // hi = ⌈45.03⌉ = 46: pairs 0..20 keep θ_i, pairs 46..63 get θ_i / s, and the factor falls
  // linearly in i between, by (1 − 1/s)/26 per pair.
  const double d_fast = D * std::log(L / (2 * M_PI * 32)) / (2 * std::log(base));  // ≈ 20.9
  const double d_slow = D * std::log(L / (2 * M_PI * 1)) / (2 * std::log(base));   // ≈ 45.0
  CHECK(std::fabs(d_fast - 20.94) < 0.01);
  CHECK(std::fabs(d_slow - 45.03) < 0.01);
  const int lo = 20, hi = 46;
  for (int i = 0; i < D / 2; ++i) {
    INFO("pair " << i);
    const double theta = std::pow(base, -2.0 * i / D);
    CHECK(std::fabs(plain[size_t(i)] - theta) <= 1e-15 * theta);
    CHECK(std::fabs(linear[size_t(i)] - theta / s) <= 1e-15 * theta);
    CHECK(std::fabs(ntk[size_t(i)] - std::pow(ntk_base, -2.0 * i / D)) <= 1e-13 * theta);
    const double want = i <= lo ? 1.0 : i >= hi ? 1.0 / s : 1.0 - (1.0 - 1.0 / s) * (i - lo) / (hi - lo);
    CHECK(std::fabs(yarn[size_t(i)] - want * theta) <= 1e-14 * theta);
  }
  CHECK(std::fabs(ntk[D / 2 - 1] - linear[D / 2 - 1]) <= 1e-13 * linear[D / 2 - 1]);  // NTK's slowest pair = linear's
  CHECK(ntk[0] == plain[0]);                                                          // NTK's fastest pair is kept
  // The lesson's table: the deployed factor next to the paper's (γ linear in r_i = L·θ_i/(2π)).
  const RopeSpec y = spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, s, base, L);
  const struct {
    int i;
    double deployed, paper;
  } table[] = {{21, 0.966, 0.993}, {24, 0.865, 0.679}, {28, 0.731, 0.424}, {32, 0.596, 0.281},
               {36, 0.462, 0.200}, {40, 0.327, 0.155}, {44, 0.192, 0.129}};
  for (const auto& row : table) {
    INFO("pair " << row.i);
    const double r = L * std::pow(base, -2.0 * row.i / D) / (2 * M_PI);
    const double gamma = std::clamp((r - 1.0) / 31.0, 0.0, 1.0);
    CHECK(std::fabs(ref::rope_factor(y, D, row.i) - row.deployed) < 5e-4);
    CHECK(std::fabs((1.0 - gamma) / s + gamma - row.paper) < 5e-4);
  }
  // When ⌈d(β_slow)⌉ > D/2 − 1 the ramp does not end inside the pairs: the deployed clamp is
  // D − 1, not D/2 − 1, so with L = 65536 (⌈d(1)⌉ = 65) the last pair is still partly kept.
  const RopeSpec wide = spec(RopeSpec::Layout::kNeox, RopeSpec::Scaling::kYarn, s, base, 65536);
  const double wide_lo = std::floor(D * std::log(65536 / (2 * M_PI * 32)) / (2 * std::log(base)));  // 40
  const double wide_hi = std::ceil(D * std::log(65536 / (2 * M_PI * 1)) / (2 * std::log(base)));    // 65
  CHECK(wide_hi == 65.0);
  const double last = 1.0 - (1.0 - 1.0 / s) * (D / 2 - 1 - wide_lo) / (wide_hi - wide_lo);
  CHECK(std::fabs(ref::rope_factor(wide, D, D / 2 - 1) - last) < 1e-14);
  CHECK(ref::rope_factor(wide, D, D / 2 - 1) > 1.0 / s);
}

TEST_CASE("the naive fp32 angle loses digits at positions 10^5 .. 10^6 (the lesson's table)",
          "[reference][rope][precision]") {
  // angle = float(m) · float(θ_i), the product rounded to fp32, against m·θ_i in double.
  // D = 128, base 10000. Error in radians, the worst pair, and its effect on cos.
  const int D = 128;
  const auto theta = ref::rope_inv_freq(spec(RopeSpec::Layout::kNeox), D);
  std::string table = "position | worst |angle error| (rad) | worst |cos error|\n";
  double err_1e3 = 0, err_1e6 = 0;
  for (int m : {1000, 10000, 100000, 1000000}) {
    double worst = 0, worst_cos = 0;
    for (int i = 0; i < D / 2; ++i) {
      const float naive = float(m) * float(theta[size_t(i)]);
      const double exact = double(m) * theta[size_t(i)];
      worst = std::max(worst, std::fabs(double(naive) - exact));
      worst_cos = std::max(worst_cos, std::fabs(std::cos(double(naive)) - std::cos(exact)));
    }
    char line[128];
    std::snprintf(line, sizeof line, "%8d | %.2e | %.2e\n", m, worst, worst_cos);
    table += line;
    if (m == 1000) err_1e3 = worst;
    if (m == 1000000) err_1e6 = worst;
  }
  INFO(table);
  CHECK(err_1e3 < 1e-4);  // harmless at short context ...
  CHECK(err_1e6 > 1e-2);  // ... hundredths of a radian at 10^6: the kernel must reduce exactly
}
