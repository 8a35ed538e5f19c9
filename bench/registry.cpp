// The registry (see bench.h): families and kernels added by the family files' static
// initialisers. Storage is a function-local static so that it exists before the first
// registration, whatever order the linker runs the initialisers in.
#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "bench.h"

namespace bench {

namespace {

struct Registry {
  std::vector<FamilyDef> families;
  std::vector<Kernel> kernels;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string all_syntaxes() {
  std::string s;
  for (const auto& f : families()) s += (s.empty() ? "" : " | ") + f.shape_syntax;
  return "shape spec examples: " + s;
}

}  // namespace

std::string Check::label() const {
  switch (status) {
    case kOk:
      return "ok";
    case kFail:
      return "FAIL";
    case kUnsupported:
      return "unsupported";
    case kError:
      return "ERROR";
    case kSkipped:
      return "-";
  }
  return "?";
}

ShapeSpec::ShapeSpec(const std::string& body) {
  std::stringstream ss(body);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      flags_.insert(item);
      continue;
    }
    long long val = 0;
    try {
      val = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) { throw std::invalid_argument("bad number in '" + item + "'"); }
    if (val <= 0) throw std::invalid_argument("'" + item + "' must be positive");
    values_[item.substr(0, eq)] = val;
  }
}

int64_t ShapeSpec::take(const std::string& key, int64_t fallback) {
  used_.insert(key);
  const auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

bool ShapeSpec::flag(const std::string& word) {
  used_.insert(word);
  return flags_.count(word) > 0;
}

std::vector<std::string> ShapeSpec::unused() const {
  std::vector<std::string> out;
  for (const auto& kv : values_)
    if (!used_.count(kv.first)) out.push_back(kv.first);
  for (const auto& f : flags_)
    if (!used_.count(f)) out.push_back(f);
  return out;
}

bool add_family(FamilyDef f) {
  auto& fs = registry().families;
  if (std::none_of(fs.begin(), fs.end(), [&](const FamilyDef& g) { return g.name == f.name; }))
    fs.push_back(std::move(f));
  return true;
}

bool add_kernel(Kernel k) {
  registry().kernels.push_back(std::move(k));
  return true;
}

std::vector<FamilyDef> families() {
  auto fs = registry().families;
  std::stable_sort(fs.begin(), fs.end(), [](const FamilyDef& a, const FamilyDef& b) { return a.order < b.order; });
  return fs;
}

const FamilyDef& family(const std::string& name) {
  for (const auto& f : registry().families)
    if (f.name == name) return f;
  throw std::invalid_argument("unknown family '" + name + "'; " + all_syntaxes());
}

std::vector<Kernel> kernels() {
  auto ks = registry().kernels;
  std::stable_sort(ks.begin(), ks.end(), [](const Kernel& a, const Kernel& b) {
    const int fa = family(a.family).order, fb = family(b.family).order;
    return fa != fb ? fa < fb : a.order < b.order;
  });
  return ks;
}

Shape parse_shape(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos) throw std::invalid_argument("bad shape '" + spec + "'; " + all_syntaxes());
  const FamilyDef& f = family(spec.substr(0, colon));
  try {
    ShapeSpec body(spec.substr(colon + 1));
    Shape s = f.parse(body);
    const auto left = body.unused();
    if (!left.empty()) throw std::invalid_argument("unknown key '" + left.front() + "'");
    s.family = f.name;
    s.from_grid = false;
    return s;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " in '" + spec + "'; e.g. " + f.shape_syntax);
  }
}

double shape_flops(const Shape& s) { return family(s.family).flops(s); }
double shape_bytes(const Shape& s) { return family(s.family).bytes(s); }

}  // namespace bench
