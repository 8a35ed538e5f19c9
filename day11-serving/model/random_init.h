// The one random-initialisation formula of the serving model, compiled for the host and (under
// nvcc) for the device, so that the engine fills the weights of a huge model on the GPU and the CPU
// reference model (model/weights.cpp's random_weights) gets the same fp16 values, bit for bit.
//
// Element `index` of tensor `tensor_id` under `seed`:
//   key  = mix64(seed ^ (tensor_id · 0x9E3779B97F4A7C15))
//   h    = mix64(key + (index + 1) · 0x9E3779B97F4A7C15)   (SplitMix64's output at position index)
//   S    = h[0:16) + h[16:32) + h[32:48) + h[48:64) − 2 · 65535      (four 16-bit uniforms)
//   matrix element = fp16( float(S) · (std · kRandomInvSigma) ),  kRandomInvSigma = fp32(1 / sqrt(1431655765))
//   norm element   = (1024 + m) / 1024 with m = (h mod 129) − 64     (exact in fp16)
// S is an Irwin–Hall sum of four uniforms: mean 0, variance 4 · (65536² − 1) / 12, bounded by
// ±3.46 standard deviations, close to a normal. Dividing by its standard deviation gives std.
//
// Why host and device agree bit for bit:
// - the hash is 64-bit integer arithmetic (wrap-around multiplication, xor, shifts): exact;
// - S is an integer with |S| < 2^18, so float(S) is exact;
// - scale = std · kRandomInvSigma and float(S) · scale are two IEEE fp32 multiplications, each
//   correctly rounded to nearest on the CPU and the GPU (__fmul_rn on the device). No addition
//   follows a multiplication, so nothing can be contracted into an FMA (which would round once
//   instead of twice);
//   no transcendental function or division is involved. Flush-to-zero (--use_fast_math) cannot
//   matter either: for std >= 1e-30 no nonzero operand or result is an fp32 subnormal;
// - the fp32 -> fp16 rounding is the integer code below (round to nearest even), not a library
//   call, so it is the same instructions on both sides (it equals __float2half_rn and
//   course::float_to_half_bits, which the CPU test checks);
// - a norm weight (1024 + m) / 1024 is computed in integers and is exactly representable.
// random_init_std() uses one double division and one double sqrt (both correctly rounded by IEEE
// on host and device, --use_fast_math touches fp32 only); the engine may as well compute it on
// the host and pass it to its kernel.
//
// Scales (random_init_std): 0.02 for every matrix, Hugging Face's initializer_range, except o_proj
// and down_proj, 0.02 / sqrt(2 · num_layers) (GPT-2's scaled residual init): those two write into
// the residual stream, once each per layer, so 2 · num_layers terms are summed into it and the
// scale keeps the stream's growth O(1) over 30 layers instead of sqrt(60) times the first term.
// Norm weights are 1 + small exact noise (in [0.9375, 1.0625], steps of 1/1024) rather than 1.0
// exactly, so a kernel that forgets to multiply by the weight (or multiplies by the wrong row)
// produces different logits.
#pragma once
#include <cstdint>
#include <cstring>
#ifndef __CUDA_ARCH__
#include <cmath>
#endif

#ifdef __CUDACC__
#define SERVING_HD __host__ __device__
#else
#define SERVING_HD
#endif

