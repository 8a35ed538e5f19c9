// Family "reduce": per-row max and sum (day 01 · 03_reduction). Bandwidth-bound: the matrix is
// read once, two floats per row are written.
#include <string>

#include "bench_util.h"
#include "reference.h"

#ifdef BENCH_HAVE_03_reduction
#include "03_reduction.h"
#endif

namespace bench {
namespace {

using RowReduceFn = void (*)(const float* x, float* row_max, float* row_sum, int rows, int cols, cudaStream_t);

double reduce_bytes(const Shape& s) {
  return sizeof(float) * (double(s.rows) * s.cols + 2.0 * s.rows);  // x; max, sum
}

FamilyDef reduce_family() {
  FamilyDef f;
  f.name = "reduce";
  f.title = "row reduction: max and sum (bandwidth)";
  f.order = 300;
  f.shape_syntax = "reduce:rows=4096,cols=1000";
  f.grid = [] { return row_grid("reduce"); };
  f.parse = [](ShapeSpec& spec) {
    return row_shape("reduce", int(spec.take("rows", 1024)), int(spec.take("cols", 1024)));
  };
  f.validation_key = [](const Shape& s) { return "c" + std::to_string(s.cols); };
  f.flops = [](const Shape&) { return 0.0; };
  f.bytes = reduce_bytes;
  return f;
}

[[maybe_unused]] Kernel reduce_kernel(std::string exercise, std::string launcher, int order, RowReduceFn fn) {
  Kernel k;
  k.exercise = std::move(exercise);
  k.launcher = std::move(launcher);
  k.family = "reduce";
  k.order = order;
  k.validate = [fn](const Shape& s, Check& c, cudaStream_t st) {
    const int rows = 7, cols = s.cols;  // the benchmark's row length: where row kernels break
    const auto x = course::random_normal(size_t(rows) * cols, seed_for("rows", cols), 0.f, 3.f);
    course::DeviceBuffer<float> dx(x);
    auto dmax = output_buffer(rows), dsum = output_buffer(rows);
    inputs_ready();
    fn(dx.data(), dmax.data(), dsum.data(), rows, cols, st);
    const std::string what = "rows=7 cols=" + std::to_string(cols);
    merge(c, course::check_device_output(dmax, course::ref::row_max(x, rows, cols), course::Dims{{"r", rows}}),
          what + " row_max");
    merge(c,
          course::check_device_output(dsum, course::ref::row_sum(x, rows, cols), course::Dims{{"r", rows}},
                                      course::Tolerance::fp32_sum(cols)),
          what + " row_sum");
  };
  k.device_bytes = reduce_bytes;
  k.time = [fn](const Shape& s, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
    auto x = filled(int64_t(s.rows) * s.cols, 1, st);
    auto mx = filled(s.rows, 2, st), sm = filled(s.rows, 3, st);
    return timed([&] { fn(x.data(), mx.data(), sm.data(), s.rows, s.cols, st); }, st, cfg, fl);
  };
  return k;
}

bool register_all() {
  add_family(reduce_family());
#ifdef BENCH_HAVE_03_reduction
  add_kernel(reduce_kernel("03_reduction", "row_reduce", 10,
                           [](const float* x, float* mx, float* sm, int rows, int cols, cudaStream_t s) {
                             row_reduce(x, mx, sm, rows, cols, s);
                           }));
#endif
  return true;
}
const bool registered = register_all();

}  // namespace
}  // namespace bench
