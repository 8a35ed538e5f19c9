// Weights: the random-init formula (determinism, statistics, the fp16 rounding it shares with the
// GPU), and a Hugging Face model directory written by the test and loaded back, with every error
// the loader must report naming the file and the tensor.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "catch_compat.h"
#include "fp16_host.h"
#include "json.h"
#include "random_init.h"
#include "safetensors.h"
#include "test_util.h"
#include "weights.h"

using serving::DType;
using serving::HostWeights;
using serving::ModelConfig;
using serving::TensorKind;
using serving_test::TempDir;

using serving_test::to_double;

namespace {

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / v.size();
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / v.size());
}

// Every tensor of w in the given dtype (F16 as is; F32 / BF16 from the fp16 values).
std::vector<serving::TensorData> tensors_of(HostWeights& w, DType dtype) {
  std::vector<serving::TensorData> out;
  for (const serving::WeightSlot& s : serving::weight_slots(w)) {
    if (dtype == DType::kF16) {
      out.push_back(serving::tensor_f16(s.name, s.shape, *s.dst));
      continue;
    }
    std::vector<float> f;
    for (uint16_t b : *s.dst) f.push_back(course::half_bits_to_float(b));
    out.push_back(dtype == DType::kF32 ? serving::tensor_f32(s.name, s.shape, f)
                                       : serving::tensor_bf16(s.name, s.shape, course::to_bf16_bits(f)));
  }
  return out;
}

void write_dir(const TempDir& dir, const ModelConfig& c, const std::vector<serving::TensorData>& ts) {
  serving_test::write_file(dir.file("config.json"), serving::hf_config_json(c));
  serving::write_safetensors(dir.file("model.safetensors"), ts);
}

void check_equal(const HostWeights& a, const HostWeights& b) {
  CHECK(a.embed == b.embed);
  CHECK(a.final_norm == b.final_norm);
  CHECK(a.lm_head == b.lm_head);
  REQUIRE(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const auto &x = a.layers[i], &y = b.layers[i];
    CHECK((x.input_norm == y.input_norm && x.q == y.q && x.k == y.k && x.v == y.v && x.o == y.o &&
           x.post_norm == y.post_norm && x.gate == y.gate && x.up == y.up && x.down == y.down));
  }
}

ModelConfig small_config(bool tied) {
  ModelConfig c = ModelConfig::tiny();
  c.num_layers = 2;
  c.tie_word_embeddings = tied;
  return c;
}

}  // namespace

TEST_CASE("random init: the fp16 rounding equals course::float_to_half_bits", "[day11][model][random]") {
  // The formula's own integer rounding is what the GPU fill runs; it must be round-to-nearest-even
  // exactly (the host reference of __float2half_rn).
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    REQUIRE(serving::random_float_to_half_bits(f) == course::float_to_half_bits(f));
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f, 1.0f + 0x1p-11f,
                  1.0f + 3 * 0x1p-11f, INFINITY, -INFINITY}) {
    CHECK(serving::random_float_to_half_bits(f) == course::float_to_half_bits(f));
  }
  CHECK((serving::random_float_to_half_bits(NAN) & 0x7C00u) == 0x7C00u);
  CHECK((serving::random_float_to_half_bits(NAN) & 0x03FFu) != 0);
}

TEST_CASE("random init: constants and the Irwin-Hall sum", "[day11][model][random]") {
  CHECK(serving::kRandomInvSigma == static_cast<float>(1.0 / std::sqrt(1431655765.0)));
  uint32_t b;
  std::memcpy(&b, &serving::kRandomInvSigma, 4);
  CHECK(b == 0x37DDB3D7u);
  CHECK(serving::random_init_sum(0) == -131070);
  CHECK(serving::random_init_sum(~uint64_t{0}) == 131070);
  // Mean 0 and variance (2^32 − 1) / 3 over many draws.
  double s = 0, s2 = 0;
  const int n = 400000;
  for (int i = 0; i < n; ++i) {
    const double x = serving::random_init_sum(serving::random_init_bits(3, 17, i));
    s += x;
    s2 += x * x;
  }
  const double sigma = std::sqrt(1431655765.0);
  CHECK(std::fabs(s / n) < 5 * sigma / std::sqrt(n));
  CHECK(std::fabs(std::sqrt(s2 / n) / sigma - 1) < 0.01);
  // Scales: 0.02, and o / down 0.02 / sqrt(2 · layers).
  CHECK(serving::random_init_std(TensorKind::kQ, 30) == 0.02f);
  CHECK(serving::random_init_std(TensorKind::kEmbed, 30) == 0.02f);
  CHECK(serving::random_init_std(TensorKind::kO, 30) == static_cast<float>(0.02 / std::sqrt(60.0)));
  CHECK(serving::random_init_std(TensorKind::kDown, 8) == 0.005f);
  CHECK(serving::random_init_std(TensorKind::kFinalNorm, 8) == 0.0f);
  // Tensor ids: distinct per (kind, layer).
  CHECK(serving::random_tensor_id(TensorKind::kEmbed, -1) == 0u);
  CHECK(serving::random_tensor_id(TensorKind::kQ, 0) == 18u);
  CHECK(serving::random_tensor_id(TensorKind::kQ, 1) != serving::random_tensor_id(TensorKind::kK, 0));
}

