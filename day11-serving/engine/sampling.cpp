// Temperature / top-p sampling on the host (sampling.h says why there).
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace serving {

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

double sampling_uniform(uint64_t seed, uint64_t counter) {
  const uint64_t h = mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^ (counter * 0xD1B54A32D192ED03ull));
  return double(h >> 11) * (1.0 / 9007199254740992.0);  // 2^-53
}

int32_t sample_top_p(const float* logits, int vocab, float temperature, float top_p, double u) {
  // Probabilities relative to the max (the max term is 1, so nothing overflows).
  const float mx = *std::max_element(logits, logits + vocab);
  std::vector<double> p(vocab);
  for (int i = 0; i < vocab; ++i) p[i] = std::exp((double(logits[i]) - mx) / temperature);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // The nucleus: the most likely tokens until their mass reaches top_p (at least one).
  double kept = 0;
  size_t n = 0;
  while (n < ids.size() && (n == 0 || kept < top_p * total)) kept += p[ids[n++]];
  double target = u * kept, run = 0;
  for (size_t i = 0; i < n; ++i) {
    run += p[ids[i]];
    if (target < run) return ids[i];
  }
  return ids[n - 1];
}

}  // namespace serving
