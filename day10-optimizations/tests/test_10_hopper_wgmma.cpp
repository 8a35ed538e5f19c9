// Tests for day10/10_hopper_wgmma: the FlashAttention-3-style Hopper kernel, fp16 and bf16, against
// the CPU reference run in double on the SAME 16-bit-rounded inputs. Every case runs for both types.
//
// What each input kind is there to catch (tolerances: common/compare.h, Tolerance::fp16()/bf16()):
//   kNormal     values, masks, tails, GQA heads, every tile and stage of the ring;
//   kOffset     Q and K with mean 2: dot products near 512, where fp16 steps by 0.5, so scores
//               accumulated in 16 bits miss by ~3 % in the weights (fp32 accumulation is exact);
//   kSixteenths logits of about ±1e4 (scale 128, values multiples of 1/16, so every logit is exact
//               in fp32): an exp taken before the running max is subtracted overflows;
//   kEqualRows  every row of V the same vector with |u| in [8, 16): O is u again, and a bf16 output
//               truncated instead of rounded drops 1/16, over the tolerance;
//   kNanTail    K and V followed by 128 rows of NaN: anything read past Nk poisons the output.
// The output is NaN-poisoned with guard regions before every launch (DeviceBuffer). The
// log-sum-exp output (the overloads with `lse`) is checked by common/lse_check.h, as exercise 05's.
//
// A block whose mbarrier phase never completes is ended by the kernel's watchdog thread after
// 10 s (common/arch/sm90.cuh, watchdog): the launch fails and the test says what that usually means.
//
// The [index] cases check wgmma_acc_row/col, wgmma_p_a_index and wgmma_desc_sw128 (and the given
// ring state of common/arch/ring_state.h, whose parities the producer and consumers wait on) on the CPU
// alone, against the PTX ISA's tables (the wgmma D and A fragments of each warp are the m16n8k16
// C and A layouts of common/mma_layout_check.h; the descriptor's fields by hand-encoded values):
// `build/bin/sol_10_hopper_wgmma "[index]"` runs them without a GPU.
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "10_hopper_wgmma.h"
#include "arch/ring_state.h"
#include "gpu_test.h"
#include "half_types.h"
#include "lse_check.h"
#include "mma_layout_check.h"
#include "reference.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

using Fp16 = course::Fp16Type;
using Bf16 = course::Bf16Type;
using course::as_t;

enum class Inputs { kNormal, kOffset, kSixteenths, kEqualRows, kNanTail };

struct Shape {
  int b, hq, hkv, nq, nk, d;
  bool causal;
  const char* why;
};

const char* describe(Inputs in) {
  switch (in) {
    case Inputs::kNormal:
      return "normal(0, 1) inputs";
    case Inputs::kOffset:
      return "Q and K with mean 2: dot products near 512 (fp16 steps by 0.5 there)";
    case Inputs::kSixteenths:
      return "scale 128, Q and K multiples of 1/16: logits of about ±1e4";
    case Inputs::kEqualRows:
      return "every V row the same u, |u| in [8, 16): O must round back to u";
    case Inputs::kNanTail:
      return "K and V followed by 128 rows of NaN";
  }
  return "";
}

