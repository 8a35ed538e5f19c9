// Tests for day10/11_hopper_backward: the FlashAttention-3-style backward on Hopper, fp16 and bf16,
// against the fp64 CPU reference run on the SAME 16-bit-rounded inputs, with exercise 09's
// gradients' tolerances and bug-targeting inputs (common/backward_test.h). Every case runs for both
// types and checks dQ, dK and dV (NaN-poisoned between guard regions); the workspace is
// NaN-poisoned too: what it holds on entry must not matter.
//
// What the cases add to 09's, for this kernel's own ways to fail:
//   * every shape runs the default (kDqReduce: dQ by the copy engine) and the deterministic mode
//     (the same, ordered); "the staircase" runs kSerial and kTwoStages (float4 atomics) too;
//   * "deterministic mode": many key blocks add into each dQ tile; two runs must give the same
//     bits (and the right values);
//   * Br = 64 (D = 128) and Br = 128 (D = 64) query tiles, ragged in both Nq and Nk, GQA groups of
//     up to 8 heads (one block walks G heads × the tiles: the Q/dO ring wraps many times).
// A block whose mbarrier phase never completes is ended by the kernel's watchdog thread after 10 s:
// the launch fails ("unspecified launch failure") and the test reports it.
//
// The [index] cases check hbwd_acc_key/query against the PTX ISA's wgmma D layout, hbwd_ds_offset
// against the 128-byte swizzle (and that a warp's stores of dSᵀ hit 32 different banks), and
// hbwd_dq_row/col (every element of a dQ tile exactly once), on the CPU alone:
// `build/bin/sol_11_hopper_backward "[index]"` runs them without a GPU.
#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "11_hopper_backward.h"
#include "backward_test.h"
#include "gpu_test.h"
#include "mma_layout_check.h"

using course::AttentionParams;
using course::DeviceBuffer;

