// Tests for day10/07_rope_yarn: rotary position embedding on Q and K, NeoX and GPT-J pairs,
// linear / NTK / YaRN scaling, fp16 and bf16, against the CPU reference (common/reference_rope.h,
// double precision, on the 16-bit-rounded inputs).
//
// The [index] cases check the helpers on the CPU alone (no CUDA call):
// `build/bin/sol_07_rope_yarn "[index]"` runs them without a GPU. rope_pair against the two
// layouts' definitions and as a partition of the D elements; rope_frequency_factor against the
// closed forms of linear, NTK-aware and YaRN scaling (the deployed ramp: linear in the pair
// index between the rounded correction dimensions, and what its clamps give where those edges
// cross); rope_yarn_mscale; rope_turn_step and
// rope_turns against long double at positions up to the int32 limits.
//
// The GPU cases: a grid of shapes (odd N, D from 16 to 256, more heads than one block holds)
// x both layouts x fp16 and bf16 x every scaling, with prefill, decode, packed and large
// (10^5 .. 10^6) positions; the int32 extremes; q·k depending on m − n only, also 10^6
// positions later; the YaRN temperature applied exactly once; in-place calls; bad arguments.
// Inputs are normal(0, 1) clipped to [−3, 3]: with the YaRN factor (at most ~1.4 here) every
// output stays below 8 in magnitude, where Tolerance::bf16 covers half a bf16 spacing.
#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "07_rope_yarn.h"
#include "gpu_test.h"
#include "half_types.h"
#include "reference_rope.h"

