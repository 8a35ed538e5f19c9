// The engine against the CPU reference model (model/reference_model.h) on ModelConfig::tiny(),
// and the serving loop's promises: batching changes no request's tokens, a bad request is
// refused alone, a bad checkpoint is refused with the loader's message.
//
// The fp16 bound, derived rather than guessed. The engine stores every activation in fp16 (the
// normed inputs, q/k/v, the attention output, each projection, the residual stream); its
// GEMMs and attention accumulate in fp32. The reference model can round its activations at the
// same points (ReferenceOptions::round_fp16) while computing everything else in double: the
// difference between that and the pure-double reference is what fp16 storage alone costs on
// this model and these tokens, e16 (relative L2) and m16 (max abs). The engine rounds at a few
// points more than the reference models (the probabilities P before P·V in the prefill
// kernels, the norm's normalized value before the weight, silu(gate) · up once instead of
// twice), each another fp16 rounding of an O(1) quantity, and sums in other orders (fp32), so
// its distance to the double reference is a small multiple of fp16's own:
//   rel_l2 <= 3·e16 and max_abs <= 5·m16,   with floors 2e-3 and 2e-3
// (the floors for tokens where e16 happens to be tiny). A kernel bug (a wrong position, a head
// mapped wrongly, a stale cache slot) moves logits by O(0.1–1) relative, far above these.
// Greedy tokens must equal the reference's arg max wherever the reference's top-2 margin
// exceeds 2 · the max-abs bound (an error of at most the bound on each of the two logits cannot
// swap them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "catch_compat.h"
#include "cli.h"
#include "engine.h"
#include "reference_model.h"
#include "weights.h"

// The test main (common/main_gpu.cpp) asks these: sm_80 (05's mma.sync, 03's vector loads).
int course_required_sm() { return 80; }
int course_max_sm() { return 0; }
bool course_has_index_checks() { return false; }

using namespace serving;

namespace {

const uint64_t kSeed = 20261126;

const HostWeights& tiny_weights() {
  static const HostWeights w = random_weights(ModelConfig::tiny(), kSeed);
  return w;
}

const ReferenceModel& reference() {
  static const ReferenceModel m(tiny_weights());
  return m;
}

std::vector<int32_t> random_tokens(int n, uint64_t seed, int vocab) {
  return serving::random_tokens(n, seed, 0, vocab);
}

std::unique_ptr<Engine> make_engine(const EngineConfig& ec, const HostWeights& w = tiny_weights()) {
  return std::make_unique<Engine>(DeviceWeights::upload(w), ec);
}

EngineConfig roomy() {
  EngineConfig ec;
  ec.num_blocks = 256;
  return ec;
}

struct Errors {
  double rel_l2 = 0, max_abs = 0;
};

Errors errors(const std::vector<float>& got, const std::vector<float>& ref) {
  REQUIRE(got.size() == ref.size());
  double num = 0, den = 0, mx = 0;
  size_t non_finite = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) ++non_finite;
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * ref[i];
    mx = std::max(mx, std::fabs(d));
  }
  REQUIRE(non_finite == 0);
  return {std::sqrt(num / std::max(den, 1e-300)), mx};
}

// The bound of the header comment for these tokens: what fp16 activations alone cost.
Errors fp16_bound(const std::vector<int32_t>& tokens, const std::vector<float>& ref64) {
  ReferenceOptions o;
  o.round_fp16 = true;
  const Errors e16 = errors(reference().forward(tokens, o), ref64);
  return {std::max(3 * e16.rel_l2, 2e-3), std::max(5 * e16.max_abs, 2e-3)};
}

// Rows [first, first + n) of [T, V] logits.
std::vector<float> rows(const std::vector<float>& l, int first, int n, int V) {
  return std::vector<float>(l.begin() + size_t(first) * V, l.begin() + size_t(first + n) * V);
}

// Checks engine logits against the double reference with the derived bound; returns the bound.
Errors check_logits(const std::vector<float>& got, const std::vector<float>& ref64, const std::vector<int32_t>& tokens,
                    const char* what) {
  const Errors bound = fp16_bound(tokens, ref64);
  const Errors e = errors(got, ref64);
  std::printf("%s: rel L2 %.2e (bound %.2e), max abs %.2e (bound %.2e)\n", what, e.rel_l2, bound.rel_l2, e.max_abs,
              bound.max_abs);
  INFO(what << ": rel L2 " << e.rel_l2 << " (bound " << bound.rel_l2 << "), max abs " << e.max_abs << " (bound "
            << bound.max_abs << ")");
  CHECK(e.rel_l2 <= bound.rel_l2);
  CHECK(e.max_abs <= bound.max_abs);
  return bound;
}