namespace {

using course::as_t;
using course::IndexFailures;
using course::ptx_c_position;
using course::PtxPos;
using course::bwd_test::Bf16;
using course::bwd_test::Case;
using course::bwd_test::Fp16;
using course::bwd_test::Inputs;
using course::bwd_test::normal_inputs;
using course::bwd_test::params_of;
using course::bwd_test::rounded;

enum class Mode { kDefault, kDeterministic, kSerial, kTwoStages, kDqReduce };

const char* describe(Mode m) {
  switch (m) {
    case Mode::kDefault:
      return "flash_attention_wgmma_backward (kDqReduce)";
    case Mode::kDeterministic:
      return "flash_attention_wgmma_backward, deterministic";
    case Mode::kSerial:
      return "flash_attention_wgmma_backward_step(kSerial)";
    case Mode::kTwoStages:
      return "flash_attention_wgmma_backward_step(kTwoStages)";
    case Mode::kDqReduce:
      return "flash_attention_wgmma_backward_step(kDqReduce)";
  }
  return "?";
}

template <class Ty>
void launch(Mode m, const AttentionParams& p, course::bwd_test::Problem& pr, void* ws) {
  using T = typename Ty::T;
  const T *q = as_t<Ty>(pr.q), *k = as_t<Ty>(pr.k), *v = as_t<Ty>(pr.v), *o = as_t<Ty>(pr.o), *d_o = as_t<Ty>(pr.d_o);
  T *dq = as_t<Ty>(pr.dq), *dk = as_t<Ty>(pr.dk), *dv = as_t<Ty>(pr.dv);
  switch (m) {
    case Mode::kDefault:
    case Mode::kDeterministic:
      flash_attention_wgmma_backward(q, k, v, o, d_o, pr.lse.data(), dq, dk, dv, ws, p, 0, m == Mode::kDeterministic);
      break;
    case Mode::kSerial:
    case Mode::kTwoStages:
    case Mode::kDqReduce: {
      const HopperBwdStep step = m == Mode::kSerial      ? HopperBwdStep::kSerial
                                 : m == Mode::kTwoStages ? HopperBwdStep::kTwoStages
                                                         : HopperBwdStep::kDqReduce;
      flash_attention_wgmma_backward_step(step, q, k, v, o, d_o, pr.lse.data(), dq, dk, dv, ws, p);
      break;
    }
  }
}

DeviceBuffer<float> poisoned_workspace(const AttentionParams& p) {
  DeviceBuffer<float> ws((flash_attention_wgmma_backward_workspace_bytes(p) + 3) / 4);
  ws.poison();
  return ws;
}

template <class Ty>
void run_and_compare(const AttentionParams& p, const Inputs& in, Mode m, size_t nan_pad = 0) {
  INFO(describe(m));
  auto pr = course::bwd_test::upload<Ty>(p, in, nan_pad);
  auto ws = poisoned_workspace(p);
  launch<Ty>(m, p, pr, ws.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  course::bwd_test::compare_gradients<Ty>(p, pr);
}

template <class Ty>
void run_grid_t(const std::string& name, const std::vector<Case>& cases, std::vector<Mode> modes) {
  for (size_t idx = 0; idx < cases.size(); ++idx) {
    const Case& c = cases[idx];
    const AttentionParams p = params_of(c);
    const uint64_t seed = course::case_seed(name + "_" + Ty::name, int64_t(idx));
    COURSE_BWD_CASE_INFO(Ty, c, p, seed);
    const Inputs in = rounded<Ty>(normal_inputs(p, seed));
    for (Mode m : modes) run_and_compare<Ty>(p, in, m);
  }
}

void run_grid(const std::string& name, const std::vector<Case>& cases,
              std::vector<Mode> modes = {Mode::kDefault, Mode::kDeterministic}) {
  run_grid_t<Fp16>(name, cases, modes);
  run_grid_t<Bf16>(name, cases, modes);
}

}  // namespace

TEST_CASE("hbwd_acc_key, hbwd_acc_query: every thread and element lands where the PTX D layout puts it",
          "[index][quick]") {
  IndexFailures f;  // N is Br here: 64 (D = 128) or 128 (D = 64)
  course::check_wgmma_accumulator(f, hbwd_acc_key, hbwd_acc_query, "hbwd_acc_key", "hbwd_acc_query", "keys");
  f.summary("hbwd_acc_key / hbwd_acc_query");
}

// The 128-byte swizzle as TMA writes and wgmma reads it: in each 1024-byte atom of 8 rows of 128
// bytes, bits 4..6 of an address (its 16-byte chunk) are XORed with bits 7..9 (its row).
TEST_CASE("hbwd_ds_offset: dSᵀ in the 128-byte swizzle, every element once, a warp's stores conflict-free",
          "[index][quick]") {
  IndexFailures f;
  for (int br : {64, 128}) {
    std::set<uint32_t> seen;
    for (int key = 0; key < 128; ++key) {
      for (int query = 0; query < br; ++query) {
        const uint32_t plain = uint32_t((query / 64) * 128 * 128 + key * 128 + (query % 64) * 2);
        const uint32_t want = plain ^ (((plain >> 7) & 7u) << 4);
        const uint32_t got = hbwd_ds_offset(key, query);
        f.check(got == want, "hbwd_ds_offset(key " + std::to_string(key) + ", query " + std::to_string(query) +
                                 ") = " + std::to_string(got) + ", expected " + std::to_string(want) +
                                 " (row = key, 128 bytes per row, 64 queries per plane of 16384 bytes, the 16-byte "
                                 "chunk XOR key mod 8)");
        seen.insert(got);
      }
    }
    f.check(int(seen.size()) == 128 * br, "Br = " + std::to_string(br) + ": " + std::to_string(seen.size()) +
                                              " distinct offsets, expected 128 × " + std::to_string(br));
  }
  // The kernel stores elements i, i + 1 of thread t as one 32-bit word: for each warp and i, the
  // 32 lanes' words must fall in 32 different banks (4-byte banks, 32 of them).
  for (int cw = 0; cw < 2; ++cw) {
    for (int warp = 0; warp < 4; ++warp) {
      for (int i = 0; i < 64; i += 2) {
        std::set<uint32_t> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int t = 32 * warp + lane;
          banks.insert((hbwd_ds_offset(64 * cw + hbwd_acc_key(t, i), hbwd_acc_query(t, i)) / 4) % 32);
        }
        f.check(banks.size() == 32, "consumer " + std::to_string(cw) + ", warp " + std::to_string(warp) + ", element " +
                                        std::to_string(i) + ": the 32 lanes' stores use " +
                                        std::to_string(banks.size()) + " banks, expected 32 (no conflict)");
      }
    }
  }
  f.summary("hbwd_ds_offset");
}

