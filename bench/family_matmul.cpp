// Family "matmul": C = A·Bᵀ in fp32 (day 01 · 02_matmul, its naive and tiled launchers).
// Compute-bound at large sizes: shown against the cuBLAS fp32 GEMM roof.
#include <array>
#include <string>

#include "bench_util.h"
#include "reference.h"

#ifdef BENCH_HAVE_02_matmul
#include "02_matmul.h"
#endif

namespace bench {
namespace {

using MatmulFn = void (*)(const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t);

Shape matmul_shape(int m, int n, int k) {
  Shape s;
  s.family = "matmul";
  s.m = m;
  s.nn = n;
  s.k = k;
  s.name = "m" + std::to_string(m) + "_n" + std::to_string(n) + "_k" + std::to_string(k);
  s.csv = {{"m", std::to_string(m)}, {"n", std::to_string(n)}, {"k", std::to_string(k)}};
  return s;
}

double matmul_bytes(const Shape& s) {
  return sizeof(float) * (double(s.m) * s.k + double(s.nn) * s.k + double(s.m) * s.nn);
}

FamilyDef matmul_family() {
  FamilyDef f;
  f.name = "matmul";
  f.title = "matmul C = A·Bᵀ (compute)";
  f.order = 200;
  f.compute_bound = true;
  f.shape_syntax = "matmul:m=512,n=512,k=64";
  // Two squares and the Q·Kᵀ shape of one 4k-token head at D = 128.
  f.grid = [] {
    std::vector<Shape> v;
    for (auto mnk : {std::array<int, 3>{1024, 1024, 1024}, std::array<int, 3>{4096, 4096, 4096},
                     std::array<int, 3>{4096, 4096, 128}})
      v.push_back(matmul_shape(mnk[0], mnk[1], mnk[2]));
    return v;
  };
  f.parse = [](ShapeSpec& spec) {
    return matmul_shape(int(spec.take("m", 1024)), int(spec.take("n", 1024)), int(spec.take("k", 1024)));
  };
  f.validation_key = [](const Shape& s) { return "k" + std::to_string(s.k); };
  f.flops = [](const Shape& s) { return 2.0 * s.m * s.nn * s.k; };
  f.bytes = matmul_bytes;
  return f;
}

[[maybe_unused]] Kernel matmul_kernel(std::string exercise, std::string launcher, int order, MatmulFn fn) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "matmul";
  k.order = order;
  k.validate = [fn](const Shape& s, Check& c, cudaStream_t st) {
    const int m = 67, n = 129, kk = s.k;  // odd tile remainders, the benchmark's reduction length
    const auto a = course::random_normal(size_t(m) * kk, seed_for("matmul", 0));
    const auto b = course::random_normal(size_t(n) * kk, seed_for("matmul", 1));
    course::DeviceBuffer<float> da(a), db(b);
    auto dc = output_buffer(size_t(m) * n);
    inputs_ready();
    fn(da.data(), db.data(), dc.data(), m, n, kk, st);
    merge(c,
          course::check_device_output(dc, course::ref::matmul_abt(a, b, m, n, kk), course::Dims{{"r", m}, {"c", n}},
                                      course::Tolerance::fp32_sum(kk)),
          "m=67 n=129 k=" + std::to_string(kk));
  };
  k.device_bytes = matmul_bytes;
  k.time = [fn](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    auto a = filled(int64_t(s.m) * s.k, 1, st), b = filled(int64_t(s.nn) * s.k, 2, st);
    auto c = filled(int64_t(s.m) * s.nn, 3, st);
    return timed([&] { fn(a.data(), b.data(), c.data(), s.m, s.nn, s.k, st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(matmul_family());
#ifdef BENCH_HAVE_02_matmul
  add_kernel(matmul_kernel("02_matmul", "matmul_naive", 10,
                           [](const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
                             matmul_naive(a, b, c, m, n, k, s);
                           }));
  add_kernel(matmul_kernel("02_matmul", "matmul_tiled", 20,
                           [](const float* a, const float* b, float* c, int m, int n, int k, cudaStream_t s) {
                             matmul_tiled(a, b, c, m, n, k, s);
                           }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
