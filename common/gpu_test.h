// The test harness for GPU exercises: everything a test needs besides its own shapes.
//
//   auto d_x = course::to_device(x);                  // upload inputs
//   course::DeviceBuffer<float> d_out(n);             // output with guard regions...
//   d_out.poison();                                   // ...and NaN poison
//   launcher(d_x.data(), ..., d_out.data(), ...);
//   COURSE_CHECK_OUTPUT(d_out, ref, dims, course::Tolerance::fp32());
//   COURSE_CHECK_INVALID_ARGUMENT("n", launcher(..., -1));   // must throw, naming 'n'
//
// COURSE_CHECK_OUTPUT synchronises, surfaces any CUDA error as a test failure, reads the output
// and its guards back and runs compare(); on failure the whole report goes into the log.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "check_invalid_argument.h"
#include "compare.h"
#include "cuda_check.h"
#include "device_buffer.h"
#include "device_compare.h"
#include "fp16_host.h"
#include "random.h"

namespace course {

template <class T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  return DeviceBuffer<T>(host);
}

// Sets COURSE_SMEM_LIMIT for one scope (common/smem_limit.h), so a launcher picks the tile
// configuration a GPU with less shared memory would, and restores the old value afterwards.
class ScopedSmemLimit {
 public:
  explicit ScopedSmemLimit(const char* bytes) {
    if (const char* old = std::getenv("COURSE_SMEM_LIMIT")) old_ = old, had_ = true;
    setenv("COURSE_SMEM_LIMIT", bytes, 1);
  }
  ~ScopedSmemLimit() {
    if (had_)
      setenv("COURSE_SMEM_LIMIT", old_.c_str(), 1);
    else
      unsetenv("COURSE_SMEM_LIMIT");
  }
  ScopedSmemLimit(const ScopedSmemLimit&) = delete;
  ScopedSmemLimit& operator=(const ScopedSmemLimit&) = delete;

 private:
  std::string old_;
  bool had_ = false;
};

}  // namespace course

// Variadic so that brace-initialised arguments (course::Dims{{"i", n}}) pass through intact.
// Arguments: (device buffer, reference vector, Dims, Tolerance).
#define COURSE_CHECK_OUTPUT(...)                                                          \
  do {                                                                                    \
    const ::course::CompareResult course_r_ = ::course::check_device_output(__VA_ARGS__); \
    if (!course_r_.ok)                                                                    \
      FAIL_CHECK(course_r_.report);                                                       \
    else                                                                                  \
      SUCCEED("output matches the reference");                                            \
  } while (0)
