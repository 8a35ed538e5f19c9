// The CPU reference for the attention backward pass, and the forward pass with its log-sum-exp.
//
// Semantics are those of attention_params.h (layouts, scale, bottom-right causal mask, sliding
// window, GQA by h / (Hq / Hkv), a row that sees no key outputs zeros). Inputs are float,
// everything inside is double, results are rounded to float once at the end; the *_f64 twins
// take and return double throughout (the finite-difference tests differentiate them).
//
// Notation of the FlashAttention papers, per (batch, query head), S = scale · Q Kᵀ masked:
//   m_i = max_j S_ij,  ℓ_i = Σ_j exp(S_ij − m_i),  L_i = m_i + log ℓ_i   (natural log of the
//                                                     SCALED logits; −inf for a row with no key)
//   P_ij = exp(S_ij − L_i)   (0 where masked),   O = P V
// and, given dO (the gradient of the loss with respect to O),
//   D_i  = rowsum(dO_i ∘ O_i)           dV = Pᵀ dO          dP = dO Vᵀ
//   dS   = P ∘ (dP − D_i)               dQ = scale · dS K   dK = scale · dSᵀ Q
// With GQA, dK and dV of a KV head are summed over the G = Hq / Hkv query heads that read it.
// A row that sees no key has L_i = −inf, O_i = 0, D_i = 0, dQ_i = 0 and adds nothing to dK, dV.
//
// Tested against central finite differences of the forward pass and closed forms in
// common/tests/test_reference_backward.cpp.
#pragma once
#include <vector>

#include "attention_params.h"

namespace course::ref {

// O and the per-row log-sum-exp a forward kernel writes for its backward pass.
template <class T>
struct AttentionForwardT {
  std::vector<T> o;    // [B, Hq, Nq, D]
  std::vector<T> lse;  // [B, Hq, Nq]: L_i = m_i + log ℓ_i; −inf for a row that sees no key
};
using AttentionForward = AttentionForwardT<float>;
using AttentionForwardF64 = AttentionForwardT<double>;

// Everything a backward exercise may be checked against.
template <class T>
struct AttentionBackwardT {
  std::vector<T> o;      // [B, Hq, Nq, D]   equal to attention_forward_lse(...).o
  std::vector<T> lse;    // [B, Hq, Nq]      equal to attention_forward_lse(...).lse
  std::vector<T> delta;  // [B, Hq, Nq]      D_i = rowsum(dO_i ∘ O_i) (FA2's preprocessing step)
  std::vector<T> dq;     // [B, Hq, Nq, D]
  std::vector<T> dk;     // [B, Hkv, Nk, D]  summed over the G query heads of a group
  std::vector<T> dv;     // [B, Hkv, Nk, D]  summed over the G query heads of a group
};
using AttentionBackward = AttentionBackwardT<float>;
using AttentionBackwardF64 = AttentionBackwardT<double>;

// Forward pass with the log-sum-exp. O comes from the same operations, in the same order, as
// ref::attention's (so it is bitwise equal to it on the same compiler and flags).
AttentionForward attention_forward_lse(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, const AttentionParams& p);
AttentionForwardF64 attention_forward_lse_f64(const std::vector<double>& q, const std::vector<double>& k,
                                              const std::vector<double>& v, const AttentionParams& p);

// Backward pass: q, d_o [B, Hq, Nq, D]; k, v [B, Hkv, Nk, D]. Throws std::invalid_argument on
// inconsistent params or sizes.
AttentionBackward attention_backward(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const std::vector<float>& d_o,
                                     const AttentionParams& p);
AttentionBackwardF64 attention_backward_f64(const std::vector<double>& q, const std::vector<double>& k,
                                            const std::vector<double>& v, const std::vector<double>& d_o,
                                            const AttentionParams& p);

}  // namespace course::ref