TEST_CASE("random init: pinned values (the engine's GPU fill must give these bits)", "[day11][model][random]") {
  // Golden values of the formula, reproduced by an independent transcription of random_init.h's
  // header comment in Python (integer hash, fp32 products rounded with struct, fp16 with
  // struct's 'e' format). A change to random_init.h changes them and must be deliberate (the
  // engine's GPU fill and this CPU code compile the same header).
  const uint16_t q0 = serving::random_weight_half_bits(1, TensorKind::kQ, 0, 0, 0.02f);
  const uint16_t q1 = serving::random_weight_half_bits(1, TensorKind::kQ, 0, 1, 0.02f);
  const uint16_t n0 = serving::random_weight_half_bits(1, TensorKind::kInputNorm, 0, 0, 0.0f);
  const uint16_t e5 = serving::random_weight_half_bits(42, TensorKind::kEmbed, -1, 5, 0.02f);
  INFO("q0 " << q0 << " q1 " << q1 << " n0 " << n0 << " e5 " << e5);
  CHECK(q0 == course::float_to_half_bits(serving::random_init_value(1, 18, 0, 0.02f)));
  CHECK(q0 == 0x9900u);
  CHECK(q1 == 0x255Cu);
  CHECK(n0 == 0x3B8Cu);
  CHECK(e5 == 0x258Eu);
}

TEST_CASE("random weights: deterministic, per-tensor streams, statistics", "[day11][model][random]") {
  const ModelConfig c = ModelConfig::tiny();
  const HostWeights a = serving::random_weights(c, 1234);
  const HostWeights b = serving::random_weights(c, 1234);
  check_equal(a, b);
  const HostWeights d = serving::random_weights(c, 1235);
  CHECK(a.embed != d.embed);
  CHECK(a.layers[0].q != a.layers[1].q);  // the layer is part of the stream
  CHECK(std::vector<uint16_t>(a.layers[0].q.begin(), a.layers[0].q.begin() + 100) !=
        std::vector<uint16_t>(a.layers[0].k.begin(), a.layers[0].k.begin() + 100));
  REQUIRE(a.embed.size() == size_t(c.vocab_size) * c.hidden_size);
  REQUIRE(a.lm_head.size() == size_t(c.vocab_size) * c.hidden_size);
  REQUIRE(a.layers[3].down.size() == size_t(c.hidden_size) * c.intermediate_size);

  struct Case {
    const char* name;
    const std::vector<uint16_t>* t;
    double std;
  };
  const double o_std = 0.02 / std::sqrt(2.0 * c.num_layers);
  for (const Case& k :
       {Case{"embed", &a.embed, 0.02}, Case{"q", &a.layers[0].q, 0.02}, Case{"gate", &a.layers[2].gate, 0.02},
        Case{"o", &a.layers[1].o, o_std}, Case{"down", &a.layers[3].down, o_std}, Case{"lm_head", &a.lm_head, 0.02}}) {
    INFO(k.name);
    const std::vector<double> v = to_double(*k.t);
    CHECK(std::fabs(mean_of(v)) < 5 * k.std / std::sqrt(double(v.size())));
    CHECK(std::fabs(std_of(v) / k.std - 1) < 0.02);
    double mx = 0;
    for (double x : v) mx = std::max(mx, std::fabs(x));
    CHECK(mx <= 3.4642 * k.std * 1.001);  // Irwin–Hall of 4: at most sqrt(12) standard deviations
    CHECK(mx > 2.5 * k.std);              // ... and not squeezed
  }
  // Norms: 1 + m/1024 with m in [−64, 64], exact; not constant.
  for (const std::vector<uint16_t>* n : {&a.final_norm, &a.layers[0].input_norm, &a.layers[3].post_norm}) {
    const std::vector<double> v = to_double(*n);
    double lo = 2, hi = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      CHECK(x * 1024 == std::round(x * 1024));
    }
    CHECK(lo >= 0.9375);
    CHECK(hi <= 1.0625);
    CHECK(hi - lo > 0.1);
    CHECK(std::fabs(mean_of(v) - 1) < 0.01);
  }
  // Tied: no lm_head.
  ModelConfig t = c;
  t.tie_word_embeddings = true;
  const HostWeights w = serving::random_weights(t, 1234);
  CHECK(w.lm_head.empty());
  CHECK(&w.output_matrix() == &w.embed);
  CHECK(w.embed == a.embed);
}

