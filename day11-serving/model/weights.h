// The weights of a Llama-architecture model on the host, every tensor as fp16 bits (uint16_t) in
// Hugging Face's layout (a Linear's weight is [out_features, in_features], y = W·x), loaded from a
// Hugging Face model directory or drawn from the random-init formula (random_init.h).
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_config.h"
#include "random_init.h"

namespace serving {

// The nine tensors of one layer; LayerWeights holds them as fp16 bits, the CPU reference as float.
template <class T>
struct LayerTensors {
  std::vector<T> input_norm;  // [hidden]
  std::vector<T> q;           // [Hq·D, hidden]
  std::vector<T> k;           // [Hkv·D, hidden]
  std::vector<T> v;           // [Hkv·D, hidden]
  std::vector<T> o;           // [hidden, Hq·D]
  std::vector<T> post_norm;   // [hidden]
  std::vector<T> gate;        // [intermediate, hidden]
  std::vector<T> up;          // [intermediate, hidden]
  std::vector<T> down;        // [hidden, intermediate]

  // The member holding a per-layer tensor kind (kEmbed, kFinalNorm, kLmHead: invalid_argument).
  std::vector<T>& operator[](TensorKind kind) {
    switch (kind) {
      case TensorKind::kInputNorm:
        return input_norm;
      case TensorKind::kQ:
        return q;
      case TensorKind::kK:
        return k;
      case TensorKind::kV:
        return v;
      case TensorKind::kO:
        return o;
      case TensorKind::kPostNorm:
        return post_norm;
      case TensorKind::kGate:
        return gate;
      case TensorKind::kUp:
        return up;
      case TensorKind::kDown:
        return down;
      default:
        throw std::invalid_argument("LayerTensors: not a per-layer tensor kind");
    }
  }
  const std::vector<T>& operator[](TensorKind kind) const { return const_cast<LayerTensors&>(*this)[kind]; }
};
using LayerWeights = LayerTensors<uint16_t>;

struct WeightSlot;

struct HostWeights {
  ModelConfig config;
  std::vector<uint16_t> embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<uint16_t> final_norm;  // [hidden]
  std::vector<uint16_t> lm_head;     // [vocab, hidden]; empty when config.tie_word_embeddings
  // The output projection: lm_head, or embed when tied.
  const std::vector<uint16_t>& output_matrix() const { return config.tie_word_embeddings ? embed : lm_head; }
  // The vector holding a tensor of weight_slots(config) (layers must hold config.num_layers).
  std::vector<uint16_t>& tensor(const WeightSlot& slot);
  const std::vector<uint16_t>& tensor(const WeightSlot& slot) const;
};

// One tensor of the checkpoint: its Hugging Face name, shape and where it lives in HostWeights.
struct WeightSlot {
  std::string name;            // "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // {Hq·D, hidden}
  TensorKind kind;             // its random-init id: random_tensor_id(kind, layer)
  int layer;                   // -1 for embed, final norm and lm_head
  std::vector<uint16_t>* dst;  // the vector it fills (nullptr from the const overload)
};
// Every tensor the model needs, in checkpoint order: embed, per layer input_layernorm,
// q/k/v/o_proj, post_attention_layernorm, gate/up/down_proj, then model.norm and (untied)
// lm_head.
std::vector<WeightSlot> weight_slots(HostWeights& w);
std::vector<WeightSlot> weight_slots(const ModelConfig& c);

// Loads <model_dir>: config.json (load_hf_config) and model.safetensors, or the shards listed by
// model.safetensors.index.json ({"weight_map": {tensor name: shard file}}). F16 is taken as is;
// F32 and BF16 are rounded to fp16 (nearest even). Every error names the file and the tensor:
//   std::invalid_argument "<dir>/model.safetensors: tensor 'model.norm.weight' is missing"
//                         "...: tensor 'lm_head.weight' has shape [384, 128], expected [384, 256]"
//                         "...: tensor 'X' has dtype I64, unsupported (F32, F16 or BF16)"
//                         "...: tensor 'X' element 17 = 1e+05 is outside fp16's range (|x| <= 65504)"
//                         "...: tensor 'X' element 3 is NaN or infinite"
//   plus the header / truncation errors of SafetensorsFile and the config errors of
//   load_hf_config; std::runtime_error when no weight file exists or one cannot be read.
// A tied model's lm_head.weight, if present anyway, is ignored. Tensors the model does not use
// (e.g. old checkpoints' rotary_emb.inv_freq) are ignored.
HostWeights load_hf_weights(const std::string& model_dir);

// Deterministic random weights of config c (validated) from random_init.h's formula:
// random_weight_half_bits(seed, kind, layer, index, random_init_std(kind, c.num_layers)) for
// element `index` (row-major) of each tensor.
HostWeights random_weights(const ModelConfig& c, uint64_t seed);

// Writes w as a Hugging Face model directory <dir>: config.json (with model_type "llama",
// architectures ["LlamaForCausalLM"], torch_dtype "float16") and model.safetensors in F16 (or,
// with max_shard_bytes > 0, model-0000i-of-0000n.safetensors shards of at most that many tensor
// bytes each, plus model.safetensors.index.json). The directory is created if needed. Tests and
// the engine's tests use it to make a small checkpoint without Python.
void save_hf_model(const HostWeights& w, const std::string& dir, int64_t max_shard_bytes = 0);
// config.json's text for c.
std::string hf_config_json(const ModelConfig& c);

}  // namespace serving
