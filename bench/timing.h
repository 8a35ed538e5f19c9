// Timing one launcher call: warm-up, then the median of timed runs with a cold L2 each time.
//
// Why each piece:
//  * CUDA events, recorded on the stream around the call, are timestamped by the GPU: a host
//    clock around an asynchronous launch would measure the launch, not the kernel.
//  * Warm-up runs absorb one-off costs (module loading, first-touch page mapping, clocks
//    ramping up) that are not the kernel's.
//  * The L2 is flushed before every timed run by writing a buffer larger than the L2: otherwise
//    run i+1 finds run i's inputs still cached and a memory-bound kernel looks faster than it
//    ever will inside a model, where other layers evict its data in between.
//  * The median, not the mean: one run disturbed by something else on the machine moves the
//    mean but not the median.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "bench.h"
#include "cuda_timer.h"
#include "device_buffer.h"

namespace bench {

class L2Flusher {
 public:
  L2Flusher();  // sizes the buffer at twice the device's L2 (at least 64 MiB)
  void flush(cudaStream_t stream);
  size_t bytes() const { return buf_.bytes(); }

 private:
  course::DeviceBuffer<unsigned char> buf_;
  int value_ = 0;
};

template <class Launch>
Measurement time_launch(Launch&& launch, cudaStream_t stream, const TimingConfig& cfg, L2Flusher& flusher) {
  course::CudaTimer timer;
  // The first warm-up call is timed too, only to decide how many runs fit the budget.
  if (cfg.flush_l2) flusher.flush(stream);
  timer.start(stream);
  launch();
  timer.stop(stream);
  const double first_ms = timer.elapsed_ms();
  for (int i = 1; i < cfg.warmup; ++i) launch();
  CUDA_CHECK(cudaStreamSynchronize(stream));

  int reps = cfg.reps;
  if (first_ms > 0.0 && first_ms * 1e-3 * reps > cfg.budget_s) {
    reps = std::max(5, int(cfg.budget_s / (first_ms * 1e-3)));
    reps = std::min(reps, cfg.reps);
  }
  std::vector<double> ms;
  ms.reserve(reps);
  for (int r = 0; r < reps; ++r) {
    if (cfg.flush_l2) flusher.flush(stream);  // outside the events: not part of the time
    timer.start(stream);
    launch();
    timer.stop(stream);
    ms.push_back(timer.elapsed_ms());
  }
  std::sort(ms.begin(), ms.end());
  Measurement m;
  m.reps = reps;
  m.min_ms = ms.front();
  m.median_ms = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
  return m;
}

}  // namespace bench