namespace {

using course::DeviceBuffer;
using course::ref::RopeSpec;

constexpr long double kTwoPiL = 6.283185307179586476925286766559005768L;

// The two 16-bit types: how the host rounds to them, encodes and decodes them, the tolerance.
using Fp16 = course::Fp16Type;
using Bf16 = course::Bf16Type;

using course::as_t;

RopeSpec spec_of(const RopeParams& p) {
  RopeSpec s;
  s.layout = p.layout == RopeLayout::kNeox ? RopeSpec::Layout::kNeox : RopeSpec::Layout::kGptj;
  s.base = p.base;
  switch (p.scaling) {
    case RopeScaling::kNone:
      s.scaling = RopeSpec::Scaling::kNone;
      break;
    case RopeScaling::kLinear:
      s.scaling = RopeSpec::Scaling::kLinear;
      break;
    case RopeScaling::kNtk:
      s.scaling = RopeSpec::Scaling::kNtk;
      break;
    case RopeScaling::kYarn:
      s.scaling = RopeSpec::Scaling::kYarn;
      break;
  }
  s.factor = p.factor;
  s.original_max_position = p.original_max_position;
  s.beta_fast = p.beta_fast;
  s.beta_slow = p.beta_slow;
  return s;
}

const char* layout_name(RopeLayout l) { return l == RopeLayout::kNeox ? "NeoX" : "GPT-J"; }

std::string describe(const RopeParams& p) {
  static const char* scalings[] = {"none", "linear", "NTK", "YaRN"};
  std::ostringstream o;
  o << "B=" << p.batch << " Hq=" << p.heads_q << " Hkv=" << p.heads_kv << " N=" << p.seq_len << " D=" << p.head_dim
    << " layout=" << layout_name(p.layout) << " base=" << p.base << " scaling=" << scalings[int(p.scaling)];
  if (p.scaling != RopeScaling::kNone) o << " s=" << p.factor;
  if (p.scaling == RopeScaling::kYarn)
    o << " L=" << p.original_max_position << " beta_fast=" << p.beta_fast << " beta_slow=" << p.beta_slow;
  return o.str();
}

RopeParams make_params(int b, int hq, int hkv, int n, int d, RopeLayout layout = RopeLayout::kNeox) {
  RopeParams p;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seq_len = n;
  p.head_dim = d;
  p.layout = layout;
  return p;
}

RopeParams with_scaling(RopeParams p, RopeScaling scaling, double s, int L = 4096, double base = 10000.0) {
  p.scaling = scaling;
  p.factor = s;
  p.original_max_position = L;
  p.base = base;
  return p;
}

std::vector<float> inputs(size_t n, uint64_t seed) {
  std::vector<float> x = course::random_normal(n, seed);
  for (float& v : x) v = std::clamp(v, -3.f, 3.f);
  return x;
}

// How the positions of a [B, N] call are laid out.
enum class Positions { kPrefill, kDecode, kPacked, kLarge };
const char* positions_name(Positions k) {
  switch (k) {
    case Positions::kPrefill:
      return "prefill (m0 + n, m0 random per sequence)";
    case Positions::kDecode:
      return "decode (one random position per token, up to 200000)";
    case Positions::kPacked:
      return "packed (sequences of 1..20 tokens back to back, each from 0)";
    default:
      return "large (random in [10^5, 10^6])";
  }
}

std::vector<int32_t> make_positions(Positions kind, int batch, int seq_len, uint64_t seed) {
  course::Rng rng(seed);
  std::vector<int32_t> pos(size_t(batch) * seq_len);
  for (int b = 0; b < batch; ++b) {
    int32_t* row = &pos[size_t(b) * seq_len];
    const int32_t m0 = int32_t(rng.uniform_int(0, 5000));
    int left = 0, next = 0;  // packed: tokens left in the current sequence, its next position
    for (int n = 0; n < seq_len; ++n) {
      switch (kind) {
        case Positions::kPrefill:
          row[n] = m0 + n;
          break;
        case Positions::kDecode:
          row[n] = int32_t(rng.uniform_int(0, 200000));
          break;
        case Positions::kPacked:
          if (left == 0) {
            left = int(rng.uniform_int(1, 20));
            next = 0;
          }
          row[n] = next++;
          --left;
          break;
        case Positions::kLarge:
          row[n] = int32_t(rng.uniform_int(100000, 1000000));
          break;
      }
    }
  }
  return pos;
}

course::Dims dims_of(const RopeParams& p, int heads) {
  return course::Dims{{"b", p.batch}, {"h", heads}, {"n", p.seq_len}, {"d", p.head_dim}};
}

// Rounds q32 and k32 to the type, runs rope_yarn (out of place, or in place), compares q_out and
// k_out with the reference on the rounded values.
template <class Ty>
void run_and_check(const RopeParams& p, const std::vector<int32_t>& pos, const std::vector<float>& q32,
                   const std::vector<float>& k32, bool in_place = false) {
  const auto q = Ty::round(q32), k = Ty::round(k32);
  auto d_q = course::to_device(Ty::bits(q));
  auto d_k = course::to_device(Ty::bits(k));
  auto d_pos = course::to_device(pos);
  DeviceBuffer<uint16_t> d_qo(q.size()), d_ko(k.size());
  d_qo.poison();
  d_ko.poison();
  if (in_place)
    rope_yarn(as_t<Ty>(d_q), as_t<Ty>(d_k), as_t<Ty>(d_q), as_t<Ty>(d_k), d_pos.data(), p);
  else
    rope_yarn(as_t<Ty>(d_q), as_t<Ty>(d_k), as_t<Ty>(d_qo), as_t<Ty>(d_ko), d_pos.data(), p);
  CUDA_CHECK(cudaDeviceSynchronize());
  const RopeSpec s = spec_of(p);
  const auto ref_q = course::ref::rope(q, pos, p.batch, p.heads_q, p.seq_len, p.head_dim, s);
  const auto ref_k = course::ref::rope(k, pos, p.batch, p.heads_kv, p.seq_len, p.head_dim, s);
  const DeviceBuffer<uint16_t>& out_q = in_place ? d_q : d_qo;
  const DeviceBuffer<uint16_t>& out_k = in_place ? d_k : d_ko;
  const auto rq = course::compare(Ty::decode(out_q.download()), ref_q, dims_of(p, p.heads_q), Ty::tolerance(),
                                  out_q.guard_damage());
  if (!rq.ok)
    FAIL_CHECK("q_out (" << Ty::name << "): " << rq.report);
  else
    SUCCEED("q_out matches the reference");
  const auto rk = course::compare(Ty::decode(out_k.download()), ref_k, dims_of(p, p.heads_kv), Ty::tolerance(),
                                  out_k.guard_damage());
  if (!rk.ok)
    FAIL_CHECK("k_out (" << Ty::name << "): " << rk.report);
  else
    SUCCEED("k_out matches the reference");
}

// Fresh inputs for p from `seed`, both dtypes.
void check_both_types(const RopeParams& p, const std::vector<int32_t>& pos, uint64_t seed) {
  const auto q = inputs(size_t(p.batch) * p.heads_q * p.seq_len * p.head_dim, seed);
  const auto k = inputs(size_t(p.batch) * p.heads_kv * p.seq_len * p.head_dim, seed + 1);
  {
    INFO("dtype fp16");
    run_and_check<Fp16>(p, pos, q, k);
  }
  {
    INFO("dtype bf16");
    run_and_check<Bf16>(p, pos, q, k);
  }
}

// The exact angle pos · inv_freq in turns, reduced to [−0.5, 0.5) (long double: 64-bit mantissa).
long double exact_turns(double inv_freq, int64_t pos) {
  const long double t = (long double)pos * ((long double)inv_freq / kTwoPiL);
  return t - std::nearbyint(t);
}

// Distance between two angles in turns, modulo whole turns.
long double turn_distance(long double a, long double b) {
  const long double d = a - b;
  return std::fabs(d - std::nearbyint(d));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Index helpers, on the CPU.

TEST_CASE("rope_pair: NeoX pairs (i, i + D/2), GPT-J pairs (2i, 2i + 1), every pair of every even D up to 256",
          "[index][quick]") {
  long long checked = 0, failures = 0;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    for (int d = 2; d <= 256; d += 2) {
      std::vector<int> seen(size_t(d), 0);
      for (int i = 0; i < d / 2; ++i) {
        const RopePair got = rope_pair(layout, d, i);
        const RopePair want = layout == RopeLayout::kNeox ? RopePair{i, i + d / 2} : RopePair{2 * i, 2 * i + 1};
        ++checked;
        if (got.a != want.a || got.b != want.b) {
          if (++failures <= 5)
            FAIL_CHECK(layout_name(layout) << " D=" << d << " pair " << i << ": got (" << got.a << ", " << got.b
                                           << "), expected (" << want.a << ", " << want.b << ")");
          continue;
        }
        ++seen[size_t(got.a)];
        ++seen[size_t(got.b)];
      }
      // The D/2 pairs must cover every element exactly once (each element is rotated once).
      if (failures == 0)
        for (int e = 0; e < d; ++e)
          if (seen[size_t(e)] != 1 && ++failures <= 5)
            FAIL_CHECK(layout_name(layout) << " D=" << d << ": element " << e << " is in " << seen[size_t(e)]
                                           << " pairs, expected exactly 1");
    }
  }
  INFO(failures << " of " << checked << " pairs wrong");
  CHECK(failures == 0);
}

TEST_CASE("rope_frequency_factor: s = 1 and kNone leave every frequency alone; linear is 1/s; NTK is s^(-2i/(D-2))",
          "[index][quick]") {
  long long failures = 0;
  auto expect = [&](const RopeParams& p, int i, double want, const char* what) {
    const double got = rope_frequency_factor(p, i);
    if (std::fabs(got - want) <= 1e-12 * std::fabs(want)) return;
    if (++failures <= 8)
      FAIL_CHECK(describe(p) << ", pair " << i << ": factor " << got << ", expected " << want << " (" << what << ")");
  };
  for (int d : {16, 64, 128, 256}) {
    for (double base : {10000.0, 500000.0}) {
      for (double s : {1.0, 2.0, 4.0, 8.0, 32.0}) {
        RopeParams p = make_params(1, 1, 1, 1, d);
        p.base = base;
        p.factor = s;
        for (int i = 0; i < d / 2; ++i) {
          p.scaling = RopeScaling::kNone;
          expect(p, i, 1.0, "no scaling");
          p.scaling = RopeScaling::kLinear;
          expect(p, i, 1.0 / s, "linear: every frequency / s");
          p.scaling = RopeScaling::kNtk;
          expect(p, i, std::pow(s, -2.0 * i / (d - 2)), "NTK: s^(-2i/(D-2))");
          // The same, as the NTK-aware base change base' = base · s^(D/(D−2)).
          const double ntk_base = base * std::pow(s, double(d) / (d - 2));
          expect(p, i, std::pow(ntk_base, -2.0 * i / d) / std::pow(base, -2.0 * i / d),
                 "NTK: base' = base·s^(D/(D-2))");
          if (s == 1.0) {
            p.scaling = RopeScaling::kYarn;
            expect(p, i, 1.0, "YaRN with s = 1 is plain RoPE");
          }
        }
        // NTK's endpoints: the fastest pair keeps its frequency, the slowest is interpolated like linear.
        p.scaling = RopeScaling::kNtk;
        expect(p, 0, 1.0, "NTK: pair 0 unchanged");
        expect(p, d / 2 - 1, 1.0 / s, "NTK: the last pair gets exactly 1/s");
      }
    }
  }
  CHECK(failures == 0);
}

TEST_CASE(
    "rope_frequency_factor: YaRN's ramp: 1 up to floor(d(beta_fast)), 1/s from ceil(d(beta_slow)), linear in i between",
    "[index][quick]") {
  // The deployed YaRN (the released YaRN code, Hugging Face, vLLM): d(β) = D·ln(L/(2πβ)) /
  // (2·ln base) is the (fractional) pair that turns β times over the trained context L. Rounded
  // outwards and clamped, lo = max(⌊d(β_fast)⌋, 0), hi = min(⌈d(β_slow)⌉, D − 1): pairs
  // i <= lo keep θ_i (factor 1), pairs i >= hi get θ_i / s, and between the factor falls
  // linearly in i, 1 − (1 − 1/s)·(i − lo)/(hi − lo). (Not the YaRN paper's ramp, linear in the
  // turns r_i = L·θ_i/(2π): the two differ by up to ~2x mid-band.) L up to 65536 at D = 16 and
  // base 10^4 puts hi past D/2 − 1, where the ramp must not reach 1/s within the pairs.
  long long failures = 0, in_ramp = 0, kept = 0, interpolated = 0, past_last = 0, skipped = 0;
  for (int d : {16, 64, 128, 256}) {
    for (double base : {10000.0, 500000.0, 1e6}) {
      for (int L : {2048, 4096, 8192, 65536}) {
        for (double s : {2.0, 4.0, 16.0, 40.0}) {
          for (auto betas : {std::pair<double, double>{32.0, 1.0}, std::pair<double, double>{16.0, 2.0},
                             std::pair<double, double>{64.0, 0.5}}) {
            RopeParams p = with_scaling(make_params(1, 1, 1, 1, d), RopeScaling::kYarn, s, L, base);
            p.beta_fast = betas.first;
            p.beta_slow = betas.second;
            const double d_fast = d * std::log(L / (2 * M_PI * p.beta_fast)) / (2 * std::log(base));
            const double d_slow = d * std::log(L / (2 * M_PI * p.beta_slow)) / (2 * std::log(base));
            // A correction dimension within rounding of an integer could round either way.
            if (std::fabs(d_fast - std::round(d_fast)) < 1e-9 || std::fabs(d_slow - std::round(d_slow)) < 1e-9) {
              ++skipped;
              continue;
            }
            const int lo = std::max(int(std::floor(d_fast)), 0);
            const int hi = std::min(int(std::ceil(d_slow)), d - 1);
            REQUIRE(hi > lo);  // always, for these inputs (L >= 2048 > 2π·β_slow)
            if (hi > d / 2 - 1) ++past_last;
            double previous = 2.0;
            for (int i = 0; i < d / 2; ++i) {
              const double got = rope_frequency_factor(p, i);
              double want;
              const char* what;
              if (i <= lo) {
                want = 1.0, what = "i <= floor(d(beta_fast)): the frequency is kept";
                ++kept;
              } else if (i >= hi) {
                want = 1.0 / s, what = "i >= ceil(d(beta_slow)): interpolated by 1/s";
                ++interpolated;
              } else {
                want = 1.0 - (1.0 - 1.0 / s) * (i - lo) / (hi - lo);
                what = "in the ramp: 1 - (1 - 1/s)·(i - lo)/(hi - lo), linear in the pair index";
                ++in_ramp;
              }
              bool ok = std::fabs(got - want) <= 1e-12;
              if (ok && got > previous + 1e-15) {
                ok = false;
                what = "the factor must not grow with i (slower pairs are interpolated at least as much)";
              }
              previous = got;
              if (!ok && ++failures <= 8)
                FAIL_CHECK(describe(p) << ", pair " << i << " (d(beta_fast) = " << d_fast
                                       << ", d(beta_slow) = " << d_slow << ", so lo = " << lo << ", hi = " << hi
                                       << "): factor " << got << ", expected " << want << " (" << what << ")");
            }
          }
        }
      }
    }
  }
  // The lesson's table: D = 128, base 10^4, s = 8, L = 4096, betas 32 and 1: lo = 20, hi = 46.
  RopeParams p = with_scaling(make_params(1, 1, 1, 1, 128), RopeScaling::kYarn, 8.0, 4096, 10000.0);
  const std::pair<int, double> table[] = {{20, 1.0},   {21, 0.966}, {24, 0.865}, {32, 0.596},
                                          {40, 0.327}, {45, 0.159}, {46, 0.125}};
  for (const auto& [i, want] : table) {
    INFO("the lesson's table, pair " << i);
    CHECK(std::fabs(rope_frequency_factor(p, i) - want) < 5e-4);
  }
  INFO(kept << " kept, " << in_ramp << " in the ramp, " << interpolated << " interpolated, " << past_last
            << " configurations with ceil(d(beta_slow)) > D/2 - 1, " << skipped << " skipped");
  CHECK(kept > 0);
  CHECK(in_ramp > 0);
  CHECK(interpolated > 0);
  CHECK(past_last > 0);
  CHECK(failures == 0);
}

TEST_CASE("rope_frequency_factor: YaRN where lo and hi cross: a trained context of a few tokens, a tiny base",
          "[index][quick]") {
  // lo = max(⌊d(β_fast)⌋, 0) is clamped from below only, hi = min(⌈d(β_slow)⌉, D − 1) from above
  // only, so the ramp's edges can cross, and then γ_i = clamp((hi − i)/(hi − lo), 0, 1) sends
  // every pair to one side, as Hugging Face's code does:
  //   * a trained context L <= 2π·β_slow·base^(−2/D) gives ⌈d(β_slow)⌉ < 0 = lo (L = 1, base 10^4,
  //     D = 128: d(1) = −12.8, hi = −12): (hi − i)/(hi − lo) >= 1, every pair keeps θ_i;
  //   * just above, ⌈d(β_slow)⌉ = 0 = lo: hi becomes 0.001, a step at pair 0 (kept), every other
  //     pair θ_i / s;
  //   * a base so small that ⌊d(β_fast)⌋ >= D puts lo past hi = D − 1: every pair gets θ_i / s.
  long long failures = 0;
  auto expect = [&](const RopeParams& p, int i, double want, const char* what) {
    const double got = rope_frequency_factor(p, i);
    if (std::fabs(got - want) <= 1e-12) return;
    if (++failures <= 8)
      FAIL_CHECK(describe(p) << ", pair " << i << ": factor " << got << ", expected " << want << " (" << what << ")");
  };
  auto d_of = [](const RopeParams& p, double beta) {
    return p.head_dim * std::log(p.original_max_position / (2 * M_PI * beta)) / (2 * std::log(p.base));
  };
  {
    // The example of the header and the lesson.
    const RopeParams p = with_scaling(make_params(1, 1, 1, 1, 128), RopeScaling::kYarn, 8.0, 1, 10000.0);
    REQUIRE(std::ceil(d_of(p, p.beta_slow)) == -12.0);  // the construction: hi = −12 < lo = 0
    REQUIRE(std::floor(d_of(p, p.beta_fast)) < 0.0);
    for (int i = 0; i < 64; ++i) expect(p, i, 1.0, "L = 1: hi = -12 < lo = 0, gamma = 1, every pair keeps theta_i");
  }
  int short_contexts = 0, steps = 0, tiny_bases = 0;
  for (int d : {16, 64, 128, 256}) {
    for (double base : {10000.0, 500000.0}) {
      for (double s : {2.0, 8.0, 40.0}) {
        for (int L = 1; L <= 8; ++L) {
          const RopeParams p = with_scaling(make_params(1, 1, 1, 1, d), RopeScaling::kYarn, s, L, base);
          const double d_slow = d_of(p, p.beta_slow);
          if (std::fabs(d_slow - std::round(d_slow)) < 1e-9) continue;  // could round either way
          const double hi = std::ceil(d_slow);
          if (hi < 0) {
            ++short_contexts;
            for (int i = 0; i < d / 2; ++i)
              expect(p, i, 1.0, "ceil(d(beta_slow)) < 0 = lo: gamma = 1, every pair keeps theta_i");
          } else if (hi == 0) {
            ++steps;
            expect(p, 0, 1.0, "ceil(d(beta_slow)) = 0 = lo: hi = 0.001, pair 0 keeps theta_0");
            for (int i = 1; i < d / 2; ++i)
              expect(p, i, 1.0 / s, "ceil(d(beta_slow)) = 0 = lo: hi = 0.001, pairs from 1 on get theta_i / s");
          }
        }
      }
    }
  }
  for (int d : {16, 64}) {
    for (double base : {1.5, 2.0, 3.0}) {
      for (int L : {4096, 65536}) {
        for (double s : {4.0, 16.0}) {
          const RopeParams p = with_scaling(make_params(1, 1, 1, 1, d), RopeScaling::kYarn, s, L, base);
          if (std::floor(d_of(p, p.beta_fast)) < d) continue;
          ++tiny_bases;
          for (int i = 0; i < d / 2; ++i)
            expect(p, i, 1.0 / s, "floor(d(beta_fast)) >= D: lo > hi = D - 1, gamma = 0, every pair gets theta_i / s");
        }
      }
    }
  }
  INFO(short_contexts << " short contexts (hi < 0), " << steps << " steps (lo = hi = 0), " << tiny_bases
                      << " tiny bases (lo > D - 1)");
  CHECK(short_contexts > 0);
  CHECK(steps > 0);
  CHECK(tiny_bases > 0);
  CHECK(failures == 0);
}

TEST_CASE("rope_yarn_mscale: 0.1 ln(s) + 1 for YaRN, 1 for every other scaling and for s = 1", "[index][quick]") {
  RopeParams p = make_params(1, 1, 1, 1, 128);
  for (double s : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 40.0}) {
    INFO("s = " << s);
    p.factor = s;
    for (RopeScaling sc : {RopeScaling::kNone, RopeScaling::kLinear, RopeScaling::kNtk}) {
      p.scaling = sc;
      CHECK(rope_yarn_mscale(p) == 1.0);
    }
    p.scaling = RopeScaling::kYarn;
    CHECK(std::fabs(rope_yarn_mscale(p) - (0.1 * std::log(s) + 1.0)) <= 1e-15);
  }
  p.factor = 16.0;
  CHECK(std::fabs(rope_yarn_mscale(p) - 1.2772588722239781) <= 1e-15);  // 0.1·ln 16 + 1
}

