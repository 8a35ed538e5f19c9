// Helpers shared by the model's CPU tests: a scratch directory, the message of an expected
// exception, and file I/O.
#pragma once
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "fp16_host.h"

namespace serving_test {

// A fresh directory under $TMPDIR (or /tmp), removed with its files when the object dies.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/serving_model_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path_ + "'";
    if (std::system(cmd.c_str()) != 0) {
      // best effort
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

enum class Thrown { kNone, kInvalidArgument, kRuntimeError, kOther };
struct Caught {
  Thrown kind = Thrown::kNone;
  std::string what;
};

// Runs f and returns what it threw (kind and message).
inline Caught error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return {Thrown::kInvalidArgument, e.what()};
  } catch (const std::runtime_error& e) { return {Thrown::kRuntimeError, e.what()}; } catch (const std::exception& e) {
    return {Thrown::kOther, e.what()};
  }
  return {};
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// REQUIRE that f throws invalid_argument whose message holds every one of `parts`.
#define SERVING_CHECK_INVALID(expr, ...)                                                        \
  do {                                                                                          \
    const serving_test::Caught caught_ = serving_test::error_of([&] { (void)(expr); });         \
    INFO("message: " << caught_.what);                                                          \
    CHECK(caught_.kind == serving_test::Thrown::kInvalidArgument);                              \
    for (const char* part_ : {__VA_ARGS__}) CHECK(serving_test::contains(caught_.what, part_)); \
  } while (0)

// fp16 bits as their double values.
inline std::vector<double> to_double(const std::vector<uint16_t>& bits) {
  std::vector<double> v;
  v.reserve(bits.size());
  for (uint16_t b : bits) v.push_back(course::half_bits_to_float(b));
  return v;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace serving_test
