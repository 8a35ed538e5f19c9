// CPU reference for rotary position embedding with linear, NTK-aware and YaRN scaling
// (declared in reference_rope.h). Plain loops in double; the angle of every (token, pair) is
// computed once and used for every head.
#include "reference_rope.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace course::ref {

namespace {
constexpr double kTwoPi = 6.283185307179586476925286766559;
}

double rope_factor(const RopeSpec& s, int head_dim, int i) {
  switch (s.scaling) {
    case RopeSpec::Scaling::kNone:
      return 1.0;
    case RopeSpec::Scaling::kLinear:
      return 1.0 / s.factor;
    case RopeSpec::Scaling::kNtk:
      // base' = base · s^(D/(D−2)); θ'_i / θ_i = (base'/base)^(−2i/D) = s^(−2i/(D−2)).
      return std::pow(s.factor, -2.0 * i / (head_dim - 2));
    case RopeSpec::Scaling::kYarn: {
      // The correction dimension d(β): the (fractional) pair index that turns β times within L
      // tokens, from L·base^(−2d/D) / (2π) = β. Rounded outwards, clamped, then a linear ramp
      // over the pair index from "keep θ_i" (i <= lo) to "θ_i / s" (i >= hi).
      const double log_base = std::log(s.base);
      const double d_fast = head_dim * std::log(s.original_max_position / (kTwoPi * s.beta_fast)) / (2 * log_base);
      const double d_slow = head_dim * std::log(s.original_max_position / (kTwoPi * s.beta_slow)) / (2 * log_base);
      const double lo = std::max(std::floor(d_fast), 0.0);
      double hi = std::min(std::ceil(d_slow), double(head_dim - 1));
      if (hi == lo) hi += 0.001;
      const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);  // 0: θ_i kept, 1: θ_i / s
      return ramp / s.factor + (1.0 - ramp);
    }
  }
  throw std::invalid_argument("ref::rope_factor: unknown scaling");
}

std::vector<double> rope_inv_freq(const RopeSpec& s, int head_dim) {
  std::vector<double> f(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i)
    f[size_t(i)] = rope_factor(s, head_dim, i) * std::pow(s.base, -2.0 * i / head_dim);
  return f;
}

double rope_mscale(const RopeSpec& s) {
  return s.scaling == RopeSpec::Scaling::kYarn && s.factor > 1.0 ? 0.1 * std::log(s.factor) + 1.0 : 1.0;
}

std::vector<float> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int batch, int heads,
                        int seq_len, int head_dim, const RopeSpec& s) {
  if (batch < 0 || heads <= 0 || seq_len < 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      x.size() != size_t(batch) * heads * seq_len * head_dim || positions.size() != size_t(batch) * seq_len)
    throw std::invalid_argument("ref::rope: inconsistent sizes");
  const int half = head_dim / 2;
  const std::vector<double> inv_freq = rope_inv_freq(s, head_dim);
  const double mscale = rope_mscale(s);
  std::vector<float> y(x.size());
  std::vector<double> c(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int b = 0; b < batch; ++b) {
    for (int n = 0; n < seq_len; ++n) {
      const double m = positions[size_t(b) * seq_len + n];
      for (int i = 0; i < half; ++i) {
        const double angle = m * inv_freq[size_t(i)];
        c[size_t(i)] = std::cos(angle);
        sn[size_t(i)] = std::sin(angle);
      }
      for (int h = 0; h < heads; ++h) {
        const size_t row = ((size_t(b) * heads + h) * seq_len + n) * head_dim;
        for (int i = 0; i < half; ++i) {
          const int a = s.layout == RopeSpec::Layout::kNeox ? i : 2 * i;
          const int bb = s.layout == RopeSpec::Layout::kNeox ? i + half : 2 * i + 1;
          const double xa = x[row + a], xb = x[row + bb];
          y[row + a] = float(mscale * (xa * c[size_t(i)] - xb * sn[size_t(i)]));
          y[row + bb] = float(mscale * (xa * sn[size_t(i)] + xb * c[size_t(i)]));
        }
      }
    }
  }
  return y;
}

}  // namespace course::ref
