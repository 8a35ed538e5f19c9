// Tests for day10/05_fp16_mma: FlashAttention-2 on mma.sync, fp16 and bf16, against the CPU
// reference run in double on the SAME 16-bit-rounded inputs. Every case runs for both types.
//
// Tolerances, in this one place: common/compare.h, Tolerance::fp16() and Tolerance::bf16().
// Both sit well above what a correct kernel errs by (the output's own rounding, up to 2^-11 or
// 2^-8 relative, plus P rounded for P·V) and well below what each targeted bug costs:
//   * S accumulated in fp16: a common offset in Q and K makes every partial dot product ~512,
//     where fp16's spacing is 0.5 (see "scores accumulate in fp32");
//   * exp of an unsubtracted score: logits of ~1e4 (see "logits of magnitude 1e4");
//   * bf16 truncated instead of rounded: V rows all equal, so O equals them up to fp32 noise and
//     truncating a value just below a bf16 number loses a whole spacing (1/16 in [8, 16))
//     (see "bf16 output is rounded to nearest");
//   * the shallower pipeline of smaller GPUs, chosen here through COURSE_SMEM_LIMIT.
// The log-sum-exp output (the overload with `lse`) is checked by common/lse_check.h, as exercise 10's.
//
// The [index] cases check the index helpers mma_acc_row, mma_acc_key and mma_p_a_source, and the
// given ldmatrix lane helpers of common/arch/ldmatrix_lanes.h (which row of Q, K and V each lane
// names), on the CPU alone (no CUDA call) against the fragment tables of the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type"), written out below independently of the kernel:
// `build/bin/sol_05_fp16_mma "[index]"` runs them without a GPU.
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "05_fp16_mma.h"
#include "arch/ldmatrix_lanes.h"
#include "gpu_test.h"
#include "half_types.h"
#include "lse_check.h"
#include "mma_layout_check.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

// The two 16-bit types: how the host rounds to them, encodes and decodes them, and the tolerance.
using Fp16 = course::Fp16Type;
using Bf16 = course::Bf16Type;

using course::as_t;

// Launches on already-encoded inputs (extra rows after K and V allowed) and compares O with the
// reference on the rounded values q, k, v.
template <class Ty>
void run_and_compare(const AttentionParams& p, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, const std::vector<uint16_t>& k_bits,
                     const std::vector<uint16_t>& v_bits) {
  auto d_q = course::to_device(Ty::bits(q));
  auto d_k = course::to_device(k_bits);
  auto d_v = course::to_device(v_bits);
  DeviceBuffer<uint16_t> d_o(size_t(p.o_elems()));
  d_o.poison();
  flash_attention_mma(as_t<Ty>(d_q), as_t<Ty>(d_k), as_t<Ty>(d_v), as_t<Ty>(d_o), p);
  CUDA_CHECK(cudaDeviceSynchronize());
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  const auto r = course::compare(Ty::decode(d_o.download()), course::ref::attention(q, k, v, p), dims, Ty::tolerance(),
                                 d_o.guard_damage());
  if (!r.ok)
    FAIL_CHECK(r.report);
  else
    SUCCEED("output matches the reference");
}

// Rounds q32, k32, v32 to the type, runs, compares.
template <class Ty>
void check_mma(const AttentionParams& p, const std::vector<float>& q32, const std::vector<float>& k32,
               const std::vector<float>& v32) {
  const auto q = Ty::round(q32), k = Ty::round(k32), v = Ty::round(v32);
  run_and_compare<Ty>(p, q, k, v, Ty::bits(k), Ty::bits(v));
}

struct Case {
  int b, h, nq, nk, d;
  bool causal;
  const char* why;
  int h_kv = 0;  // 0: MHA (Hkv = Hq)
};

AttentionParams params_of(const Case& c) {
  return AttentionParams::make(c.b, c.h, c.h_kv > 0 ? c.h_kv : c.h, c.nq, c.nk, c.d, c.causal);
}

