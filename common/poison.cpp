#include "poison.h"

#include <sstream>

namespace course {

std::string describe_guard_damage(const unsigned char* guard, size_t bytes, size_t elem_bytes, bool after_end,
                                  unsigned char expected) {
  size_t changed = 0;
  size_t nearest = bytes;  // offset (in bytes, from the buffer edge) of the closest changed byte
  for (size_t i = 0; i < bytes; ++i) {
    if (guard[i] == expected) continue;
    ++changed;
    const size_t from_edge = after_end ? i : bytes - 1 - i;
    if (from_edge < nearest) nearest = from_edge;
  }
  if (changed == 0) return "";
  std::ostringstream s;
  s << "out-of-bounds write: " << changed << " guard byte(s) " << (after_end ? "after the end" : "before the start")
    << " of the output were overwritten; the nearest is element " << (after_end ? "[n + " : "[-")
    << (after_end ? nearest / elem_bytes : nearest / elem_bytes + 1) << "]"
    << " (is a bounds check missing?)";
  return s.str();
}

}  // namespace course
