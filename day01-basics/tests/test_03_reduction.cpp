// Tests for day01/03_reduction: row max and row sum over a grid of row lengths from 1 to over
// 10 000 (below, at and above one warp; not multiples of 32 or of the 256-thread block), row
// counts from 1 to tens of thousands, and rows that are entirely negative (max identity -inf).
#include <cmath>
#include <string>
#include <vector>

#include "03_reduction.h"
#include "gpu_test.h"
#include "reference.h"

using course::DeviceBuffer;

namespace {

struct Shape {
  int rows, cols;
};

void check_rows(const std::vector<float>& x, const Shape& s, const std::string& what) {
  auto d_x = course::to_device(x);
  DeviceBuffer<float> d_max(size_t(s.rows)), d_sum(size_t(s.rows));
  d_max.poison();
  d_sum.poison();
  row_reduce(d_x.data(), d_max.data(), d_sum.data(), s.rows, s.cols);
  const course::Dims dims{{"r", s.rows}};
  {
    INFO("checking row_max (" << what << ")");
    COURSE_CHECK_OUTPUT(d_max, course::ref::row_max(x, s.rows, s.cols), dims, course::Tolerance::fp32());
  }
  {
    INFO("checking row_sum (" << what << ")");
    COURSE_CHECK_OUTPUT(d_sum, course::ref::row_sum(x, s.rows, s.cols), dims, course::Tolerance::fp32_sum(s.cols));
  }
}

void check_grid(const std::string& test, const std::vector<Shape>& shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const uint64_t seed = course::case_seed(test, int64_t(i));
    INFO("rows = " << s.rows << ", cols = " << s.cols << ", seed = " << seed << " (set COURSE_SEED to vary)");
    check_rows(course::random_normal(size_t(s.rows) * s.cols, seed), s, "normal(0, 1) inputs");
  }
}

// Every column count of the grid, each with a few row counts.
std::vector<Shape> shape_grid() {
  const std::vector<int> cols{1, 5, 31, 32, 33, 100, 255, 256, 257, 1000, 4097, 12345};
  const std::vector<int> rows{1, 7, 130};
  std::vector<Shape> shapes;
  for (int c : cols)
    for (int r : rows) shapes.push_back({r, c});
  return shapes;
}

}  // namespace

TEST_CASE("row_reduce: a few small shapes", "[day01][reduction][quick]") {
  check_grid("reduction_quick", {{1, 1}, {3, 33}, {5, 300}});
}

TEST_CASE("row_reduce matches the reference over a shape grid", "[day01][reduction]") {
  check_grid("reduction_grid", shape_grid());
}

TEST_CASE("row_reduce: many rows (one block each)", "[day01][reduction][large]") {
  // Tens of thousands of blocks: timing-dependent bugs such as a missing barrier show up here.
  check_grid("reduction_large", {{20000, 33}, {50000, 5}, {4096, 1000}, {300, 12345}});
}

TEST_CASE("row_reduce: all-negative rows have a negative max", "[day01][reduction][quick]") {
  // Every value in [-6.5, -0.5]: a max that starts from 0 instead of -inf reports 0.
  for (const Shape s : {Shape{4, 1}, Shape{3, 33}, Shape{2, 1000}, Shape{64, 4097}}) {
    const uint64_t seed = course::case_seed("reduction_negative", s.cols);
    INFO("rows = " << s.rows << ", cols = " << s.cols << ", seed = " << seed);
    auto x = course::random_uniform(size_t(s.rows) * s.cols, seed, -6.5f, -0.5f);
    check_rows(x, s, "all values negative");
  }
}

TEST_CASE("row_reduce rejects bad arguments before launching anything", "[day01][reduction][args][quick]") {
  DeviceBuffer<float> x(16), out(4);
  x.fill_zero();
  out.poison();
  COURSE_CHECK_INVALID_ARGUMENT("x", row_reduce(nullptr, out.data(), out.data(), 4, 4));
  COURSE_CHECK_INVALID_ARGUMENT("row_max", row_reduce(x.data(), nullptr, out.data(), 4, 4));
  COURSE_CHECK_INVALID_ARGUMENT("row_sum", row_reduce(x.data(), out.data(), nullptr, 4, 4));
  COURSE_CHECK_INVALID_ARGUMENT("rows", row_reduce(x.data(), out.data(), out.data(), -1, 4));
  COURSE_CHECK_INVALID_ARGUMENT("cols", row_reduce(x.data(), out.data(), out.data(), 4, 0));
  row_reduce(x.data(), out.data(), out.data(), 0, 4);  // rows = 0: valid, nothing to do
  CUDA_CHECK(cudaDeviceSynchronize());
  for (float v : out.download()) CHECK(course::is_poison_f32(v));  // nothing was written
}
