#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "poison.h"

namespace course {

std::string format_index(const Dims& dims, int64_t flat) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = flat % dims[k].extent;
    flat /= dims[k].extent;
  }
  std::ostringstream s;
  s << "(";
  for (size_t k = 0; k < dims.size(); ++k) s << (k ? ", " : "") << dims[k].name << "=" << idx[k];
  s << ")";
  return s.str();
}

namespace {
std::string sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3e", x);
  return buf;
}
std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}
}  // namespace

CompareResult compare(const float* out, const float* ref, const Dims& dims, const Tolerance& tol,
                      const std::string& guard_damage) {
  CompareResult r;
  r.count = 1;
  for (const auto& d : dims) {
    if (d.extent < 0) throw std::invalid_argument("compare: negative extent for " + d.name);
    r.count *= d.extent;
  }

  constexpr int kShow = 8;
  std::vector<int64_t> shown;  // first mismatching positions of any kind
  double err2 = 0.0, ref2 = 0.0;
  int64_t worst = -1;
  for (int64_t i = 0; i < r.count; ++i) {
    const double o = out[i], e = ref[i];
    bool bad = false;
    if (is_poison_f32(out[i])) {
      ++r.unwritten;
      bad = true;
    } else if (!std::isfinite(o)) {
      ++r.nonfinite;
      bad = true;
    } else {
      const double err = std::fabs(o - e);
      err2 += err * err;
      if (err > r.max_abs_err) {
        r.max_abs_err = err;
        worst = i;
      }
      if (err > tol.atol + tol.rtol * std::fabs(e)) {
        ++r.mismatches;
        bad = true;
      }
    }
    ref2 += e * e;
    if (bad && int(shown.size()) < kShow) shown.push_back(i);
  }
  // An all-zero reference has no scale: any error at all is then infinitely large relatively
  // (the element-wise atol check still decides how large an error is acceptable).
  r.rel_l2 = ref2 > 0.0 ? std::sqrt(err2 / ref2) : (err2 > 0.0 ? INFINITY : 0.0);
  const bool l2_bad = r.rel_l2 > tol.max_rel_l2;
  r.ok = r.unwritten == 0 && r.nonfinite == 0 && r.mismatches == 0 && !l2_bad && guard_damage.empty();
  if (r.ok) return r;

  std::ostringstream s;
  s << "output does not match the CPU reference (" << tol.name << " tolerance: |out-ref| <= " << sci(tol.atol) << " + "
    << sci(tol.rtol) << "*|ref|, rel L2 <= " << sci(tol.max_rel_l2) << ")\n";
  if (!guard_damage.empty()) s << "  " << guard_damage << "\n";
  if (r.unwritten)
    s << "  " << r.unwritten << " of " << r.count
      << " outputs were never written (they still hold the NaN poison): did the kernel write "
         "every element, e.g. every row of O, including the last partial tile?\n";
  if (r.nonfinite) s << "  " << r.nonfinite << " outputs are NaN or Inf (computed by the kernel)\n";
  if (r.mismatches) s << "  " << r.mismatches << " of " << r.count << " outputs are outside the tolerance\n";
  s << "  max |out-ref| = " << sci(r.max_abs_err);
  if (worst >= 0) s << " at " << format_index(dims, worst);
  s << ", relative L2 error = " << sci(r.rel_l2) << (l2_bad ? " (above the bound)" : "") << "\n";
  if (!shown.empty()) {
    s << "  first bad elements:\n";
    for (int64_t i : shown) {
      s << "    " << format_index(dims, i) << ": out=";
      if (is_poison_f32(out[i]))
        s << "<never written>";
      else
        s << num(out[i]);
      s << "  ref=" << num(ref[i]) << "\n";
    }
  }
  r.report = s.str();
  return r;
}

}  // namespace course
