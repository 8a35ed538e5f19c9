// Bit patterns that make unwritten or overwritten memory visible.
//
// Outputs are filled with a NaN carrying a recognisable payload before every launch. A kernel
// that forgets to write an element leaves that exact pattern behind, so compare() can say
// "never written" rather than just "wrong". Real NaNs produced by arithmetic are canonical
// NaNs, a different bit pattern, so the two are never confused.
//
// Guard regions before and after every test output buffer hold a second pattern; an
// out-of-bounds write (a missing `if (i < n)`) changes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace course {

constexpr uint32_t kPoisonF32Bits = 0x7FC0DEADu;  // quiet NaN, payload 0xDEAD
constexpr uint16_t kPoisonF16Bits = 0x7EADu;      // quiet half NaN, payload 0xAD
constexpr unsigned char kGuardByte = 0xA5u;       // as float: -2.9e-16, as half: -0.0216
// Guards of HOST buffers that a kernel's data is copied into and out of use another byte: a copy
// that runs one element long moves a device guard word into a host guard (or back), and with
// one byte for both the damage would be invisible.
constexpr unsigned char kHostGuardByte = 0x5Au;
constexpr size_t kGuardBytes = 4096;  // each side; large enough for a row overrun

inline float poison_f32() {
  float f;
  std::memcpy(&f, &kPoisonF32Bits, sizeof f);
  return f;
}

inline bool is_poison_f32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits == kPoisonF32Bits;
}

// Returns "" when every byte of the guard still holds `expected` (kGuardByte unless given),
// otherwise a sentence saying which side was hit, how many bytes changed and where the first
// one is (in elements of `elem_bytes` from the buffer's edge), for the test report.
std::string describe_guard_damage(const unsigned char* guard, size_t bytes, size_t elem_bytes, bool after_end,
                                  unsigned char expected = kGuardByte);

}  // namespace course
