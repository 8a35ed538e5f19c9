// The bench's vocabulary: what a kernel entry is, what a shape is, what one measurement holds.
//
// The bench never calls a kernel directly: every entry holds a pointer to an exercise's
// LAUNCHER (the function declared in the day's header), exactly what the tests call. Which
// launchers exist depends on which exercises have landed, so the registry files
// (kernels_day01.cpp, kernels_day06.cpp) are compiled with BENCH_HAVE_<id> definitions that
// bench/CMakeLists.txt sets only for the libraries it found.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "attention_params.h"

namespace bench {

// Workloads that share an input set-up, a validation routine and a cost model.
enum class Family { kVector, kMatmul, kRowReduce, kSoftmax, kPrefill, kDecode };
const char* family_name(Family f);

using VectorFn = void (*)(const float* a, const float* b, float* c, int64_t n, cudaStream_t);
using MatmulFn = void (*)(const float* a, const float* b, float* c, int m, int n, int k,
                          cudaStream_t);
using RowReduceFn = void (*)(const float* x, float* row_max, float* row_sum, int rows, int cols,
                             cudaStream_t);
using SoftmaxFn = void (*)(const float* x, float* y, int rows, int cols, cudaStream_t);
// Prefill attention. `workspace` is only used by kernels that declare workspace_bytes.
using PrefillFn = void (*)(const float* q, const float* k, const float* v, float* o,
                           float* workspace, const course::AttentionParams& p, cudaStream_t);
using WorkspaceFn = size_t (*)(const course::AttentionParams& p);
using PagedFn = void (*)(const float* q, const float* k_cache, const float* v_cache,
                         const int32_t* block_table, const int32_t* context_lens, float* o,
                         const course::PagedParams& p, cudaStream_t);

struct Kernel {
  std::string name;      // e.g. "flash_attention" (what --kernel matches, with `exercise`)
  std::string exercise;  // e.g. "02_flash_attention"; "baseline" for the cuBLAS attention
  Family family = Family::kVector;
  // Exactly one of these is set, matching `family`.
  VectorFn vector = nullptr;
  MatmulFn matmul = nullptr;
  RowReduceFn row_reduce = nullptr;
  SoftmaxFn softmax = nullptr;
  PrefillFn prefill = nullptr;
  PagedFn paged = nullptr;
  WorkspaceFn workspace_bytes = nullptr;  // prefill kernels with an N×N scratch buffer
  bool prefill_gqa_grid = false;  // in the default grid: run on the GQA shapes (else MHA ones)
  bool quadratic_memory = false;  // skipped in the default grid above --quadratic-max-n
};

// The registry: solution (or learner) launchers that this binary was linked with.
std::vector<Kernel> day01_kernels();
std::vector<Kernel> day06_kernels();
Kernel cublas_attention_kernel();  // the "without this course" baseline (bench/cublas_attention.cu)

struct Shape {
  Family family = Family::kVector;
  std::string name;      // unique and filterable, e.g. "b2_h32_kv32_n8192_d64_causal"
  bool from_grid = true;  // false for a shape typed on the command line
  int64_t n = 0;                 // kVector
  int m = 0, nn = 0, k = 0;      // kMatmul: C[m, nn] = A[m, k]·B[nn, k]ᵀ
  int rows = 0, cols = 0;        // kRowReduce, kSoftmax
  course::AttentionParams attn;  // kPrefill
  course::PagedParams paged;     // kDecode
  int context = 0;               // kDecode: every sequence holds `context` cached tokens
  bool gqa_grid = false;         // kPrefill grid shapes meant for the GQA kernel
};

// The default grids (bench/shapes.cpp), and a shape typed as key=value pairs, e.g.
// "prefill:b=2,h=32,kv=8,n=1000,d=64,causal" or "decode:b=16,h=32,kv=8,ctx=4096".
std::vector<Shape> default_shapes(Family f);
Shape parse_shape(const std::string& spec);  // throws std::invalid_argument with a usage line

// Cost model: the work a kernel must do and the bytes that must move, whatever the algorithm.
double shape_flops(const Shape& s);  // 0 where FLOP/s is not the point (bandwidth kernels)
double shape_bytes(const Shape& s);  // inputs read once + outputs written once

// Did the kernel compute the right thing on a small shape resembling `s`? (bench/validate.cpp)
struct Check {
  enum Status { kOk, kFail, kUnsupported, kError, kSkipped } status = kError;
  double rel_l2 = 0.0;
  std::string detail;  // the compare() report, or the exception's message
  std::string label() const;
};
Check validate(const Kernel& kern, const Shape& s, cudaStream_t stream);

struct TimingConfig {
  int warmup = 3;
  int reps = 20;
  double budget_s = 8.0;  // per measurement: reps are trimmed (to >= 5) when a call is slower
  bool flush_l2 = true;
};

struct Measurement {
  double median_ms = 0.0;
  double min_ms = 0.0;
  int reps = 0;
};

struct Roofs {
  double copy_gbs = 0.0;      // device-to-device copy, bytes read + written
  double sgemm_tflops = 0.0;  // cuBLAS fp32 GEMM (no TF32)
  double hgemm_tflops = 0.0;  // cuBLAS fp16 GEMM with fp32 accumulation (tensor cores)
};
Roofs measure_roofs(cudaStream_t stream, const TimingConfig& cfg);

}  // namespace bench
