// The engine behind a small C ABI (lib/libcourse_serving_capi.so), for Python through ctypes
// (chat.py, compare_transformers.py) without a build system for extensions. Every function
// that can fail returns -1 (or NULL) and leaves the reason in serving_last_error(); exceptions
// never cross the C boundary. A refused request is not a failure: it gets an id, and
// serving_result_error() returns its message.
#include <execinfo.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli.h"
#include "engine.h"

using namespace serving;

namespace {

thread_local std::string g_error;

template <class F>
auto guarded(F&& f, decltype(f()) on_error) -> decltype(f()) {
  try {
    g_error.clear();
    return f();
  } catch (const std::exception& e) { g_error = e.what(); } catch (...) {
    g_error = "unknown error";
  }
  return on_error;
}

struct Handle {
  std::unique_ptr<Engine> engine;
  std::string summary;
};

// SERVING_BACKTRACE=1: a crash inside the engine prints the C++ stack (glibc's backtrace) before
// the process dies, where Python's faulthandler only shows the Python line that called in.
void print_backtrace(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  const char msg[] = "serving: fatal signal in the engine; C++ stack:\n";
  (void)!write(2, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_backtrace_handler() {
  const char* on = std::getenv("SERVING_BACKTRACE");
  if (on && on[0] == '1') {
    std::signal(SIGSEGV, print_backtrace);
    std::signal(SIGBUS, print_backtrace);
    std::signal(SIGABRT, print_backtrace);
  }
}

Engine& engine_of(void* h) {
  if (!h) throw std::invalid_argument("null engine handle");
  return *static_cast<Handle*>(h)->engine;
}

}  // namespace

extern "C" {

const char* serving_last_error(void) { return g_error.c_str(); }

// model: a Hugging Face directory or a preset (smollm2_135m, llama3_8b[:layers], tiny; random
// weights from `seed`). num_blocks 0: half the free GPU memory; max_context 0: the model's.
void* serving_create(const char* model, uint64_t seed, int block_size, int num_blocks, int max_context,
                     int max_num_seqs, int max_step_tokens, int max_prefill_chunk, int cuda_graphs) {
  install_backtrace_handler();
  return guarded(
      [&]() -> void* {
        EngineConfig ec;
        ec.block_size = block_size;
        ec.num_blocks = num_blocks;
        ec.max_context = max_context;
        ec.scheduler.max_num_seqs = max_num_seqs;
        ec.scheduler.max_step_tokens = max_step_tokens;
        ec.scheduler.max_prefill_chunk = max_prefill_chunk;
        ec.cuda_graphs = cuda_graphs != 0;
        auto h = std::make_unique<Handle>();
        h->engine = std::make_unique<Engine>(load_model(model ? model : "", seed, nullptr), ec);
        h->summary = h->engine->runner().kernel_summary();
        return h.release();
      },
      static_cast<void*>(nullptr));
}

void serving_destroy(void* h) { delete static_cast<Handle*>(h); }

int serving_vocab_size(void* h) {
  return guarded([&] { return engine_of(h).config().vocab_size; }, -1);
}

int serving_max_context(void* h) {
  return guarded([&] { return engine_of(h).max_context(); }, -1);
}

const char* serving_kernel_summary(void* h) { return h ? static_cast<Handle*>(h)->summary.c_str() : ""; }

int serving_submit(void* h, const int32_t* prompt, int n, int max_new_tokens, float temperature, float top_p,
                   uint64_t seed, int stop_at_eos, int keep_logits) {
  return guarded(
      [&] {
        Request r;
        if (n > 0) r.prompt.assign(prompt, prompt + n);
        r.max_new_tokens = max_new_tokens;
        r.temperature = temperature;
        r.top_p = top_p;
        r.seed = seed;
        r.stop_at_eos = stop_at_eos != 0;
        r.keep_logits = keep_logits != 0;
        return engine_of(h).submit(r);
      },
      -1);
}

// 1: a step ran; 0: nothing to do; -1: failure.
int serving_step(void* h) {
  return guarded([&] { return engine_of(h).step() ? 1 : 0; }, -1);
}

int serving_run(void* h) {
  return guarded(
      [&] {
        engine_of(h).run();
        return 0;
      },
      -1);
}

// The request's error message into buf (cap bytes, NUL-terminated); returns its length (0: none).
int serving_result_error(void* h, int id, char* buf, int cap) {
  return guarded(
      [&] {
        const std::string& e = engine_of(h).result(id).error;
        if (buf && cap > 0) {
          const size_t n = std::min(e.size(), size_t(cap - 1));
          std::memcpy(buf, e.data(), n);
          buf[n] = '\0';
        }
        return int(e.size());
      },
      -1);
}

int serving_result_finished(void* h, int id) {
  return guarded([&] { return engine_of(h).result(id).finished ? 1 : 0; }, -1);
}

int serving_result_preemptions(void* h, int id) {
  return guarded([&] { return engine_of(h).result(id).preemptions; }, -1);
}

// The generated tokens (at most cap) into out; returns how many there are in all.
int serving_result_tokens(void* h, int id, int32_t* out, int cap) {
  return guarded(
      [&] {
        const std::vector<int32_t>& t = engine_of(h).result(id).tokens;
        for (int i = 0; i < std::min(cap, int(t.size())); ++i) out[i] = t[i];
        return int(t.size());
      },
      -1);
}

// Top-1 minus top-2 logit of each generated token (at most cap); returns how many in all.
int serving_result_margins(void* h, int id, float* out, int cap) {
  return guarded(
      [&] {
        const std::vector<float>& m = engine_of(h).result(id).margins;
        for (int i = 0; i < std::min(cap, int(m.size())); ++i) out[i] = m[i];
        return int(m.size());
      },
      -1);
}

// When each token was ready, ms after submit (at most cap); returns how many in all.
int serving_result_token_ms(void* h, int id, double* out, int cap) {
  return guarded(
      [&] {
        const std::vector<double>& m = engine_of(h).result(id).token_ms;
        for (int i = 0; i < std::min(cap, int(m.size())); ++i) out[i] = m[i];
        return int(m.size());
      },
      -1);
}

// keep_logits requests: [tokens, vocab] fp32 logits (at most cap floats); returns the count in all.
int64_t serving_result_logits(void* h, int id, float* out, int64_t cap) {
  return guarded(
      [&] {
        const std::vector<float>& l = engine_of(h).result(id).logits;
        const int64_t n = std::min<int64_t>(cap, int64_t(l.size()));
        if (n > 0) std::memcpy(out, l.data(), size_t(n) * sizeof(float));
        return int64_t(l.size());
      },
      int64_t(-1));
}

// Logits [n, vocab] of every position of tokens, prefilled in chunks of `chunk`; the engine
// must be idle. out must hold n · vocab floats.
int serving_prompt_logits(void* h, const int32_t* tokens, int n, int chunk, float* out) {
  return guarded(
      [&] {
        const std::vector<float> l = engine_of(h).prompt_logits(std::vector<int32_t>(tokens, tokens + n), chunk);
        std::memcpy(out, l.data(), l.size() * sizeof(float));
        return 0;
      },
      -1);
}

}  // extern "C"