// Runs the launcher on one shape and input kind and compares O with the reference.
template <class Ty, class Launch>
void check_case(const Shape& sh, Inputs in, const std::string& name, int64_t idx, Launch launch) {
  AttentionParams p = AttentionParams::make(sh.b, sh.hq, sh.hkv, sh.nq, sh.nk, sh.d, sh.causal);
  if (in == Inputs::kSixteenths) p.scale = 128.f;
  const uint64_t seed = course::case_seed(name + "_" + Ty::name, idx);
  INFO(Ty::name << " B=" << sh.b << " Hq=" << sh.hq << " Hkv=" << sh.hkv << " Nq=" << sh.nq << " Nk=" << sh.nk
                << " D=" << sh.d << (sh.causal ? " causal" : "") << " (" << sh.why << "); " << describe(in)
                << "; seed = " << seed << " (set COURSE_SEED to vary)");
  const size_t nq = size_t(p.q_elems()), nkv = size_t(p.kv_elems());
  std::vector<float> q32, k32, v32;
  switch (in) {
    case Inputs::kOffset:
      q32 = course::random_normal(nq, seed, 2.f);
      k32 = course::random_normal(nkv, seed + 1, 2.f);
      break;
    case Inputs::kSixteenths:
      q32 = course::random_normal_sixteenths(nq, seed);
      k32 = course::random_normal_sixteenths(nkv, seed + 1);
      break;
    default:
      q32 = course::random_normal(nq, seed);
      k32 = course::random_normal(nkv, seed + 1);
  }
  if (in == Inputs::kEqualRows) {
    std::vector<float> u = course::random_normal(size_t(p.head_dim), seed + 2);
    for (float& x : u) x = (x < 0 ? -1.f : 1.f) * (8.f + std::fmod(std::fabs(x) * 4.f, 8.f));
    v32.resize(nkv);
    for (size_t i = 0; i < nkv; ++i) v32[i] = u[i % u.size()];
  } else {
    v32 = course::random_normal(nkv, seed + 2);
  }
  const auto q = Ty::round(q32), k = Ty::round(k32), v = Ty::round(v32);
  std::vector<uint16_t> k_bits = Ty::bits(k), v_bits = Ty::bits(v);
  if (in == Inputs::kNanTail) {
    k_bits.resize(k_bits.size() + size_t(128 * p.head_dim), uint16_t(0x7FC0));  // NaN in fp16 and bf16
    v_bits.resize(v_bits.size() + size_t(128 * p.head_dim), uint16_t(0x7FC0));
  }
  auto d_q = course::to_device(Ty::bits(q));
  auto d_k = course::to_device(k_bits);
  auto d_v = course::to_device(v_bits);
  DeviceBuffer<uint16_t> d_o(size_t(p.o_elems()));
  d_o.poison();
  launch(as_t<Ty>(d_q), as_t<Ty>(d_k), as_t<Ty>(d_v), as_t<Ty>(d_o), p);
  const cudaError_t err = cudaDeviceSynchronize();
  if (err == cudaErrorLaunchFailure || err == cudaErrorIllegalInstruction) {
    FAIL("the kernel stopped with '"
         << cudaGetErrorString(err)
         << "'. In this exercise that is almost always "
            "the watchdog (common/arch/sm90.cuh) ending a block that waited 10 s on an mbarrier phase that never "
            "completes: a wait on the wrong parity, a tile the consumers never release (8 warp arrivals per "
            "phase), or expect_tx bytes that never land. The GPU context is now unusable: the test cases after "
            "this one fail too.");
  }
  CUDA_CHECK(err);
  const course::Dims dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  const auto r = course::compare(Ty::decode(d_o.download()), course::ref::attention(q, k, v, p), dims, Ty::tolerance(),
                                 d_o.guard_damage());
  if (!r.ok)
    FAIL_CHECK(r.report);
  else
    SUCCEED("output matches the reference");
}

struct Wgmma {
  template <class T>
  void operator()(const T* q, const T* k, const T* v, T* o, const AttentionParams& p) const {
    flash_attention_wgmma(q, k, v, o, p);
  }
};

void run_grid(const std::string& name, const std::vector<Shape>& shapes, Inputs in = Inputs::kNormal) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    check_case<Fp16>(shapes[i], in, name, int64_t(i), Wgmma{});
    check_case<Bf16>(shapes[i], in, name, int64_t(i), Wgmma{});
  }
}

using course::IndexFailures;
using course::ptx_a_position;
using course::ptx_c_position;
using course::PtxPos;

}  // namespace

