// The backward pass's C ABI, part of libcourse_attention.so (bench/c_api.cpp holds the forward
// kernels): the forward launchers that also write the log-sum-exp L, and the backward launchers
// that take it, for bench/course_autograd.py (a torch.autograd.Function over them),
// bench/compare_torch_backward.py and bench/train_tiny.py.
//
//   16 bits, day 10:  course_flash_attention_mma_lse_f16 / _bf16     05_fp16_mma, O and L
//                     course_flash_attention_mma_backward_f16 / _bf16  09_fp16_mma_backward
//   Hopper, day 10:   course_flash_attention_wgmma_lse_f16 / _bf16   10_hopper_wgmma, O and L
//                     course_flash_attention_wgmma_backward_f16 / _bf16  11_hopper_backward
//                     (sm_90a only: built when the build targeted sm_90; the caller checks that the
//                     GPU has compute capability 9.0. The backward takes a trailing `deterministic`:
//                     non-zero adds dQ in key-block order, bit-identical every run, and slower)
//   fp32, day 06:     course_flash_attention_lse                        02_flash_attention, O and L
//                     course_flash_backward                             05_flash_backward
//
// Same conventions as c_api.cpp: device pointers, `stream` a cudaStream_t (0: the legacy default
// stream), 0 on success and -1 on failure; the reason is in course_backward_last_error() (this
// file's own, since c_api.cpp's error string is private to it). course_backward_has(name) says
// which of the names above were built (a solution that did not exist at configure time is not):
// "flash_attention_mma_lse", "flash_attention_mma_backward", "flash_attention_wgmma_lse",
// "flash_attention_wgmma_backward", "flash_attention_lse", "flash_backward".
// Workspaces are the caller's, sized by the *_workspace_bytes functions (0 when not built).
#include <cuda_runtime.h>

#include <cstdint>
#include <exception>
#include <string>

#include "attention_params.h"

// BENCH_HAVE_<id> is set by bench/CMakeLists.txt for each solution library it found.
#ifdef BENCH_HAVE_05_fp16_mma
#include "05_fp16_mma.h"
#endif
#ifdef BENCH_HAVE_09_fp16_mma_backward
#include "09_fp16_mma_backward.h"
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
#include "10_hopper_wgmma.h"
#endif
#ifdef BENCH_HAVE_11_hopper_backward
#include "11_hopper_backward.h"
#endif
#ifdef BENCH_HAVE_02_flash_attention
#include "02_flash_attention.h"
#endif
#ifdef BENCH_HAVE_05_flash_backward
#include "05_flash_backward.h"
#endif

namespace {

thread_local std::string g_backward_error;

template <class Fn>
int guarded_backward(Fn&& fn) {
  try {
    fn();
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      g_backward_error = std::string("CUDA error after launch: ") + cudaGetErrorString(err);
      return -1;
    }
    g_backward_error.clear();
    return 0;
  } catch (const std::exception& e) { g_backward_error = e.what(); } catch (...) {
    g_backward_error = "unknown exception";
  }
  return -1;
}

[[maybe_unused]] course::AttentionParams backward_params(int b, int hq, int hkv, int nq, int nk, int d, float scale,
                                                         int causal) {
  course::AttentionParams p = course::AttentionParams::make(b, hq, hkv, nq, nk, d, causal != 0);
  p.scale = scale;
  return p;
}

[[maybe_unused]] int backward_missing(const char* what) {
  g_backward_error = std::string(what) + " was not built: its solution did not exist at configure time";
  return -1;
}

#if defined(BENCH_HAVE_05_fp16_mma) || defined(BENCH_HAVE_09_fp16_mma_backward) || \
    defined(BENCH_HAVE_10_hopper_wgmma) || defined(BENCH_HAVE_11_hopper_backward)
template <class T>
const T* cptr(const void* p) {
  return static_cast<const T*>(p);
}
template <class T>
T* mptr(void* p) {
  return static_cast<T*>(p);
}
#endif

}  // namespace

