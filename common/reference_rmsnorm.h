// The CPU reference for RMSNorm and the fused residual add + RMSNorm (day 11 · 03), in double.
//
// RMSNorm (Zhang and Sennrich 2019) as Llama uses it, on a row r of `hidden` values:
//   inv = 1 / sqrt(mean_k(r_k²) + eps),   n_j = r_j · inv
// and Hugging Face's LlamaRMSNorm on 16-bit data rounds twice: out_j = rd(rd(n_j) · w_j), where
// rd rounds to the data type (normalise in fp32, cast to the input dtype, multiply by the
// weight in that dtype). The fused operation first forms the new residual r_j = rd(res_j + x_j).
// The inputs are the 16-bit values as floats (already rounded); everything here is computed in
// double and rounded only where Hugging Face rounds. `round` is the data type's rounding
// (course::round_to_half, course::round_to_bf16), or nullptr for none (the exact values).
// Tested against closed forms in common/tests/test_reference_rmsnorm.cpp.
#pragma once
#include <vector>

namespace course::ref {

using RoundFn = float (*)(float);

// 1 / sqrt(mean_k(row_k²) + eps) of one row of `hidden` values, in double.
double rms_inverse(const float* row, int hidden, double eps);

// n_j = r_j · inv of every row of x [tokens, hidden], in double, unrounded.
std::vector<double> rms_normalized(const std::vector<float>& x, int tokens, int hidden, double eps);

// Hugging Face's output from normalised values n [tokens, hidden] and weight [hidden]:
// rd(rd(n_j) · w_j) (rd = round; nullptr: n_j · w_j in double, rounded to float once).
std::vector<float> rms_scale(const std::vector<double>& n, const std::vector<float>& weight, int tokens, int hidden,
                             RoundFn round);

// rmsnorm(x) = rms_scale(rms_normalized(x), weight): out [tokens, hidden].
std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, int tokens, int hidden,
                           double eps, RoundFn round);

// What compare() should hold a kernel's output `got` [tokens, hidden] against: element by
// element, got itself when it is one of the values rd(rd(n)·w_j) takes for some n within
// inv_slack (relative) of the exact n_j = r_j · inv, else rmsnorm's value. A kernel's inverse RMS
// is fp32 (its own summation order, rsqrtf): a few 1e-7 off, which can flip a rounding. With
// inv_slack below half a 16-bit spacing (2^-12), rounding is monotonic and at most two values
// qualify, so an exact compare() against this accepts precisely the outputs of an fp32 inverse
// RMS and names every other element with the value it should have had.
std::vector<float> rmsnorm_allowed(const std::vector<float>& got, const std::vector<float>& x,
                                   const std::vector<float>& weight, int tokens, int hidden, double eps, RoundFn round,
                                   double inv_slack);

// The fused operation's new residual: rd(residual_j + x_j), element by element.
std::vector<float> residual_add(const std::vector<float>& residual, const std::vector<float>& x, RoundFn round);

}  // namespace course::ref
