// The log-sum-exp output of the 16-bit forward kernels (the `float* lse` overloads of exercises 05
// and 10), run and checked one way for both: their headers state the same L, so a caller (the
// backward pass of 09, the ring of 12) can switch kernels, and the tests hold them to it.
//
//   check_forward_lse<Ty>(p, seed, big_logits, [](auto q, auto k, auto v, auto o, float* lse,
//                                                 const AttentionParams& p) { kernel(q, k, v, o, lse, p); });
//
// Inputs: Q, K, V normal(0, 1) rounded to Ty, or (big_logits, with p.scale = 128) Q and K
// multiples of 1/16: logits of about ±1e4, exact in fp32. O and L are NaN-poisoned with guards.
// The launcher must write both; O is compared as without lse (Ty::tolerance()), L against
// common/reference_backward.h's attention_forward_lse: L_i = m_i + ln ℓ_i, natural log, scaled
// logits. Rows that see no key must hold exactly −inf; the others |L − L_ref| <= atol +
// 2e-6·|L_ref| with atol = 2e-3 (fp16) or 1e-2 (bf16): exercise 05's ℓ sums the 16-bit-rounded P
// (ln ℓ then errs by up to about a rounding of P, 2^-11 or 2^-8 relative, for a row with one
// dominant key), and at |L| ~ 1e4 fp32 itself is only good to ~1e-3. A log2-based L (no ln 2
// factor) misses by |L|·0.44, a missing scale or m by order one: far outside.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_params.h"
#include "gpu_test.h"
#include "half_types.h"
#include "reference_backward.h"

namespace course {

template <class Ty, class Launch>
void check_forward_lse(const AttentionParams& p, uint64_t seed, bool big_logits, Launch launch) {
  INFO((big_logits ? "scale = 128, Q and K multiples of 1/16: logits of about ±1e4" : "default scale"));
  const auto q = Ty::round(big_logits ? random_normal_sixteenths(size_t(p.q_elems()), seed)
                                      : random_normal(size_t(p.q_elems()), seed));
  const auto k = Ty::round(big_logits ? random_normal_sixteenths(size_t(p.kv_elems()), seed + 1)
                                      : random_normal(size_t(p.kv_elems()), seed + 1));
  const auto v = Ty::round(random_normal(size_t(p.kv_elems()), seed + 2));
  const auto ref = ref::attention_forward_lse(q, k, v, p);
  auto d_q = to_device(Ty::bits(q)), d_k = to_device(Ty::bits(k)), d_v = to_device(Ty::bits(v));
  DeviceBuffer<uint16_t> d_o(size_t(p.o_elems()));
  DeviceBuffer<float> d_lse(size_t(p.batch) * p.heads_q * p.seq_q);
  d_o.poison();
  d_lse.poison();
  launch(as_t<Ty>(d_q), as_t<Ty>(d_k), as_t<Ty>(d_v), as_t<Ty>(d_o), d_lse.data(), p);
  CUDA_CHECK(cudaDeviceSynchronize());
  const auto ro = compare(Ty::decode(d_o.download()), ref.o,
                          Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}, {"d", p.head_dim}}, Ty::tolerance(),
                          d_o.guard_damage());
  if (!ro.ok) FAIL_CHECK("O (written together with lse): " << ro.report);
  // Rows that see no key: exactly −inf; then both sides become 0 for compare().
  std::vector<float> out = d_lse.download(), want = ref.lse;
  long wrong_empty = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isinf(want[i]) && want[i] < 0.f) {
      if (!(std::isinf(out[i]) && out[i] < 0.f) && ++wrong_empty <= 4)
        FAIL_CHECK("lse of row " << i << " (it sees no key) is " << out[i] << ", expected -inf");
      out[i] = want[i] = 0.f;
    }
  }
  const Tolerance tol{std::string(Ty::name) == "fp16" ? 2e-3 : 1e-2, 2e-6, 1e-3, "lse (fp32, from 16-bit P)"};
  const auto rl = compare(out, want, Dims{{"b", p.batch}, {"h", p.heads_q}, {"i", p.seq_q}}, tol, d_lse.guard_damage());
  if (!rl.ok)
    FAIL_CHECK("lse: " << rl.report);
  else
    SUCCEED("lse matches the reference");
}

}  // namespace course
