// Argument validation for launchers.
//
// Every launcher checks its arguments on the host before it touches the GPU. A bad call then
// fails at the call site with a message naming the field, instead of surfacing later as
// "an illegal memory access was encountered" from an unrelated CUDA call.
#pragma once
#include <stdexcept>
#include <string>

namespace course {

[[noreturn]] inline void throw_invalid_argument(const char* launcher, const char* field, const std::string& why) {
  throw std::invalid_argument(std::string(launcher) + ": argument '" + field + "' " + why);
}

inline void require(bool ok, const char* launcher, const char* field, const std::string& why) {
  if (!ok) throw_invalid_argument(launcher, field, why);
}

inline void require_not_null(const void* p, const char* launcher, const char* field) {
  require(p != nullptr, launcher, field, "must not be null");
}

inline void require_non_negative(long long v, const char* launcher, const char* field) {
  require(v >= 0, launcher, field, "must be >= 0 (got " + std::to_string(v) + ")");
}

inline void require_positive(long long v, const char* launcher, const char* field) {
  require(v > 0, launcher, field, "must be > 0 (got " + std::to_string(v) + ")");
}

}  // namespace course
