// The CPU reference for RMSNorm (see reference_rmsnorm.h).
#include "reference_rmsnorm.h"

#include <cmath>
#include <cstddef>
#include <stdexcept>

namespace course::ref {

namespace {

void check_sizes(size_t x_size, int tokens, int hidden) {
  if (tokens < 0 || hidden < 1 || x_size != size_t(tokens) * size_t(hidden))
    throw std::invalid_argument("reference rmsnorm: x must hold tokens · hidden values");
}

}  // namespace

double rms_inverse(const float* row, int hidden, double eps) {
  double sum_sq = 0.0;
  for (int k = 0; k < hidden; ++k) sum_sq += double(row[k]) * double(row[k]);
  return 1.0 / std::sqrt(sum_sq / hidden + eps);
}

std::vector<double> rms_normalized(const std::vector<float>& x, int tokens, int hidden, double eps) {
  check_sizes(x.size(), tokens, hidden);
  std::vector<double> n(x.size());
  for (int t = 0; t < tokens; ++t) {
    const float* row = &x[size_t(t) * hidden];
    const double inv = rms_inverse(row, hidden, eps);
    for (int j = 0; j < hidden; ++j) n[size_t(t) * hidden + j] = double(row[j]) * inv;
  }
  return n;
}

std::vector<float> rms_scale(const std::vector<double>& n, const std::vector<float>& weight, int tokens, int hidden,
                             RoundFn round) {
  check_sizes(n.size(), tokens, hidden);
  if (weight.size() != size_t(hidden)) throw std::invalid_argument("reference rmsnorm: weight must hold hidden values");
  std::vector<float> out(n.size());
  for (size_t e = 0; e < n.size(); ++e) {
    const double w = weight[e % size_t(hidden)];
    if (round == nullptr) {
      out[e] = float(n[e] * w);
    } else {
      // rd(n_j) first (through fp32: that differs from rounding n_j directly only when n_j lies
      // within 2^-24 relative of a 16-bit tie, far inside what the tests allow the inverse RMS),
      // then the product of two 16-bit values, exact in double, rounded once.
      const float normed = round(float(n[e]));
      out[e] = round(float(double(normed) * w));
    }
  }
  return out;
}

std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int tokens, int hidden,
                           double eps, RoundFn round) {
  return rms_scale(rms_normalized(x, tokens, hidden, eps), weight, tokens, hidden, round);
}

std::vector<float> rmsnorm_allowed(const std::vector<float>& got, const std::vector<float>& x,
                                   const std::vector<float>& weight, int tokens, int hidden, double eps, RoundFn round,
                                   double inv_slack) {
  if (got.size() != x.size()) throw std::invalid_argument("reference rmsnorm_allowed: got and x sizes differ");
  const std::vector<double> n = rms_normalized(x, tokens, hidden, eps);
  std::vector<double> lo(n.size()), hi(n.size());
  for (size_t e = 0; e < n.size(); ++e) {
    lo[e] = n[e] * (1.0 - inv_slack);
    hi[e] = n[e] * (1.0 + inv_slack);
  }
  const std::vector<float> out_lo = rms_scale(lo, weight, tokens, hidden, round);
  const std::vector<float> out_hi = rms_scale(hi, weight, tokens, hidden, round);
  std::vector<float> ref = rms_scale(n, weight, tokens, hidden, round);
  for (size_t e = 0; e < n.size(); ++e)
    if (got[e] == out_lo[e] || got[e] == out_hi[e]) ref[e] = got[e];
  return ref;
}

std::vector<float> residual_add(const std::vector<float>& residual, const std::vector<float>& x, RoundFn round) {
  if (residual.size() != x.size()) throw std::invalid_argument("reference residual_add: sizes differ");
  std::vector<float> r(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    // The sum of two 16-bit values is exact in double; float() rounds it to fp32 as a kernel's
    // fp32 addition does (both are correctly rounded), and rd then rounds that to 16 bits.
    const float s = float(double(residual[e]) + double(x[e]));
    r[e] = round ? round(s) : s;
  }
  return r;
}

}  // namespace course::ref
