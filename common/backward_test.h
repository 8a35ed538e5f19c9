// What the tests of the 16-bit backward kernels (day 10 · 09 on mma.sync, 11 on wgmma) share: the
// gradients' tolerances, the inputs that target a bug class, the upload of one problem as a
// training step would give it to the kernel, and the comparison of dQ, dK, dV with the fp64
// reference (common/reference_backward.h) run on the SAME 16-bit-rounded inputs.
//
// What the kernel is given: Q, K, V and dO rounded to the 16-bit type, O = the reference's output
// rounded to the type (what a 16-bit forward writes) and L = the reference's log-sum-exp in fp32.
//
// Tolerances (grad_tolerance). Gradients have no natural unit (dQ is about scale · sqrt(D / Nk) of
// dV's size), so the element-wise bound is relative to the rms of the reference tensor:
// |out − ref| <= a · rms(ref) + r · |ref|, and the relative L2 error <= l, with
//   fp16: a = 1e-2, r = 1e-2, l = 2e-3        bf16: a = 5e-2, r = 5e-2, l = 8e-3.
// A correct kernel errs by about 3e-4 (fp16) and 2.5e-3 (bf16) in relative L2: the rounding of P
// and dS to the 16-bit type where they are matrix-product operands, of D_i's O and of the outputs.
//
// fp32's own floor (fp32_floor). dS_ij = P_ij (dP_ij − D_i) is a difference of two fp32 sums of D
// products (dO_i·V_j and dO_i·O_i) that, for a row whose P is one-hot, are equal in exact
// arithmetic: the kernel's dS is then fp32 rounding, about u·D·|dO||V| (u = 2^-24), and dQ_i =
// scale·Σ_j dS_ij K_j carries it times scale·|K| (dK: times scale·|Q|). At the logits of
// magnitude_inputs (scale = 64, most rows one-hot) the reference's dQ and dK are nearly zero and
// this floor is all a correct kernel can meet (measured on an H100: up to 1.6e-3 for wgmma's dP,
// where 8·u·scale·D·rms(dO)·rms(V)·rms(K) = 3.9e-3). Where rms(ref) is below the floor, the
// relative L2 error (of rounding noise) is not bounded. At ordinary scales (1/sqrt(D)) the floor
// is about 1e-5 of the gradients and changes nothing.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gpu_test.h"
#include "half_types.h"
#include "reference_backward.h"

