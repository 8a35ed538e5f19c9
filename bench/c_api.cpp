// A small C ABI over the attention solution launchers, built as a shared library (libcourse_attention.so)
// so that Python can call them through ctypes (bench/compare_torch.py) without a build system
// for extensions. Every function returns 0 on success and -1 on failure; course_last_error()
// then says why. Exceptions never cross the C boundary.
//
// Pointers are device pointers (torch tensors' data_ptr()); `stream` is a cudaStream_t (torch's
// current stream's cuda_stream), 0 for the legacy default stream. Which launchers exist depends
// on which solutions were found at configure time: course_has("flash_attention") tells (the names
// are the launchers': flash_attention, flash_attention_tuned, gqa_attention, ...).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>

#include "attention_params.h"

// BENCH_HAVE_<id> is set by bench/CMakeLists.txt for each solution library it found.
#ifdef BENCH_HAVE_01_naive_attention
#include "01_naive_attention.h"
#endif
#ifdef BENCH_HAVE_02_flash_attention
#include "02_flash_attention.h"
#endif
#ifdef BENCH_HAVE_03_gqa_attention
#include "03_gqa_attention.h"
#endif
#ifdef BENCH_HAVE_04_paged_attention
#include "04_paged_attention.h"
#endif
#ifdef BENCH_HAVE_01_flash_tuned
#include "01_flash_tuned.h"
#endif

namespace {

thread_local std::string g_last_error;

template <class Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      g_last_error = std::string("CUDA error after launch: ") + cudaGetErrorString(err);
      return -1;
    }
    g_last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
  } catch (...) {
    g_last_error = "unknown exception";
  }
  return -1;
}

[[maybe_unused]] course::AttentionParams params(int b, int hq, int hkv, int nq, int nk, int d,
                                                float scale, int causal) {
  course::AttentionParams p = course::AttentionParams::make(b, hq, hkv, nq, nk, d, causal != 0);
  p.scale = scale;
  return p;
}

int missing(const char* what) {
  g_last_error = std::string(what) + " was not built: its solution did not exist at configure time";
  return -1;
}

}  // namespace

extern "C" {

const char* course_last_error() { return g_last_error.c_str(); }

int course_has(const char* name) {
  const std::string n = name ? name : "";
#ifdef BENCH_HAVE_01_naive_attention
  if (n == "naive_attention") return 1;
#endif
#ifdef BENCH_HAVE_02_flash_attention
  if (n == "flash_attention") return 1;
#endif
#ifdef BENCH_HAVE_03_gqa_attention
  if (n == "gqa_attention") return 1;
#endif
#ifdef BENCH_HAVE_04_paged_attention
  if (n == "paged_attention") return 1;
#endif
#ifdef BENCH_HAVE_01_flash_tuned
  if (n == "flash_attention_tuned") return 1;
#endif
  return 0;
}

// Bytes of scratch naive attention needs; 0 when it was not built.
uint64_t course_naive_attention_workspace_bytes(int b, int hq, int hkv, int nq, int nk, int d) {
#ifdef BENCH_HAVE_01_naive_attention
  return naive_attention_workspace_bytes(params(b, hq, hkv, nq, nk, d, 0.f, 0));
#else
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  return 0;
#endif
}

int course_naive_attention(const float* q, const float* k, const float* v, float* o, float* ws,
                           int b, int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                           void* stream) {
#ifdef BENCH_HAVE_01_naive_attention
  return guarded([&] {
    naive_attention(q, k, v, o, ws, params(b, hq, hkv, nq, nk, d, scale, causal),
                    static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)ws, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk;
  (void)d, (void)scale, (void)causal, (void)stream;
  return missing("naive_attention");
#endif
}

int course_flash_attention(const float* q, const float* k, const float* v, float* o, int b,
                           int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                           void* stream) {
#ifdef BENCH_HAVE_02_flash_attention
  return guarded([&] {
    flash_attention(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal),
                    static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention");
#endif
}

int course_gqa_attention(const float* q, const float* k, const float* v, float* o, int b, int hq,
                         int hkv, int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_03_gqa_attention
  return guarded([&] {
    gqa_attention(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal),
                  static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("gqa_attention");
#endif
}

// Day 10 · 01_flash_tuned: any Hq that is a multiple of Hkv (MHA and GQA).
int course_flash_attention_tuned(const float* q, const float* k, const float* v, float* o, int b,
                                 int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                                 void* stream) {
#ifdef BENCH_HAVE_01_flash_tuned
  return guarded([&] {
    flash_attention_tuned(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal),
                          static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_tuned");
#endif
}

int course_paged_attention(const float* q, const float* k_cache, const float* v_cache,
                           const int32_t* block_table, const int32_t* context_lens, float* o,
                           int b, int hq, int hkv, int d, int block_size, int num_blocks,
                           int max_blocks_per_seq, float scale, void* stream) {
#ifdef BENCH_HAVE_04_paged_attention
  return guarded([&] {
    course::PagedParams p;
    p.batch = b;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.head_dim = d;
    p.block_size = block_size;
    p.num_blocks = num_blocks;
    p.max_blocks_per_seq = max_blocks_per_seq;
    p.scale = scale;
    paged_attention(q, k_cache, v_cache, block_table, context_lens, o, p,
                    static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k_cache, (void)v_cache, (void)block_table, (void)context_lens, (void)o, (void)b;
  (void)hq, (void)hkv, (void)d, (void)block_size, (void)num_blocks, (void)max_blocks_per_seq;
  (void)scale, (void)stream;
  return missing("paged_attention");
#endif
}

}  // extern "C"
