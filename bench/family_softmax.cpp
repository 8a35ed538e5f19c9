// Family "softmax": row softmax (day 01 · 04_softmax, its three-pass "safe" and its online
// launcher). Bandwidth-bound: x read, y written; the online one saves a pass over x.
#include <string>

#include "bench_util.h"
#include "reference.h"

#ifdef BENCH_HAVE_04_softmax
#include "04_softmax.h"
#endif

namespace bench {
namespace {

using SoftmaxFn = void (*)(const float* x, float* y, int rows, int cols, cudaStream_t);

double softmax_bytes(const Shape& s) { return 2.0 * sizeof(float) * double(s.rows) * s.cols; }

FamilyDef softmax_family() {
  FamilyDef f;
  f.name = "softmax";
  f.title = "row softmax (bandwidth)";
  f.order = 400;
  f.shape_syntax = "softmax:rows=4096,cols=1000";
  f.grid = [] { return row_grid("softmax"); };
  f.parse = [](ShapeSpec& spec) {
    return row_shape("softmax", int(spec.take("rows", 1024)), int(spec.take("cols", 1024)));
  };
  f.validation_key = [](const Shape& s) { return "c" + std::to_string(s.cols); };
  f.flops = [](const Shape&) { return 0.0; };
  f.bytes = softmax_bytes;
  return f;
}

[[maybe_unused]] Kernel softmax_kernel(std::string exercise, std::string launcher, int order, SoftmaxFn fn) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "softmax";
  k.order = order;
  k.validate = [fn](const Shape& s, Check& c, cudaStream_t st) {
    const int rows = 7, cols = s.cols;  // the benchmark's row length: where row kernels break
    const auto x = course::random_normal(size_t(rows) * cols, seed_for("rows", cols), 0.f, 3.f);
    course::DeviceBuffer<float> dx(x);
    auto dy = output_buffer(x.size());
    inputs_ready();
    fn(dx.data(), dy.data(), rows, cols, st);
    merge(c,
          course::check_device_output(dy, course::ref::softmax_rows(x, rows, cols),
                                      course::Dims{{"r", rows}, {"c", cols}}),
          "rows=7 cols=" + std::to_string(cols));
  };
  k.device_bytes = softmax_bytes;
  k.time = [fn](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    auto x = filled(int64_t(s.rows) * s.cols, 1, st), y = filled(int64_t(s.rows) * s.cols, 2, st);
    return timed([&] { fn(x.data(), y.data(), s.rows, s.cols, st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(softmax_family());
#ifdef BENCH_HAVE_04_softmax
  add_kernel(softmax_kernel(
      "04_softmax", "softmax_safe", 10,
      [](const float* x, float* y, int rows, int cols, cudaStream_t s) { softmax_safe(x, y, rows, cols, s); }));
  add_kernel(softmax_kernel(
      "04_softmax", "softmax_online", 20,
      [](const float* x, float* y, int rows, int cols, cudaStream_t s) { softmax_online(x, y, rows, cols, s); }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
