// For the [index] tests of the tensor-core exercises (05, 09): the PTX ISA's m16n8k16 fragment
// layouts written out as the ISA states them, independently of any kernel, and a counter that
// reports the first few failed index checks instead of thousands.
#pragma once

#include <string>

#include "catch_compat.h"

namespace course {

struct PtxPos {
  int row, col;
};

// C/D (16 × 8, four .f32 c0..c3 per lane): groupID = laneid >> 2, threadID_in_group = laneid % 4;
// row = groupID for c0, c1 and groupID + 8 for c2, c3; col = threadID_in_group * 2 + (i & 0x1).
inline PtxPos ptx_c_position(int laneid, int i) {
  const int group_id = laneid >> 2, thread_id_in_group = laneid % 4;
  return {i < 2 ? group_id : group_id + 8, thread_id_in_group * 2 + (i & 0x1)};
}

// A (16 × 16, four .f16x2 registers, eight 16-bit a0..a7 per lane, register j holding a2j in
// its low and a2j+1 in its high half): row = groupID for a0, a1, a4, a5 and groupID + 8 for
// a2, a3, a6, a7; col = threadID_in_group * 2 + (i & 0x1) for a0..a3, the same + 8 for a4..a7.
inline PtxPos ptx_a_position(int laneid, int i) {
  const int group_id = laneid >> 2, thread_id_in_group = laneid % 4;
  const bool lower = i == 2 || i == 3 || i == 6 || i == 7;
  return {lower ? group_id + 8 : group_id, thread_id_in_group * 2 + (i & 0x1) + (i < 4 ? 0 : 8)};
}

// Counts failed index checks and reports the first few.
struct IndexFailures {
  long checks = 0, failed = 0;
  void check(bool ok, const std::string& what) {
    ++checks;
    if (!ok && ++failed <= 8) FAIL_CHECK(what);
  }
  void summary(const char* name) {
    INFO(failed << " of " << checks << " checks of " << name << " failed");
    CHECK(failed == 0);
  }
};

}  // namespace course