TEST_CASE("weights: a model directory written and loaded back (untied, tied, sharded)", "[day11][model][weights]") {
  for (bool tied : {false, true}) {
    INFO("tied " << tied);
    TempDir dir;
    const HostWeights w = serving::random_weights(small_config(tied), 99);
    serving::save_hf_model(w, dir.path());
    const serving::SafetensorsFile f(dir.file("model.safetensors"));
    CHECK((f.find("lm_head.weight") != nullptr) == !tied);
    CHECK(f.find("model.layers.1.mlp.down_proj.weight")->shape == std::vector<int64_t>{256, 512});
    CHECK(f.find("model.layers.0.self_attn.k_proj.weight")->shape == std::vector<int64_t>{128, 256});
    CHECK(f.find("model.layers.0.self_attn.o_proj.weight")->shape == std::vector<int64_t>{256, 256});
    CHECK(f.find("model.embed_tokens.weight")->dtype == DType::kF16);
    CHECK(f.tensors().size() == 2 + 9 * 2 + (tied ? 0 : 1));

    const HostWeights r = serving::load_hf_weights(dir.path());
    CHECK(r.config.tie_word_embeddings == tied);
    CHECK(r.config.num_layers == 2);
    CHECK(r.lm_head.empty() == tied);
    check_equal(w, r);
  }
  // Sharded: at most ~300 KB of tensors per shard, plus the index.
  TempDir dir;
  const HostWeights w = serving::random_weights(small_config(false), 5);
  serving::save_hf_model(w, dir.path(), 300000);
  std::ifstream index_file(dir.file("model.safetensors.index.json"));
  const serving::json::Value index =
      serving::json::parse(std::string(std::istreambuf_iterator<char>(index_file), std::istreambuf_iterator<char>()));
  const std::string first = index.find("weight_map")->find("model.embed_tokens.weight")->as_string();
  const std::string last = index.find("weight_map")->find("lm_head.weight")->as_string();
  CHECK(first.rfind("model-00001-of-", 0) == 0);
  CHECK(first != last);
  CHECK(serving::SafetensorsFile(dir.file(first)).find("model.embed_tokens.weight") != nullptr);
  CHECK(serving::SafetensorsFile(dir.file(last)).find("lm_head.weight") != nullptr);
  check_equal(w, serving::load_hf_weights(dir.path()));
}

TEST_CASE("weights: F32 and BF16 checkpoints are rounded to fp16", "[day11][model][weights]") {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    TempDir dir;
    HostWeights w = serving::random_weights(small_config(true), 8);
    write_dir(dir, w.config, tensors_of(w, dt));
    const HostWeights r = serving::load_hf_weights(dir.path());
    if (dt == DType::kF32) {
      check_equal(w, r);  // fp16 values survive fp32 exactly
    } else {
      // bf16 has 8 significant bits: the loaded value is the bf16 value rounded to fp16.
      const std::vector<uint16_t> bf = course::to_bf16_bits(course::half_bits_to_float(w.layers[1].gate));
      for (size_t i = 0; i < bf.size(); ++i) {
        REQUIRE(r.layers[1].gate[i] == course::float_to_half_bits(course::bf16_bits_to_float(bf[i])));
      }
      CHECK(r.layers[1].gate != w.layers[1].gate);
    }
  }
}

