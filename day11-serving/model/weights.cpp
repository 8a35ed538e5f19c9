#include "weights.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "fp16_host.h"
#include "json.h"
#include "parallel.h"
#include "safetensors.h"

namespace serving {

namespace {

std::vector<WeightSlot> make_slots(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim,
                inter = c.intermediate_size, vocab = c.vocab_size;
  std::vector<WeightSlot> s;
  s.push_back({"model.embed_tokens.weight", {vocab, h}, TensorKind::kEmbed, -1, nullptr});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {h}, TensorKind::kInputNorm, i, nullptr});
    s.push_back({p + "self_attn.q_proj.weight", {q, h}, TensorKind::kQ, i, nullptr});
    s.push_back({p + "self_attn.k_proj.weight", {kv, h}, TensorKind::kK, i, nullptr});
    s.push_back({p + "self_attn.v_proj.weight", {kv, h}, TensorKind::kV, i, nullptr});
    s.push_back({p + "self_attn.o_proj.weight", {h, q}, TensorKind::kO, i, nullptr});
    s.push_back({p + "post_attention_layernorm.weight", {h}, TensorKind::kPostNorm, i, nullptr});
    s.push_back({p + "mlp.gate_proj.weight", {inter, h}, TensorKind::kGate, i, nullptr});
    s.push_back({p + "mlp.up_proj.weight", {inter, h}, TensorKind::kUp, i, nullptr});
    s.push_back({p + "mlp.down_proj.weight", {h, inter}, TensorKind::kDown, i, nullptr});
  }
  s.push_back({"model.norm.weight", {h}, TensorKind::kFinalNorm, -1, nullptr});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {vocab, h}, TensorKind::kLmHead, -1, nullptr});
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open the file");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// One tensor of a file, converted to fp16 bits with the range checks of load_hf_weights.
void convert_to_half(const SafetensorsFile& f, const TensorInfo& t, std::vector<uint16_t>& out) {
  const int64_t n = t.numel();
  out.resize(static_cast<size_t>(n));
  const uint8_t* p = f.data(t);
  auto fail = [&](int64_t i, const std::string& what) {
    throw std::invalid_argument(f.path() + ": tensor '" + t.name + "' element " + std::to_string(i) + what);
  };
  auto from_float = [&](int64_t i, float x) {
    if (!std::isfinite(x)) fail(i, " is NaN or infinite");
    const uint16_t h = course::float_to_half_bits(x);
    if ((h & 0x7FFFu) == 0x7C00u) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " = %g is outside fp16's range (|x| <= 65504)", x);
      fail(i, buf);
    }
    out[i] = h;
  };
  switch (t.dtype) {
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8);
        if ((h & 0x7C00u) == 0x7C00u) fail(i, " is NaN or infinite");
        out[i] = h;
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        from_float(i, course::bf16_bits_to_float(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8)));
      }
      break;
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t b = uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 |
                           uint32_t{p[4 * i + 3]} << 24;
        float x;
        std::memcpy(&x, &b, 4);
        from_float(i, x);
      }
      break;
    default:
      throw std::invalid_argument(f.path() + ": tensor '" + t.name + "' has dtype " + dtype_name(t.dtype) +
                                  ", unsupported (F32, F16 or BF16)");
  }
}

}  // namespace

std::vector<uint16_t>& HostWeights::tensor(const WeightSlot& slot) {
  switch (slot.kind) {
    case TensorKind::kEmbed:
      return embed;
    case TensorKind::kFinalNorm:
      return final_norm;
    case TensorKind::kLmHead:
      return lm_head;
    default:
      if (slot.layer < 0 || slot.layer >= static_cast<int>(layers.size())) {
        throw std::invalid_argument("HostWeights: tensor '" + slot.name + "' of layer " + std::to_string(slot.layer) +
                                    ", but the weights hold " + std::to_string(layers.size()) + " layers");
      }
      return layers[slot.layer][slot.kind];
  }
}

const std::vector<uint16_t>& HostWeights::tensor(const WeightSlot& slot) const {
  return const_cast<HostWeights&>(*this).tensor(slot);
}