namespace course::bwd_test {

// The gradients' own bounds on top of the shared type traits.
struct Fp16 : course::Fp16Type {
  static constexpr double kAtolRms = 1e-2, kRtol = 1e-2, kRelL2 = 2e-3;
};
struct Bf16 : course::Bf16Type {
  static constexpr double kAtolRms = 5e-2, kRtol = 5e-2, kRelL2 = 8e-3;
};

inline double rms(const std::vector<float>& x) {
  double s = 0.0;
  for (float v : x) s += double(v) * v;
  return x.empty() ? 0.0 : std::sqrt(s / double(x.size()));
}

// |out − ref| <= a·s + r·|ref| and rel L2 <= l, with s = rms(ref), or `floor` when that is larger
// (a reference that is exactly zero, e.g. dQ and dK with a single key, has no scale of its own;
// its relative L2 error is then undefined and only the element-wise bound applies).
template <class Ty>
course::Tolerance grad_tolerance(const std::vector<float>& ref, double floor) {
  const double s = rms(ref);
  return {
      Ty::kAtolRms * std::max(s, floor), Ty::kRtol, s > 0.0 ? Ty::kRelL2 : INFINITY,
      Ty::kRelL2 < 5e-3 ? "fp16 gradient (atol relative to rms(ref))" : "bf16 gradient (atol relative to rms(ref))"};
}

// Rounded inputs of one problem (fp32 values exactly representable in the 16-bit type).
struct Inputs {
  std::vector<float> q, k, v, d_o;
};

template <class Ty>
Inputs rounded(Inputs in) {
  in.q = Ty::round(in.q);
  in.k = Ty::round(in.k);
  in.v = Ty::round(in.v);
  in.d_o = Ty::round(in.d_o);
  return in;
}

inline Inputs normal_inputs(const AttentionParams& p, uint64_t seed) {
  return {course::random_normal(size_t(p.q_elems()), seed), course::random_normal(size_t(p.kv_elems()), seed + 1),
          course::random_normal(size_t(p.kv_elems()), seed + 2), course::random_normal(size_t(p.q_elems()), seed + 3)};
}

// Logits of about ±1e3 (set p.scale = 64 before calling): Q and K are multiples of 1/16 (exact in
// both types), so every logit is exact in fp32 and many reach ±1e3. Any exp of an unsubtracted
// score overflows; P must be exp(S − L_i) with the given L_i. Most rows are then nearly one-hot,
// and for those D_i = dO_i·O_i is difference-sensitive: dP_ij − D_i is tiny for the winning key,
// and the 16-bit rounding of O (all the backward gets) would move D_i by more than that. So that
// the test judges the kernel and not that inherent rounding, dO_i is made orthogonal to the
// rounding error of O_i before dO is itself rounded (dO_i·O16_i = dO_i·O_i to second order).
template <class Ty>
Inputs magnitude_inputs(const AttentionParams& p, uint64_t seed) {
  Inputs in{course::random_normal_sixteenths(size_t(p.q_elems()), seed),
            course::random_normal_sixteenths(size_t(p.kv_elems()), seed + 1),
            course::random_normal(size_t(p.kv_elems()), seed + 2),
            course::random_normal(size_t(p.q_elems()), seed + 3)};
  in = rounded<Ty>(in);
  const auto fwd = course::ref::attention_forward_lse(in.q, in.k, in.v, p);
  const size_t D = size_t(p.head_dim);
  for (size_t row = 0; row < in.d_o.size() / D; ++row) {
    double ee = 0.0, de = 0.0;
    std::vector<double> err(D);
    for (size_t d = 0; d < D; ++d) {
      const size_t x = row * D + d;
      err[d] = double(Ty::round1(fwd.o[x])) - double(fwd.o[x]);
      ee += err[d] * err[d];
      de += err[d] * in.d_o[x];
    }
    if (ee > 0.0)
      for (size_t d = 0; d < D; ++d) in.d_o[row * D + d] -= float(de / ee * err[d]);
  }
  in.d_o = Ty::round(in.d_o);
  return in;
}

// dQ_i = scale · Σ_j dS_ij K_j is summed over the key blocks. Here the partial sums are large and
// cancel: K_j = w + noise for every key (Σ_j dS_ij = 0 removes w from the total), and V_j = +u +
// noise for the first half of the keys, −u + noise for the second, so that dS_ij has one sign over
// the first half and the other over the second. After half the key blocks the running sum of a
// row is about |w|·|dO_i·u|/2, many times the final dQ_i. An accumulator that rounds to 16 bits
// after each block loses ~2^-11 (fp16) or ~2^-8 (bf16) of that running sum per block: 10 to 50
// times the bound (emulated on the CPU), while fp32 accumulation loses nothing measurable.
template <class Ty>
Inputs cancelling_dq_inputs(const AttentionParams& p, uint64_t seed) {
  const size_t D = size_t(p.head_dim);
  const int Nk = p.seq_k;
  Inputs in{course::random_normal(size_t(p.q_elems()), seed, 0.f, 0.5f),
            course::random_normal(size_t(p.kv_elems()), seed + 1),
            course::random_normal(size_t(p.kv_elems()), seed + 2, 0.f, 0.5f),
            course::random_normal(size_t(p.q_elems()), seed + 3)};
  const auto w = course::random_normal(D, seed + 4), u = course::random_normal(D, seed + 5);
  for (size_t r = 0; r < in.k.size() / D; ++r) {
    const float sign = int(r % size_t(Nk)) < Nk / 2 ? 1.f : -1.f;
    for (size_t d = 0; d < D; ++d) {
      in.k[r * D + d] += w[d];
      in.v[r * D + d] += sign * u[d];
    }
  }
  return rounded<Ty>(in);
}

// 16-bit bits with `pad` NaN elements appended (the tensor is followed by garbage in memory).
template <class Ty>
std::vector<uint16_t> bits_padded(const std::vector<float>& x, size_t pad) {
  std::vector<uint16_t> b = Ty::bits(x);
  b.resize(b.size() + pad, uint16_t(0x7FC0));  // NaN in fp16 and bf16
  return b;
}

// One problem on the device, outputs NaN-poisoned between guard regions. nan_pad: NaN rows placed
// after q, k, v, o, d_o and lse in memory.
struct Problem {
  course::ref::AttentionBackward ref;
  DeviceBuffer<uint16_t> q, k, v, o, d_o;
  DeviceBuffer<float> lse;
  DeviceBuffer<uint16_t> dq, dk, dv;
  double rms_q = 0, rms_k = 0, rms_v = 0, rms_do = 0;  // of the inputs, for fp32_floor
};

template <class Ty>
Problem upload(const AttentionParams& p, const Inputs& in, size_t nan_pad = 0) {
  auto ref = course::ref::attention_backward(in.q, in.k, in.v, in.d_o, p);
  const size_t pad = nan_pad * size_t(p.head_dim);
  std::vector<float> lse = ref.lse;
  lse.resize(lse.size() + nan_pad, std::numeric_limits<float>::quiet_NaN());
  Problem pr{std::move(ref),
             course::to_device(bits_padded<Ty>(in.q, pad)),
             course::to_device(bits_padded<Ty>(in.k, pad)),
             course::to_device(bits_padded<Ty>(in.v, pad)),
             DeviceBuffer<uint16_t>(),
             course::to_device(bits_padded<Ty>(in.d_o, pad)),
             course::to_device(lse),
             DeviceBuffer<uint16_t>(size_t(p.q_elems())),
             DeviceBuffer<uint16_t>(size_t(p.kv_elems())),
             DeviceBuffer<uint16_t>(size_t(p.kv_elems()))};
  pr.o = course::to_device(bits_padded<Ty>(Ty::round(pr.ref.o), pad));  // O as a 16-bit forward writes it
  pr.rms_q = rms(in.q);
  pr.rms_k = rms(in.k);
  pr.rms_v = rms(in.v);
  pr.rms_do = rms(in.d_o);
  pr.dq.poison();
  pr.dk.poison();
  pr.dv.poison();
  return pr;
}

// The element-wise bound fp32 arithmetic itself allows dQ (times rms(K)) or dK (times rms(Q)).
inline double fp32_floor(const AttentionParams& p, const Problem& pr, double rms_other) {
  return 8.0 * std::ldexp(1.0, -24) * double(p.softmax_scale()) * p.head_dim * pr.rms_do * pr.rms_v * rms_other;
}

// dQ, dK, dV against the reference, one assertion each.
template <class Ty>
void compare_gradients(const AttentionParams& p, const Problem& pr) {
  const double floor = 1e-3 * rms(pr.ref.dv);
  const course::Dims qdims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}};
  const course::Dims kdims{{"b", p.batch}, {"h_kv", p.heads_kv}, {"j", p.seq_k}, {"d", p.head_dim}};
  struct Grad {
    const char* name;
    const DeviceBuffer<uint16_t>& out;
    const std::vector<float>& ref;
    const course::Dims& dims;
    double fp32;  // fp32_floor of this gradient
  };
  for (const Grad& gr :
       {Grad{"dQ", pr.dq, pr.ref.dq, qdims, fp32_floor(p, pr, pr.rms_k)},
        Grad{"dK", pr.dk, pr.ref.dk, kdims, fp32_floor(p, pr, pr.rms_q)}, Grad{"dV", pr.dv, pr.ref.dv, kdims, 0.0}}) {
    course::Tolerance tol = grad_tolerance<Ty>(gr.ref, floor);
    if (gr.fp32 > tol.atol) {
      tol.atol = gr.fp32;
      tol.name = "gradient at fp32's floor (see common/backward_test.h)";
      if (rms(gr.ref) < gr.fp32) tol.max_rel_l2 = INFINITY;
    }
    const auto r = course::compare(Ty::decode(gr.out.download()), gr.ref, gr.dims, tol, gr.out.guard_damage());
    if (!r.ok)
      FAIL_CHECK(gr.name << ": " << r.report);
    else
      SUCCEED(gr.name << " matches the reference");
  }
}

