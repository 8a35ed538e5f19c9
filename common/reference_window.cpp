// CPU reference for decode over a rolling (ring) KV cache (declared in reference.h).
//
// Written as plainly as the rest of the reference: find the tokens the query sees, read each from
// its slot t % (window + 1), softmax in double. It does not reuse the dense reference on
// purpose: common/tests/test_ring_cache.cpp checks the two against each other.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "reference.h"

namespace course::ref {

std::vector<float> ring_decode_attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                                         const std::vector<float>& v_cache, const std::vector<int32_t>& seq_lens,
                                         const RingCacheParams& p) {
  if (p.batch < 0 || p.heads_q <= 0 || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0 || p.head_dim <= 0 ||
      p.window < 0 || int(seq_lens.size()) != p.batch || q.size() != size_t(p.q_elems()) ||
      k_cache.size() != size_t(p.cache_elems()) || v_cache.size() != size_t(p.cache_elems()))
    throw std::invalid_argument("ref::ring_decode_attention: inconsistent RingCacheParams");
  const int D = p.head_dim, cap = p.capacity();
  const double scale = p.softmax_scale();
  std::vector<float> o(size_t(p.q_elems()), 0.f);
  std::vector<double> w, acc(static_cast<size_t>(D));
  for (int b = 0; b < p.batch; ++b) {
    const int len = seq_lens[size_t(b)];
    const int first = std::max(0, len - 1 - p.window);  // oldest token still in the window
    for (int h = 0; h < p.heads_q; ++h) {
      const float* qr = &q[(size_t(b) * p.heads_q + h) * D];
      const size_t head_base = (size_t(b) * p.heads_kv + p.kv_head_of(h)) * cap;
      auto row = [&](const std::vector<float>& cache, int t) { return &cache[(head_base + t % cap) * D]; };
      w.clear();
      double mx = -INFINITY;
      for (int t = first; t < len; ++t) {
        double s = 0;
        for (int d = 0; d < D; ++d) s += double(qr[d]) * row(k_cache, t)[d];
        w.push_back(s * scale);
        mx = std::max(mx, w.back());
      }
      double l = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t = first; t < len; ++t) {
        const double e = std::exp(w[size_t(t - first)] - mx);
        l += e;
        for (int d = 0; d < D; ++d) acc[size_t(d)] += e * row(v_cache, t)[d];
      }
      float* out = &o[(size_t(b) * p.heads_q + h) * D];
      for (int d = 0; d < D; ++d) out[d] = l > 0 ? float(acc[size_t(d)] / l) : 0.f;  // len <= 0: zeros
    }
  }
  return o;
}

}  // namespace course::ref