// Arg max of a row (lowest index on ties) and its top-2 margin.
std::pair<int, double> top(const float* row, int V) {
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (row[i] > row[best]) best = i;
  double second = -1e300;
  for (int i = 0; i < V; ++i)
    if (i != best) second = std::max(second, double(row[i]));
  return {best, double(row[best]) - second};
}

}  // namespace

TEST_CASE("engine: prefill logits in one chunk match the CPU reference", "[day11][engine][logits]") {
  const int V = ModelConfig::tiny().vocab_size;
  auto engine = make_engine(roomy());
  for (int n : {1, 7, 64, 150}) {  // one token, below a page, whole pages, a long odd prompt
    const std::vector<int32_t> tokens = random_tokens(n, 100 + n, V);
    const std::vector<float> got = engine->prompt_logits(tokens, n);
    const std::vector<float> ref = reference().forward(tokens);
    check_logits(got, ref, tokens, ("prefill of " + std::to_string(n) + " tokens, one chunk").c_str());
  }
}

TEST_CASE("engine: chunked prefill logits match the CPU reference", "[day11][engine][chunked_prefill]") {
  const int V = ModelConfig::tiny().vocab_size;
  auto engine = make_engine(roomy());
  const std::vector<int32_t> tokens = random_tokens(150, 7, V);
  const std::vector<float> ref = reference().forward(tokens);
  // Chunks of 1 (every token through the decode kernel), 17 (not a multiple of the page size:
  // chunks start mid-page) and 64 (whole pages): each chunk's queries attend to every earlier
  // chunk's K/V through the paged cache, bottom-right causal.
  for (int chunk : {1, 17, 64}) {
    const std::vector<float> got = engine->prompt_logits(tokens, chunk);
    check_logits(got, ref, tokens, ("prefill of 150 tokens in chunks of " + std::to_string(chunk)).c_str());
  }
}

TEST_CASE("engine: 16 decode steps match the CPU reference", "[day11][engine][decode]") {
  const int V = ModelConfig::tiny().vocab_size;
  auto engine = make_engine(roomy());
  for (int prompt_len : {5, 40}) {
    Request r;
    r.prompt = random_tokens(prompt_len, 900 + prompt_len, V);
    r.max_new_tokens = 16;
    r.keep_logits = true;
    const int id = engine->submit(r);
    engine->run();
    const RequestResult& res = engine->result(id);
    REQUIRE(res.error.empty());
    REQUIRE(res.tokens.size() == 16);
    // The reference reads the whole sequence the engine produced; row p is the distribution of
    // token p + 1, so rows prompt_len - 1 .. prompt_len + 14 are the 16 the engine sampled from.
    std::vector<int32_t> all = r.prompt;
    all.insert(all.end(), res.tokens.begin(), res.tokens.end() - 1);
    const std::vector<float> ref_all = reference().forward(all);
    const std::vector<float> ref = rows(ref_all, prompt_len - 1, 16, V);
    ReferenceOptions o;
    o.round_fp16 = true;
    const Errors e16 = errors(rows(reference().forward(all, o), prompt_len - 1, 16, V), ref);
    const Errors bound{std::max(3 * e16.rel_l2, 2e-3), std::max(5 * e16.max_abs, 2e-3)};
    const Errors e = errors(res.logits, ref);
    std::printf("16 decode steps after %d prompt tokens: rel L2 %.2e (bound %.2e), max abs %.2e (bound %.2e)\n",
                prompt_len, e.rel_l2, bound.rel_l2, e.max_abs, bound.max_abs);
    CHECK(e.rel_l2 <= bound.rel_l2);
    CHECK(e.max_abs <= bound.max_abs);
    int compared = 0;
    for (int s = 0; s < 16; ++s) {
      const auto [best, margin] = top(ref.data() + size_t(s) * V, V);
      if (margin <= 2 * bound.max_abs) continue;
      ++compared;
      INFO("step " << s << ": reference arg max " << best << " (margin " << margin << "), engine " << res.tokens[s]);
      CHECK(res.tokens[s] == best);
    }
    std::printf("  greedy tokens compared where the margin exceeds %.2e: %d of 16\n", 2 * bound.max_abs, compared);
  }
}