std::vector<WeightSlot> weight_slots(HostWeights& w) {
  w.layers.resize(w.config.num_layers);
  std::vector<WeightSlot> slots = make_slots(w.config);
  for (WeightSlot& s : slots) s.dst = &w.tensor(s);
  return slots;
}

std::vector<WeightSlot> weight_slots(const ModelConfig& c) { return make_slots(c); }

HostWeights load_hf_weights(const std::string& model_dir) {
  HostWeights w;
  w.config = load_hf_config(model_dir);
  const std::string single = model_dir + "/model.safetensors";
  const std::string index = model_dir + "/model.safetensors.index.json";

  // Where each tensor lives: one file, or the shards the index names.
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::vector<std::pair<std::string, size_t>> location;  // tensor name -> file (index into files)
  const bool sharded = !file_exists(single) && file_exists(index);
  if (sharded) {
    json::Value root;
    try {
      root = json::parse(read_text(index));
    } catch (const std::invalid_argument& e) { throw std::invalid_argument(index + ": " + e.what()); }
    const json::Value* map = root.is_object() ? root.find("weight_map") : nullptr;
    if (!map || !map->is_object()) throw std::invalid_argument(index + ": needs an object \"weight_map\"");
    std::vector<std::string> shard_names;
    for (const auto& [name, file] : map->as_object()) {
      if (!file.is_string() || file.as_string().empty() || file.as_string().find('/') != std::string::npos) {
        throw std::invalid_argument(index + ": weight_map entry '" + name +
                                    "' must name a file of the directory, got " + file.dump(80));
      }
      size_t k = 0;
      while (k < shard_names.size() && shard_names[k] != file.as_string()) ++k;
      if (k == shard_names.size()) shard_names.push_back(file.as_string());
      location.emplace_back(name, k);
    }
    for (const std::string& s : shard_names) files.push_back(std::make_unique<SafetensorsFile>(model_dir + "/" + s));
  } else {
    if (!file_exists(single)) {
      throw std::runtime_error(model_dir + ": no model.safetensors and no model.safetensors.index.json");
    }
    files.push_back(std::make_unique<SafetensorsFile>(single));
    for (const TensorInfo& t : files[0]->tensors()) location.emplace_back(t.name, 0);
  }

  for (const WeightSlot& slot : weight_slots(w)) {
    const SafetensorsFile* f = nullptr;
    for (const auto& [name, k] : location) {
      if (name == slot.name) f = files[k].get();
    }
    if (!f) {
      throw std::invalid_argument((sharded ? index : single) + ": tensor '" + slot.name + "' is missing" +
                                  (sharded ? " from weight_map" : ""));
    }
    const TensorInfo* t = f->find(slot.name);
    if (!t) {
      throw std::invalid_argument(f->path() + ": tensor '" + slot.name +
                                  "' is missing (model.safetensors.index.json places it in this file)");
    }
    if (t->shape != slot.shape) {
      throw std::invalid_argument(f->path() + ": tensor '" + slot.name + "' has shape " + t->shape_str() +
                                  ", expected " + shape_str(slot.shape) + " (from config.json)");
    }
    convert_to_half(*f, *t, *slot.dst);
  }
  return w;
}

HostWeights random_weights(const ModelConfig& c, uint64_t seed) {
  c.validate();
  HostWeights w;
  w.config = c;
  for (const WeightSlot& slot : weight_slots(w)) {
    const int64_t n = numel(slot.shape);
    slot.dst->resize(static_cast<size_t>(n));
    const float stddev = random_init_std(slot.kind, c.num_layers);
    uint16_t* dst = slot.dst->data();
    const int64_t chunk = 1 << 16, chunks = (n + chunk - 1) / chunk;
    course::parallel_for(chunks, [&](int64_t b) {
      const int64_t end = std::min(n, (b + 1) * chunk);
      for (int64_t i = b * chunk; i < end; ++i) {
        dst[i] = random_weight_half_bits(seed, slot.kind, slot.layer, static_cast<uint64_t>(i), stddev);
      }
    });
  }
  return w;
}

