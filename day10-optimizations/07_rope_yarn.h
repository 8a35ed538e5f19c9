// Day 10 · Exercise 07 · rotary position embedding (RoPE) with YaRN scaling — the contract.
//
// Rotates the queries and keys of one attention layer by their positions, as every Llama-style
// model does before attention:
//   q, q_out    T [B, Hq, N, D]
//   k, k_out    T [B, Hkv, N, D]
//   positions   int32 [B, N]: the position of token n of sequence b, shared by all of its heads
// with T = __half or __nv_bfloat16 (one overload each). Positions are any int32 values, so a
// prefill chunk (m0, m0 + 1, ...), one decode token per sequence at its own position (N = 1)
// and several sequences packed into one row (positions restarting at 0) are all the same call;
// a negative position rotates backwards.
//
// For every row x (D values) at position m and every pair i = 0 .. D/2 − 1, whose two elements
// (a, b) are given by rope_pair (NeoX half-split or GPT-J interleaved):
//   y_a = mscale · (x_a·cos(m·θ'_i) − x_b·sin(m·θ'_i))
//   y_b = mscale · (x_a·sin(m·θ'_i) + x_b·cos(m·θ'_i))
//   θ'_i = rope_frequency_factor(p, i) · base^(−2i/D),   mscale = rope_yarn_mscale(p)
// computed in fp32 from the 16-bit inputs and rounded to T once (round to nearest). The angle
// m·θ'_i is accurate to ~1e-6 rad for EVERY int32 m: it is reduced modulo whole turns in 64-bit
// fixed point (rope_turn_step, rope_turns), so position 10^6 is as exact as position 10 (a
// naive fp32 product m·θ'_i is off by up to ~0.05 rad there: lesson: "The precision trap").
//
// The YaRN temperature: the paper scales the logits by 1/t with sqrt(1/t) = 0.1·ln(s) + 1. Here
// EACH of q_out and k_out is multiplied by mscale = 0.1·ln(s) + 1 (YaRN with s > 1; 1 for every
// other case), so q_out · k_out carries mscale² = 1/t and the attention kernel that follows
// uses its usual 1/sqrt(D) and nothing else (what Hugging Face and vLLM do with their cos/sin).
//
// Out of place: q_out and k_out are separate outputs; q_out == q and k_out == k (in place) is
// also allowed, any other overlap is not (not checked). Every row is read once and written once.
// Limits: head_dim a multiple of 16 in [16, 256]; B, Hq, Hkv, N >= 1 and B · N · ceil((Hq + Hkv)
// / rows per block) < 2^31 blocks (rows per block = 4096 / head_dim); base > 1; factor >= 1 when
// scaling is not kNone; YaRN: original_max_position >= 1 and 0 <= beta_slow < beta_fast.
// All pointers are device pointers, the four 16-bit tensors 16-byte aligned (cudaMalloc gives
// 256). Throws std::invalid_argument naming the field (q, k, q_out, k_out, positions, batch,
// heads_q, heads_kv, seq_len, head_dim, layout, base, scaling, factor, original_max_position,
// beta_fast, beta_slow) before any launch. The launcher only enqueues on `stream`.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

enum class RopeLayout : int {
  kNeox = 0,  // GPT-NeoX / Llama (Hugging Face "rotate_half"): pair i = (i, i + D/2)
  kGptj = 1,  // GPT-J / Meta's original Llama code (complex pairs): pair i = (2i, 2i + 1)
};

enum class RopeScaling : int {
  kNone = 0,    // plain RoPE: θ'_i = θ_i
  kLinear = 1,  // position interpolation: θ'_i = θ_i / s
  kNtk = 2,     // NTK-aware: base' = base · s^(D/(D−2)), i.e. θ'_i = θ_i · s^(−2i/(D−2))
  kYarn = 3,    // YaRN: NTK-by-parts ramp over the pairs (as deployed), plus the temperature
};

struct RopeParams {
  int batch = 1;       // B
  int heads_q = 1;     // Hq
  int heads_kv = 1;    // Hkv (any count: RoPE does not care how query heads share K)
  int seq_len = 1;     // N, tokens per sequence in this call
  int head_dim = 128;  // D
  RopeLayout layout = RopeLayout::kNeox;
  double base = 10000.0;  // θ: 10000 (Llama 2), 500000 (Llama 3), 1e6 (Qwen 2, Code Llama)
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;               // s, the context extension factor (>= 1)
  int original_max_position = 4096;  // L, the trained context length (YaRN)
  double beta_fast = 32.0;           // YaRN: pairs up to ⌊d(β_fast)⌋ (turning > β_fast times within L) keep θ_i
  double beta_slow = 1.0;  // YaRN: pairs from ⌈d(β_slow)⌉ (turning < β_slow times within L) get θ_i / s
};