#define CASE_INFO(Ty, c, p, seed)                                                                         \
  INFO(Ty::name << " B=" << (c).b << " Hq=" << (c).h << " Hkv=" << (p).heads_kv << " Nq=" << (c).nq       \
                << " Nk=" << (c).nk << " D=" << (c).d << ((c).causal ? " causal" : "") << " (" << (c).why \
                << "), seed = " << (seed) << " (set COURSE_SEED to vary)")

template <class Ty>
void run_grid_t(const std::string& name, const std::vector<Case>& cases) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed(name + "_" + Ty::name, int64_t(idx));
    CASE_INFO(Ty, c, p, seed);
    check_mma<Ty>(p, course::random_normal(size_t(p.q_elems()), seed),
                  course::random_normal(size_t(p.kv_elems()), seed + 1),
                  course::random_normal(size_t(p.kv_elems()), seed + 2));
  }
}

void run_grid(const std::string& name, const std::vector<Case>& cases) {
  run_grid_t<Fp16>(name, cases);
  run_grid_t<Bf16>(name, cases);
}

using course::IndexFailures;
using course::ptx_a_position;
using course::ptx_b_position;
using course::ptx_c_position;
using course::ptx_ldmatrix_element;
using course::PtxPos;

}  // namespace

TEST_CASE("mma_acc_row, mma_acc_key: every lane and element lands where the PTX accumulator layout puts it",
          "[index][quick]") {
  IndexFailures f;
  for (int warp_row0 : {0, 16, 48, 80, 4080}) {
    for (int k0 : {0, 64, 1024}) {
      for (int n = 0; n < 16; ++n) {
        std::set<std::pair<int, int>> seen;  // (row, key) of fragment n over all lanes and elements
        for (int lane = 0; lane < 32; ++lane) {
          for (int e = 0; e < 4; ++e) {
            const PtxPos c = ptx_c_position(lane, e);
            const int want_row = warp_row0 + c.row, want_key = k0 + 8 * n + c.col;
            const int row = mma_acc_row(lane, e, warp_row0), key = mma_acc_key(lane, n, e, k0);
            std::ostringstream at;
            at << "lane " << lane << " (g = " << lane / 4 << ", t4 = " << lane % 4 << "), element " << e
               << ", fragment n = " << n << ", warp_row0 = " << warp_row0 << ", k0 = " << k0 << ": ";
            f.check(row == want_row, at.str() + "mma_acc_row gave " + std::to_string(row) + ", expected " +
                                         std::to_string(want_row) + " (the PTX C layout puts c" + std::to_string(e) +
                                         " in tile row " + std::to_string(c.row) + ")");
            f.check(key == want_key, at.str() + "mma_acc_key gave " + std::to_string(key) + ", expected " +
                                         std::to_string(want_key) + " (the PTX C layout puts c" + std::to_string(e) +
                                         " in tile column " + std::to_string(c.col) + " of fragment n's 8 keys)");
            seen.insert({row, key});
          }
        }
        std::ostringstream at;
        at << "fragment n = " << n << ", warp_row0 = " << warp_row0 << ", k0 = " << k0 << ": the 32 lanes × 4 "
           << "elements cover " << seen.size() << " distinct (row, key) positions, expected all 16 × 8 = 128";
        f.check(seen.size() == 128, at.str());
      }
    }
  }
  f.summary("mma_acc_row / mma_acc_key");
}

// One ldmatrix.x4 of a 16 × 16 block, each lane naming (row, chunk) = source(lane): register i,
// half h of every lane must hold the element of the block that `want(lane, i, h)` names (row and
// column as stored).
template <class Source, class Want>
void check_ldmatrix(IndexFailures& f, const char* name, Source source, bool trans, Want want) {
  for (int lane = 0; lane < 32; ++lane) {
    const course::arch::sm80::LdmatrixSource s = source(lane);
    f.check(s.row >= 0 && s.row < 16 && (s.chunk == 0 || s.chunk == 1),
            std::string(name) + "(" + std::to_string(lane) + ") = {row " + std::to_string(s.row) + ", chunk " +
                std::to_string(s.chunk) + "}: outside the 16 × 16 block (rows 0..15, chunks 0, 1)");
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      for (int h = 0; h < 2; ++h) {
        const course::LdmatrixElement e = ptx_ldmatrix_element(lane, i, h, trans);
        const course::arch::sm80::LdmatrixSource s = source(e.source_lane);
        const PtxPos got{s.row, 8 * s.chunk + e.col}, w = want(lane, i, h);
        std::ostringstream at;
        at << name << ": lane " << lane << ", register " << i << ", " << (h ? "high" : "low")
           << " half comes from lane " << e.source_lane << "'s row, i.e. block (row " << got.row << ", column "
           << got.col << "); the mma operand wants (row " << w.row << ", column " << w.col << ") there";
        f.check(got.row == w.row && got.col == w.col, at.str());
      }
    }
  }
}

