// Registry, day 01: the basics' launchers this binary was linked with.
//
// bench/CMakeLists.txt defines BENCH_HAVE_<id> only when the implementation library of
// exercise <id> exists (the exercise's files have landed), so this file compiles at every
// stage of the course's construction and in every learner/solution variant.
#include <vector>

#include "bench.h"

#include "launchers.h"

namespace bench {

std::vector<Kernel> day01_kernels() {
  std::vector<Kernel> ks;
  Kernel k;
#ifdef BENCH_HAVE_01_vector_add
  k = Kernel{};
  k.name = "vector_add";
  k.exercise = "01_vector_add";
  k.family = Family::kVector;
  k.vector = [](const float* a, const float* b, float* c, int64_t n, cudaStream_t s) {
    vector_add(a, b, c, n, s);
  };
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_02_matmul
  k = Kernel{};
  k.exercise = "02_matmul";
  k.family = Family::kMatmul;
  k.name = "matmul_naive";
  k.matmul = [](const float* a, const float* b, float* c, int m, int n, int kk, cudaStream_t s) {
    matmul_naive(a, b, c, m, n, kk, s);
  };
  ks.push_back(k);
  k.name = "matmul_tiled";
  k.matmul = [](const float* a, const float* b, float* c, int m, int n, int kk, cudaStream_t s) {
    matmul_tiled(a, b, c, m, n, kk, s);
  };
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_03_reduction
  k = Kernel{};
  k.name = "row_reduce";
  k.exercise = "03_reduction";
  k.family = Family::kRowReduce;
  k.row_reduce = [](const float* x, float* mx, float* sm, int rows, int cols, cudaStream_t s) {
    row_reduce(x, mx, sm, rows, cols, s);
  };
  ks.push_back(k);
#endif
#ifdef BENCH_HAVE_04_softmax
  k = Kernel{};
  k.exercise = "04_softmax";
  k.family = Family::kSoftmax;
  k.name = "softmax_safe";
  k.softmax = [](const float* x, float* y, int rows, int cols, cudaStream_t s) {
    softmax_safe(x, y, rows, cols, s);
  };
  ks.push_back(k);
  k.name = "softmax_online";
  k.softmax = [](const float* x, float* y, int rows, int cols, cudaStream_t s) {
    softmax_online(x, y, rows, cols, s);
  };
  ks.push_back(k);
#endif
  (void)k;
  return ks;
}

}  // namespace bench