// The two elements of pair i (index helper: the kernel calls it, the [index] tests check it on
// the CPU). NeoX: (a, b) = (i, i + D/2); GPT-J: (a, b) = (2i, 2i + 1). Element a takes the cos
// of the formula above, b the sin. Needs head_dim even and 0 <= i < head_dim / 2.
struct RopePair {
  int a, b;
};
__host__ __device__ RopePair rope_pair(RopeLayout layout, int head_dim, int i);

// θ'_i / θ_i for pair i of a head_dim-vector under p's scaling (s = p.factor, L =
// p.original_max_position, D = p.head_dim): 1 (kNone), 1/s (kLinear), s^(−2i/(D−2)) (kNtk), and
// for kYarn the ramp of the released YaRN code, Hugging Face and vLLM (linear in the pair index,
// not the YaRN paper's ramp linear in r_i = L·θ_i/(2π)):
//   d(β) = D·ln(L / (2π·β)) / (2·ln base)   (the pair that turns β times within L; ∞ for β = 0)
//   lo = max(⌊d(β_fast)⌋, 0),  hi = min(⌈d(β_slow)⌉, D − 1)   (hi = lo + 0.001 if they are equal)
//   γ_i = clamp((hi − i) / (hi − lo), 0, 1),  factor = (1 − γ_i)/s + γ_i
// so pairs i <= lo keep θ_i, pairs i >= hi get θ_i / s, and the factor is linear in i between.
// lo is clamped only from below and hi only from above, so lo > hi happens, at either end, and
// then the clamp sends every pair to one side (as in Hugging Face's code):
//   ⌈d(β_slow)⌉ < 0, a trained context L <= 2π·β_slow·base^(−2/D) (L = 1, base 10^4, D = 128:
//     hi = −12, lo = 0): γ_i = 1, every pair keeps θ_i;
//   ⌊d(β_fast)⌋ >= D (tiny bases, base <= ~sqrt(L / (2π·β_fast))): hi = D − 1 < lo, γ_i = 0,
//     every pair gets θ_i / s.
// (⌈d(β_slow)⌉ = 0 gives lo = hi = 0, hence hi = 0.001: pair 0 keeps θ_0, the others get θ_i / s.)
// (D − 1, not D/2 − 1, is the deployed clamp: hi > D/2 − 1 leaves even the last pair partly kept.)
// Host only, in double; needs p within the launcher's limits (CPU [index] tests check it
// against closed forms).
double rope_frequency_factor(const RopeParams& p, int i);

// mscale: 0.1·ln(s) + 1 for kYarn with s > 1, else 1 (the factor each of q and k gets; Hugging
// Face's default attention_factor and vLLM's mscale, both multiplied into cos and sin).
double rope_yarn_mscale(const RopeParams& p);

// Pair i's rotation per position step in turns (1 turn = 2π rad) as 0.64 fixed point:
// round(inv_freq / (2π) · 2^64), for 0 <= inv_freq <= 1 (every θ'_i is). Host only, in double.
uint64_t rope_turn_step(double inv_freq);

// The angle pos · θ' in turns, reduced to the nearest whole turn: pos · step / 2^64 minus the
// nearest integer, as a float in [−0.5, 0.5], where step = rope_turn_step(θ'). Exact up to the
// float rounding of the result (and step's own 2^-64), for every int32 pos: the kernel turns it
// into cos and sin. Index helper: the kernel calls it, the [index] tests check it on the CPU.
__host__ __device__ float rope_turns(uint64_t step, int32_t pos);

void rope_yarn(const __half* q, const __half* k, __half* q_out, __half* k_out, const int32_t* positions,
               const RopeParams& p, cudaStream_t stream = 0);
void rope_yarn(const __nv_bfloat16* q, const __nv_bfloat16* k, __nv_bfloat16* q_out, __nv_bfloat16* k_out,
               const int32_t* positions, const RopeParams& p, cudaStream_t stream = 0);
