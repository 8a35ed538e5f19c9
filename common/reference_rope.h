// The CPU reference for rotary position embedding (day 10 · 07_rope_yarn), in double.
//
// RoPE (RoFormer, Su et al. 2021) rotates pair i of a head vector x at position m by the angle
// m·θ'_i, with θ_i = base^(−2i/D), i = 0 .. D/2 − 1, and θ'_i = θ_i · factor_i the scaled
// frequency (factor_i = 1 without scaling; linear, NTK-aware and YaRN below):
//   y_a = mscale · (x_a·cos(mθ'_i) − x_b·sin(mθ'_i))
//   y_b = mscale · (x_a·sin(mθ'_i) + x_b·cos(mθ'_i))
// where (a, b) are the pair's two elements: NeoX (half-split) a = i, b = i + D/2; GPT-J
// (interleaved) a = 2i, b = 2i + 1. Everything is computed in double (the angle m·θ'_i too: at
// m = 2^31 its spacing is ~5e-7 rad) and rounded to float once. The reference is tested against
// closed forms in common/tests/test_reference_rope.cpp.
//
// Per-dimension factors (s = factor >= 1, L = original_max_position):
//   none    1
//   linear  1/s                                    (position interpolation, Chen et al. 2023)
//   NTK     s^(−2i/(D − 2))   i.e. base' = base · s^(D/(D − 2))   (NTK-aware, bloc97 2023)
//   YaRN    (1 − γ_i)/s + γ_i with γ_i linear in the pair index, as the released YaRN code,
//           Hugging Face and vLLM compute it (Peng et al. 2023, "NTK-by-parts"; the paper's
//           own γ is linear in r_i = L·θ_i/(2π) instead, and differs by up to ~2x mid-band):
//             d(β) = D·ln(L/(2πβ)) / (2·ln base), lo = max(⌊d(β_fast)⌋, 0),
//             hi = min(⌈d(β_slow)⌉, D − 1) (lo + 0.001 if equal),
//             γ_i = clamp((hi − i)/(hi − lo), 0, 1): pairs i <= lo kept, i >= hi get 1/s
// mscale = 0.1·ln(s) + 1 for YaRN with s > 1 (the paper's sqrt(1/t)), 1 otherwise: each of q and
// k is multiplied by it, so the logits q·k are multiplied by mscale² = 1/t.
#pragma once
#include <cstdint>
#include <vector>

namespace course::ref {

struct RopeSpec {
  enum class Layout { kNeox, kGptj };
  enum class Scaling { kNone, kLinear, kNtk, kYarn };
  Layout layout = Layout::kNeox;
  double base = 10000.0;
  Scaling scaling = Scaling::kNone;
  double factor = 1.0;               // s
  int original_max_position = 4096;  // L, YaRN only
  double beta_fast = 32.0;           // YaRN: pairs up to ⌊d(β_fast)⌋ keep θ_i (the paper's β)
  double beta_slow = 1.0;            // YaRN: pairs from ⌈d(β_slow)⌉ get θ_i / s (the paper's α)
};

// factor_i = θ'_i / θ_i of pair i of a head_dim-vector (the table above).
double rope_factor(const RopeSpec& s, int head_dim, int i);
// θ'_i = factor_i · base^(−2i/D), i = 0 .. D/2 − 1.
std::vector<double> rope_inv_freq(const RopeSpec& s, int head_dim);
// 0.1·ln(s) + 1 for YaRN with s > 1, else 1: the factor each of q and k is multiplied by.
double rope_mscale(const RopeSpec& s);

// x: [batch, heads, seq_len, head_dim]; positions: int32 [batch, seq_len] (token n of sequence
// b, every head). Returns the rotated (and, for YaRN, mscale-multiplied) x, same layout.
// Throws std::invalid_argument on inconsistent sizes or an odd head_dim.
std::vector<float> rope(const std::vector<float>& x, const std::vector<int32_t>& positions, int batch, int heads,
                        int seq_len, int head_dim, const RopeSpec& s);

}  // namespace course::ref
