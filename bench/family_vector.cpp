// Family "vector": c = a + b over n floats (day 01 · 01_vector_add). Bandwidth-bound: 3 floats
// move per element and one add is done, so the copy roof is the only one that matters.
#include <string>

#include "bench_util.h"
#include "reference.h"

#ifdef BENCH_HAVE_01_vector_add
#include "01_vector_add.h"
#endif

namespace bench {
namespace {

using VectorFn = void (*)(const float* a, const float* b, float* c, int64_t n, cudaStream_t);

Shape vector_shape(int64_t n) {
  Shape s;
  s.family = "vector";
  s.n = n;
  s.name = "n" + std::to_string(n);
  s.csv["n"] = std::to_string(n);
  return s;
}

FamilyDef vector_family() {
  FamilyDef f;
  f.name = "vector";
  f.title = "vector add (bandwidth)";
  f.order = 100;
  f.shape_syntax = "vector:n=1000000";
  // 64 MiB and 1 GiB per operand: both far beyond L2, the second amortises the tail.
  f.grid = [] { return std::vector<Shape>{vector_shape(int64_t(1) << 24), vector_shape(int64_t(1) << 28)}; };
  f.parse = [](ShapeSpec& spec) { return vector_shape(spec.take("n", 1 << 20)); };
  f.validation_key = [](const Shape&) { return std::string(); };
  f.flops = [](const Shape&) { return 0.0; };
  f.bytes = [](const Shape& s) { return 3.0 * sizeof(float) * double(s.n); };  // a, b read; c written
  return f;
}

[[maybe_unused]] Kernel vector_kernel(std::string exercise, std::string launcher, int order, VectorFn fn) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "vector";
  k.order = order;
  k.validate = [fn](const Shape&, Check& c, cudaStream_t st) {
    const int64_t n = 100003;  // not a multiple of any block size
    const auto a = course::random_normal(n, seed_for("vector", 0));
    const auto b = course::random_normal(n, seed_for("vector", 1));
    course::DeviceBuffer<float> da(a), db(b);
    auto dc = output_buffer(n);
    inputs_ready();
    fn(da.data(), db.data(), dc.data(), n, st);
    merge(c, course::check_device_output(dc, course::ref::add(a, b), course::Dims{{"i", n}}), "n=100003");
  };
  k.device_bytes = [](const Shape& s) { return 3.0 * sizeof(float) * double(s.n); };
  k.time = [fn](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    auto a = filled(s.n, 1, st), b = filled(s.n, 2, st), c = filled(s.n, 3, st);
    return timed([&] { fn(a.data(), b.data(), c.data(), s.n, st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(vector_family());
#ifdef BENCH_HAVE_01_vector_add
  add_kernel(vector_kernel(
      "01_vector_add", "vector_add", 10,
      [](const float* a, const float* b, float* c, int64_t n, cudaStream_t s) { vector_add(a, b, c, n, s); }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
