// Error checking for the CUDA runtime API.
//
// CUDA calls report errors through return codes, and kernel launches report nothing at all
// until you ask. CUDA_CHECK turns a failing call into an exception that names the call,
// the file:line and CUDA's own description; CUDA_CHECK_LAUNCH() asks right after a launch
// (bad grid size, too much shared memory, no kernel image for this GPU).
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace course {

inline void cuda_check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return;
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace course

#define CUDA_CHECK(expr) ::course::cuda_check((expr), #expr, __FILE__, __LINE__)
// Launch errors are only visible through cudaGetLastError(); errors *during* execution
// (illegal address, ...) show up at the next synchronising call, which CUDA_CHECK also covers.
#define CUDA_CHECK_LAUNCH() ::course::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
