// Tests for day01/04_softmax: softmax_safe and softmax_online over the row-length grid of
// exercise 03, logits large enough to overflow exp() (±100, ±1e3, ±1e4), rows of equal values,
// and the in-place call (y aliases x).
#include <functional>
#include <string>
#include <vector>

#include "04_softmax.h"
#include "gpu_test.h"
#include "reference.h"

using course::DeviceBuffer;

namespace {

struct Shape {
  int rows, cols;
};

struct NamedLauncher {
  const char* name;
  std::function<void(const float*, float*, int, int)> fn;
};

const std::vector<NamedLauncher>& launchers() {
  static const std::vector<NamedLauncher> all{
      {"softmax_safe", [](const float* x, float* y, int r, int c) { softmax_safe(x, y, r, c); }},
      {"softmax_online", [](const float* x, float* y, int r, int c) { softmax_online(x, y, r, c); }},
  };
  return all;
}

// Runs both launchers on x (out of place, or in place when in_place is set).
void check_softmax(const std::vector<float>& x, const Shape& s, bool in_place = false) {
  const auto ref = course::ref::softmax_rows(x, s.rows, s.cols);
  const course::Dims dims{{"r", s.rows}, {"c", s.cols}};
  for (const auto& l : launchers()) {
    INFO("launcher: " << l.name << (in_place ? " (in place: y == x)" : ""));
    auto d_x = course::to_device(x);
    if (in_place) {
      l.fn(d_x.data(), d_x.data(), s.rows, s.cols);
      COURSE_CHECK_OUTPUT(d_x, ref, dims, course::Tolerance::fp32());
    } else {
      DeviceBuffer<float> d_y(x.size());
      d_y.poison();
      l.fn(d_x.data(), d_y.data(), s.rows, s.cols);
      COURSE_CHECK_OUTPUT(d_y, ref, dims, course::Tolerance::fp32());
    }
  }
}

// normal(0, scale) logits for every shape, each with its own seed.
void check_grid(const std::string& test, const std::vector<Shape>& shapes, float scale = 1.f, bool in_place = false) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const uint64_t seed = course::case_seed(test, int64_t(i));
    INFO("rows = " << s.rows << ", cols = " << s.cols << ", logits ~ normal(0, " << scale << "), seed = " << seed
                   << " (set COURSE_SEED to vary)");
    check_softmax(course::random_normal(size_t(s.rows) * s.cols, seed, 0.f, scale), s, in_place);
  }
}

}  // namespace

TEST_CASE("softmax: a few small shapes", "[day01][softmax][quick]") {
  check_grid("softmax_quick", {{1, 1}, {3, 33}, {2, 300}});
  check_grid("softmax_quick_large_logits", {{2, 40}}, 100.f);
}

TEST_CASE("softmax matches the reference over a shape grid", "[day01][softmax]") {
  // Row lengths below, at and above a warp and the 256-thread block, up to over 10 000.
  const std::vector<int> cols{1, 5, 31, 32, 33, 100, 255, 256, 257, 1000, 4097, 12345};
  std::vector<Shape> shapes;
  for (int c : cols)
    for (int r : {1, 7, 130}) shapes.push_back({r, c});
  check_grid("softmax_grid", shapes);
}

TEST_CASE("softmax: many rows", "[day01][softmax][large]") {
  check_grid("softmax_large", {{20000, 33}, {2048, 1000}, {200, 12345}});
}

TEST_CASE("softmax stays finite for large logits", "[day01][softmax]") {
  // exp() overflows fp32 above ~88.7: logits of ±100 already break a softmax that does not
  // subtract the row max, ±1e3 and ±1e4 make almost every row one-hot.
  const std::vector<Shape> shapes{{7, 33}, {4, 1000}, {3, 4097}};
  for (float scale : {100.f, 1e3f, 1e4f}) {
    check_grid("softmax_magnitude_" + std::to_string(int(scale)), shapes, scale);
  }
}

TEST_CASE("softmax of a row of equal values is uniform", "[day01][softmax]") {
  // exp(x - m) = 1 for every column: 1/cols everywhere. At ±1e4 the unshifted exp() is inf or 0.
  for (float value : {0.f, 3.5f, 1e4f, -1e4f}) {
    for (const Shape s : {Shape{2, 1}, Shape{3, 77}, Shape{2, 1000}}) {
      INFO("every logit = " << value << ", rows = " << s.rows << ", cols = " << s.cols);
      check_softmax(std::vector<float>(size_t(s.rows) * s.cols, value), s);
    }
  }
}

TEST_CASE("softmax works in place (y aliases x)", "[day01][softmax][quick]") {
  check_grid("softmax_in_place", {{130, 33}, {7, 1000}, {3, 12345}}, 1.f, /*in_place=*/true);
}

TEST_CASE("softmax rejects bad arguments before launching anything", "[day01][softmax][args][quick]") {
  DeviceBuffer<float> x(16), y(16);
  x.fill_zero();
  y.poison();
  for (const auto& l : launchers()) {
    INFO("launcher: " << l.name);
    COURSE_CHECK_INVALID_ARGUMENT("x", l.fn(nullptr, y.data(), 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("y", l.fn(x.data(), nullptr, 4, 4));
    COURSE_CHECK_INVALID_ARGUMENT("rows", l.fn(x.data(), y.data(), -1, 4));
    COURSE_CHECK_INVALID_ARGUMENT("cols", l.fn(x.data(), y.data(), 4, 0));
    l.fn(x.data(), y.data(), 0, 4);  // rows = 0: valid, nothing to do
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float v : y.download()) CHECK(course::is_poison_f32(v));  // nothing was written
}
