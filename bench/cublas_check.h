// Error checking for cuBLAS calls, in the style of CUDA_CHECK (which cannot take a
// cublasStatus_t).
#pragma once
#include <cublas_v2.h>

#include <stdexcept>
#include <string>

#define CUBLAS_CHECK(expr)                                                                             \
  do {                                                                                                 \
    const cublasStatus_t bench_st_ = (expr);                                                           \
    if (bench_st_ != CUBLAS_STATUS_SUCCESS)                                                            \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + #expr + \
                               " failed: " + cublasGetStatusString(bench_st_));                        \
  } while (0)
