// The RMSNorm reference (common/reference_rmsnorm.h) checked against closed forms. Day 11 ·
// 03_fused_add_rmsnorm's GPU tests trust it.
#include <cmath>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "fp16_host.h"
#include "random.h"
#include "reference_rmsnorm.h"

namespace ref = course::ref;

namespace {

std::vector<float> randn(size_t n, int64_t idx, float mean = 0.f, float stddev = 1.f) {
  return course::random_normal(n, course::case_seed("reference_rmsnorm", idx), mean, stddev);
}

}  // namespace

TEST_CASE("reference rmsnorm: a row (3, 4) by hand", "[reference][rmsnorm]") {
  // mean of squares (9 + 16) / 2 = 12.5, inv = 1 / sqrt(12.5) = 0.28284..., n = (0.8485, 1.1314)
  const std::vector<float> x = {3.f, 4.f};
  CHECK(std::fabs(ref::rms_inverse(x.data(), 2, 0.0) - 1.0 / std::sqrt(12.5)) < 1e-15);
  const auto n = ref::rms_normalized(x, 1, 2, 0.0);
  CHECK(std::fabs(n[0] - 3.0 / std::sqrt(12.5)) < 1e-15);
  CHECK(std::fabs(n[1] - 4.0 / std::sqrt(12.5)) < 1e-15);
  // eps adds to the mean of squares: 12.5 + 0.5 = 13
  CHECK(std::fabs(ref::rms_inverse(x.data(), 2, 0.5) - 1.0 / std::sqrt(13.0)) < 1e-15);
  // With a weight (2, -0.5) and fp16: rd(0.8485...) = 0.8486328125, rd(1.1313...) = 1.1318359375
  const auto out = ref::rmsnorm(x, {2.f, -0.5f}, 1, 2, 0.0, course::round_to_half);
  CHECK(out[0] == 2.f * 0.8486328125f);
  CHECK(out[1] == -0.5f * 1.1318359375f);
}