TEST_CASE("rope_turn_step: inv_freq / (2 pi) turns per position in 0.64 fixed point", "[index][quick]") {
  long long failures = 0;
  std::vector<double> freqs{0.0, 1.0, 0.5, 1e-3, 1e-6, 1e-9};
  for (int i = 0; i < 64; ++i) freqs.push_back(std::pow(10000.0, -2.0 * i / 128));
  for (int i = 0; i < 64; ++i) freqs.push_back(std::pow(500000.0, -2.0 * i / 128) / 8.0);
  for (double f : freqs) {
    const long double want = (long double)f / kTwoPiL * 18446744073709551616.0L;  // · 2^64
    const uint64_t got = rope_turn_step(f);
    // The double division leaves ~2^-52 relative error; anything past that is a wrong scale.
    if (std::fabs((long double)got - want) > want * 0x1p-50L + 1.0L && ++failures <= 5)
      FAIL_CHECK("inv_freq " << f << ": got " << got << ", expected " << (double)want
                             << " (round(inv_freq / (2 pi) · 2^64))");
  }
  CHECK(failures == 0);
}

TEST_CASE("rope_turns: exact to 2e-7 turns at every int32 position, where the naive fp32 angle is not",
          "[index][quick]") {
  // Frequencies of a real table (D = 128, base 10000, and YaRN s = 16 over base 500000), at
  // positions from 0 to the int32 limits. The naive way, angle = float(pos) · float(θ), is
  // measured alongside for the message: at 10^6 it is off by hundredths of a radian.
  std::vector<double> freqs;
  for (int i = 0; i < 64; ++i) freqs.push_back(std::pow(10000.0, -2.0 * i / 128));
  for (int i = 0; i < 64; ++i) {
    // The closed form, not rope_frequency_factor: this case checks rope_turns alone. Here
    // d(32) = 18.1 and d(1) = 35.0: pairs up to 18 kept, from 35 on θ/16, linear between.
    const double theta = std::pow(500000.0, -2.0 * i / 128);
    const double ramp = std::clamp((i - 18.0) / (35.0 - 18.0), 0.0, 1.0);
    freqs.push_back(theta * (ramp / 16.0 + (1 - ramp)));
  }
  const std::vector<int64_t> positions{0,        1,         -1,       2,           7,       100,         4095,
                                       4096,     32768,     100000,   131071,      500000,  999999,      1000000,
                                       16777217, 123456789, -1000000, INT_MAX - 1, INT_MAX, INT_MIN + 1, INT_MIN};
  long long failures = 0;
  long double worst = 0, worst_naive_1e6 = 0;
  for (double f : freqs) {
    const uint64_t step = std::llround(std::ldexp(f / (2 * M_PI), 64));  // the header's step, independently
    for (int64_t pos : positions) {
      const float got = rope_turns(step, int32_t(pos));
      const long double want = exact_turns(f, pos);
      const long double err = turn_distance(got, want);
      worst = std::max(worst, err);
      if ((err > 2e-7L || !(got >= -0.5f && got <= 0.5f)) && ++failures <= 6)
        FAIL_CHECK("inv_freq " << f << ", pos " << pos << ": rope_turns = " << got << ", exact " << (double)want
                               << " turns (error " << (double)err << " turns; must be within 2e-7 and in [-0.5, 0.5])");
      if (pos == 1000000) {
        const float naive = float(pos) * float(f);  // radians, rounded twice
        worst_naive_1e6 = std::max(worst_naive_1e6, turn_distance((long double)naive / kTwoPiL, want));
      }
    }
  }
  INFO("worst error of rope_turns: " << (double)worst << " turns (" << (double)(worst * kTwoPiL)
                                     << " rad); the naive fp32 angle at position 10^6: "
                                     << (double)(worst_naive_1e6 * kTwoPiL) << " rad");
  CHECK(failures == 0);
}