TEST_CASE("hbwd_dq_row, hbwd_dq_col: the two consumers' pieces cover a dQ tile exactly once", "[index][quick]") {
  IndexFailures f;
  for (int d : {64, 128}) {
    const int br = d == 128 ? 64 : 128;
    std::set<std::pair<int, int>> seen;
    for (int w = 0; w < 2; ++w) {
      for (int t = 0; t < 128; ++t) {
        for (int i = 0; i < 32; ++i) {
          const int row = hbwd_dq_row(d, w, t, i), col = hbwd_dq_col(d, w, t, i);
          const PtxPos c = ptx_c_position(t % 32, i % 4);
          const int r = 16 * (t / 32) + c.row, cc = 8 * (i / 4) + c.col;  // the m64n64 accumulator's
          const int want_row = d == 128 ? r : 64 * w + r, want_col = d == 128 ? 64 * w + cc : cc;
          std::ostringstream at;
          at << "D = " << d << ", consumer " << w << ", thread " << t << ", element " << i << ": ";
          f.check(row == want_row && col == want_col,
                  at.str() + "(" + std::to_string(row) + ", " + std::to_string(col) + "), expected (" +
                      std::to_string(want_row) + ", " + std::to_string(want_col) +
                      ") (D = 128: consumer w computes columns 64w..; D = 64: rows 64w..)");
          seen.insert({row, col});
        }
      }
    }
    f.check(int(seen.size()) == br * d, "D = " + std::to_string(d) + ": " + std::to_string(seen.size()) +
                                            " distinct (row, column) positions, expected " + std::to_string(br) +
                                            " × " + std::to_string(d));
  }
  f.summary("hbwd_dq_row / hbwd_dq_col");
}

TEST_CASE("flash_attention_wgmma_backward: small shapes and N = 1", "[day10][hopper_backward][quick]") {
  run_grid("hbwd_small", course::bwd_test::small_cases());
}

TEST_CASE("flash_attention_wgmma_backward: Nq != Nk, causal alignment is bottom-right",
          "[day10][hopper_backward][quick]") {
  run_grid("hbwd_nq_ne_nk", course::bwd_test::nq_ne_nk_cases());
}

TEST_CASE("flash_attention_wgmma_backward: GQA, dK and dV summed over the group", "[day10][hopper_backward][quick]") {
  run_grid("hbwd_gqa", course::bwd_test::gqa_cases());
}

TEST_CASE("flash_attention_wgmma_backward: tile boundaries, head dims and longer sequences",
          "[day10][hopper_backward]") {
  run_grid("hbwd_grid", {
                            {1, 2, 1000, 1000, 128, true, "non-multiple, causal, D=128"},
                            {1, 2, 1000, 1000, 64, false, "non-multiple, D=64"},
                            {1, 3, 128, 128, 64, true, "exactly one query tile and one key block (D=64)"},
                            {1, 3, 64, 128, 128, true, "exactly one query tile and one key block (D=128)"},
                            {1, 1, 129, 129, 64, true, "one past a tile boundary, both ways"},
                            {1, 2, 511, 1537, 128, true, "many key blocks"},
                            {1, 2, 2048, 2048, 64, true, "2048, causal"},
                            {1, 32, 256, 256, 128, true, "(32,8) over several query tiles", 8},
                        });
}

