#include "random.h"

#include <cmath>
#include <cstdlib>

namespace course {

uint64_t base_seed() {
  if (const char* s = std::getenv("COURSE_SEED")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s, &end, 0);
    if (end != s) return v;
  }
  return 0x5EED2026ull;
}

uint64_t case_seed(const std::string& test, int64_t index) {
  // FNV-1a over the test name, then mixed with the base seed and the case index.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : test) h = (h ^ c) * 1099511628211ull;
  Rng mix(h ^ (base_seed() * 0x9E3779B97F4A7C15ull) ^ static_cast<uint64_t>(index));
  return mix.next_u64();
}

uint64_t Rng::next_u64() {  // splitmix64
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1 = uniform();
  while (u1 <= 0.0) u1 = uniform();
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 6.283185307179586 * u2;
  spare_ = r * std::sin(t);
  has_spare_ = true;
  return r * std::cos(t);
}

int64_t Rng::uniform_int(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next_u64() % span);
}

std::vector<float> random_normal(size_t n, uint64_t seed, float mean, float stddev) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(mean + stddev * rng.normal());
  return v;
}

std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return v;
}

std::vector<float> random_normal_sixteenths(size_t n, uint64_t seed, float stddev) {
  std::vector<float> v = random_normal(n, seed, 0.f, stddev);
  for (float& x : v) x = std::trunc(x * 16.f) / 16.f;
  return v;
}

}  // namespace course
