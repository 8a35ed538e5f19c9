#include "model_config.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "json.h"

namespace serving {

namespace {

void require(bool ok, const char* field, const std::string& why) {
  if (!ok) throw std::invalid_argument(std::string("ModelConfig: argument '") + field + "' " + why);
}

std::string got(double v) {
  std::ostringstream s;
  s << " (got " << v << ")";
  return s.str();
}

}  // namespace

void ModelConfig::validate() const {
  require(vocab_size >= 1, "vocab_size", "must be >= 1" + got(vocab_size));
  require(hidden_size >= 8 && hidden_size <= 16384 && hidden_size % 8 == 0, "hidden_size",
          "must be a multiple of 8 in [8, 16384]" + got(hidden_size));
  require(intermediate_size >= 8 && intermediate_size % 8 == 0, "intermediate_size",
          "must be a positive multiple of 8" + got(intermediate_size));
  require(num_layers >= 1, "num_layers", "must be >= 1" + got(num_layers));
  require(num_heads >= 1, "num_heads", "must be >= 1" + got(num_heads));
  require(num_kv_heads >= 1, "num_kv_heads", "must be >= 1" + got(num_kv_heads));
  require(num_heads % num_kv_heads == 0, "num_kv_heads",
          "must divide num_heads (" + std::to_string(num_heads) + ")" + got(num_kv_heads));
  require(head_dim == 64 || head_dim == 128, "head_dim", "must be 64 or 128" + got(head_dim));
  require(rope_theta > 0, "rope_theta", "must be > 0" + got(rope_theta));
  require(rms_norm_eps > 0, "rms_norm_eps", "must be > 0" + got(rms_norm_eps));
  require(max_position_embeddings >= 1, "max_position_embeddings", "must be >= 1" + got(max_position_embeddings));
  require(bos_token_id >= -1 && bos_token_id < vocab_size, "bos_token_id",
          "must be -1 (none) or in [0, vocab_size)" + got(bos_token_id));
  require(eos_token_id >= -1 && eos_token_id < vocab_size, "eos_token_id",
          "must be -1 (none) or in [0, vocab_size)" + got(eos_token_id));
  for (int id : eos_token_ids) {
    require(id >= 0 && id < vocab_size, "eos_token_ids", "must be in [0, vocab_size)" + got(id));
  }
}

ModelConfig ModelConfig::smollm2_135m() {
  ModelConfig c;
  c.name = "smollm2-135m";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.rope_theta = 100000.0;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = 8192;
  c.tie_word_embeddings = true;
  c.bos_token_id = 0;
  c.eos_token_id = 0;
  c.eos_token_ids = {0};
  return c;
}

ModelConfig ModelConfig::llama3_8b(int layers) {
  ModelConfig c;
  c.name = layers == 32 ? "llama3-8b" : "llama3-8b-" + std::to_string(layers) + "-layers";
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = layers;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = 8192;
  c.tie_word_embeddings = false;
  c.bos_token_id = 128000;
  c.eos_token_id = 128001;
  c.eos_token_ids = {128001};
  return c;
}

ModelConfig ModelConfig::tiny() {
  ModelConfig c;
  c.name = "tiny";
  c.vocab_size = 384;
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = 1024;
  c.tie_word_embeddings = false;
  c.bos_token_id = 256;
  c.eos_token_id = 257;
  c.eos_token_ids = {257};
  return c;
}

int64_t ModelConfig::kv_bytes_per_token(int bytes_per_element) const {
  return int64_t{2} * num_layers * num_kv_heads * head_dim * bytes_per_element;
}

int64_t ModelConfig::num_parameters() const {
  const int64_t h = hidden_size, q = int64_t{num_heads} * head_dim, kv = int64_t{num_kv_heads} * head_dim;
  const int64_t per_layer = 2 * h                                  // input_layernorm, post_attention_layernorm
                            + q * h + 2 * kv * h + h * q           // q, k, v, o
                            + 3 * int64_t{intermediate_size} * h;  // gate, up, down
  const int64_t embed = int64_t{vocab_size} * h;
  return embed + num_layers * per_layer + h + (tie_word_embeddings ? 0 : embed);
}

namespace {

// Reads config.json's keys; every error names the file.
struct ConfigReader {
  const json::Value& root;
  const std::string& where;