namespace {

// 16 requests of different lengths (prompts 3..200 tokens, 6..20 new tokens).
std::vector<Request> mixed_requests() {
  const int V = ModelConfig::tiny().vocab_size;
  std::vector<Request> reqs;
  for (int i = 0; i < 16; ++i) {
    Request r;
    r.prompt = random_tokens(3 + (i * 37) % 198, 5000 + i, V);
    r.max_new_tokens = 6 + (i * 5) % 15;
    reqs.push_back(r);
  }
  return reqs;
}

// Each request alone in the engine: the tokens and margins the batched runs are compared with.
std::vector<RequestResult> run_alone(const std::vector<Request>& reqs) {
  auto engine = make_engine(roomy());
  std::vector<RequestResult> out;
  for (const Request& r : reqs) {
    const int id = engine->submit(r);
    engine->run();
    out.push_back(engine->result(id));
  }
  return out;
}

// Batched tokens equal the alone tokens up to the end, or up to a step where the alone run's
// top-2 margin is below `tol` (there an fp16-sized difference may legitimately pick the other
// token, and the two continuations differ from then on).
void check_same_tokens(const RequestResult& alone, const RequestResult& batched, int i, double tol) {
  INFO("request " << i);
  REQUIRE(batched.error.empty());
  REQUIRE(batched.finished);
  REQUIRE(batched.tokens.size() == alone.tokens.size());
  for (size_t s = 0; s < alone.tokens.size(); ++s) {
    if (alone.tokens[s] == batched.tokens[s]) continue;
    INFO("token " << s << " differs: alone " << alone.tokens[s] << ", batched " << batched.tokens[s] << ", margin "
                  << alone.margins[s]);
    CHECK(alone.margins[s] < tol);
    return;
  }
}

}  // namespace

TEST_CASE("engine: every request gets the same tokens alone and in a continuously batched mix",
          "[day11][engine][batch_invariance]") {
  const std::vector<Request> reqs = mixed_requests();
  const std::vector<RequestResult> alone = run_alone(reqs);
  // A small page pool (24 pages of 16 tokens for ~1900 tokens of work) forces preemption; small
  // chunks and a small step budget mix prefill chunks and decodes in the same steps.
  EngineConfig ec;
  ec.num_blocks = 24;
  ec.scheduler.max_num_seqs = 16;
  ec.scheduler.max_step_tokens = 64;
  ec.scheduler.max_prefill_chunk = 32;
  auto engine = make_engine(ec);
  std::vector<int> ids;
  for (const Request& r : reqs) ids.push_back(engine->submit(r));
  engine->run();
  int preemptions = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    check_same_tokens(alone[i], engine->result(ids[i]), int(i), 0.02);
    preemptions += engine->result(ids[i]).preemptions;
  }
  std::printf("16 requests, %d steps, %d preemptions, peak %d of 24 pages\n", engine->steps(), preemptions,
              engine->peak_blocks_used());
  CHECK(preemptions > 0);  // the recompute path ran

  // Requests that join while others are decoding: submit half, step a few times, submit the rest.
  auto late = make_engine(ec);
  std::vector<int> late_ids;
  for (size_t i = 0; i < reqs.size(); ++i) {
    late_ids.push_back(late->submit(reqs[i]));
    if (i % 2 == 1) late->step();
  }
  late->run();
  for (size_t i = 0; i < reqs.size(); ++i) check_same_tokens(alone[i], late->result(late_ids[i]), int(i), 0.02);
}

TEST_CASE("engine: CUDA graphs change no token", "[day11][engine][graphs]") {
  std::vector<Request> reqs = mixed_requests();
  reqs.resize(6);
  std::vector<RequestResult> results[2];
  for (int g = 0; g < 2; ++g) {
    EngineConfig ec = roomy();
    ec.cuda_graphs = g == 1;
    auto engine = make_engine(ec);
    // Twice: a batch size's graph is captured the second time it is seen.
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<int> ids;
      for (const Request& r : reqs) ids.push_back(engine->submit(r));
      engine->run();
      if (pass == 1)
        for (int id : ids) results[g].push_back(engine->result(id));
    }
    if (g == 1) {
      std::printf("graphs captured: %d\n", engine->runner().graphs_captured());
      CHECK(engine->runner().graphs_captured() > 0);
    }
  }
  // A graph step runs a batch padded to a power of two (6 -> 8 rows), so cuBLAS and the decode
  // kernel may sum in another order than the eager step: the same tokens up to fp16-sized margins.
  for (size_t i = 0; i < reqs.size(); ++i) check_same_tokens(results[0][i], results[1][i], int(i), 0.02);
}