extern "C" {

const char* course_backward_last_error() { return g_backward_error.c_str(); }

int course_backward_has(const char* name) {
  const std::string n = name ? name : "";
#ifdef BENCH_HAVE_05_fp16_mma
  if (n == "flash_attention_mma_lse") return 1;
#endif
#ifdef BENCH_HAVE_09_fp16_mma_backward
  if (n == "flash_attention_mma_backward") return 1;
#endif
#ifdef BENCH_HAVE_10_hopper_wgmma
  if (n == "flash_attention_wgmma_lse") return 1;
#endif
#ifdef BENCH_HAVE_11_hopper_backward
  if (n == "flash_attention_wgmma_backward") return 1;
#endif
#ifdef BENCH_HAVE_02_flash_attention
  if (n == "flash_attention_lse") return 1;
#endif
#ifdef BENCH_HAVE_05_flash_backward
  if (n == "flash_backward") return 1;
#endif
  return 0;
}

// ---- 16 bits (day 10): q, k, v, o are __half (f16) or __nv_bfloat16 (bf16); lse fp32 [B, Hq, Nq].
int course_flash_attention_mma_lse_f16(const void* q, const void* k, const void* v, void* o, float* lse, int b, int hq,
                                       int hkv, int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_05_fp16_mma
  return guarded_backward([&] {
    flash_attention_mma(cptr<__half>(q), cptr<__half>(k), cptr<__half>(v), mptr<__half>(o), lse,
                        backward_params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_mma (fp16, with lse)");
#endif
}

int course_flash_attention_mma_lse_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int b, int hq,
                                        int hkv, int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_05_fp16_mma
  return guarded_backward([&] {
    flash_attention_mma(cptr<__nv_bfloat16>(q), cptr<__nv_bfloat16>(k), cptr<__nv_bfloat16>(v), mptr<__nv_bfloat16>(o),
                        lse, backward_params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_mma (bf16, with lse)");
#endif
}

uint64_t course_flash_attention_mma_backward_workspace_bytes(int b, int hq, int hkv, int nq, int nk, int d) {
#ifdef BENCH_HAVE_09_fp16_mma_backward
  return flash_attention_mma_backward_workspace_bytes(backward_params(b, hq, hkv, nq, nk, d, 0.f, 0));
#else
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  return 0;
#endif
}

int course_flash_attention_mma_backward_f16(const void* q, const void* k, const void* v, const void* o, const void* d_o,
                                            const float* lse, void* dq, void* dk, void* dv, float* workspace, int b,
                                            int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                                            void* stream) {
#ifdef BENCH_HAVE_09_fp16_mma_backward
  return guarded_backward([&] {
    flash_attention_mma_backward(cptr<__half>(q), cptr<__half>(k), cptr<__half>(v), cptr<__half>(o), cptr<__half>(d_o),
                                 lse, mptr<__half>(dq), mptr<__half>(dk), mptr<__half>(dv), workspace,
                                 backward_params(b, hq, hkv, nq, nk, d, scale, causal),
                                 static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)d_o, (void)lse, (void)dq, (void)dk, (void)dv, (void)workspace;
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d, (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_mma_backward (fp16)");
#endif
}

int course_flash_attention_mma_backward_bf16(const void* q, const void* k, const void* v, const void* o,
                                             const void* d_o, const float* lse, void* dq, void* dk, void* dv,
                                             float* workspace, int b, int hq, int hkv, int nq, int nk, int d,
                                             float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_09_fp16_mma_backward
  return guarded_backward([&] {
    using T = __nv_bfloat16;
    flash_attention_mma_backward(
        cptr<T>(q), cptr<T>(k), cptr<T>(v), cptr<T>(o), cptr<T>(d_o), lse, mptr<T>(dq), mptr<T>(dk), mptr<T>(dv),
        workspace, backward_params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)d_o, (void)lse, (void)dq, (void)dk, (void)dv, (void)workspace;
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d, (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_mma_backward (bf16)");
#endif
}

// ---- Hopper, day 10 (sm_90a only): 10's forward with L and 11's backward, same tensors as above.
int course_flash_attention_wgmma_lse_f16(const void* q, const void* k, const void* v, void* o, float* lse, int b,
                                         int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                                         void* stream) {
#ifdef BENCH_HAVE_10_hopper_wgmma
  return guarded_backward([&] {
    flash_attention_wgmma(cptr<__half>(q), cptr<__half>(k), cptr<__half>(v), mptr<__half>(o), lse,
                          backward_params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_wgmma (fp16, with lse; sm_90a only)");
#endif
}

int course_flash_attention_wgmma_lse_bf16(const void* q, const void* k, const void* v, void* o, float* lse, int b,
                                          int hq, int hkv, int nq, int nk, int d, float scale, int causal,
                                          void* stream) {
#ifdef BENCH_HAVE_10_hopper_wgmma
  return guarded_backward([&] {
    using T = __nv_bfloat16;
    flash_attention_wgmma(cptr<T>(q), cptr<T>(k), cptr<T>(v), mptr<T>(o), lse,
                          backward_params(b, hq, hkv, nq, nk, d, scale, causal), static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention_wgmma (bf16, with lse; sm_90a only)");
#endif
}

uint64_t course_flash_attention_wgmma_backward_workspace_bytes(int b, int hq, int hkv, int nq, int nk, int d) {
#ifdef BENCH_HAVE_11_hopper_backward
  return flash_attention_wgmma_backward_workspace_bytes(backward_params(b, hq, hkv, nq, nk, d, 0.f, 0));
#else
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  return 0;
#endif
}

int course_flash_attention_wgmma_backward_f16(const void* q, const void* k, const void* v, const void* o,
                                              const void* d_o, const float* lse, void* dq, void* dk, void* dv,
                                              void* workspace, int b, int hq, int hkv, int nq, int nk, int d,
                                              float scale, int causal, void* stream, int deterministic) {
#ifdef BENCH_HAVE_11_hopper_backward
  return guarded_backward([&] {
    using T = __half;
    flash_attention_wgmma_backward(cptr<T>(q), cptr<T>(k), cptr<T>(v), cptr<T>(o), cptr<T>(d_o), lse, mptr<T>(dq),
                                   mptr<T>(dk), mptr<T>(dv), workspace,
                                   backward_params(b, hq, hkv, nq, nk, d, scale, causal),
                                   static_cast<cudaStream_t>(stream), deterministic != 0);
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)d_o, (void)lse, (void)dq, (void)dk, (void)dv, (void)workspace;
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d, (void)scale, (void)causal, (void)stream;
  (void)deterministic;
  return backward_missing("flash_attention_wgmma_backward (fp16; sm_90a only)");
#endif
}

int course_flash_attention_wgmma_backward_bf16(const void* q, const void* k, const void* v, const void* o,
                                               const void* d_o, const float* lse, void* dq, void* dk, void* dv,
                                               void* workspace, int b, int hq, int hkv, int nq, int nk, int d,
                                               float scale, int causal, void* stream, int deterministic) {
#ifdef BENCH_HAVE_11_hopper_backward
  return guarded_backward([&] {
    using T = __nv_bfloat16;
    flash_attention_wgmma_backward(cptr<T>(q), cptr<T>(k), cptr<T>(v), cptr<T>(o), cptr<T>(d_o), lse, mptr<T>(dq),
                                   mptr<T>(dk), mptr<T>(dv), workspace,
                                   backward_params(b, hq, hkv, nq, nk, d, scale, causal),
                                   static_cast<cudaStream_t>(stream), deterministic != 0);
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)d_o, (void)lse, (void)dq, (void)dk, (void)dv, (void)workspace;
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d, (void)scale, (void)causal, (void)stream;
  (void)deterministic;
  return backward_missing("flash_attention_wgmma_backward (bf16; sm_90a only)");
#endif
}

// ---- fp32 (day 06): everything fp32.
int course_flash_attention_lse(const float* q, const float* k, const float* v, float* o, float* lse, int b, int hq,
                               int hkv, int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_02_flash_attention
  return guarded_backward([&] {
    flash_attention(q, k, v, o, backward_params(b, hq, hkv, nq, nk, d, scale, causal),
                    static_cast<cudaStream_t>(stream), lse);
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)lse, (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_attention (with lse)");
#endif
}

uint64_t course_flash_backward_workspace_bytes(int b, int hq, int hkv, int nq, int nk, int d) {
#ifdef BENCH_HAVE_05_flash_backward
  return flash_backward_workspace_bytes(backward_params(b, hq, hkv, nq, nk, d, 0.f, 0));
#else
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d;
  return 0;
#endif
}

int course_flash_backward(const float* q, const float* k, const float* v, const float* o, const float* d_o,
                          const float* lse, float* dq, float* dk, float* dv, float* workspace, int b, int hq, int hkv,
                          int nq, int nk, int d, float scale, int causal, void* stream) {
#ifdef BENCH_HAVE_05_flash_backward
  return guarded_backward([&] {
    flash_backward(q, k, v, o, d_o, lse, dq, dk, dv, workspace, backward_params(b, hq, hkv, nq, nk, d, scale, causal),
                   static_cast<cudaStream_t>(stream));
  });
#else
  (void)q, (void)k, (void)v, (void)o, (void)d_o, (void)lse, (void)dq, (void)dk, (void)dv, (void)workspace;
  (void)b, (void)hq, (void)hkv, (void)nq, (void)nk, (void)d, (void)scale, (void)causal, (void)stream;
  return backward_missing("flash_backward");
#endif
}

}  // extern "C"