TEST_CASE("weights: loader errors name the file and the tensor", "[day11][model][weights]") {
  HostWeights w = serving::random_weights(small_config(false), 3);
  const ModelConfig c = w.config;
  TempDir dir;
  const std::string file = dir.file("model.safetensors");
  auto with = [&](auto edit) {
    std::vector<serving::TensorData> ts = tensors_of(w, DType::kF16);
    edit(ts);
    write_dir(dir, c, ts);
  };
  auto find = [](std::vector<serving::TensorData>& ts, const std::string& name) -> serving::TensorData& {
    for (auto& t : ts) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no " + name);
  };

  SECTION("no weight file") {
    serving_test::write_file(dir.file("config.json"), serving::hf_config_json(c));
    const auto e = serving_test::error_of([&] { serving::load_hf_weights(dir.path()); });
    CHECK(e.kind == serving_test::Thrown::kRuntimeError);
    CHECK(serving_test::contains(e.what, "no model.safetensors"));
  }
  SECTION("missing tensor") {
    with([&](auto& ts) { ts.erase(ts.begin() + 5); });  // model.layers.0.self_attn.o_proj.weight
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(),
                          "tensor 'model.layers.0.self_attn.o_proj.weight' is missing");
    with([&](auto& ts) { ts.pop_back(); });  // untied: lm_head required
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), "tensor 'lm_head.weight' is missing");
  }
  SECTION("wrong shape") {
    with([&](auto& ts) {
      serving::TensorData& t = find(ts, "model.layers.1.mlp.up_proj.weight");
      t.shape = {256, 512};  // transposed
    });
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(),
                          "tensor 'model.layers.1.mlp.up_proj.weight' has shape [256, 512], expected [512, 256]");
  }
  SECTION("unsupported dtype") {
    with([&](auto& ts) {
      serving::TensorData& t = find(ts, "model.norm.weight");
      t.dtype = DType::kI16;  // same byte count
    });
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(),
                          "tensor 'model.norm.weight' has dtype I16, unsupported");
  }
  SECTION("value outside fp16's range, NaN") {
    with([&](auto& ts) {
      serving::TensorData& t = find(ts, "model.layers.0.input_layernorm.weight");
      std::vector<float> v(256, 1.0f);
      v[17] = 1e5f;
      t = serving::tensor_f32(t.name, t.shape, v);
    });
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(),
                          "tensor 'model.layers.0.input_layernorm.weight' element 17 = 100000 is outside fp16's range");
    with([&](auto& ts) {
      serving::TensorData& t = find(ts, "model.norm.weight");
      std::vector<uint16_t> v(256, 0x3C00);
      v[3] = 0x7E00;
      t = serving::tensor_f16(t.name, t.shape, v);
    });
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), "tensor 'model.norm.weight' element 3 is NaN");
  }
  SECTION("truncated file") {
    with([](auto&) {});
    std::vector<uint8_t> b = serving_test::read_bytes(file);
    b.resize(b.size() - 1000);
    serving_test::write_bytes(file, b);
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(), "tensor 'lm_head.weight'",
                          "truncated file");
  }
  SECTION("bad header") {
    with([](auto&) {});
    std::vector<uint8_t> b = serving_test::read_bytes(file);
    b[8] = '[';
    serving_test::write_bytes(file, b);
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), file.c_str(), "bad header");
  }
  SECTION("config not supported") {
    with([](auto&) {});
    std::string cfg = serving::hf_config_json(c);
    cfg.replace(cfg.find("\"rope_scaling\": null"), 20, "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}");
    serving_test::write_file(dir.file("config.json"), cfg);
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), "config.json", "rope_scaling", "not supported");
  }
  SECTION("a tied model's lm_head and unknown tensors are ignored") {
    ModelConfig t = c;
    t.tie_word_embeddings = true;
    std::vector<serving::TensorData> ts = tensors_of(w, DType::kF16);
    ts.push_back(serving::tensor_f32("model.layers.0.self_attn.rotary_emb.inv_freq", {32}, std::vector<float>(32)));
    write_dir(dir, t, ts);
    const HostWeights r = serving::load_hf_weights(dir.path());
    CHECK(r.lm_head.empty());
    CHECK(r.embed == w.embed);
  }
  SECTION("sharded: the index names a tensor's shard") {
    serving::save_hf_model(w, dir.path(), 300000);
    std::string index;
    {
      std::ifstream f(dir.file("model.safetensors.index.json"));
      index.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const std::string entry = "\"model.norm.weight\": \"";
    const size_t at = index.find(entry);
    REQUIRE(at != std::string::npos);
    index.replace(at + entry.size(), 5, "xxxxx");  // another (missing) file
    serving_test::write_file(dir.file("model.safetensors.index.json"), index);
    const auto e = serving_test::error_of([&] { serving::load_hf_weights(dir.path()); });
    CHECK(e.kind == serving_test::Thrown::kRuntimeError);
    CHECK(serving_test::contains(e.what, "xxxxx"));
    index.erase(index.find(entry) - 5, index.find('\n', index.find(entry)) - index.find(entry) + 5);
    serving_test::write_file(dir.file("model.safetensors.index.json"), index);
    SERVING_CHECK_INVALID(serving::load_hf_weights(dir.path()), "model.safetensors.index.json",
                          "tensor 'model.norm.weight' is missing from weight_map");
  }
}
