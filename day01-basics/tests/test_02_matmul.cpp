// Tests for day01/02_matmul: C = A·Bᵀ through both launchers (naive and tiled) over a shape
// grid with every size in every dimension — 1, below / at / above the 32-wide tile, 67, 1000 —
// and large problems whose many blocks and many K steps expose shared-memory races.
#include <functional>
#include <string>
#include <vector>

#include "02_matmul.h"
#include "gpu_test.h"
#include "reference.h"

using course::DeviceBuffer;

namespace {

struct Shape {
  int m, n, k;
};

using Launcher = std::function<void(const float*, const float*, float*, int, int, int)>;

struct NamedLauncher {
  const char* name;
  Launcher fn;
};

const std::vector<NamedLauncher>& launchers() {
  static const std::vector<NamedLauncher> all{
      {"matmul_naive",
       [](const float* a, const float* b, float* c, int m, int n, int k) { matmul_naive(a, b, c, m, n, k); }},
      {"matmul_tiled",
       [](const float* a, const float* b, float* c, int m, int n, int k) { matmul_tiled(a, b, c, m, n, k); }},
  };
  return all;
}

// Runs every launcher on one shape with fresh seeded inputs and a NaN-poisoned C.
void check_shape(const std::string& test, int index, const Shape& s) {
  const uint64_t seed = course::case_seed(test, index);
  INFO("M = " << s.m << ", N = " << s.n << ", K = " << s.k << ", seed = " << seed << " (set COURSE_SEED to vary)");
  const auto a = course::random_normal(size_t(s.m) * s.k, seed);
  const auto b = course::random_normal(size_t(s.n) * s.k, seed + 1);
  const auto ref = course::ref::matmul_abt(a, b, s.m, s.n, s.k);
  auto d_a = course::to_device(a), d_b = course::to_device(b);
  for (const auto& l : launchers()) {
    INFO("launcher: " << l.name);
    DeviceBuffer<float> d_c(size_t(s.m) * s.n);
    d_c.poison();
    l.fn(d_a.data(), d_b.data(), d_c.data(), s.m, s.n, s.k);
    COURSE_CHECK_OUTPUT(d_c, ref, course::Dims{{"i", s.m}, {"j", s.n}}, course::Tolerance::fp32_sum(s.k));
  }
}

}  // namespace

TEST_CASE("matmul: a few small shapes, including a partial tile", "[day01][matmul][quick]") {
  const std::vector<Shape> shapes{{1, 1, 1}, {32, 32, 32}, {33, 31, 67}, {67, 33, 7}};
  for (size_t i = 0; i < shapes.size(); ++i) check_shape("matmul_quick", int(i), shapes[i]);
}

TEST_CASE("matmul: every small size in every dimension", "[day01][matmul]") {
  // Each of M, N, K runs through 1, 7 (below a warp), 31, 32, 33 (around the tile), 67 (two
  // tiles and a bit), in combinations that put different sizes side by side.
  const std::vector<int> sizes{1, 7, 31, 32, 33, 67};
  std::vector<Shape> shapes;
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t j = 0; j < sizes.size(); ++j)
      shapes.push_back({sizes[i], sizes[j], sizes[(i + 2 * j + 1) % sizes.size()]});
  for (size_t i = 0; i < shapes.size(); ++i) check_shape("matmul_small", int(i), shapes[i]);
}

TEST_CASE("matmul: 1000-wide and long-K shapes", "[day01][matmul]") {
  const std::vector<Shape> shapes{{1000, 67, 33},  {67, 1000, 7},   {31, 33, 1000},  {1000, 1000, 67},
                                  {1, 1000, 1000}, {1000, 1, 4095}, {100, 200, 4096}};
  for (size_t i = 0; i < shapes.size(); ++i) check_shape("matmul_medium", int(i), shapes[i]);
}

TEST_CASE("matmul: large problems (many blocks, many K steps)", "[day01][matmul][large]") {
  // 2048 blocks of 32×32 outputs with 16 K steps, then 128 K steps: a missing barrier in the
  // tiled kernel shows up here even when the small shapes happen to pass.
  const std::vector<Shape> shapes{{1024, 2048, 512}, {256, 512, 4096}, {1000, 1000, 1000}};
  for (size_t i = 0; i < shapes.size(); ++i) check_shape("matmul_large", int(i), shapes[i]);
}

TEST_CASE("matmul: K = 0 gives zeros, M = 0 or N = 0 writes nothing", "[day01][matmul]") {
  DeviceBuffer<float> a(1), b(1);
  a.fill_zero();
  b.fill_zero();
  for (const auto& l : launchers()) {
    INFO("launcher: " << l.name);
    DeviceBuffer<float> c(6);
    c.poison();
    l.fn(a.data(), b.data(), c.data(), 2, 3, 0);
    COURSE_CHECK_OUTPUT(c, std::vector<float>(6, 0.f), course::Dims{{"i", 2}, {"j", 3}}, course::Tolerance::fp32());
    DeviceBuffer<float> untouched(4);
    untouched.poison();
    l.fn(a.data(), b.data(), untouched.data(), 0, 4, 5);
    l.fn(a.data(), b.data(), untouched.data(), 4, 0, 5);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (float x : untouched.download()) CHECK(course::is_poison_f32(x));
    CHECK(untouched.guard_damage().empty());
  }
}

TEST_CASE("matmul rejects bad arguments before launching anything", "[day01][matmul][args][quick]") {
  DeviceBuffer<float> a(16), c(16);
  a.fill_zero();
  c.poison();
  for (const auto& l : launchers()) {
    INFO("launcher: " << l.name);
    COURSE_CHECK_INVALID_ARGUMENT("a", l.fn(nullptr, a.data(), c.data(), 4, 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("b", l.fn(a.data(), nullptr, c.data(), 4, 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("c", l.fn(a.data(), a.data(), nullptr, 4, 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("m", l.fn(a.data(), a.data(), c.data(), -1, 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("n", l.fn(a.data(), a.data(), c.data(), 4, -1, 4));
    COURSE_CHECK_INVALID_ARGUMENT("k", l.fn(a.data(), a.data(), c.data(), 4, 4, -1));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float x : c.download()) CHECK(course::is_poison_f32(x));  // nothing was written
}