// ---------------------------------------------------------------------------------------------
// The kernel, on the GPU.

TEST_CASE("rope_yarn: prefill, decode and packed positions, both layouts, fp16 and bf16", "[day10][rope_yarn][quick]") {
  int idx = 0;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    for (Positions kind : {Positions::kPrefill, Positions::kDecode, Positions::kPacked}) {
      const int n = kind == Positions::kDecode ? 1 : 37;
      RopeParams p = make_params(2, 4, 2, n, 64, layout);
      if (kind == Positions::kPacked) p = with_scaling(p, RopeScaling::kYarn, 8.0, 2048);
      const uint64_t seed = course::case_seed("rope_quick", idx++);
      const auto pos = make_positions(kind, p.batch, p.seq_len, seed ^ 0x9E37ull);
      INFO(describe(p) << ", positions " << positions_name(kind) << ", seed = " << seed
                       << " (set COURSE_SEED to vary)");
      check_both_types(p, pos, seed);
    }
  }
}

TEST_CASE("rope_yarn: shapes (odd N, D 16..256, many heads) x layouts x fp16/bf16 x none/linear/NTK/YaRN",
          "[day10][rope_yarn]") {
  struct Shape {
    int b, hq, hkv, n, d;
  };
  // {2, 40, 8, 33, 128}: 48 heads in two blocks of 24 per token; {2, 32, 8, 7, 256}: 40 heads
  // in three blocks (14, 14, 12); {1, 300, 1, 3, 16}: 301 heads in two blocks; D = 80, 48, 144:
  // blocks of 120, 120 and 72 threads.
  const std::vector<Shape> shapes{{1, 1, 1, 1, 16},    {2, 4, 2, 37, 64},  {3, 5, 3, 67, 32},  {1, 8, 1, 129, 128},
                                  {2, 40, 8, 33, 128}, {1, 2, 1, 5, 256},  {2, 32, 8, 7, 256}, {1, 3, 3, 1000, 80},
                                  {2, 6, 2, 17, 48},   {1, 300, 1, 3, 16}, {1, 1, 1, 257, 144}};
  const Positions kinds[] = {Positions::kPrefill, Positions::kDecode, Positions::kPacked, Positions::kLarge};
  int idx = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& sh = shapes[si];
    for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
      RopeParams p = make_params(sh.b, sh.hq, sh.hkv, sh.n, sh.d, layout);
      switch ((si + (layout == RopeLayout::kGptj ? 2 : 0)) % 5) {
        case 0:
          break;
        case 1:
          p = with_scaling(p, RopeScaling::kLinear, 4.0);
          break;
        case 2:
          p = with_scaling(p, RopeScaling::kNtk, 8.0, 4096, 500000.0);
          break;
        case 3:
          p = with_scaling(p, RopeScaling::kYarn, 16.0, 2048);
          break;
        default:
          p = with_scaling(p, RopeScaling::kYarn, 40.0, 4096, 1e6);
          break;
      }
      const Positions kind = kinds[(si + (layout == RopeLayout::kGptj ? 1 : 0)) % 4];
      const uint64_t seed = course::case_seed("rope_grid", idx++);
      const auto pos = make_positions(kind, p.batch, p.seq_len, seed ^ 0x9E37ull);
      INFO(describe(p) << ", positions " << positions_name(kind) << ", seed = " << seed
                       << " (set COURSE_SEED to vary)");
      check_both_types(p, pos, seed);
    }
  }
}

