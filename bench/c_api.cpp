// A small C ABI over the attention solution launchers, built as a shared library (libcourse_attention.so)
// so that Python can call them through ctypes (bench/compare_torch.py) without a build system
// for extensions. Every function returns 0 on success and -1 on failure; course_last_error()
// then says why. Exceptions never cross the C boundary.
//
// Pointers are device pointers (torch tensors' data_ptr()); `stream` is a cudaStream_t (torch's
// current stream's cuda_stream), 0 for the legacy default stream. Which launchers exist depends
// on which solutions were found at configure time: course_has("flash_attention") tells (the names
// are the launchers': flash_attention, flash_attention_tuned, gqa_attention, ...; the mma kernel
// is flash_attention_mma_f16 / _bf16, one C name per element type; the Hopper kernel likewise
// flash_attention_wgmma_f16 / _bf16, built only when the build targets sm_90).
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
#ifdef BENCH_HAVE_02_sliding_window
#include "02_sliding_window.h"
#endif
#ifdef BENCH_HAVE_03_block_sparse
#include "03_block_sparse.h"
#endif
#ifdef BENCH_HAVE_04_fp16_wmma
#include "04_fp16_wmma.h"
#endif
#ifdef BENCH_HAVE_05_fp16_mma
#include "05_fp16_mma.h"
#endif
#ifdef BENCH_HAVE_06_split_kv_decode
#include "06_split_kv_decode.h"
#endif
#ifdef BENCH_HAVE_07_rope_yarn
#include "07_rope_yarn.h"
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
#include "10_hopper_wgmma.h"
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
  } catch (const std::exception& e) { g_last_error = e.what(); } catch (...) {
    g_last_error = "unknown exception";
  }
  return -1;
}

[[maybe_unused]] course::PagedParams paged_params(int b, int hq, int hkv, int d, int block_size, int num_blocks,
                                                  int max_blocks_per_seq, float scale) {
  course::PagedParams p;
  p.batch = b;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = d;
  p.block_size = block_size;
  p.num_blocks = num_blocks;
  p.max_blocks_per_seq = max_blocks_per_seq;
  p.scale = scale;
  return p;
}