  [[noreturn]] void fail(const std::string& what) const { throw std::invalid_argument(where + ": " + what); }
  // A key's value, nullptr when absent or null.
  const json::Value* get(const char* key) const {
    const json::Value* v = root.find(key);
    return v && !v->is_null() ? v : nullptr;
  }
  int int_key(const char* key, bool required, int fallback) const {
    const json::Value* v = get(key);
    if (!v) {
      if (required) fail(std::string("key \"") + key + "\" is missing");
      return fallback;
    }
    if (!v->is_integer() || v->as_int() < -(int64_t{1} << 31) || v->as_int() >= (int64_t{1} << 31)) {
      fail(std::string("key \"") + key + "\" must be an integer, got " + v->dump());
    }
    return static_cast<int>(v->as_int());
  }
  double number_key(const json::Value* v, const char* key, double fallback) const {
    if (!v) return fallback;
    if (!v->is_number()) fail(std::string("key \"") + key + "\" must be a number, got " + v->dump());
    return v->as_double();
  }
  bool bool_key(const char* key, bool fallback) const {
    const json::Value* v = get(key);
    if (!v) return fallback;
    if (!v->is_bool()) fail(std::string("key \"") + key + "\" must be true or false, got " + v->dump());
    return v->as_bool();
  }
  // rope_scaling / rope_parameters: absent, null, or of rope_type "default" (plain RoPE; the
  // theta may sit inside, as transformers 5 writes it).
  void require_plain_rope(const char* key) const {
    const json::Value* v = get(key);
    if (!v) return;
    bool plain = false;
    if (v->is_object()) {
      const json::Value* t = v->find("rope_type");
      if (!t) t = v->find("type");
      plain = t && t->is_string() && t->as_string() == "default";
      for (const auto& [k, e] : v->as_object()) {
        if (k != "rope_type" && k != "type" && k != "rope_theta" && k != "partial_rotary_factor") plain = false;
        if (k == "partial_rotary_factor" && !(e.is_number() && e.as_double() == 1.0)) plain = false;
      }
    }
    if (!plain) {
      fail(std::string(key) + " " + v->dump() + " is not supported (this engine implements plain RoPE only)");
    }
  }
};

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& where) {
  json::Value root;
  try {
    root = json::parse(json_text);
  } catch (const std::invalid_argument& e) { throw std::invalid_argument(where + ": " + e.what()); }
  if (!root.is_object()) throw std::invalid_argument(where + ": expected a JSON object, got " + root.dump(80));
  const ConfigReader r{root, where};

  const json::Value* type = r.get("model_type");
  if (!type) r.fail("key \"model_type\" is missing (only \"llama\" is supported)");
  if (!type->is_string() || type->as_string() != "llama") {
    r.fail("model_type " + type->dump() + " is not supported (only \"llama\")");
  }
  if (const json::Value* act = r.get("hidden_act")) {
    if (!act->is_string() || act->as_string() != "silu") {
      r.fail("hidden_act " + act->dump() + " is not supported (only \"silu\")");
    }
  }
  if (r.bool_key("attention_bias", false)) r.fail("attention_bias true is not supported (projections have no bias)");
  if (r.bool_key("mlp_bias", false)) r.fail("mlp_bias true is not supported (projections have no bias)");
  r.require_plain_rope("rope_scaling");
  r.require_plain_rope("rope_parameters");

  ModelConfig c;
  c.name = "hf";
  c.vocab_size = r.int_key("vocab_size", true, 0);
  c.hidden_size = r.int_key("hidden_size", true, 0);
  c.intermediate_size = r.int_key("intermediate_size", true, 0);
  c.num_layers = r.int_key("num_hidden_layers", true, 0);
  c.num_heads = r.int_key("num_attention_heads", true, 0);
  c.num_kv_heads = r.int_key("num_key_value_heads", false, c.num_heads);
  if (c.num_heads < 1) r.fail("num_attention_heads must be >= 1 (got " + std::to_string(c.num_heads) + ")");
  if (r.get("head_dim")) {
    c.head_dim = r.int_key("head_dim", true, 0);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      r.fail("hidden_size " + std::to_string(c.hidden_size) + " is not divisible by num_attention_heads " +
             std::to_string(c.num_heads) + " (and head_dim is not given)");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  const json::Value* params = r.get("rope_parameters");
  const json::Value* theta = r.get("rope_theta");
  if (!theta && params) theta = params->find("rope_theta");
  c.rope_theta = r.number_key(theta, "rope_theta", 10000.0);
  c.rms_norm_eps = static_cast<float>(r.number_key(r.get("rms_norm_eps"), "rms_norm_eps", 1e-6));
  c.max_position_embeddings = r.int_key("max_position_embeddings", false, 2048);
  c.tie_word_embeddings = r.bool_key("tie_word_embeddings", false);
  c.bos_token_id = r.int_key("bos_token_id", false, -1);
  if (const json::Value* eos = r.get("eos_token_id")) {
    if (eos->is_integer()) {
      c.eos_token_ids.push_back(static_cast<int>(eos->as_int()));
    } else if (eos->is_array()) {
      for (const json::Value& e : eos->as_array()) {
        if (!e.is_integer()) r.fail("eos_token_id must be an integer or a list of integers, got " + eos->dump());
        c.eos_token_ids.push_back(static_cast<int>(e.as_int()));
      }
    } else {
      r.fail("eos_token_id must be an integer or a list of integers, got " + eos->dump());
    }
  }
  c.eos_token_id = c.eos_token_ids.empty() ? -1 : c.eos_token_ids.front();
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": config not supported: " + e.what());
  }
  return c;
}

ModelConfig load_hf_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(path + ": cannot open the file");
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) throw std::runtime_error(path + ": read error");
  ModelConfig c = parse_hf_config(text.str(), path);
  // The model's name: the directory's last component.
  const size_t last = model_dir.find_last_not_of('/');
  const std::string trimmed = last == std::string::npos ? model_dir : model_dir.substr(0, last + 1);
  const size_t slash = trimmed.find_last_of('/');
  c.name = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  return c;
}

}  // namespace serving
