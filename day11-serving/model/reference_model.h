// The CPU reference forward pass of a Llama-architecture model on HostWeights, the oracle of the
// engine's tests. Weights are the fp16 values (held as float, exactly); every activation and
// every sum is double:
//   x_0 = embed[token]
//   per layer:  h = rmsnorm(x) ⊙ input_norm                 rmsnorm(x) = x / sqrt(mean(x²) + eps)
//               q = Wq·h, k = Wk·h, v = Wv·h                 per head, D = head_dim
//               q, k rotated by RoPE at the token's position (NeoX / rotate_half layout, pair i is
//               (i, i + D/2), angle pos · theta^(−2i/D), as Hugging Face's Llama)
//               a_h = Σ_{j <= t} softmax_j(q_h·k_{g(h),j} / sqrt(D)) v_{g(h),j},  g(h) = h / (Hq/Hkv)
//               x += Wo·a
//               h = rmsnorm(x) ⊙ post_norm
//               x += Wdown·(silu(Wgate·h) ⊙ (Wup·h)),  silu(z) = z / (1 + e^−z)
//   logits = lm_head · (rmsnorm(x) ⊙ final_norm)   (lm_head = embed when tied)
// Small models only: ModelConfig::tiny() at 200 tokens takes well under a second or two.
#pragma once
#include <cstdint>
#include <vector>

#include "weights.h"

namespace serving {

struct ReferenceOptions {
  // Round activations to fp16 where an fp16 engine stores them: the normed inputs of each
  // projection, q and k after RoPE, v, the attention output, every projection's output, the
  // SwiGLU product, the residual stream after each add, the final norm's output and the logits.
  // Off by default (pure double).
  bool round_fp16 = false;
  // Position of the first token (RoPE angles use first_position + t).
  int first_position = 0;
};

// Intermediates for tests and debugging, filled when a pointer is given.
struct ReferenceTrace {
  std::vector<std::vector<double>> attn;    // per layer: attention output before o_proj [T, Hq·D]
  std::vector<std::vector<double>> hidden;  // per layer: residual stream after the layer [T, hidden]
  std::vector<double> final_normed;         // rmsnorm(x) ⊙ final_norm [T, hidden]
};

class ReferenceModel {
 public:
  // Copies the weights as float (exact fp16 values); validates the config and every tensor size
  // (invalid_argument naming the tensor).
  explicit ReferenceModel(const HostWeights& w);
  const ModelConfig& config() const { return config_; }
  // Logits [T, vocab] (row-major, rounded to float once) of tokens[0..T): row t is the
  // distribution of token t + 1. Token ids outside [0, vocab): invalid_argument "token".
  std::vector<float> forward(const std::vector<int32_t>& tokens, const ReferenceOptions& opt = {},
                             ReferenceTrace* trace = nullptr) const;
  // Greedy decoding: the prompt, then `new_tokens` argmax tokens (ties: the lowest id), each
  // from a full forward of the sequence so far. Returns only the new tokens.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int new_tokens,
                              const ReferenceOptions& opt = {}) const;

 private:
  using Layer = LayerTensors<float>;
  ModelConfig config_;
  std::vector<float> embed_, final_norm_, out_;  // out_: lm_head or a copy of embed
  std::vector<Layer> layers_;
};

// One-shot helper: ReferenceModel(w).forward(tokens, opt).
std::vector<float> reference_logits(const HostWeights& w, const std::vector<int32_t>& tokens,
                                    const ReferenceOptions& opt = {});

// RoPE on one head vector x[0..D) at `position`, NeoX layout: pair i = (x_i, x_{i+D/2}),
// angle position · theta^(−2i/D), i < D/2 (exposed for the tests).
void reference_rope_neox(double* x, int head_dim, double position, double theta);

}  // namespace serving