namespace serving {

// The tensors of a Llama model, in Hugging Face's naming. Layer tensors fold the layer index
// into the id (random_tensor_id), global ones use layer -1.
enum class TensorKind : uint32_t {
  kEmbed = 0,       // model.embed_tokens.weight            [vocab, hidden]
  kInputNorm = 1,   // model.layers.i.input_layernorm.weight [hidden]
  kQ = 2,           // ...self_attn.q_proj.weight            [Hq·D, hidden]
  kK = 3,           // ...self_attn.k_proj.weight            [Hkv·D, hidden]
  kV = 4,           // ...self_attn.v_proj.weight            [Hkv·D, hidden]
  kO = 5,           // ...self_attn.o_proj.weight            [hidden, Hq·D]
  kPostNorm = 6,    // ...post_attention_layernorm.weight    [hidden]
  kGate = 7,        // ...mlp.gate_proj.weight               [intermediate, hidden]
  kUp = 8,          // ...mlp.up_proj.weight                 [intermediate, hidden]
  kDown = 9,        // ...mlp.down_proj.weight               [hidden, intermediate]
  kFinalNorm = 10,  // model.norm.weight                     [hidden]
  kLmHead = 11,     // lm_head.weight                        [vocab, hidden]
};

// (layer + 1) · 16 + kind: distinct for every tensor of a model with up to 2^28 − 1 layers.
SERVING_HD inline uint32_t random_tensor_id(TensorKind kind, int layer) {
  return (static_cast<uint32_t>(layer + 1) << 4) | static_cast<uint32_t>(kind);
}

SERVING_HD inline bool random_is_norm(TensorKind kind) {
  return kind == TensorKind::kInputNorm || kind == TensorKind::kPostNorm || kind == TensorKind::kFinalNorm;
}

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijection of 64-bit integers that mixes
// every input bit into every output bit.
SERVING_HD inline uint64_t random_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The 64 random bits of one element.
SERVING_HD inline uint64_t random_init_bits(uint64_t seed, uint32_t tensor_id, uint64_t index) {
  const uint64_t key = random_mix64(seed ^ (static_cast<uint64_t>(tensor_id) * 0x9E3779B97F4A7C15ull));
  return random_mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
}

// 1 / sqrt(4 · (65536² − 1) / 12) = 1 / sqrt(1431655765), rounded to fp32 once (a literal, so
// the compiler's rounding of it is the same everywhere).
constexpr float kRandomInvSigma = 2.64289974e-05f;  // bits 0x37DDB3D7

// The Irwin–Hall integer S of the header comment, in [−131070, 131070].
SERVING_HD inline int32_t random_init_sum(uint64_t bits) {
  const int32_t s = static_cast<int32_t>(bits & 0xFFFFu) + static_cast<int32_t>((bits >> 16) & 0xFFFFu) +
                    static_cast<int32_t>((bits >> 32) & 0xFFFFu) + static_cast<int32_t>(bits >> 48);
  return s - 2 * 65535;
}

// A matrix element as fp32, before the fp16 rounding: mean 0, standard deviation `stddev`.
SERVING_HD inline float random_init_value(uint64_t seed, uint32_t tensor_id, uint64_t index, float stddev) {
  const float s = static_cast<float>(random_init_sum(random_init_bits(seed, tensor_id, index)));
#ifdef __CUDA_ARCH__
  return __fmul_rn(s, __fmul_rn(stddev, kRandomInvSigma));  // never contracted into an FMA
#else
  const float scale = stddev * kRandomInvSigma;
  return s * scale;
#endif
}

// fp32 -> fp16 bits, round to nearest even, overflow to inf, NaN kept (quiet): integer code only.
SERVING_HD inline uint16_t random_float_to_half_bits(float f) {
  uint32_t x;
#ifdef __CUDA_ARCH__
  x = __float_as_uint(f);
#else
  std::memcpy(&x, &f, sizeof x);
#endif
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp == 0xFFu) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {  // fp16 subnormal or zero
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// A norm weight: (1024 + m) / 1024, m in [−64, 64], as fp16 bits (exact: fp16 spacing is 2^-11
// in [0.5, 1) and 2^-10 in [1, 2)). Built from integers: 0x3C00 is 1.0.
SERVING_HD inline uint16_t random_norm_half_bits(uint64_t seed, uint32_t tensor_id, uint64_t index) {
  const int m = static_cast<int>(random_init_bits(seed, tensor_id, index) % 129u) - 64;
  if (m >= 0) return static_cast<uint16_t>(0x3C00u + static_cast<uint32_t>(m));  // 1 + m·2^-10
  return static_cast<uint16_t>(0x3C00u - 2u * static_cast<uint32_t>(-m));        // 1 − 2|m|·2^-11
}

// The standard deviation of a tensor kind (norms: 0, they are not drawn with a std).
SERVING_HD inline float random_init_std(TensorKind kind, int num_layers) {
  if (random_is_norm(kind)) return 0.0f;
  if (kind == TensorKind::kO || kind == TensorKind::kDown) {
    return static_cast<float>(0.02 / sqrt(2.0 * static_cast<double>(num_layers)));
  }
  return 0.02f;
}

// Element `index` (row-major in the tensor's Hugging Face shape) of tensor (kind, layer) as fp16
// bits: what random_weights() stores and what the engine's GPU fill writes. `stddev` is
// random_init_std(kind, num_layers) (ignored for norms).
SERVING_HD inline uint16_t random_weight_half_bits(uint64_t seed, TensorKind kind, int layer, uint64_t index,
                                                   float stddev) {
  const uint32_t id = random_tensor_id(kind, layer);
  if (random_is_norm(kind)) return random_norm_half_bits(seed, id, index);
  return random_float_to_half_bits(random_init_value(seed, id, index, stddev));
}

}  // namespace serving
