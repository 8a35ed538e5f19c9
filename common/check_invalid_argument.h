// COURSE_CHECK_INVALID_ARGUMENT: a call must throw std::invalid_argument whose message names the
// field, before anything else happens. Host-only (no CUDA), so the CPU exercises' tests share it
// with the GPU harness (gpu_test.h includes it).
//
//   COURSE_CHECK_INVALID_ARGUMENT("n", vector_add(a, b, c, -1));
#pragma once
#include <exception>
#include <stdexcept>
#include <string>

#include "catch_compat.h"

namespace course {

// Calls fn() and reports whether it threw std::invalid_argument whose message names `field`
// (quoted: 'field'). Returns "" on success, else what went wrong.
template <class Fn>
std::string invalid_argument_problem(Fn&& fn, const std::string& field) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    if (msg.find("'" + field + "'") == std::string::npos)
      return "threw std::invalid_argument, but the message does not name '" + field + "': " + msg;
    return "";
  } catch (const std::exception& e) {
    return std::string("expected std::invalid_argument naming '") + field + "', got another exception: " + e.what();
  }
  return "expected std::invalid_argument naming '" + field + "', but the call returned normally";
}

}  // namespace course

#define COURSE_CHECK_INVALID_ARGUMENT(field, ...)                                                  \
  do {                                                                                             \
    const std::string course_p_ = ::course::invalid_argument_problem([&] { __VA_ARGS__; }, field); \
    if (!course_p_.empty())                                                                        \
      FAIL_CHECK(course_p_);                                                                       \
    else                                                                                           \
      SUCCEED("rejected with std::invalid_argument naming " << field);                             \
  } while (0)
