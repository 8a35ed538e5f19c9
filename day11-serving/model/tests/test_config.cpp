// ModelConfig: the presets' numbers (parameters, KV bytes per token), validate()'s messages, and
// config.json parsing with what it refuses.
#include <string>

#include "catch_compat.h"
#include "model_config.h"
#include "test_util.h"
#include "weights.h"

using serving::ModelConfig;
using serving::parse_hf_config;

namespace {

// A Llama config.json as transformers writes it, with one key replaced or added.
std::string config_json(const std::string& extra = "", const std::string& drop = "") {
  std::string keys[][2] = {{"architectures", "[\"LlamaForCausalLM\"]"},
                           {"model_type", "\"llama\""},
                           {"vocab_size", "384"},
                           {"hidden_size", "256"},
                           {"intermediate_size", "512"},
                           {"num_hidden_layers", "4"},
                           {"num_attention_heads", "4"},
                           {"num_key_value_heads", "2"},
                           {"hidden_act", "\"silu\""},
                           {"rms_norm_eps", "1e-05"},
                           {"rope_theta", "10000.0"},
                           {"rope_scaling", "null"},
                           {"max_position_embeddings", "1024"},
                           {"tie_word_embeddings", "false"},
                           {"bos_token_id", "256"},
                           {"eos_token_id", "257"},
                           {"torch_dtype", "\"float16\""}};
  std::string s = "{";
  bool first = true;
  for (auto& kv : keys) {
    if (kv[0] == drop || serving_test::contains(extra, "\"" + kv[0] + "\"")) continue;
    s += (first ? "\"" : ", \"") + kv[0] + "\": " + kv[1];
    first = false;
  }
  if (!extra.empty()) s += ", " + extra;
  return s + "}";
}

}  // namespace

TEST_CASE("config: SmolLM2-135M preset", "[day11][model][config]") {
  const ModelConfig c = ModelConfig::smollm2_135m();
  c.validate();
  CHECK(c.num_layers == 30);
  CHECK(c.hidden_size == 576);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.intermediate_size == 1536);
  CHECK(c.vocab_size == 49152);
  CHECK(c.tie_word_embeddings);
  // 2 · 30 layers · 3 KV heads · 64 · 2 bytes.
  CHECK(c.kv_bytes_per_token() == 23040);
  CHECK(c.kv_bytes_per_token(4) == 46080);
  // embed 49152·576 = 28,311,552; per layer 2·576 + 576·576 + 2·192·576 + 576·576 + 3·1536·576
  // = 3,540,096, times 30 = 106,202,880; final norm 576; tied: no lm_head.
  CHECK(c.num_parameters() == 134515008);
}

TEST_CASE("config: Llama-3-8B preset", "[day11][model][config]") {
  const ModelConfig c = ModelConfig::llama3_8b();
  c.validate();
  CHECK(c.num_layers == 32);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.kv_bytes_per_token() == 131072);  // 2 · 32 · 8 · 128 · 2: 128 KiB per token
  // embed and lm_head 128256·4096 each; per layer 218,112,000.
  CHECK(c.num_parameters() == 8030261248LL);
  const ModelConfig four = ModelConfig::llama3_8b(4);
  CHECK(four.num_layers == 4);
  CHECK(four.num_parameters() == 2 * 525336576LL + 4 * 218112000LL + 4096);
}

TEST_CASE("config: tiny preset", "[day11][model][config]") {
  const ModelConfig c = ModelConfig::tiny();
  c.validate();
  CHECK(c.vocab_size == 384);
  CHECK(c.hidden_size == 256);
  CHECK(c.num_layers == 4);
  CHECK(c.num_heads == 4);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 64);
  CHECK(c.intermediate_size == 512);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.kv_bytes_per_token() == 2 * 4 * 2 * 64 * 2);
  // embed + lm_head 2·384·256; per layer 512 + 65536 + 2·32768 + 65536 + 3·131072.
  CHECK(c.num_parameters() == 2 * 98304 + 4 * 590336 + 256);
}

TEST_CASE("config: validate names the field", "[day11][model][config]") {
  auto with = [](auto set) {
    ModelConfig c = ModelConfig::tiny();
    set(c);
    return c;
  };
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.head_dim = 80; }).validate(), "'head_dim'", "64 or 128", "got 80");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.num_kv_heads = 3; }).validate(), "'num_kv_heads'",
                        "must divide num_heads (4)");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.num_kv_heads = 0; }).validate(), "'num_kv_heads'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.hidden_size = 260; }).validate(), "'hidden_size'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.hidden_size = 16392; }).validate(), "'hidden_size'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.vocab_size = 0; }).validate(), "'vocab_size'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.intermediate_size = 100; }).validate(), "'intermediate_size'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.num_layers = 0; }).validate(), "'num_layers'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.rope_theta = 0; }).validate(), "'rope_theta'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.rms_norm_eps = 0; }).validate(), "'rms_norm_eps'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.eos_token_id = 384; }).validate(), "'eos_token_id'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.bos_token_id = -2; }).validate(), "'bos_token_id'");
  SERVING_CHECK_INVALID(with([](ModelConfig& c) { c.max_position_embeddings = 0; }).validate(),
                        "'max_position_embeddings'");
}

