#include <cuda_runtime.h>

#include <string>

#include "gpu_probe.h"

namespace {
__global__ void probe_kernel(int* out) { *out = 42; }
}  // namespace

namespace course {

namespace {

// "13.0" from 13000.
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why no device is usable, in the learner's terms. The runtime reports a machine with no NVIDIA
// driver at all as "CUDA driver version is insufficient", which sends people off to update a
// driver they do not have; cudaDriverGetVersion tells the two apart (0 = no driver installed).
std::string no_device_reason(cudaError_t err) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (driver == 0) { return "no NVIDIA driver or GPU on this machine"; }
  if (err == cudaErrorInsufficientDriver) {
    return "the NVIDIA driver supports CUDA " + cuda_version(driver) +
           ", older than this "
           "build's CUDA " +
           cuda_version(runtime) +
           " runtime: update the driver or build with "
           "an older toolkit";
  }
  if (err == cudaErrorNoDevice || err == cudaSuccess) {
    return "an NVIDIA driver is installed but sees no GPU (a container started without "
           "--gpus all? CUDA_VISIBLE_DEVICES empty?)";
  }
  return std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
}

}  // namespace

GpuStatus probe_gpu(int required_sm, std::string* why) { return probe_gpu(required_sm, 0, why); }

GpuStatus probe_gpu(int required_sm, int max_sm, std::string* why) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    *why = no_device_reason(err);
    return GpuStatus::kSkip;
  }
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, dev);
  const int sm = prop.major * 10 + prop.minor;
  if (sm < required_sm) {
    *why = "this exercise needs sm_" + std::to_string(required_sm) + " or newer; " + prop.name + " is sm_" +
           std::to_string(sm);
    return GpuStatus::kSkip;
  }
  if (max_sm > 0 && sm > max_sm) {
    *why = "this exercise uses instructions that exist only on sm_" + std::to_string(max_sm) + " (built for sm_" +
           std::to_string(max_sm) + "a); " + prop.name + " is sm_" + std::to_string(sm);
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
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx || err == cudaErrorUnsupportedPtxVersion) {
    *why = std::string("this build has no code for ") + prop.name + " (sm_" + std::to_string(sm) +
           "): rebuild with `make clean && make CUDA_ARCH=" + std::to_string(sm) + "` (" + cudaGetErrorString(err) +
           ")";
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
