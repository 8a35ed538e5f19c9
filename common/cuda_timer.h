// Times GPU work with CUDA events. Kernel launches return before the kernel runs, so a host
// clock around a launch measures the launch, not the kernel; events are recorded into the
// stream and timestamped by the GPU itself.
#pragma once
#include <cuda_runtime.h>

#include "cuda_check.h"

namespace course {

class CudaTimer {
 public:
  CudaTimer() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaTimer(const CudaTimer&) = delete;
  CudaTimer& operator=(const CudaTimer&) = delete;

  void start(cudaStream_t s = 0) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  void stop(cudaStream_t s = 0) { CUDA_CHECK(cudaEventRecord(stop_, s)); }
  // Waits for the stop event, then returns the milliseconds between the two events.
  float elapsed_ms() {
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

}  // namespace course