TEST_CASE("flash_attention_wgmma_backward: logits of magnitude 1e3", "[day10][hopper_backward][quick]") {
  const std::vector<Case> cases = course::bwd_test::magnitude_cases();
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      AttentionParams p = params_of(c);
      p.scale = 64.f;
      const uint64_t seed = course::case_seed(std::string("hbwd_magnitude_") + Ty::name, int64_t(idx));
      COURSE_BWD_CASE_INFO(Ty, c, p, seed);
      INFO("scale = 64: logits spread over about ±1e3");
      run_and_compare<Ty>(p, course::bwd_test::magnitude_inputs<Ty>(p, seed), Mode::kDefault);
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// Partial sums of dQ that are large and cancel (common/backward_test.h, cancelling_dq_inputs): dQ
// summed in 16 bits across the key blocks misses by 10 to 50 times the bound.
TEST_CASE("flash_attention_wgmma_backward: dQ accumulates in fp32 across key blocks",
          "[day10][hopper_backward][quick]") {
  const std::vector<Case> cases = course::bwd_test::cancelling_dq_cases();
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("hbwd_dq_fp32_") + Ty::name, int64_t(idx));
      COURSE_BWD_CASE_INFO(Ty, c, p, seed);
      INFO("K_j = w + noise, V_j = ±u + noise (+ for the first half of the keys): large partial sums that cancel");
      const Inputs in = course::bwd_test::cancelling_dq_inputs<Ty>(p, seed);
      run_and_compare<Ty>(p, in, Mode::kDefault);
      run_and_compare<Ty>(p, in, Mode::kSerial);
    }
  };
  run(Fp16{});
  run(Bf16{});
}

// Q, K, V, O, dO (and L) are followed in memory by 64 rows of NaN: a kernel that reads past Nq or
// Nk, or lets a zero-filled row of a partial tile become NaN, turns gradients into NaN.
TEST_CASE("flash_attention_wgmma_backward: nothing past the end of the inputs is read",
          "[day10][hopper_backward][quick]") {
  const std::vector<Case> cases = course::bwd_test::nan_tail_cases();
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("hbwd_tail_nan_") + Ty::name, int64_t(idx));
      COURSE_BWD_CASE_INFO(Ty, c, p, seed);
      run_and_compare<Ty>(p, rounded<Ty>(normal_inputs(p, seed)), Mode::kDefault, 64);
    }
  };
  run(Fp16{});
  run(Bf16{});
}

TEST_CASE("flash_attention_wgmma_backward_step: every rung of the staircase computes the same gradients",
          "[day10][hopper_backward][quick]") {
  run_grid("hbwd_steps",
           {
               {1, 2, 200, 333, 64, true, "tails, causal, D=64"},
               {1, 4, 129, 200, 128, true, "tails, causal, GQA (4,2), D=128", 2},
               {1, 2, 300, 300, 128, false, "the Q/dO ring wraps, D=128"},
           },
           {Mode::kSerial, Mode::kTwoStages, Mode::kDefault});
}

// Every dQ tile here gets one partial sum from each of 16 to 32 key blocks. Without an order the
// fp32 sums round differently from run to run; in the deterministic mode they may not.
TEST_CASE("flash_attention_wgmma_backward: the deterministic mode gives the same bits every run",
          "[day10][hopper_backward][quick]") {
  const std::vector<Case> cases{{1, 4, 256, 4096, 64, false, "256 queries, 32 key blocks, GQA (4,2)", 2},
                                {2, 2, 300, 2048, 128, true, "16 key blocks, causal, batch 2"}};
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    for (size_t idx = 0; idx < cases.size(); ++idx) {
      const Case& c = cases[idx];
      const AttentionParams p = params_of(c);
      const uint64_t seed = course::case_seed(std::string("hbwd_determinism_") + Ty::name, int64_t(idx));
      COURSE_BWD_CASE_INFO(Ty, c, p, seed);
      auto pr = course::bwd_test::upload<Ty>(p, rounded<Ty>(normal_inputs(p, seed)));
      auto ws = poisoned_workspace(p);
      std::vector<std::vector<uint16_t>> runs;
      for (int r = 0; r < 3; ++r) {
        pr.dq.poison();
        launch<Ty>(Mode::kDeterministic, p, pr, ws.data());
        CUDA_CHECK(cudaDeviceSynchronize());
        runs.push_back(pr.dq.download());
      }
      course::bwd_test::compare_gradients<Ty>(p, pr);
      for (int r = 1; r < 3; ++r) {
        size_t differ = 0;
        for (size_t e = 0; e < runs[0].size(); ++e) differ += runs[0][e] != runs[size_t(r)][e];
        INFO("run " << r + 1 << " against run 1: " << differ << " of " << runs[0].size() << " dQ elements differ");
        CHECK(differ == 0);
      }
    }
  };
  run(Fp16{});
  run(Bf16{});
}