TEST_CASE("rope_yarn: positions up to 10^6 and the int32 extremes are as accurate as position 10",
          "[day10][rope_yarn][quick]") {
  // One decode token per sequence (N = 1), 64 sequences. At 10^6 a naive fp32 angle is off by up
  // to ~0.05 rad in the fastest pairs, an fp16 angle overflows; both fail here.
  std::vector<int32_t> pos{10,      100000,  262143,   500000,   999999,    1000000,    INT_MAX,
                           INT_MIN, -999999, 16777217, 33554431, 123456789, INT_MAX - 7};
  course::Rng rng(course::case_seed("rope_large_positions", 0));
  while (pos.size() < 64) pos.push_back(int32_t(rng.uniform_int(100000, 1000000)));
  int idx = 0;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    for (double base : {10000.0, 500000.0}) {
      RopeParams p = make_params(64, 4, 2, 1, 128, layout);
      p.base = base;
      if (base == 500000.0) p = with_scaling(p, RopeScaling::kYarn, 32.0, 8192, base);
      const uint64_t seed = course::case_seed("rope_large_positions", ++idx);
      INFO(describe(p) << ", positions 10 .. 10^6 and INT_MIN, INT_MAX, seed = " << seed);
      check_both_types(p, pos, seed);
    }
  }
}

