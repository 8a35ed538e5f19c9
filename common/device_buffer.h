// DeviceBuffer<T>: an owning GPU allocation with guard regions, for tests and the bench.
//
//   [ front guard | n elements of T | back guard ]
//
// Both guards are filled with kGuardByte when the buffer is created; guard_damage() reads
// them back and describes any out-of-bounds write. poison() fills the payload with a NaN
// pattern so compare() can tell "never written" from "wrong". The guard size keeps the
// payload 256-byte aligned, like a plain cudaMalloc, so vectorised loads stay legal.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.h"
#include "poison.h"

namespace course {

template <class T>
class DeviceBuffer {
  static_assert(kGuardBytes % 256 == 0, "guards must preserve the payload's alignment");

 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), 2 * kGuardBytes + bytes()));
    CUDA_CHECK(cudaMemset(base_, kGuardByte, kGuardBytes));
    CUDA_CHECK(cudaMemset(base_ + kGuardBytes + bytes(), kGuardByte, kGuardBytes));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (base_) cudaFree(base_);  // no throw from a destructor; a sticky error is reported elsewhere
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : base_(std::exchange(o.base_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(n_, o.n_);
    return *this;
  }

  T* data() { return reinterpret_cast<T*>(base_ + kGuardBytes); }
  const T* data() const { return reinterpret_cast<const T*>(base_ + kGuardBytes); }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    if (host.size() != n_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
    CUDA_CHECK(cudaMemcpy(data(), host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    CUDA_CHECK(cudaMemcpy(host.data(), data(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  void fill_zero() { CUDA_CHECK(cudaMemset(data(), 0, bytes())); }

  // Fill the payload with the NaN poison (fp32 pattern for 4-byte T, fp16 pattern for 2-byte T,
  // 0xFF bytes otherwise).
  void poison() {
    std::vector<unsigned char> pattern(bytes());
    for (size_t i = 0; i < n_; ++i) {
      unsigned char* dst = pattern.data() + i * sizeof(T);
      if (sizeof(T) == 4)
        std::memcpy(dst, &kPoisonF32Bits, 4);
      else if (sizeof(T) == 2)
        std::memcpy(dst, &kPoisonF16Bits, 2);
      else
        std::memset(dst, 0xFF, sizeof(T));
    }
    CUDA_CHECK(cudaMemcpy(data(), pattern.data(), bytes(), cudaMemcpyHostToDevice));
  }

  // "" when both guards are intact, else a sentence for the test report.
  std::string guard_damage() const {
    std::vector<unsigned char> g(kGuardBytes);
    CUDA_CHECK(cudaMemcpy(g.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost));
    std::string front = describe_guard_damage(g.data(), kGuardBytes, sizeof(T), false);
    CUDA_CHECK(cudaMemcpy(g.data(), base_ + kGuardBytes + bytes(), kGuardBytes, cudaMemcpyDeviceToHost));
    std::string back = describe_guard_damage(g.data(), kGuardBytes, sizeof(T), true);
    if (!front.empty() && !back.empty()) return front + "; " + back;
    return front + back;
  }

 private:
  unsigned char* base_ = nullptr;
  size_t n_ = 0;
};

}  // namespace course