[[maybe_unused]] course::AttentionParams params(int b, int hq, int hkv, int nq, int nk, int d, float scale,
                                                int causal) {
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
#ifdef BENCH_HAVE_02_sliding_window
  if (n == "sliding_window_attention") return 1;
#endif
#ifdef BENCH_HAVE_03_block_sparse
  if (n == "block_sparse_attention") return 1;
#endif
#ifdef BENCH_HAVE_04_fp16_wmma
  if (n == "flash_attention_wmma") return 1;
#endif
#ifdef BENCH_HAVE_05_fp16_mma
  if (n == "flash_attention_mma_f16" || n == "flash_attention_mma_bf16") return 1;
#endif
#ifdef BENCH_HAVE_06_split_kv_decode
  if (n == "split_kv_decode") return 1;
#endif
#ifdef BENCH_HAVE_07_rope_yarn
  if (n == "rope_yarn") return 1;
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
  if (n == "flash_attention_wgmma_f16" || n == "flash_attention_wgmma_bf16") return 1;
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

int course_naive_attention(const float* q, const float* k, const float* v, float* o, float* ws, int b, int hq, int hkv,
                           int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_01_naive_attention
  return guarded([&] {
    naive_attention(q, k, v, o, ws, params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)ws, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk;
  (void)d, (void)scale, (void)causal, (void)stream;
  return missing("naive_attention");
#endif
}

int course_flash_attention(const float* q, const float* k, const float* v, float* o, int b, int hq, int hkv, int nq,
                           int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_02_flash_attention
  return guarded([&] {
    flash_attention(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention");
#endif
}

int course_gqa_attention(const float* q, const float* k, const float* v, float* o, int b, int hq, int hkv, int nq,
                         int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_03_gqa_attention
  return guarded([&] {
    gqa_attention(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("gqa_attention");
#endif
}

// Day 10 · 01_flash_tuned: any Hq that is a multiple of Hkv (MHA and GQA).
int course_flash_attention_tuned(const float* q, const float* k, const float* v, float* o, int b, int hq, int hkv,
                                 int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_01_flash_tuned
  return guarded([&] {
    flash_attention_tuned(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_tuned");
#endif
}

int course_paged_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* block_table,
                           const int32_t* context_lens, float* o, int b, int hq, int hkv, int d, int block_size,
                           int num_blocks, int max_blocks_per_seq, float scale, void* stream) {
#ifdef BENCH_HAVE_04_paged_attention
  return guarded([&] {
    paged_attention(q, k_cache, v_cache, block_table, context_lens, o,
                    paged_params(b, hq, hkv, d, block_size, num_blocks, max_blocks_per_seq, scale),
                    static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k_cache, (void)v_cache, (void)block_table, (void)context_lens, (void)o, (void)b;
  (void)hq, (void)hkv, (void)d, (void)block_size, (void)num_blocks, (void)max_blocks_per_seq;
  (void)scale, (void)stream;
  return missing("paged_attention");
#endif
}

// Day 10 · 02_sliding_window (prefill): query i sees keys i + off - window .. i + off.
int course_sliding_window_attention(const float* q, const float* k, const float* v, float* o, int b, int hq, int hkv,
                                    int nq, int nk, int d, int window, float scale, void* stream) {
#ifdef BENCH_HAVE_02_sliding_window
  return guarded([&] {
    course::AttentionParams p = params(b, hq, hkv, nq, nk, d, scale, 1);
    p.window = window;
    sliding_window_attention(q, k, v, o, p, static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)window, (void)scale, (void)stream;
  return missing("sliding_window_attention");
#endif
}

// Day 10 · 03_block_sparse: the BSR layout (64 × 64 blocks, one for every head) twice, as the
// launcher wants it: host arrays (validated) and the same arrays already on the device.
int course_block_sparse_attention(const float* q, const float* k, const float* v, float* o, int b, int hq, int hkv,
                                  int nq, int nk, int d, float scale, int causal, const int32_t* row_ptr_host,
                                  int row_ptr_len, const int32_t* col_idx_host, int nnz, const int32_t* row_ptr_dev,
                                  const int32_t* col_idx_dev, void* stream) {
#ifdef BENCH_HAVE_03_block_sparse
  return guarded([&] {
    course::ref::BlockSparseLayout layout;
    layout.row_ptr.assign(row_ptr_host, row_ptr_host + row_ptr_len);
    layout.col_idx.assign(col_idx_host, col_idx_host + nnz);
    block_sparse_attention(q, k, v, o, params(b, hq, hkv, nq, nk, d, scale, causal), layout, row_ptr_dev, col_idx_dev,
                           static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)row_ptr_host, (void)row_ptr_len, (void)col_idx_host, (void)nnz;
  (void)row_ptr_dev, (void)col_idx_dev, (void)stream;
  return missing("block_sparse_attention");
#endif
}

// Day 10 · 04/05, 16-bit tensors passed as raw device pointers (torch.half / torch.bfloat16).
int course_flash_attention_wmma(const void* q, const void* k, const void* v, void* o, int b, int hq, int hkv, int nq,
                                int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_04_fp16_wmma
  return guarded([&] {
    flash_attention_wmma(static_cast<const __half*>(q), static_cast<const __half*>(k), static_cast<const __half*>(v),
                         static_cast<__half*>(o), params(b, hq, hkv, nq, nk, d, scale, causal),
                         static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_wmma");
#endif
}

int course_flash_attention_mma_f16(const void* q, const void* k, const void* v, void* o, int b, int hq, int hkv, int nq,
                                   int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_05_fp16_mma
  return guarded([&] {
    flash_attention_mma(static_cast<const __half*>(q), static_cast<const __half*>(k), static_cast<const __half*>(v),
                        static_cast<__half*>(o), params(b, hq, hkv, nq, nk, d, scale, causal),
                        static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_mma (fp16)");
#endif
}

int course_flash_attention_mma_bf16(const void* q, const void* k, const void* v, void* o, int b, int hq, int hkv,
                                    int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_05_fp16_mma
  return guarded([&] {
    flash_attention_mma(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                        static_cast<const __nv_bfloat16*>(v), static_cast<__nv_bfloat16*>(o),
                        params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_mma (bf16)");
#endif
}

// Day 10 · 10_hopper_wgmma (sm_90a only: the library has it when the build targeted sm_90; the
// caller checks that the GPU is a Hopper one, compute capability 9.0).
int course_flash_attention_wgmma_f16(const void* q, const void* k, const void* v, void* o, int b, int hq, int hkv,
                                     int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_10_hopper_wgmma
  return guarded([&] {
    flash_attention_wgmma(static_cast<const __half*>(q), static_cast<const __half*>(k), static_cast<const __half*>(v),
                          static_cast<__half*>(o), params(b, hq, hkv, nq, nk, d, scale, causal),
                          static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_wgmma (fp16)");
#endif
}

int course_flash_attention_wgmma_bf16(const void* q, const void* k, const void* v, void* o, int b, int hq, int hkv,
                                      int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_10_hopper_wgmma
  return guarded([&] {
    flash_attention_wgmma(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                          static_cast<const __nv_bfloat16*>(v), static_cast<__nv_bfloat16*>(o),
                          params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return missing("flash_attention_wgmma (bf16)");
#endif
}

// Day 10 · 06_split_kv_decode: fp16 paged cache, automatic split count. The workspace (fp32
// partials) is the caller's, sized by course_split_kv_decode_workspace_bytes.
uint64_t course_split_kv_decode_workspace_bytes(int b, int hq, int hkv, int d, int block_size, int num_blocks,
                                                int max_blocks_per_seq) {
#ifdef BENCH_HAVE_06_split_kv_decode
  uint64_t bytes = 0;
  const int rc = guarded([&] {
    bytes =
        split_kv_decode_workspace_bytes(paged_params(b, hq, hkv, d, block_size, num_blocks, max_blocks_per_seq, 0.f));
  });
  return rc == 0 ? bytes : 0;
#else
  (void)b, (void)hq, (void)hkv, (void)d, (void)block_size, (void)num_blocks, (void)max_blocks_per_seq;
  return 0;
#endif
}

int course_split_kv_decode(const void* q, const void* k_cache, const void* v_cache, const int32_t* block_table,
                           const int32_t* context_lens, void* o, float* workspace, int b, int hq, int hkv, int d,
                           int block_size, int num_blocks, int max_blocks_per_seq, float scale, void* stream) {
#ifdef BENCH_HAVE_06_split_kv_decode
  return guarded([&] {
    split_kv_decode(static_cast<const __half*>(q), static_cast<const __half*>(k_cache),
                    static_cast<const __half*>(v_cache), block_table, context_lens, static_cast<__half*>(o), workspace,
                    paged_params(b, hq, hkv, d, block_size, num_blocks, max_blocks_per_seq, scale),
                    static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k_cache, (void)v_cache, (void)block_table, (void)context_lens, (void)o;
  (void)workspace, (void)b, (void)hq, (void)hkv, (void)d, (void)block_size, (void)num_blocks;
  (void)max_blocks_per_seq, (void)scale, (void)stream;
  return missing("split_kv_decode");
#endif
}

// Day 10 · 07_rope_yarn: RoPE on q and k, out of place. gptj 0/1 picks the layout, bf16 0/1 the
// type; scaling 0 none, 1 linear, 2 NTK, 3 YaRN (RopeScaling's values).
int course_rope_yarn(const void* q, const void* k, void* q_out, void* k_out, const void* positions, int b, int hq,
                     int hkv, int n, int d, int gptj, int bf16, double base, int scaling, double factor,
                     int original_max_position, double beta_fast, double beta_slow, void* stream) {
#ifdef BENCH_HAVE_07_rope_yarn
  return guarded([&] {
    RopeParams p;
    p.batch = b;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.seq_len = n;
    p.head_dim = d;
    p.layout = gptj ? RopeLayout::kGptj : RopeLayout::kNeox;
    p.base = base;
    p.scaling = static_cast<RopeScaling>(scaling);
    p.factor = factor;
    p.original_max_position = original_max_position;
    p.beta_fast = beta_fast;
    p.beta_slow = beta_slow;
    const auto* pos = static_cast<const int32_t*>(positions);
    const auto st = static_cast<cudaStream_t>(stream);
    if (bf16)
      rope_yarn(static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
                static_cast<__nv_bfloat16*>(q_out), static_cast<__nv_bfloat16*>(k_out), pos, p, st);
    else
      rope_yarn(static_cast<const __half*>(q), static_cast<const __half*>(k), static_cast<__half*>(q_out),
                static_cast<__half*>(k_out), pos, p, st);
  });
#else
  (void)q, (void)k, (void)q_out, (void)k_out, (void)positions, (void)b, (void)hq, (void)hkv, (void)n, (void)d;
  (void)gptj, (void)bf16, (void)base, (void)scaling, (void)factor, (void)original_max_position, (void)beta_fast;
  (void)beta_slow, (void)stream;
  return missing("rope_yarn");
#endif
}

}  // extern "C"
