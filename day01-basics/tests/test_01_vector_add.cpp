// Tests for day01/01_vector_add: a size grid around the block size, and sizes large enough
// that one grid of 32 blocks per SM cannot cover them (the grid-stride loop must).
#include <vector>

#include "01_vector_add.h"
#include "gpu_test.h"
#include "reference.h"

using course::DeviceBuffer;

TEST_CASE("vector_add matches the reference over a size grid", "[day01][vector_add]") {
  // 1, below / at / above one warp, not a multiple of the block, > one grid of 32 blocks/SM.
  const std::vector<int64_t> sizes{1, 31, 32, 33, 1000, (1 << 20) + 3, (1 << 24) + 7};
  for (size_t idx = 0; idx < sizes.size(); ++idx) {
    const int64_t n = sizes[idx];
    const uint64_t seed = course::case_seed("vector_add", int64_t(idx));
    INFO("n = " << n << ", seed = " << seed << " (set COURSE_SEED to vary)");
    const auto a = course::random_normal(size_t(n), seed);
    const auto b = course::random_normal(size_t(n), seed + 1);
    auto d_a = course::to_device(a), d_b = course::to_device(b);
    DeviceBuffer<float> d_c{size_t(n)};
    d_c.poison();
    vector_add(d_a.data(), d_b.data(), d_c.data(), n);
    COURSE_CHECK_OUTPUT(d_c, course::ref::add(a, b), course::Dims{{"i", n}}, course::Tolerance::fp32());
  }
}

TEST_CASE("vector_add works in place (c aliases a)", "[day01][vector_add][quick]") {
  const int64_t n = 4099;
  const auto a = course::random_normal(n, course::case_seed("vector_add_inplace", 0));
  const auto b = course::random_normal(n, course::case_seed("vector_add_inplace", 1));
  auto d_a = course::to_device(a), d_b = course::to_device(b);
  vector_add(d_a.data(), d_b.data(), d_a.data(), n);
  COURSE_CHECK_OUTPUT(d_a, course::ref::add(a, b), course::Dims{{"i", n}}, course::Tolerance::fp32());
}

TEST_CASE("vector_add with n = 0 does nothing", "[day01][vector_add][quick]") {
  DeviceBuffer<float> d(1);
  d.poison();
  vector_add(d.data(), d.data(), d.data(), 0);
  CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(course::is_poison_f32(d.download()[0]));
}

TEST_CASE("vector_add rejects bad arguments before launching anything", "[day01][vector_add][args][quick]") {
  DeviceBuffer<float> a(8), c(8);
  a.fill_zero();
  c.poison();
  COURSE_CHECK_INVALID_ARGUMENT("a", vector_add(nullptr, a.data(), c.data(), 8));
  COURSE_CHECK_INVALID_ARGUMENT("b", vector_add(a.data(), nullptr, c.data(), 8));
  COURSE_CHECK_INVALID_ARGUMENT("c", vector_add(a.data(), a.data(), nullptr, 8));
  COURSE_CHECK_INVALID_ARGUMENT("n", vector_add(a.data(), a.data(), c.data(), -1));
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float x : c.download()) CHECK(course::is_poison_f32(x));  // nothing was written
}
