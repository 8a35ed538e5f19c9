// See bench_util.h.
#include "bench_util.h"

#include <algorithm>

#include "random.h"

namespace bench {

course::DeviceBuffer<float> filled(int64_t n, uint64_t seed, cudaStream_t st) {
  course::DeviceBuffer<float> b(size_t(std::max<int64_t>(n, 1)));
  fill_uniform(b.data(), n, seed, -1.f, 1.f, st);
  return b;
}

course::DeviceBuffer<float> output_buffer(size_t n) {
  course::DeviceBuffer<float> b(n);
  b.poison();
  return b;
}

void inputs_ready() { CUDA_CHECK(cudaDeviceSynchronize()); }

uint64_t seed_for(const std::string& what, int64_t i) { return course::case_seed("bench/" + what, i); }

void merge(Check& c, const course::CompareResult& r, const std::string& what) {
  c.rel_l2 = std::max(c.rel_l2, r.rel_l2);
  if (!r.ok && c.status == Check::kOk) {
    c.status = Check::kFail;
    c.detail = what + ":\n" + r.report;
  }
}

Shape row_shape(const std::string& family, int rows, int cols) {
  Shape s;
  s.family = family;
  s.rows = rows;
  s.cols = cols;
  s.name = "r" + std::to_string(rows) + "_c" + std::to_string(cols);
  s.csv = {{"rows", std::to_string(rows)}, {"cols", std::to_string(cols)}};
  return s;
}

std::vector<Shape> row_grid(const std::string& family) {
  return {row_shape(family, 65536, 1024), row_shape(family, 8192, 8192), row_shape(family, 2048, 32768)};
}

}  // namespace bench
