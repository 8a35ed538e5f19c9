// For the [index] tests of the tensor-core exercises (05, 09): the PTX ISA's m16n8k16 fragment
// layouts and ldmatrix's lane-to-register rule written out as the ISA states them, independently
// of any kernel, and a counter that reports the first few failed index checks instead of
// thousands.
#pragma once

#include <set>
#include <string>
#include <utility>

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

// B (16 × 8, two .f16x2 registers, four 16-bit b0..b3 per lane, register j holding b2j in its
// low and b2j+1 in its high half): row = threadID_in_group * 2 + (i & 0x1) for b0, b1 and the
// same + 8 for b2, b3; col = groupID.
inline PtxPos ptx_b_position(int laneid, int i) {
  const int group_id = laneid >> 2, thread_id_in_group = laneid % 4;
  return {thread_id_in_group * 2 + (i & 0x1) + (i < 2 ? 0 : 8), group_id};
}

// ldmatrix.x4 (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): lanes 8i .. 8i+7 give
// the addresses of rows 0..7 of 8 × 8 matrix i, and register i of lane l receives row l / 4,
// elements 2(l % 4) and 2(l % 4) + 1 of matrix i; with .trans, of matrix i's transpose, i.e.
// column l / 4, rows 2(l % 4) and 2(l % 4) + 1 as stored. Returns (which matrix row as stored,
// which column as stored) element h (0: low half, 1: high half) of register i of lane l is.
struct LdmatrixElement {
  int source_lane;  // the lane that named the stored row
  int col;          // 0..7: the column within that 8-element row
};
inline LdmatrixElement ptx_ldmatrix_element(int laneid, int i, int h, bool trans) {
  if (!trans) return {8 * i + laneid / 4, 2 * (laneid % 4) + h};
  return {8 * i + 2 * (laneid % 4) + h, laneid / 4};
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

// An m64nN wgmma accumulator (N = 64 and 128): warp w of the warpgroup holds rows 16w .. 16w + 15,
// element i of thread t sitting at position ptx_c_position(t % 32, i % 4) of the m16n8 C fragment
// of columns 8·(i / 4) ... row_of(t, i) and col_of(t, i) are the helpers under test, named
// row_name and col_name in the messages; `rows_are` says what the rows hold (queries, keys).
template <class RowFn, class ColFn>
void check_wgmma_accumulator(IndexFailures& f, RowFn row_of, ColFn col_of, const std::string& row_name,
                             const std::string& col_name, const std::string& rows_are) {
  for (int n : {64, 128}) {
    std::set<std::pair<int, int>> seen;
    for (int t = 0; t < 128; ++t) {
      for (int i = 0; i < n / 2; ++i) {
        const PtxPos c = ptx_c_position(t % 32, i % 4);
        const int want_row = 16 * (t / 32) + c.row, want_col = 8 * (i / 4) + c.col;
        const int row = row_of(t, i), col = col_of(t, i);
        const std::string at = "N = " + std::to_string(n) + ", thread " + std::to_string(t) + " (warp " +
                               std::to_string(t / 32) + ", lane " + std::to_string(t % 32) + "), element d[" +
                               std::to_string(i) + "]: ";
        f.check(row == want_row, at + row_name + " gave " + std::to_string(row) + ", expected " +
                                     std::to_string(want_row) + " (warp w holds rows 16w .. 16w + 15; rows are " +
                                     rows_are + ")");
        f.check(col == want_col,
                at + col_name + " gave " + std::to_string(col) + ", expected " + std::to_string(want_col));
        seen.insert({row, col});
      }
    }
    f.check(int(seen.size()) == 64 * n, "N = " + std::to_string(n) + ": the 128 threads cover " +
                                            std::to_string(seen.size()) +
                                            " distinct (row, column) positions, expected 64 × " + std::to_string(n));
  }
}

}  // namespace course
