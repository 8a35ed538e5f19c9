// The two roofs every number in the table is compared with, measured in the same run on the
// same GPU (datasheet peaks are rarely reachable, and clocks differ between boards):
//
//  * copy bandwidth: cudaMemcpy device-to-device of a buffer much larger than L2, counting
//    bytes read + bytes written. A memory-bound kernel that reads its inputs once and writes
//    its outputs once cannot beat this by much; "% of copy" is how close it gets.
//  * GEMM throughput: cuBLAS on a large square product. fp32 (SGEMM, default math mode, so
//    no TF32) is the roof for this course's fp32 kernels; fp16 inputs with fp32 accumulation
//    (tensor cores) is the roof for the fp16 kernels and shows what the fp32 ones leave behind.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>

#include "bench.h"
#include "cublas_check.h"
#include "device_buffer.h"
#include "device_fill.h"
#include "timing.h"

namespace bench {

namespace {

double copy_roof(cudaStream_t stream, const TimingConfig& cfg, L2Flusher& flusher) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  // 1 GiB each way (20x an H100's L2), less on a small card.
  const size_t bytes = std::min<size_t>(size_t(1) << 30, free_b / 4) & ~size_t(4095);
  course::DeviceBuffer<unsigned char> src(bytes), dst(bytes);
  CUDA_CHECK(cudaMemsetAsync(src.data(), 1, bytes, stream));
  const Measurement m =
      time_launch([&] { CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream)); },
                  stream, cfg, flusher);
  return 2.0 * double(bytes) / (m.median_ms * 1e-3) / 1e9;
}

double gemm_roof(bool fp16, cudaStream_t stream, const TimingConfig& cfg, L2Flusher& flusher) {
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, stream));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  // 8192³: large enough that tile quantisation and the launch are noise on any current GPU.
  const int n = 8192;
  const int64_t elems = int64_t(n) * n;
  Measurement m;
  try {
    if (fp16) {
      course::DeviceBuffer<uint16_t> a(elems), b(elems), c(elems);
      fill_uniform_half(a.data(), elems, 11, -1.f, 1.f, stream);  // random data: zeros run
      fill_uniform_half(b.data(), elems, 12, -1.f, 1.f, stream);  // faster (less switching)
      const float alpha = 1.f, beta = 0.f;
      m = time_launch(
          [&] {
            CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.data(), CUDA_R_16F, n, b.data(),
                                      CUDA_R_16F, n, &beta, c.data(), CUDA_R_16F, n, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
          },
          stream, cfg, flusher);
    } else {
      course::DeviceBuffer<float> a(elems), b(elems), c(elems);
      fill_uniform(a.data(), elems, 13, -1.f, 1.f, stream);
      fill_uniform(b.data(), elems, 14, -1.f, 1.f, stream);
      const float alpha = 1.f, beta = 0.f;
      m = time_launch(
          [&] {
            CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, a.data(), n, b.data(), n, &beta,
                                     c.data(), n));
          },
          stream, cfg, flusher);
    }
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
  CUBLAS_CHECK(cublasDestroy(h));
  return 2.0 * double(n) * n * n / (m.median_ms * 1e-3) / 1e12;
}

}  // namespace

Roofs measure_roofs(cudaStream_t stream, const TimingConfig& cfg) {
  L2Flusher flusher;
  Roofs r;
  r.copy_gbs = copy_roof(stream, cfg, flusher);
  r.sgemm_tflops = gemm_roof(false, stream, cfg, flusher);
  r.hgemm_tflops = gemm_roof(true, stream, cfg, flusher);
  return r;
}

}  // namespace bench
