// Helpers every family file uses: timing inputs, checked outputs, folding compare() results.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"
#include "compare.h"
#include "device_buffer.h"
#include "device_compare.h"
#include "device_fill.h"
#include "random.h"
#include "timing.h"

namespace bench {

// Timing inputs: filled on the GPU with hashed uniform values in [-1, 1) (device_fill.h).
// Drawing gigabytes on the CPU would take longer than the benchmark, and timing does not
// depend on the values.
course::DeviceBuffer<float> filled(int64_t n, uint64_t seed, cudaStream_t st);

// An output for a check: NaN-poisoned with guard regions, so "never written" and "wrote out
// of bounds" are caught too.
course::DeviceBuffer<float> output_buffer(size_t n);

// Inputs and poison are written with cudaMemcpy from pageable memory, which may return before
// the data has landed; make sure it has before the kernel (on the bench's stream) reads it.
void inputs_ready();

// A seed per (what, i): the checks draw the same inputs in every run.
uint64_t seed_for(const std::string& what, int64_t i);

// Folds one compare() into the running verdict (the worst one wins).
void merge(Check& c, const course::CompareResult& r, const std::string& what);

// Row-wise families (reduce, softmax) share their shapes: "r<rows>_c<cols>". The grid is
// 256 MiB each: many short rows, square, few very long rows (a 32k-token score row).
Shape row_shape(const std::string& family, int rows, int cols);
std::vector<Shape> row_grid(const std::string& family);

// Warm-up, L2 flush, CUDA-event timing, median: what every family's Kernel::time ends with.
template <class Launch>
Measurement timed(Launch&& launch, cudaStream_t st, const TimingConfig& cfg, L2Flusher& fl) {
  return time_launch(std::forward<Launch>(launch), st, cfg, fl);
}

}  // namespace bench