// A test case: shape, mask and what it is there to catch.
struct Case {
  int b, h, nq, nk, d;
  bool causal;
  const char* why;
  int h_kv = 0;  // 0: MHA (Hkv = Hq)
};

inline AttentionParams params_of(const Case& c) {
  return AttentionParams::make(c.b, c.h, c.h_kv > 0 ? c.h_kv : c.h, c.nq, c.nk, c.d, c.causal);
}

// The shape grids both kernels' tests run (what each case is there to catch is its `why`).
inline std::vector<Case> small_cases() {
  return {{1, 1, 1, 1, 64, false, "N = 1: one query, one key (dQ = dK = 0 exactly)"},
          {1, 2, 1, 1, 128, true, "N = 1, causal"},
          {2, 3, 17, 17, 64, true, "below one tile"},
          {1, 2, 67, 67, 128, false, "not a tile multiple"},
          {1, 2, 67, 67, 64, true, "not a tile multiple, causal"},
          {1, 1, 5, 200, 128, false, "short query, keys over two key blocks"},
          {1, 1, 16, 16, 64, true, "causal within one warp's 16 rows: rows g and g+8"}};
}

inline std::vector<Case> nq_ne_nk_cases() {
  return {{1, 2, 64, 333, 64, true, "Nq < Nk: chunked prefill, row i sees keys <= i + 269"},
          {1, 2, 1, 150, 128, true, "one query sees every key (decode step)"},
          {1, 2, 300, 100, 64, true, "Nq > Nk: rows 0..199 see no key, their dQ is zero"},
          {1, 1, 130, 1, 128, true, "only the last query row sees the single key"},
          {2, 2, 100, 37, 128, false, "Nq > Nk without a mask"}};
}