TEST_CASE("reference rmsnorm: a constant row normalises to +-1, so the output is the weight", "[reference][rmsnorm]") {
  const int hidden = 4096;
  const auto w = course::round_to_half(randn(hidden, 1));
  for (float c : {1.f, -3.5f, 300.f, 1e-3f}) {
    std::vector<float> x(size_t(2) * hidden, c);
    for (int j = 0; j < hidden; ++j) x[size_t(hidden) + j] = -c;  // second row: the negated constant
    for (ref::RoundFn round : {static_cast<ref::RoundFn>(nullptr), static_cast<ref::RoundFn>(course::round_to_half),
                               static_cast<ref::RoundFn>(course::round_to_bf16)}) {
      const auto out = ref::rmsnorm(x, w, 2, hidden, 0.0, round);
      long long bad = 0;
      for (int j = 0; j < hidden; ++j) {
        const float want = round ? round(w[j]) : w[j];
        if (std::fabs(out[j] - (c > 0 ? want : -want)) > 1e-6f * std::fabs(want)) ++bad;
        if (std::fabs(out[size_t(hidden) + j] - (c > 0 ? -want : want)) > 1e-6f * std::fabs(want)) ++bad;
      }
      INFO("c = " << c);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("reference rmsnorm: scale invariance (eps = 0) and mean of squares 1", "[reference][rmsnorm]") {
  const int tokens = 3, hidden = 576;
  const auto x = randn(size_t(tokens) * hidden, 2);
  const auto n1 = ref::rms_normalized(x, tokens, hidden, 0.0);
  for (float alpha : {0.25f, 8.f, 1000.f, -2.f}) {
    std::vector<float> y(x.size());
    for (size_t e = 0; e < x.size(); ++e) y[e] = alpha * x[e];  // powers of two: exact; 1000: within 1e-7
    const auto n2 = ref::rms_normalized(y, tokens, hidden, 0.0);
    double worst = 0;
    for (size_t e = 0; e < x.size(); ++e) worst = std::fmax(worst, std::fabs(n2[e] - (alpha > 0 ? n1[e] : -n1[e])));
    INFO("alpha = " << alpha);
    CHECK(worst < 1e-6);
  }
  for (int t = 0; t < tokens; ++t) {
    double ms = 0;
    for (int j = 0; j < hidden; ++j) ms += n1[size_t(t) * hidden + j] * n1[size_t(t) * hidden + j];
    CHECK(std::fabs(ms / hidden - 1.0) < 1e-12);
  }
}

TEST_CASE("reference rmsnorm: a zero row gives zeros, not NaN (eps > 0)", "[reference][rmsnorm]") {
  const std::vector<float> x(64, 0.f), w(64, 1.f);
  const auto out = ref::rmsnorm(x, w, 1, 64, 1e-5, course::round_to_bf16);
  for (float v : out) CHECK(v == 0.f);
}

TEST_CASE("reference rmsnorm: two roundings, as Hugging Face, not one", "[reference][rmsnorm]") {
  // n = 1 + 2^-11 + 2^-13 (between fp16 1 and 1 + 2^-10, above their tie): rd(n) = 1 + 2^-10;
  // times w = 1.5: 1.5 + 2^-10 + 2^-11, a tie between 1.5 + 2^-10 and 1.5 + 2^-9 (the spacing is
  // 2^-10 in [1, 2)), and nearest even gives 1.5 + 2^-9. One rounding of n·w = 1.5 + 0.9375·2^-10
  // gives 1.5 + 2^-10 instead.
  const double n = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -13);
  const auto two = ref::rms_scale({n}, {1.5f}, 1, 1, course::round_to_half);
  CHECK(two[0] == 1.501953125f);
  const auto none = ref::rms_scale({n}, {1.5f}, 1, 1, nullptr);
  CHECK(course::round_to_half(none[0]) == 1.5009765625f);
}

TEST_CASE("reference rmsnorm_allowed: accepts what an fp32 inverse RMS can give, nothing else",
          "[reference][rmsnorm]") {
  const int tokens = 4, hidden = 576;
  for (ref::RoundFn round :
       {static_cast<ref::RoundFn>(course::round_to_half), static_cast<ref::RoundFn>(course::round_to_bf16)}) {
    const auto x = [&] {
      auto v = randn(size_t(tokens) * hidden, 5);
      for (float& e : v) e = round(e);
      return v;
    }();
    std::vector<float> w = randn(hidden, 6, 1.f, 0.5f);
    for (float& e : w) e = round(e);
    const auto exact = ref::rmsnorm(x, w, tokens, hidden, 1e-5, round);
    CHECK(ref::rmsnorm_allowed(exact, x, w, tokens, hidden, 1e-5, round, 1e-4) == exact);
    // An inverse RMS 3e-5 relative off: some elements round the other way, every one allowed.
    auto n = ref::rms_normalized(x, tokens, hidden, 1e-5);
    for (double& e : n) e *= 1.0 + 3e-5;
    const auto shifted = ref::rms_scale(n, w, tokens, hidden, round);
    CHECK(ref::rmsnorm_allowed(shifted, x, w, tokens, hidden, 1e-5, round, 1e-4) == shifted);
    // One rounding instead of two: differs from HF's order, and is not allowed where it differs.
    const auto one = ref::rms_scale(ref::rms_normalized(x, tokens, hidden, 1e-5), w, tokens, hidden, nullptr);
    std::vector<float> one_rd(one.size());
    for (size_t e = 0; e < one.size(); ++e) one_rd[e] = round(one[e]);
    const auto allowed = ref::rmsnorm_allowed(one_rd, x, w, tokens, hidden, 1e-5, round, 1e-4);
    long long differ = 0, rejected = 0;
    for (size_t e = 0; e < one.size(); ++e) {
      differ += one_rd[e] != exact[e];
      rejected += allowed[e] != one_rd[e];
    }
    CHECK(differ > 0);
    // Where the two orders differ, r · inv often lies near a midpoint of the first rounding, and
    // so within the slack of rounding the other way: in fp16 about a third of those elements are
    // also a value an fp32 inverse RMS could give. The rest are rejected.
    CHECK(rejected >= differ / 2);
  }
}

TEST_CASE("reference residual_add: rd(residual + x), exact sums rounded once", "[reference][rmsnorm]") {
  // fp16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: nearest even gives 1.
  const auto r = ref::residual_add({1.f, 1000.f, -3.f}, {std::ldexp(1.f, -11), 0.25f, 3.f}, course::round_to_half);
  CHECK(r[0] == 1.f);
  CHECK(r[1] == 1000.f);  // 1000.25: fp16 spacing at 1000 is 0.5, the tie rounds to even 1000
  CHECK(r[2] == 0.f);
  const auto b = ref::residual_add({300.f}, {1.f}, course::round_to_bf16);
  CHECK(b[0] == 300.f);  // bf16 spacing at 300 is 2: 301 is a tie, nearest even 300
  const auto x = randn(1000, 3), y = randn(1000, 4);
  const auto exact = ref::residual_add(x, y, nullptr);
  for (size_t e = 0; e < x.size(); ++e) CHECK(exact[e] == x[e] + y[e]);
}
