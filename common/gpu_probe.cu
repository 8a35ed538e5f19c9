#include <cuda_runtime.h>

#include <string>

#include "gpu_probe.h"

namespace {
__global__ void probe_kernel(int* out) { *out = 42; }
}  // namespace

namespace course {

GpuStatus probe_gpu(int required_sm, std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    *why = std::string("no usable CUDA device (") +
           (err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0") + ")";
    return GpuStatus::kSkip;
  }
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, dev);
  const int sm = prop.major * 10 + prop.minor;
  if (sm < required_sm) {
    *why = "this exercise needs sm_" + std::to_string(required_sm) + " or newer; " + prop.name +
           " is sm_" + std::to_string(sm);
    return GpuStatus::kSkip;
  }
  // Launch one trivial kernel: a build without code for this GPU fails here with a clear
  // message instead of in every test.
  int* d = nullptr;
  err = cudaMalloc(&d, sizeof(int));
  if (err == cudaSuccess) {
    probe_kernel<<<1, 1>>>(d);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    cudaFree(d);
  }
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx ||
      err == cudaErrorUnsupportedPtxVersion) {
    *why = std::string("this build has no code for ") + prop.name + " (sm_" + std::to_string(sm) +
           "): rebuild with `make clean && make CUDA_ARCH=" + std::to_string(sm) + "` (" +
           cudaGetErrorString(err) + ")";
    return GpuStatus::kBroken;
  }
  if (err != cudaSuccess) {
    *why = std::string("the GPU did not run a trivial kernel: ") + cudaGetErrorString(err);
    return GpuStatus::kBroken;
  }
  *why = std::string(prop.name) + " (sm_" + std::to_string(sm) + ")";
  return GpuStatus::kUsable;
}

}  // namespace course