TEST_CASE("ldmatrix lane sources: Q, K and V fragments come out in the PTX A and B layouts", "[index][quick]") {
  IndexFailures f;
  // Q (A, row-major, plain load): register i is a(2i), a(2i+1).
  check_ldmatrix(f, "ldmatrix_a_source", course::arch::sm80::ldmatrix_a_source, false,
                 [](int lane, int i, int h) { return ptx_a_position(lane, 2 * i + h); });
  // K (rows = keys = n, columns = head dim = k; plain load): register i is b(2(i%2)) .. of n-fragment i/2.
  check_ldmatrix(f, "ldmatrix_b_source", course::arch::sm80::ldmatrix_b_source, false, [](int lane, int i, int h) {
    const PtxPos b = ptx_b_position(lane, 2 * (i % 2) + h);
    return PtxPos{8 * (i / 2) + b.col, b.row};
  });
  // V (rows = keys = k, columns = head dim = n; .trans): the same registers, V as stored.
  check_ldmatrix(f, "ldmatrix_b_trans_source", course::arch::sm80::ldmatrix_b_trans_source, true,
                 [](int lane, int i, int h) {
                   const PtxPos b = ptx_b_position(lane, 2 * (i % 2) + h);
                   return PtxPos{b.row, 8 * (i / 2) + b.col};
                 });
  f.summary("ldmatrix_a_source / ldmatrix_b_source / ldmatrix_b_trans_source");
}

TEST_CASE("mma_p_a_source: every A register of P holds what the PTX A layout expects, from the lane's own accumulators",
          "[index][quick]") {
  IndexFailures f;
  for (int kk = 0; kk < 8; ++kk) {
    for (int j = 0; j < 4; ++j) {
      const MmaAccPair src = mma_p_a_source(kk, j);
      std::ostringstream at;
      at << "k-step kk = " << kk << ", A register j = " << j << ": mma_p_a_source gave {n = " << src.n
         << ", e = " << src.e << "}";
      const bool in_range = (src.e == 0 || src.e == 2) && (src.n == 2 * kk || src.n == 2 * kk + 1);
      f.check(in_range, at.str() +
                            ", expected n = 2kk or 2kk + 1 (the fragments of keys 16kk .. 16kk + 15) "
                            "and e = 0 or 2 (the pair e, e + 1 is one row's two neighbouring keys)");
      if (!in_range) continue;
      for (int lane = 0; lane < 32; ++lane) {
        for (int half = 0; half < 2; ++half) {
          // What the A layout wants in this half of register j, in P_ij's (tile row, key) ...
          const PtxPos a = ptx_a_position(lane, 2 * j + half);
          const int want_key = 16 * kk + a.col;
          // ... and what accumulator element src.e + half of fragment src.n holds (C layout).
          const PtxPos c = ptx_c_position(lane, src.e + half);
          const int got_key = 8 * src.n + c.col;
          std::ostringstream where;
          where << at.str() << ", lane " << lane << ", " << (half ? "high" : "low") << " half (PTX element a"
                << 2 * j + half << "): the A layout wants (row " << a.row << ", key " << want_key << "), s[" << src.n
                << "][" << src.e + half << "] holds (row " << c.row << ", key " << got_key << ")";
          f.check(c.row == a.row && got_key == want_key, where.str());
        }
      }
    }
  }
  f.summary("mma_p_a_source");
}