TEST_CASE("engine: a bad request is refused with its message and the others go on", "[day11][engine][bad_requests]") {
  const int V = ModelConfig::tiny().vocab_size;
  std::vector<Request> good = mixed_requests();
  good.resize(3);
  const std::vector<RequestResult> alone = run_alone(good);

  EngineConfig ec = roomy();
  auto engine = make_engine(ec);
  struct Bad {
    Request r;
    std::string message;
  };
  std::vector<Bad> bad(5);
  bad[0].r.prompt = random_tokens(1020, 1, V);  // 1020 + 10 > the context of 1024
  bad[0].r.max_new_tokens = 10;
  bad[0].message = "exceed the context of 1024 tokens";
  bad[1].r.prompt = {1, 2, V, 3};  // an id outside the vocabulary
  bad[1].message = "token 2 is 384, outside the vocabulary [0, 384)";
  bad[2].r.prompt = {1, 2, 3};
  bad[2].r.max_new_tokens = 0;
  bad[2].message = "max_new_tokens must be >= 1 (got 0)";
  bad[3].r.prompt = {};
  bad[3].message = "prompt: empty";
  bad[4].r.prompt = {-1};
  bad[4].message = "is -1, outside the vocabulary";
  std::vector<int> good_ids, bad_ids;
  for (size_t i = 0; i < bad.size(); ++i) {
    if (i < good.size()) good_ids.push_back(engine->submit(good[i]));
    bad_ids.push_back(engine->submit(bad[i].r));
  }
  engine->step();
  // Submitted while the others run: refused at once, nothing else disturbed.
  const int late_bad = engine->submit(bad[1].r);
  engine->run();
  for (size_t i = 0; i < bad.size(); ++i) {
    const RequestResult& r = engine->result(bad_ids[i]);
    INFO("bad request " << i << ": " << r.error);
    CHECK(r.finished);
    CHECK(r.tokens.empty());
    CHECK(r.error.find(bad[i].message) != std::string::npos);
  }
  CHECK(engine->result(late_bad).error.find(bad[1].message) != std::string::npos);
  for (size_t i = 0; i < good.size(); ++i) check_same_tokens(alone[i], engine->result(good_ids[i]), int(i), 0.02);
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// load_model (what serve --model DIR and the C API call) on a broken directory: the message
// must name the problem; an engine is never built.
std::string load_error(const std::string& dir) {
  try {
    load_model(dir, 0, nullptr);
  } catch (const std::exception& e) { return e.what(); }
  return "(no error)";
}

}  // namespace

TEST_CASE(
    "engine: a checkpoint with a wrong shape, dtype or truncated tensor, or a config it does not support, is refused "
    "with the loader's message",
    "[day11][engine][bad_weights]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("serving_bad_weights_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string good = (root / "good").string();
  save_hf_model(tiny_weights(), good);
  // The good directory loads and gives the reference's logits (the loader's layout is the engine's).
  {
    EngineConfig ec = roomy();
    Engine e(load_model(good, 0, nullptr), ec);
    const std::vector<int32_t> tokens = random_tokens(20, 3, ModelConfig::tiny().vocab_size);
    check_logits(e.prompt_logits(tokens, 20), reference().forward(tokens), tokens, "the saved checkpoint");
  }
  auto copy_of = [&](const std::string& name) {
    const fs::path d = root / name;
    fs::create_directories(d);
    fs::copy(good, d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return d.string();
  };
  // Wrong shape: config.json says intermediate_size 520, the tensors hold 512.
  {
    const std::string d = copy_of("shape");
    std::string cfg = read_file(d + "/config.json");
    const size_t at = cfg.find("\"intermediate_size\"");
    REQUIRE(at != std::string::npos);
    const size_t num = cfg.find("512", at);
    REQUIRE(num != std::string::npos);
    cfg.replace(num, 3, "520");
    write_file(d + "/config.json", cfg);
    const std::string msg = load_error(d);
    INFO(msg);
    CHECK(msg.find("shape") != std::string::npos);
    CHECK(msg.find("gate_proj") != std::string::npos);
  }
  // Wrong dtype: the first tensor's "F16" in the safetensors header becomes "I16".
  {
    const std::string d = copy_of("dtype");
    std::string st = read_file(d + "/model.safetensors");
    const size_t at = st.find("\"F16\"");
    REQUIRE(at != std::string::npos);
    st.replace(at, 5, "\"I16\"");
    write_file(d + "/model.safetensors", st);
    const std::string msg = load_error(d);
    INFO(msg);
    CHECK(msg.find("I16") != std::string::npos);
    CHECK(msg.find("model.safetensors") != std::string::npos);
  }
  // A config the engine does not support: Llama 3.1's RoPE scaling.
  {
    const std::string d = copy_of("config");
    std::string cfg = read_file(d + "/config.json");
    const std::string null_scaling = "\"rope_scaling\": null";
    const size_t at = cfg.find(null_scaling);
    REQUIRE(at != std::string::npos);
    cfg.replace(at, null_scaling.size(), "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}");
    write_file(d + "/config.json", cfg);
    const std::string msg = load_error(d);
    INFO(msg);
    CHECK(msg.find("rope_scaling") != std::string::npos);
    CHECK(msg.find("not supported") != std::string::npos);
  }
  // Truncated: the file loses its last 1000 bytes (part of the last tensor).
  {
    const std::string d = copy_of("truncated");
    std::string st = read_file(d + "/model.safetensors");
    write_file(d + "/model.safetensors", st.substr(0, st.size() - 1000));
    const std::string msg = load_error(d);
    INFO(msg);
    CHECK(msg.find("model.safetensors") != std::string::npos);
    CHECK(msg != "(no error)");
  }
  fs::remove_all(root);
}
