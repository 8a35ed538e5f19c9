// compare(): the one verdict every test uses.
//
// An output passes only if ALL of these hold:
//   * no element is NaN or Inf (the poison pattern counts separately as "never written");
//   * every element satisfies |out - ref| <= atol + rtol·|ref|;
//   * the relative L2 error ||out - ref|| / ||ref|| is within the dtype's bound;
//   * the guard regions around the output are intact (guard_damage is empty).
// The report is written for a learner: the first mismatches with their named indices,
// e.g. (b=0, h=3, i=66, d=12), how many outputs were never written, and the error figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace course {

struct Tolerance {
  double atol;
  double rtol;
  double max_rel_l2;
  const char* name;

  static Tolerance fp32() { return {1e-5, 1e-4, 1e-5, "fp32"}; }
  // fp32 results that are sums of `terms` products or values (a length-K dot product, a row
  // sum): each addition rounds, and in a different order on the GPU than on the CPU, so the
  // absolute error grows with the length (~2^-24·K/√2 for unit-normal data, the worst of a
  // million outputs ~5x that). 5e-7 per term keeps a 2x margin over that worst case while a
  // dropped tile, a race or a missing element still errs by order one.
  static Tolerance fp32_sum(long long terms) {
    Tolerance t = fp32();
    t.atol += 5e-7 * double(terms);
    t.name = "fp32, atol + 5e-7 per summed term";
    return t;
  }
  // fp16 inputs with fp32 accumulation: one rounding of each input (2^-11 ≈ 4.9e-4 relative)
  // and of the output dominate.
  static Tolerance fp16() { return {2e-3, 1e-2, 2e-3, "fp16"}; }
  // bf16 inputs with fp32 accumulation: 8 significant bits, so the output's own rounding alone
  // is up to half a spacing, 2^-8 ≈ 3.9e-3 relative (rms ~1.3e-3), and P rounded to bf16 for
  // P·V adds about as much again. atol + rtol·|ref| covers a half spacing for every |ref| below
  // 8 (attention outputs are averages of V); above 8 the spacing is 1/16, and a test relies on a
  // whole spacing there (what truncating instead of rounding loses) exceeding 5e-3 + 3e-3·16.
  static Tolerance bf16() { return {5e-3, 3e-3, 6e-3, "bf16"}; }
  // bf16 outputs merged from bf16 partial outputs (day 10 · 12, ring attention): the local kernel
  // rounds each partial O_s to bf16 before the log-sum-exp merge, and the merged row is rounded
  // once more. That is two half spacings (each up to 2^-8·|x|, so 2^-7 ≈ 7.8e-3 relative) plus P's
  // rounding, where bf16() budgets one; and partials of opposite sign can cancel, so a small
  // output may carry the rounding error of a larger partial (|O_s| ~ 2 rounds by up to 7.8e-3
  // absolute). Every bug the ring attention tests target errs by order one.
  static Tolerance bf16_merged() { return {1e-2, 8e-3, 8e-3, "bf16, merged from bf16 partials"}; }
};

// Named extents of the output, outermost first: {{"b", B}, {"h", H}, {"i", N}, {"d", D}}.
struct Dim {
  std::string name;
  int64_t extent;
};
using Dims = std::vector<Dim>;

struct CompareResult {
  bool ok = false;
  int64_t count = 0;
  int64_t mismatches = 0;  // finite but outside atol + rtol·|ref|
  int64_t nonfinite = 0;   // NaN/Inf produced by the kernel
  int64_t unwritten = 0;   // still holding the poison pattern
  double max_abs_err = 0.0;
  double rel_l2 = 0.0;
  std::string report;  // empty when ok
};

CompareResult compare(const float* out, const float* ref, const Dims& dims, const Tolerance& tol,
                      const std::string& guard_damage = "");

inline CompareResult compare(const std::vector<float>& out, const std::vector<float>& ref, const Dims& dims,
                             const Tolerance& tol, const std::string& guard_damage = "") {
  return compare(out.data(), ref.data(), dims, tol, guard_damage);
}

// "(b=0, h=3, i=66, d=12)" for flat index `flat` of `dims`.
std::string format_index(const Dims& dims, int64_t flat);

}  // namespace course