TEST_CASE("flash_attention_mma: small shapes", "[day10][fp16_mma][quick]") {
  run_grid("mma_small", {
                            {1, 1, 1, 1, 64, false, "one query, one key"},
                            {1, 1, 1, 1, 128, true, "one query, one key, causal"},
                            {2, 3, 17, 17, 64, true, "below one tile"},
                            {1, 2, 67, 67, 128, false, "not a tile multiple"},
                            {1, 2, 67, 67, 64, true, "not a tile multiple, causal"},
                            {1, 1, 5, 200, 128, false, "short query, keys over several tiles"},
                            {1, 1, 16, 16, 64, true, "causal within one fragment: rows g and g+8"},
                        });
}

TEST_CASE("flash_attention_mma: Nq != Nk, causal alignment is bottom-right", "[day10][fp16_mma][quick]") {
  run_grid("mma_nq_ne_nk", {
                               {1, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
                               {1, 2, 1, 150, 128, true, "one query sees every key (decode step)"},
                               {1, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key and must be zero"},
                               {1, 1, 130, 1, 128, true, "only the last query row sees the single key"},
                               {2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
                           });
}

TEST_CASE("flash_attention_mma: tile boundaries, head dims, batch and GQA", "[day10][fp16_mma]") {
  run_grid("mma_grid", {
                           {2, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
                           {2, 2, 1000, 1000, 64, false, "non-multiple, D=64"},
                           {1, 3, 64, 64, 64, true, "exactly one tile"},
                           {1, 1, 65, 129, 128, true, "one past a tile boundary, both ways"},
                           {1, 2, 511, 1537, 128, true, "chunked prefill over many tiles"},
                           {1, 1, 1, 2048, 64, false, "one query, 2048 keys: the running max must be rescaled"},
                           {2, 8, 67, 67, 64, true, "GQA 8/2, causal, tails", 2},
                           {1, 4, 130, 200, 128, false, "MQA 4/1", 1},
                       });
}

TEST_CASE("flash_attention_mma: long sequences (2048)", "[day10][fp16_mma]") {
  run_grid("mma_long", {
                           {1, 2, 2048, 2048, 64, false, "prefill, no mask"},
                           {1, 2, 2048, 2048, 128, true, "prefill, causal, D=128"},
                           {1, 1, 2048, 1024, 64, true, "Nq > Nk, half the rows see nothing"},
                       });
}

// fp16 has 11 significant bits: between 512 and 1024 its spacing is 0.5. With Q and K both
// offset by 2, every dot product is about 4·D = 512 plus a few units, and an mma that keeps its
// accumulator in fp16 rounds each partial sum to a multiple of 0.5: errors of ~0.4 in the dot
// product, ~0.03 in the logits (scale 1/√128), ~3 % in the weights: over ten times Tolerance::fp16. In fp32
// the same sums are exact to ~3e-5. (bf16 has no fp16-accumulating mma; it runs the case too.)
TEST_CASE("flash_attention_mma: scores accumulate in fp32 (large dot products)", "[day10][fp16_mma][quick]") {
  const std::vector<Case> cases{{1, 2, 80, 200, 128, false, "offset 2 in Q and K, D=128"},
                                {1, 2, 130, 130, 128, true, "offset 2 in Q and K, D=128, causal"}};
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("mma_fp32_accumulation_") + Ty::name, int64_t(idx));
      CASE_INFO(Ty, c, p, seed);
      check_mma<Ty>(p, course::random_normal(size_t(p.q_elems()), seed, 2.f),
                    course::random_normal(size_t(p.kv_elems()), seed + 1, 2.f),
                    course::random_normal(size_t(p.kv_elems()), seed + 2));
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// Logits of about ±1e4 (scale 128; D = 128 dot products of values with a spread of 1 reach ~±80).
// exp of an unsubtracted score overflows fp32 above 88, so any place the kernel forms exp(s)
// before subtracting the running max turns a row into Inf/NaN. Q and K are multiples of 1/16
// below 16 (exact in fp16 and bf16), so every dot product and, with the power-of-two scale,
// every logit is exact in fp32: the usual tolerance still applies.
TEST_CASE("flash_attention_mma: logits of magnitude 1e4 never overflow", "[day10][fp16_mma][quick]") {
  const std::vector<Case> cases{{1, 2, 150, 150, 64, false, "large logits"},
                                {1, 2, 150, 150, 128, true, "large logits, causal"},
                                {1, 1, 40, 300, 128, true, "large logits, Nq < Nk"}};
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      AttentionParams p = params_of(c);
      p.scale = 128.f;
      const uint64_t seed = course::case_seed(std::string("mma_magnitude_") + Ty::name, int64_t(idx));
      CASE_INFO(Ty, c, p, seed);
      INFO("scale = 128: logits spread over about ±1e4");
      check_mma<Ty>(p, course::random_normal_sixteenths(size_t(p.q_elems()), seed),
                    course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1),
                    course::random_normal(size_t(p.kv_elems()), seed + 2));
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// K and V are followed by 64 rows of NaN: a kernel that reads past Nk, or gives the padding keys
// of a partial last tile any weight, turns outputs into NaN.
TEST_CASE("flash_attention_mma: nothing past the end of K and V is read", "[day10][fp16_mma][quick]") {
  const Case cases[] = {{1, 1, 67, 67, 64, false, "NaN rows after K and V"},
                        {1, 1, 33, 100, 128, true, "NaN rows after K and V, causal"}};
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < 2; ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("mma_tail_nan_") + Ty::name, int64_t(idx));
      CASE_INFO(Ty, c, p, seed);
      const auto q = Ty::round(course::random_normal(size_t(p.q_elems()), seed));
      const auto k = Ty::round(course::random_normal(size_t(p.kv_elems()), seed + 1));
      const auto v = Ty::round(course::random_normal(size_t(p.kv_elems()), seed + 2));
      auto with_nan_tail = [&](const std::vector<float>& x) {
        std::vector<uint16_t> bits = Ty::bits(x);
        bits.resize(bits.size() + size_t(64 * p.head_dim), uint16_t(0x7FC0));  // NaN in fp16 and bf16
        return bits;
      };
      run_and_compare<Ty>(p, q, k, v, with_nan_tail(k), with_nan_tail(v));
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// Every row of V is the same vector u with |u| in [8, 16), where bf16's spacing is 1/16. O is
// then u up to fp32 noise (the kernel's ℓ sums the same rounded P that multiplies V, so a row's
// weights add up to 1), about half of it just below u. Rounded to nearest, that is u again;
// truncated, it drops a whole spacing, 0.0625, over Tolerance::bf16's 5e-3 + 3e-3·16 = 0.053.
TEST_CASE("flash_attention_mma: bf16 output is rounded to nearest, not truncated", "[day10][fp16_mma][quick]") {
  const std::vector<Case> cases{{1, 2, 70, 90, 64, false, "V rows all equal"},
                                {1, 2, 70, 70, 128, true, "V rows all equal, causal"}};
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("mma_round_output_") + Ty::name, int64_t(idx));
      CASE_INFO(Ty, c, p, seed);
      std::vector<float> u = course::random_normal(size_t(p.head_dim), seed + 2);
      for (float& x : u) x = (x < 0 ? -1.f : 1.f) * (8.f + std::fmod(std::fabs(x) * 4.f, 8.f));
      std::vector<float> v(size_t(p.kv_elems()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = u[i % u.size()];
      check_mma<Ty>(p, course::random_normal(size_t(p.q_elems()), seed),
                    course::random_normal(size_t(p.kv_elems()), seed + 1), v);
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// 99 KiB (consumer Ampere/Ada): D = 128 runs the 2-stage pipeline. Same answers expected.
TEST_CASE("flash_attention_mma: the 2-stage pipeline of smaller GPUs", "[day10][fp16_mma][quick]") {
  course::ScopedSmemLimit override_limit("101376");
  INFO("COURSE_SMEM_LIMIT=101376");
  run_grid("mma_smem_99k", {
                               {1, 2, 67, 300, 128, true, "tails, causal, D=128"},
                               {1, 2, 100, 37, 64, true, "Nq > Nk, D=64"},
                               {1, 1, 5, 200, 128, false, "keys over several tiles"},
                           });
}

// The overload with `lse` writes L_i = m_i + ln ℓ_i (natural log, scaled logits) per query row, what
// the backward pass (exercise 09) recomputes P from, and the same O as without it. Run and checked by
// common/lse_check.h (exercise 10's test uses the same check): rows that see no key must hold
// exactly −inf, the others match common/reference_backward.h's attention_forward_lse within the
// tolerance that header explains.
TEST_CASE("flash_attention_mma: the log-sum-exp output for the backward pass", "[day10][fp16_mma][lse][quick]") {
  const std::vector<Case> cases{{1, 1, 1, 1, 64, false, "one query, one key: L = its logit"},
                                {2, 3, 67, 67, 128, true, "tails, causal"},
                                {1, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key, L = -inf"},
                                {1, 2, 64, 333, 128, false, "Nq < Nk, several key tiles"},
                                {1, 8, 130, 130, 64, true, "GQA 8/2", 2}};
  auto run = [&](auto ty, float scale) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      AttentionParams p = params_of(c);
      p.scale = scale;
      const uint64_t seed =
          course::case_seed(std::string("mma_lse_") + Ty::name + (scale != 0.f ? "_big" : ""), int64_t(idx));
      CASE_INFO(Ty, c, p, seed);
      course::check_forward_lse<Ty>(p, seed, scale != 0.f,
                                    [](auto q, auto k, auto v, auto o, float* lse, const AttentionParams& pp) {
                                      flash_attention_mma(q, k, v, o, lse, pp);
                                    });
    }
  };
  run(Fp16{}, 0.f);
  run(Bf16{}, 0.f);
  run(Fp16{}, 128.f);
  run(Bf16{}, 128.f);
}

TEST_CASE("flash_attention_mma rejects bad arguments before launching anything", "[day10][fp16_mma][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 8, 8, 64);
  DeviceBuffer<uint16_t> q(size_t(good.q_elems())), o(size_t(good.o_elems()));
  q.fill_zero();
  o.poison();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    using T = typename Ty::T;
    INFO(Ty::name);
    const T* x = as_t<Ty>(q);
    T* y = as_t<Ty>(o);
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_mma(nullptr, x, x, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("k", flash_attention_mma(x, nullptr, x, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("v", flash_attention_mma(x, x, nullptr, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention_mma(x, x, x, nullptr, good));
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_mma(x + 1, x, x, y, good));  // not 16-byte aligned
    COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention_mma(x, x, x, y + 4, good));  // 8 bytes off
    COURSE_CHECK_INVALID_ARGUMENT("batch", flash_attention_mma(x, x, x, y, with([](auto& p) { p.batch = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_q", flash_attention_mma(x, x, x, y, with([](auto& p) { p.heads_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_kv", flash_attention_mma(x, x, x, y, with([](auto& p) { p.heads_kv = 3; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_q", flash_attention_mma(x, x, x, y, with([](auto& p) { p.seq_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_k", flash_attention_mma(x, x, x, y, with([](auto& p) { p.seq_k = -3; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim", flash_attention_mma(x, x, x, y, with([](auto& p) { p.head_dim = 32; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim", flash_attention_mma(x, x, x, y, with([](auto& p) { p.head_dim = 80; })));
    COURSE_CHECK_INVALID_ARGUMENT("window", flash_attention_mma(x, x, x, y, with([](auto& p) { p.window = 16; })));
    float* l = reinterpret_cast<float*>(o.data());
    COURSE_CHECK_INVALID_ARGUMENT(
        "lse", flash_attention_mma(x, x, x, y, reinterpret_cast<float*>(y + 1), good));  // 2 bytes off
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_mma(nullptr, x, x, y, l, good));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  flash_attention_mma(x, x, x, y, l, with([](auto& p) { p.head_dim = 32; })));
  };
  run(Fp16{});
  run(Bf16{});
  CUDA_CHECK(cudaDeviceSynchronize());
  for (uint16_t h : o.download()) CHECK(h == course::kPoisonF16Bits);  // nothing was written
}