TEST_CASE("flash_attention_wgmma_backward rejects bad arguments before launching anything",
          "[day10][hopper_backward][args][quick]") {
  const AttentionParams good = AttentionParams::make(1, 2, 2, 8, 8, 64);
  DeviceBuffer<uint16_t> x16(size_t(good.q_elems())), out(size_t(good.q_elems()));
  DeviceBuffer<float> lse(size_t(good.batch * good.heads_q * good.seq_q));
  DeviceBuffer<float> ws((flash_attention_wgmma_backward_workspace_bytes(good) + 3) / 4);
  x16.fill_zero();
  lse.fill_zero();
  out.poison();
  auto with = [&](auto edit) {
    AttentionParams p = good;
    edit(p);
    return p;
  };
  auto run = [&](auto ty) {
    using Ty = decltype(ty);
    using T = typename Ty::T;
    INFO(Ty::name);
    const T* x = as_t<Ty>(x16);
    T* y = as_t<Ty>(out);
    const float* l = lse.data();
    float* w = ws.data();
#define BWD(...) flash_attention_wgmma_backward(__VA_ARGS__)
    COURSE_CHECK_INVALID_ARGUMENT("q", BWD(nullptr, x, x, x, x, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("k", BWD(x, nullptr, x, x, x, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("v", BWD(x, x, nullptr, x, x, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("o", BWD(x, x, x, nullptr, x, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("d_o", BWD(x, x, x, x, nullptr, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("lse", BWD(x, x, x, x, x, nullptr, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("dq", BWD(x, x, x, x, x, l, nullptr, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("dk", BWD(x, x, x, x, x, l, y, nullptr, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("dv", BWD(x, x, x, x, x, l, y, y, nullptr, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("workspace", BWD(x, x, x, x, x, l, y, y, y, nullptr, good));
    COURSE_CHECK_INVALID_ARGUMENT("q", BWD(x + 1, x, x, x, x, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("d_o", BWD(x, x, x, x, x + 4, l, y, y, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("dk", BWD(x, x, x, x, x, l, y, y + 2, y, w, good));
    COURSE_CHECK_INVALID_ARGUMENT("workspace", BWD(x, x, x, x, x, l, y, y, y, w + 1, good));
    COURSE_CHECK_INVALID_ARGUMENT("batch", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.batch = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_q", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.heads_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("heads_kv", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.heads_kv = 3; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_q", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.seq_q = 0; })));
    COURSE_CHECK_INVALID_ARGUMENT("seq_k", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.seq_k = -3; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.head_dim = 32; })));
    COURSE_CHECK_INVALID_ARGUMENT("head_dim",
                                  BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.head_dim = 80; })));
    COURSE_CHECK_INVALID_ARGUMENT("window", BWD(x, x, x, x, x, l, y, y, y, w, with([](auto& p) { p.window = 16; })));
#undef BWD
  };
  run(Fp16{});
  run(Bf16{});
  CUDA_CHECK(cudaDeviceSynchronize());
  for (uint16_t h : out.download()) CHECK(h == course::kPoisonF16Bits);  // nothing was written
}