TEST_CASE("rope_yarn: q·k depends only on m − n, also 10^6 positions later", "[day10][rope_yarn][quick]") {
  // Sequence 0 holds tokens at positions m_t, sequence 1 the same q and k rows at m_t + 999983.
  // Every q_t · k_u must be the same in both (fp16 outputs: within ~2^-10 · |q||k| each).
  const int n = 16, d = 128;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    RopeParams p = with_scaling(make_params(2, 1, 1, n, d, layout), RopeScaling::kYarn, 8.0, 4096);
    const uint64_t seed = course::case_seed("rope_relative", int(layout));
    const auto half_q = course::round_to_half(inputs(size_t(n) * d, seed));
    const auto half_k = course::round_to_half(inputs(size_t(n) * d, seed + 1));
    std::vector<float> q(half_q), k(half_k);
    q.insert(q.end(), half_q.begin(), half_q.end());
    k.insert(k.end(), half_k.begin(), half_k.end());
    std::vector<int32_t> pos(size_t(2) * n);
    for (int t = 0; t < n; ++t) {
      pos[size_t(t)] = t * 37 + 5;
      pos[size_t(n + t)] = t * 37 + 5 + 999983;
    }
    auto d_q = course::to_device(course::to_half_bits(q));
    auto d_k = course::to_device(course::to_half_bits(k));
    auto d_pos = course::to_device(pos);
    DeviceBuffer<uint16_t> d_qo(q.size()), d_ko(k.size());
    d_qo.poison();
    d_ko.poison();
    rope_yarn(as_t<Fp16>(d_q), as_t<Fp16>(d_k), as_t<Fp16>(d_qo), as_t<Fp16>(d_ko), d_pos.data(), p);
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto qo = course::half_bits_to_float(d_qo.download());
    const auto ko = course::half_bits_to_float(d_ko.download());
    INFO(describe(p) << ", seed = " << seed);
    int failures = 0;
    for (int t = 0; t < n; ++t) {
      for (int u = 0; u < n; ++u) {
        double dot0 = 0, dot1 = 0, nq = 0, nk = 0;
        for (int e = 0; e < d; ++e) {
          dot0 += double(qo[size_t(t) * d + e]) * ko[size_t(u) * d + e];
          dot1 += double(qo[size_t(n + t) * d + e]) * ko[size_t(n + u) * d + e];
          nq += double(q[size_t(t) * d + e]) * q[size_t(t) * d + e];
          nk += double(k[size_t(u) * d + e]) * k[size_t(u) * d + e];
        }
        const double bound = 4e-3 * std::sqrt(nq * nk);
        if (!(std::fabs(dot0 - dot1) <= bound) && ++failures <= 4)
          FAIL_CHECK("q_" << t << " · k_" << u << ": " << dot0 << " at positions (" << pos[size_t(t)] << ", "
                          << pos[size_t(u)] << "), " << dot1 << " at (" << pos[size_t(n + t)] << ", "
                          << pos[size_t(n + u)] << "): differ by more than 4e-3·|q||k| = " << bound);
      }
    }
    CHECK(failures == 0);
  }
}