// Each warp w of the warpgroup holds rows 16w .. 16w + 15 of the m64nN result; within a warp,
// every 8 columns are one m16n8 C fragment (PTX ISA, "wgmma .m64nNk16 register fragment layout
// for accumulator matrix D").
// An mbarrier as the PTX ISA describes it: after c completed phases, try_wait.parity(P) succeeds
// iff the phase of parity P has completed, i.e. iff the phase in progress, c mod 2, is not P.
template <int kStages>
void check_ring(IndexFailures& f) {
  using Ring = course::arch::sm90::RingState<kStages>;
  const auto passes = [](int completed, uint32_t parity) { return uint32_t(completed & 1) != parity; };
  Ring walked;
  for (int j = 0; j < 6 * kStages + 1; ++j, walked.advance()) {
    const Ring r = Ring::at(j);
    const int use = j / kStages;
    std::ostringstream at;
    at << "kStages = " << kStages << ", tile j = " << j << " (stage " << r.stage << ", use " << use << "): ";
    f.check(r.stage == j % kStages && r.stage == walked.stage && r.phase == walked.phase,
            at.str() + "at(j) and j calls of advance() disagree");
    // The consumers' full barrier has completed `use` phases before tile j lands, use + 1 after.
    f.check(!passes(use, r.full_parity()) && passes(use + 1, r.full_parity()),
            at.str() + "full_parity() must block until this use's copy lands and pass after");
    // The producer's empty barrier: `use` releases of this stage happened once the previous use is
    // consumed (none for use 0, where the wait must pass on a fresh barrier), use - 1 before.
    f.check(passes(use, r.empty_parity()) && (use == 0 || !passes(use - 1, r.empty_parity())),
            at.str() + "empty_parity() must pass once the previous use is released, and block before");
  }
}

TEST_CASE("RingState: the stage and the parities of tile j, walked and computed", "[index][quick]") {
  IndexFailures f;
  check_ring<1>(f);
  check_ring<2>(f);
  check_ring<3>(f);
  f.summary("RingState");
}

TEST_CASE("wgmma_acc_row, wgmma_acc_col: every thread and element lands where the PTX D layout puts it",
          "[index][quick]") {
  IndexFailures f;
  course::check_wgmma_accumulator(f, wgmma_acc_row, wgmma_acc_col, "wgmma_acc_row", "wgmma_acc_col", "query rows");
  f.summary("wgmma_acc_row / wgmma_acc_col");
}

// The A operand of wgmma.m64nNk16 in registers: warp w holds rows 16w..16w+15 as the m16n8k16 A
// fragment (registers j = 0..3, elements a_{2j}, a_{2j+1}).
TEST_CASE("wgmma_p_a_index: every register of P holds what the PTX A layout expects, from the thread's own S elements",
          "[index][quick]") {
  IndexFailures f;
  for (int kk = 0; kk < 8; ++kk) {
    for (int j = 0; j < 4; ++j) {
      const int i = wgmma_p_a_index(kk, j);
      std::ostringstream at;
      at << "k-step kk = " << kk << ", register j = " << j << ": wgmma_p_a_index gave " << i;
      if (i < 0 || i + 1 >= 64) {
        f.check(false, at.str() + ", outside the 64 S elements of a thread (N = 128)");
        continue;
      }
      for (int t = 0; t < 128; ++t) {
        for (int half = 0; half < 2; ++half) {
          const PtxPos a = ptx_a_position(t % 32, 2 * j + half);
          const int want_row = 16 * (t / 32) + a.row, want_key = 16 * kk + a.col;
          const int got_row = wgmma_acc_row(t, i + half), got_key = wgmma_acc_col(t, i + half);
          std::ostringstream where;
          where << at.str() << ", thread " << t << ", " << (half ? "high" : "low") << " half: the A layout wants (row "
                << want_row << ", key " << want_key << "), S element " << i + half << " is (row " << got_row << ", key "
                << got_key << ")";
          f.check(got_row == want_row && got_key == want_key, where.str());
        }
      }
    }
  }
  f.summary("wgmma_p_a_index");
}

// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): bits 0-13 start address >> 4 (of the
// address's low 18 bits), 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 49-51
// base offset (0 here), 62-63 swizzle mode, 1 = 128-byte swizzle. Expected values encoded by hand.
TEST_CASE("wgmma_desc_sw128: the descriptor's bit fields", "[index][quick]") {
  struct Want {
    uint32_t addr, lbo, sbo;
    uint64_t desc;
    const char* why;
  };
  const Want cases[] = {
      {0x0, 16, 1024, 0x4000004000010000ull, "K-major tile at address 0: LBO 16 (unused, 1), SBO 1024 (64)"},
      {0x12340, 16, 1024, 0x4000004000011234ull, "start address 0x12340 -> 0x1234 in bits 0-13"},
      {0x8020, 16384, 1024, 0x4000004004000802ull, "V tile (N-major): LBO 16384 -> 1024 in bits 16-29"},
      {0x40400, 16, 2048, 0x4000008000010040ull, "address bits above 17 are dropped; SBO 2048 -> 128"},
  };
  IndexFailures f;
  for (const Want& w : cases) {
    const uint64_t got = wgmma_desc_sw128(w.addr, w.lbo, w.sbo);
    std::ostringstream msg;
    msg << std::hex << "wgmma_desc_sw128(0x" << w.addr << ", " << std::dec << w.lbo << ", " << w.sbo << ") = 0x"
        << std::hex << got << ", expected 0x" << w.desc << " (" << w.why << ")";
    if (((got >> 62) & 3) != 1) msg << "; bits 62-63 must be 1 (128-byte swizzle), got " << ((got >> 62) & 3);
    f.check(got == w.desc, msg.str());
  }
  f.summary("wgmma_desc_sw128");
}

TEST_CASE("flash_attention_wgmma: small shapes and tails", "[day10][hopper][quick]") {
  run_grid("wgmma_small", {
                              {1, 1, 1, 1, 1, 64, false, "one query, one key"},
                              {1, 1, 1, 1, 1, 128, true, "one query, one key, causal"},
                              {2, 3, 3, 17, 17, 64, true, "below one tile"},
                              {1, 2, 2, 67, 67, 128, false, "not a tile multiple"},
                              {1, 2, 2, 130, 130, 128, true, "one row past a block of 128 (D = 128: two consumers)"},
                              {1, 2, 2, 130, 130, 64, true, "rows 128, 129: the third consumer's (D = 64: Br = 192)"},
                              {1, 2, 2, 193, 193, 64, true, "one row past a block of 192 (D = 64: three consumers)"},
                              {1, 1, 1, 5, 300, 128, false, "short query, keys over three tiles"},
                              {1, 1, 1, 16, 16, 64, true, "causal within one warp: rows r and r + 8"},
                          });
}

