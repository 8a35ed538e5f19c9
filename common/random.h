// Seeded, reproducible random inputs.
//
// Every test case draws fresh inputs from its own seed: case_seed(test, index) mixes the case
// into a base seed. The base seed is fixed (so failures reproduce) unless COURSE_SEED is set in
// the environment, which lets you fuzz:   for s in 1 2 3; do COURSE_SEED=$s ./bin/sol_...; done
// The generator is our own (splitmix64 + Box-Muller), so the numbers do not depend on the
// standard library's distribution implementation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace course {

uint64_t base_seed();                                        // COURSE_SEED or a fixed default
uint64_t case_seed(const std::string& test, int64_t index);  // distinct seed per test case

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform();                             // [0, 1)
  double normal();                              // N(0, 1)
  int64_t uniform_int(int64_t lo, int64_t hi);  // [lo, hi]

 private:
  uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

std::vector<float> random_normal(size_t n, uint64_t seed, float mean = 0.f, float stddev = 1.f);
std::vector<float> random_uniform(size_t n, uint64_t seed, float lo, float hi);

// Normal samples truncated to multiples of 1/16. Products of such values, and sums of a few
// hundred of them, are exact in fp32 whatever the summation order; with a power-of-two
// softmax scale the logits are then exact too. Large-logit tests (|S| ~ 1e3) use them: with
// arbitrary inputs, merely rounding a logit near 1e3 to fp32 moves it by ~3e-5, and two nearly
// tied keys then swap weight beyond any fp32 tolerance (a property of fp32, not of the kernel).
// With exact logits what remains is the kernel's softmax arithmetic, held to Tolerance::fp32().
std::vector<float> random_normal_sixteenths(size_t n, uint64_t seed, float stddev = 1.f);

}  // namespace course