TEST_CASE("rope_yarn: the YaRN temperature multiplies q·k by (0.1 ln s + 1)^2, once", "[day10][rope_yarn][quick]") {
  // q = k row for row, same position: q_out · k_out = mscale² · |x|² for YaRN (mscale = 0.1 ln s
  // + 1 on each of q and k), |x|² for every other scaling.
  const int n = 33, d = 64;
  for (RopeScaling sc : {RopeScaling::kNone, RopeScaling::kNtk, RopeScaling::kYarn}) {
    for (double s : {1.0, 16.0}) {
      RopeParams p = with_scaling(make_params(1, 1, 1, n, d, RopeLayout::kGptj), sc, s, 2048);
      const double mscale = sc == RopeScaling::kYarn ? 0.1 * std::log(s) + 1.0 : 1.0;
      const uint64_t seed = course::case_seed("rope_mscale", int(sc) * 10 + int(s));
      const auto x = course::round_to_half(inputs(size_t(n) * d, seed));
      const auto pos = make_positions(Positions::kLarge, 1, n, seed);
      auto d_x = course::to_device(course::to_half_bits(x));
      auto d_pos = course::to_device(pos);
      DeviceBuffer<uint16_t> d_qo(x.size()), d_ko(x.size());
      d_qo.poison();
      d_ko.poison();
      rope_yarn(as_t<Fp16>(d_x), as_t<Fp16>(d_x), as_t<Fp16>(d_qo), as_t<Fp16>(d_ko), d_pos.data(), p);
      CUDA_CHECK(cudaDeviceSynchronize());
      const auto qo = course::half_bits_to_float(d_qo.download());
      const auto ko = course::half_bits_to_float(d_ko.download());
      INFO(describe(p) << ": expected q_out·k_out = " << mscale * mscale << " · |x|^2, seed = " << seed);
      int failures = 0;
      for (int t = 0; t < n; ++t) {
        double dot = 0, norm2 = 0;
        for (int e = 0; e < d; ++e) {
          dot += double(qo[size_t(t) * d + e]) * ko[size_t(t) * d + e];
          norm2 += double(x[size_t(t) * d + e]) * x[size_t(t) * d + e];
        }
        const double ratio = dot / norm2;
        if (!(std::fabs(ratio - mscale * mscale) <= 4e-3 * mscale * mscale) && ++failures <= 3)
          FAIL_CHECK("token " << t << ": q_out·k_out / |x|^2 = " << ratio << ", expected " << mscale * mscale
                              << (sc == RopeScaling::kYarn ? " = (0.1 ln s + 1)^2" : " (no temperature)"));
      }
      CHECK(failures == 0);
    }
  }
}