namespace {

// The shortest decimal text that reads back as the same float / double.
std::string shortest(double v, bool as_float) {
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    const double back = std::strtod(buf, nullptr);
    if (as_float ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string hf_config_json(const ModelConfig& c) {
  std::ostringstream s;
  auto id = [](int v) { return v < 0 ? std::string("null") : std::to_string(v); };
  std::string eos = id(c.eos_token_id);
  if (c.eos_token_ids.size() > 1) {
    eos = "[";
    for (size_t i = 0; i < c.eos_token_ids.size(); ++i) eos += (i ? ", " : "") + std::to_string(c.eos_token_ids[i]);
    eos += "]";
  }
  s << "{\n"
    << "  \"architectures\": [\"LlamaForCausalLM\"],\n"
    << "  \"model_type\": \"llama\",\n"
    << "  \"vocab_size\": " << c.vocab_size << ",\n"
    << "  \"hidden_size\": " << c.hidden_size << ",\n"
    << "  \"intermediate_size\": " << c.intermediate_size << ",\n"
    << "  \"num_hidden_layers\": " << c.num_layers << ",\n"
    << "  \"num_attention_heads\": " << c.num_heads << ",\n"
    << "  \"num_key_value_heads\": " << c.num_kv_heads << ",\n"
    << "  \"head_dim\": " << c.head_dim << ",\n"
    << "  \"hidden_act\": \"silu\",\n"
    << "  \"rms_norm_eps\": " << shortest(c.rms_norm_eps, true) << ",\n"
    << "  \"rope_theta\": " << shortest(c.rope_theta, false) << ",\n"
    << "  \"rope_scaling\": null,\n"
    << "  \"max_position_embeddings\": " << c.max_position_embeddings << ",\n"
    << "  \"tie_word_embeddings\": " << (c.tie_word_embeddings ? "true" : "false") << ",\n"
    << "  \"attention_bias\": false,\n"
    << "  \"mlp_bias\": false,\n"
    << "  \"bos_token_id\": " << id(c.bos_token_id) << ",\n"
    << "  \"eos_token_id\": " << eos << ",\n"
    << "  \"torch_dtype\": \"float16\"\n"
    << "}\n";
  return s.str();
}

void save_hf_model(const HostWeights& w, const std::string& dir, int64_t max_shard_bytes) {
  w.config.validate();
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error(dir + ": cannot create the directory (" + std::strerror(errno) + ")");
  }
  {
    std::ofstream f(dir + "/config.json", std::ios::trunc);
    f << hf_config_json(w.config);
    if (!f) throw std::runtime_error(dir + "/config.json: write error");
  }
  if (static_cast<int>(w.layers.size()) != w.config.num_layers) {
    throw std::invalid_argument("save_hf_model: " + std::to_string(w.layers.size()) + " layers, the config says " +
                                std::to_string(w.config.num_layers));
  }
  std::vector<std::vector<TensorData>> shards(1);
  int64_t shard_bytes = 0;
  for (const WeightSlot& slot : weight_slots(w.config)) {
    const std::vector<uint16_t>& data = w.tensor(slot);
    if (static_cast<int64_t>(data.size()) != numel(slot.shape)) {
      throw std::invalid_argument("save_hf_model: tensor '" + slot.name + "' holds " + std::to_string(data.size()) +
                                  " values, its shape " + shape_str(slot.shape) + " needs " +
                                  std::to_string(numel(slot.shape)));
    }
    const int64_t bytes = 2 * numel(slot.shape);
    if (max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(tensor_f16(slot.name, slot.shape, data));
    shard_bytes += bytes;
  }
  if (max_shard_bytes <= 0) {
    write_safetensors(dir + "/model.safetensors", shards[0]);
    return;
  }
  const int n = static_cast<int>(shards.size());
  std::string index = "{\n  \"metadata\": {\"total_size\": " + std::to_string(2 * w.config.num_parameters()) +
                      "},\n  \"weight_map\": {";
  bool first = true;
  for (int k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n);
    write_safetensors(dir + "/" + name, shards[k]);
    for (const TensorData& t : shards[k]) {
      index += std::string(first ? "" : ",") + "\n    \"" + t.name + "\": \"" + name + "\"";
      first = false;
    }
  }
  index += "\n  }\n}\n";
  std::ofstream f(dir + "/model.safetensors.index.json", std::ios::trunc);
  f << index;
  if (!f) throw std::runtime_error(dir + "/model.safetensors.index.json: write error");
}

}  // namespace serving