TEST_CASE("config: config.json parsed", "[day11][model][config]") {
  const ModelConfig c = parse_hf_config(config_json());
  CHECK(c.vocab_size == 384);
  CHECK(c.hidden_size == 256);
  CHECK(c.intermediate_size == 512);
  CHECK(c.num_layers == 4);
  CHECK(c.num_heads == 4);
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 64);  // hidden / heads
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.rms_norm_eps == 1e-5f);
  CHECK(c.max_position_embeddings == 1024);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK(c.bos_token_id == 256);
  CHECK(c.eos_token_id == 257);

  // Defaults of absent keys; head_dim given explicitly; an eos list; transformers 5's
  // rope_parameters.
  const ModelConfig d = parse_hf_config(
      config_json("\"head_dim\": 128, \"eos_token_id\": [7, 9], \"rope_parameters\": {\"rope_type\": \"default\", "
                  "\"rope_theta\": 500000.0}",
                  "num_key_value_heads"));
  CHECK(d.num_kv_heads == 4);
  CHECK(d.head_dim == 128);
  CHECK(d.eos_token_id == 7);
  CHECK(d.eos_token_ids == std::vector<int>{7, 9});
  const ModelConfig e =
      parse_hf_config(config_json("\"rope_parameters\": {\"rope_type\": \"default\", "
                                  "\"rope_theta\": 500000.0}",
                                  "rope_theta"));
  CHECK(e.rope_theta == 500000.0);
  const ModelConfig f = parse_hf_config(config_json("", "rope_theta"));
  CHECK(f.rope_theta == 10000.0);
  const ModelConfig g = parse_hf_config(config_json("\"tie_word_embeddings\": true, \"eos_token_id\": null"));
  CHECK(g.tie_word_embeddings);
  CHECK(g.eos_token_id == -1);
  CHECK(g.eos_token_ids.empty());
}

TEST_CASE("config: config.json refused with the reason", "[day11][model][config]") {
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"model_type\": \"mistral\""), "dir/config.json"),
                        "dir/config.json", "model_type \"mistral\" is not supported");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("", "model_type")), "\"model_type\" is missing");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}")),
                        "rope_scaling", "\"llama3\"", "not supported");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}")),
                        "rope_scaling", "not supported");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": "
                                                    "4.0, \"rope_theta\": 10000.0}")),
                        "rope_parameters", "not supported");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"num_key_value_heads\": 3")), "config not supported",
                        "'num_kv_heads'", "must divide num_heads (4)");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"num_attention_heads\": 3")), "hidden_size 256",
                        "not divisible by num_attention_heads 3");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"num_attention_heads\": 8")), "'head_dim'", "got 32");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"hidden_act\": \"gelu\"")), "hidden_act \"gelu\"");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"attention_bias\": true")), "attention_bias");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"mlp_bias\": true")), "mlp_bias");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("", "vocab_size")), "\"vocab_size\" is missing");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"hidden_size\": 256.5")), "\"hidden_size\" must be an integer");
  SERVING_CHECK_INVALID(parse_hf_config(config_json("\"eos_token_id\": \"x\"")), "eos_token_id");
  SERVING_CHECK_INVALID(parse_hf_config("{\"model_type\": \"llama\",", "c.json"), "c.json", "JSON:", "at byte");
  SERVING_CHECK_INVALID(parse_hf_config("[1]"), "expected a JSON object");
}

TEST_CASE("config: load_hf_config reads <dir>/config.json; hf_config_json round-trips", "[day11][model][config]") {
  serving_test::TempDir dir;
  const auto missing = serving_test::error_of([&] { serving::load_hf_config(dir.path()); });
  CHECK(missing.kind == serving_test::Thrown::kRuntimeError);
  CHECK(serving_test::contains(missing.what, dir.path() + "/config.json"));

  for (ModelConfig c : {ModelConfig::tiny(), ModelConfig::smollm2_135m(), ModelConfig::llama3_8b(2)}) {
    c.eos_token_ids = {c.eos_token_id, 3};
    serving_test::write_file(dir.file("config.json"), serving::hf_config_json(c));
    const ModelConfig r = serving::load_hf_config(dir.path() + "/");
    INFO(c.name);
    CHECK(r.vocab_size == c.vocab_size);
    CHECK(r.hidden_size == c.hidden_size);
    CHECK(r.intermediate_size == c.intermediate_size);
    CHECK(r.num_layers == c.num_layers);
    CHECK(r.num_heads == c.num_heads);
    CHECK(r.num_kv_heads == c.num_kv_heads);
    CHECK(r.head_dim == c.head_dim);
    CHECK(r.rope_theta == c.rope_theta);
    CHECK(r.rms_norm_eps == c.rms_norm_eps);
    CHECK(r.max_position_embeddings == c.max_position_embeddings);
    CHECK(r.tie_word_embeddings == c.tie_word_embeddings);
    CHECK(r.bos_token_id == c.bos_token_id);
    CHECK(r.eos_token_ids == c.eos_token_ids);
    CHECK(r.num_parameters() == c.num_parameters());
    CHECK(r.name == dir.path().substr(dir.path().rfind('/') + 1));  // the directory's name
  }
}
