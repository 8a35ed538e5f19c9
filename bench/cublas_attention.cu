// The baseline: attention as you would write it without this course, from a vendor GEMM.
//
//   S = scale · Q·Kᵀ     cublasSgemmStridedBatched, written to an N×N workspace in HBM
//   P = softmax(S)       one row per block, in place (the kernel below)
//   O = P·V              cublasSgemmStridedBatched
//
// The two GEMMs run near cuBLAS's fp32 roof, so what this baseline loses is the memory
// traffic of S and P: B·H·Nq·Nk floats written, read, written and read again, the very
// traffic flash attention never generates. It also needs that workspace (4·B·H·N² bytes:
// 17 GB at N = 8192 with B·N = 16k tokens and 32 heads).
//
// GQA without copying K/V: the G query heads that share KV head g are adjacent in the
// [B, Hq, Nq, D] layout, so they form ONE [G·Nq, D] matrix; each batched GEMM instance is one
// (b, kv-head) pair multiplying that matrix by the shared K (or V).
#include <cublas_v2.h>

#include <cfloat>
#include <stdexcept>

#include "check_args.h"
#include "cublas_attention.h"
#include "cublas_check.h"
#include "cuda_check.h"

namespace bench {

namespace {

constexpr int kSoftmaxThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by the previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // every warp's partial is in scratch
  v = lane < blockDim.x / 32 ? scratch[lane] : (is_max ? -FLT_MAX : 0.f);
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, other) : v + other;
  }
  return v;
}

// Row r of S belongs to query row i = r % Nq; with a causal mask it sees keys j <= i + Nk - Nq.
// Three passes over the row (max, sum of exponentials, normalise): the row is re-read from
// L2/HBM each time, which is fine for a baseline and is exactly what fusion avoids.
__global__ void masked_softmax_rows(float* s, int64_t rows, int nq, int nk, bool causal) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = s + r * nk;
    const int i = int(r % nq);
    const int visible = causal ? min(nk, max(0, i + (nk - nq) + 1)) : nk;
    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, true, scratch);
    float l = 0.f;
    for (int j = threadIdx.x; j < visible; j += blockDim.x) l += __expf(row[j] - m);
    l = block_reduce(l, false, scratch);
    const float inv_l = visible > 0 ? 1.f / l : 0.f;  // no visible key: the row is all zeros
    for (int j = threadIdx.x; j < nk; j += blockDim.x) row[j] = j < visible ? __expf(row[j] - m) * inv_l : 0.f;
  }
}

cublasHandle_t handle() {
  // One handle for the process (creating one costs milliseconds); never destroyed, because a
  // static destructor would run after the CUDA runtime has shut down.
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    CUBLAS_CHECK(cublasCreate(&created));
    // Default math: true fp32 FMA, no TF32, so the baseline is as accurate as our kernels.
    CUBLAS_CHECK(cublasSetMathMode(created, CUBLAS_DEFAULT_MATH));
    return created;
  }();
  return h;
}

}  // namespace

size_t cublas_attention_workspace_bytes(const course::AttentionParams& p) {
  return sizeof(float) * size_t(p.batch) * p.heads_q * p.seq_q * p.seq_k;
}

void cublas_attention(const float* q, const float* k, const float* v, float* o, float* ws,
                      const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "cublas_attention";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k, fn, "k");
  course::require_not_null(v, fn, "v");
  course::require_not_null(o, fn, "o");
  course::require_not_null(ws, fn, "workspace");
  course::require_positive(p.batch, fn, "batch");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_q > 0 && p.heads_q % p.heads_kv == 0, fn, "heads_q",
                  "must be a positive multiple of heads_kv");
  course::require_positive(p.seq_q, fn, "seq_q");
  course::require_positive(p.seq_k, fn, "seq_k");
  course::require_positive(p.head_dim, fn, "head_dim");
  course::require(p.window < 0, fn, "window", "is not supported by the baseline");

  cublasHandle_t h = handle();
  CUBLAS_CHECK(cublasSetStream(h, stream));
  const int g_nq = p.group_size() * p.seq_q;  // rows of one (b, kv-head) instance
  const int nk = p.seq_k, d = p.head_dim;
  const int batch = p.batch * p.heads_kv;
  const float scale = p.softmax_scale(), one = 1.f, zero = 0.f;
  // cuBLAS is column-major: a row-major [R, C] matrix is a column-major [C, R] one. So the
  // row-major S[g_nq, nk] = Q·Kᵀ is computed as the column-major Sᵀ[nk, g_nq] = K·Qᵀ.
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, nk, g_nq, d, &scale, k, d, int64_t(nk) * d, q, d,
                                         int64_t(g_nq) * d, &zero, ws, nk, int64_t(g_nq) * nk, batch));
  const int64_t rows = int64_t(batch) * g_nq;
  const int blocks = int(rows < 65535 * 8 ? rows : 65535 * 8);
  masked_softmax_rows<<<blocks, kSoftmaxThreads, 0, stream>>>(ws, rows, p.seq_q, nk, p.causal);
  CUDA_CHECK_LAUNCH();
  // Row-major O[g_nq, d] = P·V is the column-major Oᵀ[d, g_nq] = Vᵀ·Pᵀ.
  CUBLAS_CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, d, g_nq, nk, &one, v, d, int64_t(nk) * d, ws, nk,
                                         int64_t(g_nq) * nk, &zero, o, d, int64_t(g_nq) * d, batch));
}

}  // namespace bench