inline std::vector<Case> gqa_cases() {
  return {{1, 8, 67, 67, 64, true, "(8,8) MHA, causal", 8},
          {1, 8, 67, 130, 64, true, "(8,2), causal, Nq < Nk", 2},
          {1, 8, 100, 37, 128, false, "(8,1) MQA, Nq > Nk", 1},
          {1, 8, 130, 130, 128, true, "(8,1) MQA, causal", 1},
          {1, 32, 40, 70, 64, false, "(32,8)", 8},
          {2, 32, 33, 33, 128, true, "(32,8), causal, batch 2", 8}};
}

// magnitude_inputs' shapes (run with p.scale = 64).
inline std::vector<Case> magnitude_cases() {
  return {{1, 2, 150, 150, 64, false, "large logits"},
          {1, 2, 150, 150, 128, true, "large logits, causal"},
          {1, 1, 40, 300, 128, true, "large logits, Nq < Nk"},
          {1, 4, 90, 90, 64, true, "large logits, GQA (4,2)", 2}};
}

// cancelling_dq_inputs' shapes: few queries, many key blocks.
inline std::vector<Case> cancelling_dq_cases() {
  return {{1, 2, 64, 4096, 64, false, "64 queries, 4096 keys (32 or 64 key blocks)"},
          {1, 2, 40, 2000, 128, false, "40 queries, 2000 keys, D=128"},
          {1, 2, 40, 1000, 128, true, "40 queries, 1000 keys, causal"}};
}

// Shapes run with 64 NaN rows after every input (upload's nan_pad).
inline std::vector<Case> nan_tail_cases() {
  return {{1, 1, 67, 67, 64, false, "NaN rows after every input"},
          {1, 1, 33, 100, 128, true, "NaN rows after every input, causal"},
          {1, 1, 129, 65, 64, true, "NaN rows after every input, Nq > Nk"}};
}

#define COURSE_BWD_CASE_INFO(Ty, c, p, seed)                                                              \
  INFO(Ty::name << " B=" << (c).b << " Hq=" << (c).h << " Hkv=" << (p).heads_kv << " Nq=" << (c).nq       \
                << " Nk=" << (c).nk << " D=" << (c).d << ((c).causal ? " causal" : "") << " (" << (c).why \
                << "), seed = " << (seed) << " (set COURSE_SEED to vary)")

}  // namespace course::bwd_test