TEST_CASE("rope_yarn: in place (q_out == q, k_out == k) gives the same result", "[day10][rope_yarn][quick]") {
  int idx = 0;
  for (RopeLayout layout : {RopeLayout::kNeox, RopeLayout::kGptj}) {
    RopeParams p = with_scaling(make_params(2, 40, 8, 9, 128, layout), RopeScaling::kYarn, 4.0, 4096);
    const uint64_t seed = course::case_seed("rope_in_place", idx++);
    const auto pos = make_positions(Positions::kPrefill, p.batch, p.seq_len, seed);
    const auto q = inputs(size_t(p.batch) * p.heads_q * p.seq_len * p.head_dim, seed);
    const auto k = inputs(size_t(p.batch) * p.heads_kv * p.seq_len * p.head_dim, seed + 1);
    INFO(describe(p) << ", in place, seed = " << seed);
    run_and_check<Fp16>(p, pos, q, k, true);
    run_and_check<Bf16>(p, pos, q, k, true);
  }
}

TEST_CASE("rope_yarn rejects bad arguments before launching anything", "[day10][rope_yarn][args][quick]") {
  const RopeParams good = with_scaling(make_params(2, 4, 2, 3, 64), RopeScaling::kYarn, 4.0, 4096);
  const size_t nq = size_t(2) * 4 * 3 * 64, nk = size_t(2) * 2 * 3 * 64;
  DeviceBuffer<uint16_t> q(nq), k(nk), qo(nq), ko(nk);
  DeviceBuffer<int32_t> pos(std::vector<int32_t>(6, 1));
  q.fill_zero();
  k.fill_zero();
  qo.poison();
  ko.poison();
  const __half* qd = as_t<Fp16>(q);
  const __half* kd = as_t<Fp16>(k);
  __half* qod = as_t<Fp16>(qo);
  __half* kod = as_t<Fp16>(ko);
  const int32_t* pd = pos.data();
  auto with = [&](auto edit) {
    RopeParams p = good;
    edit(p);
    return p;
  };
  COURSE_CHECK_INVALID_ARGUMENT("q", rope_yarn(static_cast<const __half*>(nullptr), kd, qod, kod, pd, good));
  COURSE_CHECK_INVALID_ARGUMENT("k", rope_yarn(qd, nullptr, qod, kod, pd, good));
  COURSE_CHECK_INVALID_ARGUMENT("q_out", rope_yarn(qd, kd, nullptr, kod, pd, good));
  COURSE_CHECK_INVALID_ARGUMENT("k_out", rope_yarn(qd, kd, qod, nullptr, pd, good));
  COURSE_CHECK_INVALID_ARGUMENT("positions", rope_yarn(qd, kd, qod, kod, nullptr, good));
  COURSE_CHECK_INVALID_ARGUMENT("q", rope_yarn(qd + 1, kd, qod, kod, pd, good));  // 2 bytes off: not 16-byte aligned
  COURSE_CHECK_INVALID_ARGUMENT("k_out", rope_yarn(qd, kd, qod, kod + 4, pd, good));
  COURSE_CHECK_INVALID_ARGUMENT("batch", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.batch = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_q", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.heads_q = -1; })));
  COURSE_CHECK_INVALID_ARGUMENT("heads_kv", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.heads_kv = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_len", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.seq_len = 0; })));
  for (int bad_d : {0, 8, 72, 100, 272})
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  rope_yarn(qd, kd, qod, kod, pd, with([&](auto& p) { p.head_dim = bad_d; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "layout", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.layout = static_cast<RopeLayout>(2); })));
  COURSE_CHECK_INVALID_ARGUMENT("base", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.base = 1.0; })));
  COURSE_CHECK_INVALID_ARGUMENT("base", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.base = NAN; })));
  COURSE_CHECK_INVALID_ARGUMENT(
      "scaling", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.scaling = static_cast<RopeScaling>(7); })));
  COURSE_CHECK_INVALID_ARGUMENT("factor", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.factor = 0.5; })));
  COURSE_CHECK_INVALID_ARGUMENT("factor", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) {
                                                      p.scaling = RopeScaling::kLinear;
                                                      p.factor = INFINITY;
                                                    })));
  COURSE_CHECK_INVALID_ARGUMENT("original_max_position",
                                rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.original_max_position = 0; })));
  COURSE_CHECK_INVALID_ARGUMENT("beta_slow",
                                rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.beta_slow = -1.0; })));
  COURSE_CHECK_INVALID_ARGUMENT("beta_fast", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) { p.beta_fast = 1.0; })));
  COURSE_CHECK_INVALID_ARGUMENT("seq_len", rope_yarn(qd, kd, qod, kod, pd, with([](auto& p) {
                                                       p.batch = 65536;
                                                       p.seq_len = 65536;
                                                     })));
  // The bf16 overload checks the same way.
  COURSE_CHECK_INVALID_ARGUMENT("head_dim", rope_yarn(as_t<Bf16>(q), as_t<Bf16>(k), as_t<Bf16>(qo), as_t<Bf16>(ko), pd,
                                                      with([](auto& p) { p.head_dim = 24; })));
  CUDA_CHECK(cudaDeviceSynchronize());
  bool untouched = true;
  for (uint16_t x : qo.download()) untouched = untouched && x == course::kPoisonF16Bits;
  for (uint16_t x : ko.download()) untouched = untouched && x == course::kPoisonF16Bits;
  CHECK(untouched);  // nothing was written
  // Parameters a scaling does not use are not checked: plain RoPE ignores factor and the YaRN fields.
  RopeParams plain = good;
  plain.scaling = RopeScaling::kNone;
  plain.factor = 0.0;
  plain.original_max_position = 0;
  plain.beta_fast = 0.0;
  CHECK_NOTHROW(rope_yarn(qd, kd, qod, kod, pd, plain));
  CUDA_CHECK(cudaDeviceSynchronize());
}
