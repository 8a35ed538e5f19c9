// The shape of a Llama-architecture model: what the engine allocates, what the loader checks a
// checkpoint against, and what the serving arithmetic (KV bytes per token, weight bytes) uses.
//
// The architecture (Hugging Face's LlamaForCausalLM): token embedding, then num_layers blocks of
//   x += o_proj(attention(rope(q_proj(rmsnorm(x))), rope(k_proj(·)), v_proj(·)))   (causal, GQA)
//   x += down_proj(silu(gate_proj(rmsnorm(x))) * up_proj(rmsnorm(x)))              (SwiGLU)
// then a final RMSNorm and lm_head (the embedding matrix itself when tie_word_embeddings).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace serving {

struct ModelConfig {
  std::string name = "custom";
  int vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0;
  int num_heads = 0, num_kv_heads = 0, head_dim = 0;
  double rope_theta = 10000.0;
  float rms_norm_eps = 1e-5f;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  int bos_token_id = -1, eos_token_id = -1;  // -1: none
  // Every end-of-sequence id of the checkpoint (config.json may give a list, as Llama 3 Instruct
  // does); eos_token_id is the first of them. Empty when there is none.
  std::vector<int> eos_token_ids;

  // Throws std::invalid_argument naming the field, e.g.
  //   "ModelConfig: argument 'head_dim' must be 64 or 128 (got 80)":
  //   vocab_size >= 1; hidden_size a multiple of 8 in [8, 16384] (03's RMSNorm kernel);
  //   intermediate_size >= 1 and a multiple of 8; num_layers >= 1; num_heads >= 1;
  //   num_kv_heads >= 1 dividing num_heads; head_dim 64 or 128 (06's decode kernel);
  //   rope_theta > 0; rms_norm_eps > 0; max_position_embeddings >= 1; bos / eos ids in
  //   [-1, vocab_size).
  void validate() const;

  // HuggingFaceTB/SmolLM2-135M: 30 layers, hidden 576, 9 / 3 heads, D 64, intermediate 1536,
  // vocab 49152, theta 100000, eps 1e-5, tied, max pos 8192 (bos 0, eos 0).
  static ModelConfig smollm2_135m();
  // meta-llama/Meta-Llama-3-8B with `layers` layers (32 for the real model): hidden 4096,
  // 32 / 8 heads, D 128, intermediate 14336, vocab 128256, theta 500000, eps 1e-5, untied,
  // max pos 8192 (bos 128000, eos 128001).
  static ModelConfig llama3_8b(int layers = 32);
  // For tests: vocab 384, hidden 256, 4 layers, 4 / 2 heads, D 64, intermediate 512,
  // theta 10000, eps 1e-5, untied, max pos 1024 (bos 256, eos 257: the ByteTokenizer's).
  static ModelConfig tiny();

  // K and V of every layer for one token: 2 · num_layers · num_kv_heads · head_dim · bytes.
  int64_t kv_bytes_per_token(int bytes_per_element = 2) const;
  // Every weight: embedding, per layer 2 norms + q, k, v, o + gate, up, down, the final norm, and
  // lm_head unless tied. SmolLM2-135M: 134,515,008; Llama-3-8B: 8,030,261,248.
  int64_t num_parameters() const;
};

// Reads <model_dir>/config.json (a Hugging Face LlamaConfig) and validates it. Supported:
// model_type "llama"; hidden_act "silu" (or absent); attention_bias and mlp_bias false (or
// absent); no RoPE scaling: rope_scaling null or absent, or {"rope_type": "default"}; the
// theta from rope_theta or, as transformers 5 writes it, rope_parameters.rope_theta (default
// 10000); num_key_value_heads absent means num_attention_heads; head_dim absent means
// hidden_size / num_attention_heads; rms_norm_eps default 1e-6; max_position_embeddings
// default 2048; tie_word_embeddings default false; eos_token_id an int, a list or null.
// Errors: std::runtime_error when the file cannot be read; std::invalid_argument naming the file
// and the key otherwise, e.g. "<dir>/config.json: rope_scaling {\"rope_type\": \"llama3\", ...}
// is not supported (this engine implements plain RoPE only)".
ModelConfig load_hf_config(const std::string& model_dir);
// The same from the text of a config.json; `where` names it in error messages.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& where = "config.json");

}  // namespace serving
