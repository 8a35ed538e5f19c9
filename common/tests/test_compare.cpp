// compare() and the guard check are the verdict of every GPU test: each way an output can be
// wrong must be flagged, with a report that points at the element.
#include <cmath>
#include <string>

#include "catch_compat.h"
#include "compare.h"
#include "poison.h"

using course::compare;
using course::Dims;
using course::Tolerance;

namespace {
const Dims kDims{{"b", 2}, {"h", 3}, {"i", 4}, {"d", 5}};  // 120 elements
std::vector<float> ramp() {
  std::vector<float> v(120);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * float(i) - 7.f;
  return v;
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("identical outputs pass with an empty report", "[compare]") {
  const auto r = compare(ramp(), ramp(), kDims, Tolerance::fp32());
  CHECK(r.ok);
  CHECK(r.report.empty());
  CHECK(r.count == 120);
}

TEST_CASE("differences inside atol + rtol*|ref| pass", "[compare]") {
  auto out = ramp();
  const auto ref = ramp();
  for (size_t i = 0; i < out.size(); ++i) out[i] += 1e-6f * (1.f + std::fabs(ref[i]));
  CHECK(compare(out, ref, kDims, Tolerance::fp32()).ok);
}

TEST_CASE("a single wrong element fails and is named by its index", "[compare]") {
  auto out = ramp();
  const int64_t flat = ((1 * 3 + 2) * 4 + 3) * 5 + 1;  // (b=1, h=2, i=3, d=1)
  out[flat] += 0.01f;
  const auto r = compare(out, ramp(), kDims, Tolerance::fp32());
  CHECK_FALSE(r.ok);
  CHECK(r.mismatches == 1);
  CHECK(contains(r.report, "(b=1, h=2, i=3, d=1)"));
  CHECK(contains(r.report, "1 of 120 outputs are outside"));
}

TEST_CASE("a NaN computed by the kernel fails", "[compare]") {
  auto out = ramp();
  out[7] = std::nanf("");
  const auto r = compare(out, ramp(), kDims, Tolerance::fp32());
  CHECK_FALSE(r.ok);
  CHECK(r.nonfinite == 1);
  CHECK(contains(r.report, "NaN or Inf"));
}

TEST_CASE("an Inf fails", "[compare]") {
  auto out = ramp();
  out[0] = INFINITY;
  CHECK_FALSE(compare(out, ramp(), kDims, Tolerance::fp32()).ok);
}

TEST_CASE("unwritten (still poisoned) elements are counted and reported as such", "[compare]") {
  auto out = ramp();
  for (int d = 0; d < 5; ++d) out[(3 * 4 + 2) * 5 + d] = course::poison_f32();  // one whole row
  const auto r = compare(out, ramp(), kDims, Tolerance::fp32());
  CHECK_FALSE(r.ok);
  CHECK(r.unwritten == 5);
  CHECK(r.nonfinite == 0);
  CHECK(contains(r.report, "never written"));
  CHECK(contains(r.report, "(b=0, h=3") == false);  // h only goes to 2: the index must be decoded right
  CHECK(contains(r.report, "(b=1, h=0, i=2, d=0)"));
}

TEST_CASE("a relative L2 error above the bound fails even when every element is within atol", "[compare]") {
  const std::vector<float> ref(1000, 1e-3f);
  std::vector<float> out(ref);
  for (auto& x : out) x += 1e-5f;  // each within atol = 2e-5, but 1% off in relative L2
  Tolerance t = Tolerance::fp32();
  t.atol = 2e-5;
  const auto r = compare(out, ref, {{"i", 1000}}, t);
  CHECK_FALSE(r.ok);
  CHECK(r.mismatches == 0);
  CHECK(r.rel_l2 > t.max_rel_l2);
}

TEST_CASE("expected zeros: zeros pass, anything else fails", "[compare]") {
  const std::vector<float> zeros(10, 0.f), ones(10, 1.f), tiny(10, 1e-7f);
  CHECK(compare(zeros, zeros, {{"i", 10}}, Tolerance::fp32()).ok);
  CHECK_FALSE(compare(ones, zeros, {{"i", 10}}, Tolerance::fp32()).ok);
  CHECK_FALSE(compare(tiny, zeros, {{"i", 10}}, Tolerance::fp32()).ok);  // no scale: L2 is infinite
}

TEST_CASE("guard damage fails an otherwise perfect output", "[compare][guard]") {
  const auto r = compare(ramp(), ramp(), kDims, Tolerance::fp32(), "out-of-bounds write: ...");
  CHECK_FALSE(r.ok);
  CHECK(contains(r.report, "out-of-bounds write"));
}

TEST_CASE("describe_guard_damage finds the overwritten element nearest the buffer", "[guard]") {
  std::vector<unsigned char> g(course::kGuardBytes, course::kGuardByte);
  CHECK(course::describe_guard_damage(g.data(), g.size(), 4, true).empty());
  g[8] = 0;  // after the end: byte 8 = element [n + 2] of a float buffer
  g[100] = 0;
  const std::string back = course::describe_guard_damage(g.data(), g.size(), 4, true);
  CHECK(contains(back, "2 guard byte(s) after the end"));
  CHECK(contains(back, "[n + 2]"));
  std::vector<unsigned char> f(course::kGuardBytes, course::kGuardByte);
  f[f.size() - 1] = 0;  // the byte right before the payload: element [-1]
  CHECK(contains(course::describe_guard_damage(f.data(), f.size(), 4, false), "[-1]"));
}

TEST_CASE("format_index decodes row-major positions", "[compare]") {
  CHECK(course::format_index(kDims, 0) == "(b=0, h=0, i=0, d=0)");
  CHECK(course::format_index(kDims, 119) == "(b=1, h=2, i=3, d=4)");
}