TEST_CASE("flash_attention_wgmma: Nq != Nk, causal alignment is bottom-right, rows that see nothing",
          "[day10][hopper][quick]") {
  run_grid("wgmma_nq_ne_nk",
           {
               {1, 2, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill"},
               {1, 2, 2, 1, 150, 128, true, "one query sees every key (decode step)"},
               {1, 2, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key and must be zero"},
               {1, 1, 1, 130, 1, 128, true, "only the last query row sees the single key"},
               {1, 1, 1, 400, 20, 128, true, "Nq > Nk: whole blocks of 128 rows see nothing (no tile loaded)"},
               {1, 1, 1, 450, 40, 64, true, "Nq > Nk at D = 64: a whole block of 192 rows sees nothing"},
               {2, 2, 2, 100, 37, 128, false, "Nq > Nk without a mask"},
           });
}

TEST_CASE("flash_attention_wgmma: GQA ratios (8,8) (8,2) (8,1) (32,8)", "[day10][hopper][quick]") {
  run_grid("wgmma_gqa", {
                            {1, 8, 8, 150, 150, 128, true, "MHA 8/8"},
                            {2, 8, 2, 67, 200, 64, true, "GQA 8/2, tails"},
                            {1, 8, 1, 130, 257, 128, false, "MQA 8/1"},
                            {1, 32, 8, 70, 70, 64, true, "GQA 32/8"},
                        });
}

TEST_CASE("flash_attention_wgmma: long sequences: the K/V ring wraps many times", "[day10][hopper]") {
  run_grid("wgmma_long", {
                             {1, 2, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
                             {2, 2, 2, 1000, 1000, 64, false, "non-multiple, D=64"},
                             {1, 2, 2, 511, 1537, 128, true, "chunked prefill over 13 tiles"},
                             {1, 1, 1, 1, 2048, 64, false, "one query, 2048 keys: the running max must be rescaled"},
                             {1, 2, 2, 2048, 2048, 128, true, "prefill, causal, D=128"},
                             {1, 2, 2, 2048, 2048, 64, false, "prefill, no mask, D=64"},
                         });
}

TEST_CASE("flash_attention_wgmma: scores accumulate in fp32 (large dot products)", "[day10][hopper][quick]") {
  run_grid("wgmma_fp32_acc", {{1, 2, 2, 80, 200, 128, false, "D=128"}, {1, 2, 2, 130, 130, 128, true, "D=128, causal"}},
           Inputs::kOffset);
}

TEST_CASE("flash_attention_wgmma: logits of magnitude 1e4 never overflow", "[day10][hopper][quick]") {
  run_grid(
      "wgmma_magnitude",
      {{1, 2, 2, 150, 150, 64, false, "large logits"}, {1, 2, 2, 150, 300, 128, true, "large logits, causal, Nq < Nk"}},
      Inputs::kSixteenths);
}

TEST_CASE("flash_attention_wgmma: nothing past the end of K and V is read", "[day10][hopper][quick]") {
  run_grid(
      "wgmma_nan_tail",
      {{1, 1, 1, 67, 67, 64, false, "partial last tile"}, {1, 1, 1, 33, 200, 128, true, "partial last tile, causal"}},
      Inputs::kNanTail);
}

TEST_CASE("flash_attention_wgmma: bf16 output is rounded to nearest, not truncated", "[day10][hopper][quick]") {
  run_grid(
      "wgmma_round",
      {{1, 2, 2, 70, 90, 64, false, "V rows all equal"}, {1, 2, 2, 70, 300, 128, true, "V rows all equal, causal"}},
      Inputs::kEqualRows);
}

// The bench's staircase runs the same function four ways, one per rung; each rung must be right too.
TEST_CASE("flash_attention_wgmma_step: every rung of the staircase computes the same function",
          "[day10][hopper][quick]") {
  const std::vector<Shape> shapes{{1, 2, 2, 200, 333, 128, true, "causal, tails, 3 tiles"},
                                  {1, 4, 2, 130, 600, 64, false, "GQA 4/2, 5 tiles"}};
  for (WgmmaStep step : {WgmmaStep::kSerial, WgmmaStep::kTwoStages, WgmmaStep::kOverlapped, WgmmaStep::kPingPong}) {
    INFO("step " << int(step));
    auto launch = [step](const auto* q, const auto* k, const auto* v, auto* o, const AttentionParams& p) {
      flash_attention_wgmma_step(step, q, k, v, o, p);
    };
    for (size_t i = 0; i < shapes.size(); ++i) {
      check_case<Fp16>(shapes[i], Inputs::kNormal, "wgmma_step" + std::to_string(int(step)), int64_t(i), launch);
      check_case<Bf16>(shapes[i], Inputs::kNormal, "wgmma_step" + std::to_string(int(step)), int64_t(i), launch);
    }
  }
}

// The overloads with `lse` write L_i = m_i + ln ℓ_i (natural log, scaled logits) per query row,
// exercise 05's definition, which ring attention (12) merges partial outputs by, and the same O as
// without it. Run and checked by common/lse_check.h, exactly as exercise 05's: rows that see no
// key hold −inf (here also whole blocks of 128 rows that load no tile), the others match
// common/reference_backward.h's attention_forward_lse.
TEST_CASE("flash_attention_wgmma: the log-sum-exp output, exercise 05's", "[day10][hopper][lse][quick]") {
  const std::vector<Shape> shapes{{1, 1, 1, 1, 1, 64, false, "one query, one key: L = its logit"},
                                  {2, 3, 3, 67, 67, 128, true, "tails, causal"},
                                  {1, 2, 2, 130, 130, 64, true, "rows 128, 129: the third consumer's at D = 64"},
                                  {1, 2, 2, 193, 193, 64, true, "one row past a block of 192: the next block's"},
                                  {1, 2, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key, L = -inf"},
                                  {1, 2, 2, 64, 333, 128, false, "Nq < Nk, several key tiles"},
                                  {1, 8, 2, 130, 257, 64, true, "GQA 8/2, tails"}};
  auto run = [&](auto ty, float scale) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < shapes.size(); ++idx) {
      const Shape& sh = shapes[idx];
      AttentionParams p = AttentionParams::make(sh.b, sh.hq, sh.hkv, sh.nq, sh.nk, sh.d, sh.causal);
      p.scale = scale;
      const uint64_t seed =
          course::case_seed(std::string("wgmma_lse_") + Ty::name + (scale != 0.f ? "_big" : ""), int64_t(idx));
      INFO(Ty::name << " B=" << sh.b << " Hq=" << sh.hq << " Hkv=" << sh.hkv << " Nq=" << sh.nq << " Nk=" << sh.nk
                    << " D=" << sh.d << (sh.causal ? " causal" : "") << " (" << sh.why << "); seed = " << seed
                    << " (set COURSE_SEED to vary)");
      course::check_forward_lse<Ty>(p, seed, scale != 0.f,
                                    [](auto q, auto k, auto v, auto o, float* lse, const AttentionParams& pp) {
                                      flash_attention_wgmma(q, k, v, o, lse, pp);
                                    });
    }
  };
  run(Fp16{}, 0.f);
  run(Bf16{}, 0.f);
  run(Fp16{}, 128.f);
  run(Bf16{}, 128.f);
}

TEST_CASE("flash_attention_wgmma rejects bad arguments before launching anything", "[day10][hopper][args][quick]") {
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
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_wgmma(nullptr, x, x, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("k", flash_attention_wgmma(x, nullptr, x, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("v", flash_attention_wgmma(x, x, nullptr, y, good));
    COURSE_CHECK_INVALID_ARGUMENT("o", flash_attention_wgmma(x, x, x, nullptr, good));
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_wgmma(x + 1, x, x, y, good));  // not 16-byte aligned
    COURSE_CHECK_INVALID_ARGUMENT("k", flash_attention_wgmma(x, x + 4, x, y, good));  // 8 bytes off
    COURSE_CHECK_INVALID_ARGUMENT("batch", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.batch = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_q", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.heads_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_kv", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.heads_kv = 3; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_q", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.seq_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_k", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.seq_k = -3; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.head_dim = 32; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.head_dim = 96; })));
    COURSE_CHECK_INVALID_ARGUMENT("window", flash_attention_wgmma(x, x, x, y, with([](auto& p) { p.window = 16; })));
    COURSE_CHECK_INVALID_ARGUMENT(
        "head_dim", flash_attention_wgmma_step(WgmmaStep::kSerial, x, x, x, y, with([](auto& p) { p.head_dim = 80; })));
    float* l = reinterpret_cast<float*>(o.data());
    COURSE_CHECK_INVALID_ARGUMENT(
        "lse", flash_attention_wgmma(x, x, x, y, reinterpret_cast<float*>(y + 1), good));  // 2 bytes off
    COURSE_CHECK_INVALID_ARGUMENT("q", flash_attention_wgmma(nullptr, x, x, y, l, good));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  flash_attention_wgmma(x, x, x, y, l, with([](auto& p) { p.head_dim = 32; })));
  };
  run(Fp16{});
  run(Bf16{});
  CUDA_CHECK(cudaDeviceSynchronize());
  for (uint16_t h : o.download()) CHECK(h == course::kPoisonF16Bits);  // nothing was written
}
