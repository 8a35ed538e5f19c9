// Day 10 · Exercise 08 · KV-cache compression (H2O / SnapKV): score the cache with an observation window, keep sinks + recent + top-k per KV head, compact into a new paged cache.
// Lesson: day10-optimizations/08_kv_compress/README.md. Test: make test EX=08_kv_compress
//
// Five kernels, one after the other on the stream:
//   1. kvc_row_stats_kernel (given): one block per (128-key tile, KV head, sequence). For each of
//      the G·W window rows of the KV head: the max m and the sum ℓ of exp(s − m) over the tile's
//      keys that the row sees, a partial of the row's softmax statistics.
//   2. kvc_merge_stats_kernel (given): one warp per window row folds the partials of its tiles
//      into the row's (m, 1/ℓ).
//   3. kvc_score_kernel: the grid of 1. Each thread owns one key, recomputes its logits and adds
//      up its probabilities under all G·W rows: the key's score.
//   4. kvc_select_kernel: one block per (KV head, sequence). Max-pools the candidates' scores,
//      finds the top-k threshold with a radix select on the fp32 bits, then walks the tokens in
//      order and writes the kept ones, ascending, to kept_indices. Head 0's block also writes
//      the new length and block table.
//   5. kvc_gather_kernel: copies the K and V rows of every kept token to its slot of the new pool.
// A sequence with L <= budget skips 1-3: it is copied whole.
//
// Why two passes over K for the scores: a key's probability under a row needs the row's softmax
// denominator, a sum over all the keys the row sees. Pass 1 finds it, pass 2 uses it (the same
// recomputation FlashAttention's backward pass does instead of storing the G·W × L logits).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "08_kv_compress.h"
#include "arch/exp2.cuh"
#include "check_args.h"
#include "cuda_check.h"

// ---------------------------------------------------------------------------------------------
// Index helpers (the header's contracts). The kernels call them on the device, the [index] tests
// on the host; defined here, in the kernels' translation unit, so nvcc inlines them.

__host__ __device__ KvKeepPlan kv_keep_plan(int len, int n_sink, int n_recent, int budget) {
  // TODO(1) (≈ 2 lines): the sinks, the recent window, the number of candidates kept by score
  //          and the total kept, for a sequence of len tokens, both when it is short enough to
  //          keep whole and when it is not (lesson: "What is kept").
  return {0, 0, 0, 0};  // TODO(1): replace (nothing kept until then)
}

__host__ __device__ KvRange kv_pool_range(int t, int len, int pool_kernel) {
  // TODO(2) (≈ 2 lines): the neighbours of key t that its max pool looks at, never outside the
  //          sequence's tokens (lesson: "Pooling neighbours").
  return {t, t};  // TODO(2): replace (an empty range until then)
}

__host__ __device__ KvSlot kv_dest_slot(int b, int rank, int out_blocks, int block_size) {
  // TODO(3) (≈ 1 line): the physical block and slot of the new cache that the token of rank
  //          `rank` of sequence b goes to (lesson: "The new paged cache").
  return {0, 0};  // TODO(3): replace
}

__host__ __device__ long long kv_pool_row(int block, int hk, int slot, int heads_kv, int block_size) {
  // TODO(4) (≈ 1 line): the row of the pool [num_blocks, Hkv, block_size, D] holding that
  //          slot of that head of that block, in 64-bit arithmetic (lesson: "The new paged cache").
  return 0;  // TODO(4): replace (every token reads row 0 until then)
}

namespace {

using course::arch::kLog2e;

constexpr int kTile = 128;            // keys per block of passes 1 and 3 (one per thread)
constexpr int kStageRows = 16;        // window rows staged in shared memory at a time
constexpr int kSelectThreads = 1024;  // one block per (KV head, sequence) for the selection
constexpr int kGatherRows = 32;       // kept tokens per gather block
constexpr int kGatherThreads = 128;
constexpr int kMaxPoolKernel = 31;

// Everything the kernels need to know about the problem, by value.
struct KvcDims {
  int heads_q, heads_kv, group, window, rows;  // rows = group · window: window rows per KV head
  int block_size, max_blocks, out_blocks, n_tiles;
  long long width;  // max_blocks · block_size: a score row's length
  int n_sink, n_recent, budget, pool_kernel;
  float scale_log2;  // softmax scale · log2(e)
};

__device__ float warp_max(float x) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}

__device__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Folds the softmax statistics (m2, l2) of some keys into (m, l) of others; either may be empty
// (m = −inf, l = 0). Values are in log2 units: l = Σ 2^(s − m).
__device__ void fold_ml(float& m, float& l, float m2, float l2) {
  const float m_new = fmaxf(m, m2);
  if (m_new == -INFINITY) return;  // both empty
  l = l * exp2f(m - m_new) + l2 * exp2f(m2 - m_new);
  m = m_new;
}

// The fp32 K row of token t of KV head hk (sequence b's block table `table`); zeros for t >= len,
// whose slots hold garbage: they are never read.
template <int D>
__device__ void load_key_row(const __half* k_cache, const int32_t* table, int t, int len, int hk, const KvcDims& dm,
                             float (&k)[D]) {
  if (t < len) {
    const long long row = kv_pool_row(table[t / dm.block_size], hk, t % dm.block_size, dm.heads_kv, dm.block_size);
    const uint4* src = reinterpret_cast<const uint4*>(k_cache) + row * (D / 8);
#pragma unroll
    for (int c = 0; c < D / 8; ++c) {
      const uint4 raw = src[c];
      const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        k[8 * c + 2 * i] = f.x;
        k[8 * c + 2 * i + 1] = f.y;
      }
    }
  } else {
#pragma unroll
    for (int d = 0; d < D; ++d) k[d] = 0.f;
  }
}

// Window rows [r0, r0 + n) of KV head hk into shared memory, fp32, times scale·log2(e). Row
// r = g·W + i is query head hk·G + g at window position i: the G·W rows of a KV head are
// contiguous in q_window [B, Hq, W, D].
template <int D>
__device__ void stage_rows(float* sh_q, const __half* q_window, int b, int hk, int r0, int n, const KvcDims& dm) {
  const __half* src = q_window + ((size_t(b) * dm.heads_q + size_t(hk) * dm.group) * dm.window + r0) * D;
  for (int e = threadIdx.x; e < n * D; e += blockDim.x) sh_q[e] = __half2float(src[e]) * dm.scale_log2;
}

// q · k with q in shared memory (the same address for every thread: a broadcast) and k in
// registers; four partial sums keep four FMA chains in flight.
template <int D>
__device__ float dot_row(const float* q, const float (&k)[D]) {
  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll
  for (int d = 0; d < D; d += 4) {
    const float4 qv = *reinterpret_cast<const float4*>(q + d);
    a0 = fmaf(qv.x, k[d], a0);
    a1 = fmaf(qv.y, k[d + 1], a1);
    a2 = fmaf(qv.z, k[d + 2], a2);
    a3 = fmaf(qv.w, k[d + 3], a3);
  }
  return (a0 + a1) + (a2 + a3);
}

// Exclusive prefix sum of x over the block (in thread order) and the block's total. Every thread
// of the block must call it; `sh` holds 32 ints.
__device__ int block_exclusive_scan(int x, int* sh, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int incl = x;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int y = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += y;
  }
  __syncthreads();  // the previous call's readers are done with sh
  if (lane == 31) sh[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < warps ? sh[lane] : 0;
    int wi = w;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, wi, off);
      if (lane >= off) wi += y;
    }
    sh[lane] = wi;  // warps 0 .. lane, summed
  }
  __syncthreads();
  total = sh[warps - 1];
  return incl - x + (warp > 0 ? sh[warp - 1] : 0);
}

// ---------------------------------------------------------------------------------------------
// Pass 1. Grid: x = 128-key tile, y = KV head, z = sequence; thread = key tile·128 + threadIdx.x.
template <int D>
__global__ void __launch_bounds__(kTile)
    kvc_row_stats_kernel(const __half* __restrict__ q_window, const __half* __restrict__ k_cache,
                         const int32_t* __restrict__ block_table, const int32_t* __restrict__ context_lens,
                         float* __restrict__ part_m, float* __restrict__ part_l, KvcDims dm) {
  __shared__ __align__(16) float sh_q[kStageRows * D];
  __shared__ float sh_m[kTile / 32][kStageRows], sh_l[kTile / 32][kStageRows];
  const int tile = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int len = context_lens[b];
  if (len <= dm.budget || tile * kTile >= len) return;  // kept whole, or a tile past the last token
  const int t = tile * kTile + threadIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float k[D];
  load_key_row<D>(k_cache, block_table + size_t(b) * dm.max_blocks, t, len, hk, dm, k);
  const int off = len - dm.window;  // window row i is token off + i: it sees keys j <= off + i

  for (int r0 = 0; r0 < dm.rows; r0 += kStageRows) {
    const int n = min(kStageRows, dm.rows - r0);
    __syncthreads();  // everyone is done with the previous rows' q and statistics
    stage_rows<D>(sh_q, q_window, b, hk, r0, n, dm);
    __syncthreads();
    for (int rr = 0; rr < n; ++rr) {
      const int i = (r0 + rr) % dm.window;
      const float s = t <= off + i ? dot_row<D>(sh_q + rr * D, k) : -INFINITY;
      const float m = warp_max(s);
      const float l = warp_sum(m == -INFINITY ? 0.f : exp2f(s - m));  // a warp of unseen keys: (−inf, 0)
      if (lane == 0) {
        sh_m[warp][rr] = m;
        sh_l[warp][rr] = l;
      }
    }
    __syncthreads();
    if (threadIdx.x < n) {
      float m = -INFINITY, l = 0.f;
      for (int w = 0; w < kTile / 32; ++w) fold_ml(m, l, sh_m[w][threadIdx.x], sh_l[w][threadIdx.x]);
      const size_t at = ((size_t(b) * dm.heads_kv + hk) * dm.rows + r0 + threadIdx.x) * dm.n_tiles + tile;
      part_m[at] = m;
      part_l[at] = l;
    }
  }
}

// Pass 1b. One warp per window row (b, hk, r): the tiles' partials, folded, are the row's softmax
// statistics. Lanes fold every 32nd tile, then a butterfly folds the lanes: a fixed order.
__global__ void __launch_bounds__(128)
    kvc_merge_stats_kernel(const float* __restrict__ part_m, const float* __restrict__ part_l,
                           const int32_t* __restrict__ context_lens, float* __restrict__ row_m,
                           float* __restrict__ row_il, KvcDims dm, long long total_rows) {
  const long long row = (long long)blockIdx.x * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= total_rows) return;
  const int b = int(row / ((long long)dm.heads_kv * dm.rows));
  const int len = context_lens[b];
  if (len <= dm.budget) return;
  const int used = (len + kTile - 1) / kTile;  // the tiles that hold tokens: pass 1 wrote exactly those
  float m = -INFINITY, l = 0.f;
  for (int j = lane; j < used; j += 32) fold_ml(m, l, part_m[row * dm.n_tiles + j], part_l[row * dm.n_tiles + j]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float l2 = __shfl_xor_sync(0xffffffffu, l, off);
    fold_ml(m, l, m2, l2);
  }
  if (lane == 0) {
    row_m[row] = m;
    row_il[row] = 1.f / l;  // l >= 1: every row sees key 0 (L − W >= 1 when L > budget >= W)
  }
}

// ---------------------------------------------------------------------------------------------
// Pass 2. The grid of pass 1; each thread's key gets its score, Σ over the G·W rows of its
// probability under the row, summed in row order (so equal keys get equal scores, bit for bit).
template <int D>
__global__ void __launch_bounds__(kTile)
    kvc_score_kernel(const __half* __restrict__ q_window, const __half* __restrict__ k_cache,
                     const int32_t* __restrict__ block_table, const int32_t* __restrict__ context_lens,
                     const float* __restrict__ row_m, const float* __restrict__ row_il, float* __restrict__ scores,
                     KvcDims dm) {
  __shared__ __align__(16) float sh_q[kStageRows * D];
  __shared__ float sh_m[kStageRows], sh_il[kStageRows];
  const int tile = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int len = context_lens[b];
  if (len <= dm.budget || tile * kTile >= len) return;
  const int t = tile * kTile + threadIdx.x;
  float k[D];
  load_key_row<D>(k_cache, block_table + size_t(b) * dm.max_blocks, t, len, hk, dm, k);
  const int off = len - dm.window;
  const size_t rows_of_head = (size_t(b) * dm.heads_kv + hk) * dm.rows;

  float acc = 0.f;  // this key's score over the rows seen so far
  for (int r0 = 0; r0 < dm.rows; r0 += kStageRows) {
    const int n = min(kStageRows, dm.rows - r0);
    __syncthreads();
    stage_rows<D>(sh_q, q_window, b, hk, r0, n, dm);
    if (threadIdx.x < n) {
      sh_m[threadIdx.x] = row_m[rows_of_head + r0 + threadIdx.x];
      sh_il[threadIdx.x] = row_il[rows_of_head + r0 + threadIdx.x];
    }
    __syncthreads();
    for (int rr = 0; rr < n; ++rr) {
      const int i = (r0 + rr) % dm.window;
      const float s = dot_row<D>(sh_q + rr * D, k);  // log2 units: q was scaled by scale·log2(e)
      // TODO(5) (≈ 1 line): add this key's probability under window row rr (the row's softmax
      //          statistics are in sh_m and sh_il) to acc; a key the row does not see adds nothing
      //          (lesson: "Observation scores").
    }
  }
  if (t < len) scores[(size_t(b) * dm.heads_kv + hk) * dm.width + t] = acc;
}

// ---------------------------------------------------------------------------------------------
// Selection. Grid: x = KV head, y = sequence; kSelectThreads threads.
__global__ void __launch_bounds__(kSelectThreads)
    kvc_select_kernel(const float* __restrict__ scores, float* __restrict__ pooled,
                      const int32_t* __restrict__ context_lens, int32_t* __restrict__ kept_indices,
                      int32_t* __restrict__ out_block_table, int32_t* __restrict__ out_context_lens, KvcDims dm) {
  __shared__ unsigned hist[256];
  __shared__ unsigned sh_prefix;
  __shared__ int sh_need;
  __shared__ int sh_scan[32];
  const int hk = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
  const int len = context_lens[b];
  const KvKeepPlan plan = kv_keep_plan(len, dm.n_sink, dm.n_recent, dm.budget);
  if (hk == 0) {  // one length and one block table per sequence serve all its heads
    if (tid == 0) out_context_lens[b] = plan.kept;
    for (int i = tid; i < dm.out_blocks; i += blockDim.x)
      out_block_table[size_t(b) * dm.out_blocks + i] = b * dm.out_blocks + i;
  }
  const size_t head = size_t(b) * dm.heads_kv + hk;
  const float* sc = scores + head * dm.width;
  float* pl = pooled + head * dm.width;
  int32_t* kept = kept_indices + head * dm.budget;

  // 1. The candidates' pooled scores. Neighbours may be sinks or recent tokens: every key < len
  //    has a score (scores are >= 0, so 0 is a neutral start for the max).
  for (int t = plan.sink_end + tid; t < plan.recent_begin; t += blockDim.x) {
    const KvRange nb = kv_pool_range(t, len, dm.pool_kernel);
    float v = 0.f;
    for (int j = nb.begin; j < nb.end; ++j) v = fmaxf(v, sc[j]);
    pl[t] = v;
  }
  __syncthreads();  // this block's global writes are visible to the whole block after the barrier

  // 2. Radix select over the candidates. Pooled scores are >= 0, and for non-negative floats the
  //    order of the values is the order of their bits as unsigned ints. One 8-bit digit per round,
  //    most significant first: `prefix` holds the digits decided so far (the bits under `mask`)
  //    of thr, the topk-th largest pooled score; `need` how many of the candidates that agree
  //    with prefix on those bits are still to be kept.
  unsigned prefix = 0u, mask = 0u;
  int need = plan.topk;
  if (tid == 0) {  // what the digit walk leaves for everyone after each round
    sh_prefix = 0u;
    sh_need = need;
  }
  for (int shift = 24; shift >= 0 && plan.topk > 0; shift -= 8) {
    for (int i = tid; i < 256; i += blockDim.x) hist[i] = 0u;
    __syncthreads();
    for (int t = plan.sink_end + tid; t < plan.recent_begin; t += blockDim.x) {
      const unsigned bits = __float_as_uint(pl[t]);
      if ((bits & mask) == prefix) atomicAdd(&hist[(bits >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      // TODO(6) (≈ 5 lines): from this round's histogram, the digit of the need-th largest
      //          candidate: leave in sh_prefix the prefix extended by that digit, and in sh_need
      //          how many of the candidates in its bin are still to be kept (lesson: "Top-k by
      //          radix select").
    }
    __syncthreads();
    prefix = sh_prefix;
    need = sh_need;
    mask |= 255u << shift;
  }
  // Now prefix is thr's bits: the candidates above thr are kept, and the first `need` (lowest
  // indices) of those equal to it. No candidate at all (topk = 0): nothing is above or at thr.
  const unsigned thr = plan.topk > 0 ? prefix : 0xFFFFFFFFu;
  if (plan.topk == 0) need = 0;

  // 3. Compaction, in token order, kSelectThreads tokens per step: a token's rank among the kept
  //    ones (and a candidate's rank among those at thr) is a prefix sum over the tokens before it.
  int at_thr_before = 0, kept_before = 0;
  for (int base = 0; base < len; base += blockDim.x) {
    const int t = base + tid;
    const bool cand = t >= plan.sink_end && t < plan.recent_begin;
    const unsigned bits = cand ? __float_as_uint(pl[t]) : 0u;
    const bool at_thr = cand && bits == thr;
    int at_thr_total = 0, kept_total = 0;
    const int at_thr_rank = at_thr_before + block_exclusive_scan(at_thr ? 1 : 0, sh_scan, at_thr_total);
    // TODO(7) (≈ 1 line): whether token t is kept: the sinks and the recent window, the
    //          candidates above the threshold, and those at it while they are among the first
    //          `need` at it in token order (lesson: "Ties and compaction").
    const bool keep = false;  // TODO(7): replace (nothing is kept until then)
    const int rank = kept_before + block_exclusive_scan(keep ? 1 : 0, sh_scan, kept_total);
    if (keep && rank < dm.budget) kept[rank] = t;  // never past the row, whatever went wrong above
    at_thr_before += at_thr_total;
    kept_before += kept_total;
  }
  __syncthreads();
  for (int r = plan.kept + tid; r < dm.budget; r += blockDim.x) kept[r] = -1;
}

// ---------------------------------------------------------------------------------------------
// Gather. Grid: x = group of kGatherRows ranks, y = KV head, z = sequence. Consecutive threads
// copy consecutive 16-byte chunks of a row.
template <int D>
__global__ void __launch_bounds__(kGatherThreads)
    kvc_gather_kernel(const __half* __restrict__ k_cache, const __half* __restrict__ v_cache,
                      const int32_t* __restrict__ block_table, const int32_t* __restrict__ context_lens,
                      const int32_t* __restrict__ kept_indices, __half* __restrict__ k_out, __half* __restrict__ v_out,
                      KvcDims dm) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  const int hk = blockIdx.y, b = blockIdx.z;
  const int len = context_lens[b];
  const int n = kv_keep_plan(len, dm.n_sink, dm.n_recent, dm.budget).kept;
  const int32_t* kept = kept_indices + (size_t(b) * dm.heads_kv + hk) * dm.budget;
  const int32_t* table = block_table + size_t(b) * dm.max_blocks;
  const uint4* k8 = reinterpret_cast<const uint4*>(k_cache);
  const uint4* v8 = reinterpret_cast<const uint4*>(v_cache);
  uint4* ko8 = reinterpret_cast<uint4*>(k_out);
  uint4* vo8 = reinterpret_cast<uint4*>(v_out);
  for (int c = threadIdx.x; c < kGatherRows * kChunks; c += blockDim.x) {
    const int r = blockIdx.x * kGatherRows + c / kChunks, col = c % kChunks;
    if (r >= n) continue;
    const int t = kept[r];
    if (t < 0 || t >= len) continue;  // an index outside the sequence (a bug upstream) is never followed
    // TODO(8) (≈ 5 lines): copy chunk `col` of token t's K row and V row, read through the input
    //          block table, to the slot of rank r in the new pool (lesson: "The new paged cache").
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

void check_params(const course::PagedParams& p, const KvCompressParams& c, const char* fn) {
  course::require_positive(p.batch, fn, "batch");
  course::require(p.batch <= 65535, fn, "batch", "must be <= 65535 (grid z)");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_q % p.heads_kv == 0, fn, "heads_kv", "must divide heads_q");
  course::require(p.heads_kv <= 65535, fn, "heads_kv", "must be <= 65535 (grid y)");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require_positive(p.block_size, fn, "block_size");
  course::require_positive(p.num_blocks, fn, "num_blocks");
  course::require_positive(p.max_blocks_per_seq, fn, "max_blocks_per_seq");
  course::require((long long)p.max_blocks_per_seq * p.block_size <= INT_MAX, fn, "max_blocks_per_seq",
                  "times block_size must fit in int");
  course::require(c.window >= 1, fn, "window", "must be >= 1 (got " + std::to_string(c.window) + ")");
  course::require_non_negative(c.n_sink, fn, "n_sink");
  course::require_non_negative(c.n_recent, fn, "n_recent");
  course::require_positive(c.budget, fn, "budget");
  course::require((long long)c.n_sink + c.n_recent <= c.budget, fn, "budget", "must be >= n_sink + n_recent");
  course::require(c.window <= c.budget, fn, "window",
                  "must be <= budget (a compressed sequence holds the whole window)");
  course::require(c.pool_kernel >= 1 && c.pool_kernel <= kMaxPoolKernel && c.pool_kernel % 2 == 1, fn, "pool_kernel",
                  "must be odd and in [1, 31] (got " + std::to_string(c.pool_kernel) + ")");
  const long long out_blocks = (c.budget + (long long)p.block_size - 1) / p.block_size;
  course::require(out_blocks * p.batch <= INT_MAX, fn, "budget", "too large: the new pool's block ids must fit in int");
  course::require((long long)p.batch * p.heads_q * c.window <= INT_MAX, fn, "window",
                  "times batch · heads_q must fit in int (window rows)");
}

KvcDims make_dims(const course::PagedParams& p, const KvCompressParams& c) {
  KvcDims dm;
  dm.heads_q = p.heads_q;
  dm.heads_kv = p.heads_kv;
  dm.group = p.group_size();
  dm.window = c.window;
  dm.rows = dm.group * c.window;
  dm.block_size = p.block_size;
  dm.max_blocks = p.max_blocks_per_seq;
  dm.out_blocks = int((c.budget + (long long)p.block_size - 1) / p.block_size);
  dm.width = (long long)p.max_blocks_per_seq * p.block_size;
  dm.n_tiles = int((dm.width + kTile - 1) / kTile);
  dm.n_sink = c.n_sink;
  dm.n_recent = c.n_recent;
  dm.budget = c.budget;
  dm.pool_kernel = c.pool_kernel;
  dm.scale_log2 = p.softmax_scale() * kLog2e;
  return dm;
}

// The workspace's parts, in this order: partial m and ℓ [B, Hkv, rows, n_tiles] each, the rows'
// m and 1/ℓ [B, Hkv, rows] each, scores and pooled scores [B, Hkv, width] each.
struct Workspace {
  float *part_m, *part_l, *row_m, *row_il, *scores, *pooled;
  size_t floats;
};

Workspace carve(float* base, const KvcDims& dm, int batch) {
  const size_t rows = size_t(batch) * dm.heads_kv * dm.rows;
  const size_t parts = rows * dm.n_tiles;
  const size_t keys = size_t(batch) * dm.heads_kv * size_t(dm.width);
  Workspace w;
  w.part_m = base;
  w.part_l = base ? w.part_m + parts : nullptr;
  w.row_m = base ? w.part_l + parts : nullptr;
  w.row_il = base ? w.row_m + rows : nullptr;
  w.scores = base ? w.row_il + rows : nullptr;
  w.pooled = base ? w.scores + keys : nullptr;
  w.floats = 2 * parts + 2 * rows + 2 * keys;
  return w;
}

template <int D>
void launch_all(const __half* q_window, const __half* k_cache, const __half* v_cache, const int32_t* block_table,
                const int32_t* context_lens, __half* k_out, __half* v_out, int32_t* out_block_table,
                int32_t* out_context_lens, int32_t* kept_indices, const Workspace& ws, const KvcDims& dm, int batch,
                cudaStream_t stream) {
  const dim3 tiles(unsigned(dm.n_tiles), unsigned(dm.heads_kv), unsigned(batch));
  kvc_row_stats_kernel<D>
      <<<tiles, kTile, 0, stream>>>(q_window, k_cache, block_table, context_lens, ws.part_m, ws.part_l, dm);
  CUDA_CHECK_LAUNCH();
  const long long total_rows = (long long)batch * dm.heads_kv * dm.rows;
  kvc_merge_stats_kernel<<<unsigned((total_rows + 3) / 4), 128, 0, stream>>>(ws.part_m, ws.part_l, context_lens,
                                                                             ws.row_m, ws.row_il, dm, total_rows);
  CUDA_CHECK_LAUNCH();
  kvc_score_kernel<D>
      <<<tiles, kTile, 0, stream>>>(q_window, k_cache, block_table, context_lens, ws.row_m, ws.row_il, ws.scores, dm);
  CUDA_CHECK_LAUNCH();
  kvc_select_kernel<<<dim3(unsigned(dm.heads_kv), unsigned(batch)), kSelectThreads, 0, stream>>>(
      ws.scores, ws.pooled, context_lens, kept_indices, out_block_table, out_context_lens, dm);
  CUDA_CHECK_LAUNCH();
  const dim3 gather(unsigned((dm.budget + kGatherRows - 1) / kGatherRows), unsigned(dm.heads_kv), unsigned(batch));
  kvc_gather_kernel<D><<<gather, kGatherThreads, 0, stream>>>(k_cache, v_cache, block_table, context_lens, kept_indices,
                                                              k_out, v_out, dm);
  CUDA_CHECK_LAUNCH();
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

int kv_compress_out_blocks(const course::PagedParams& p, const KvCompressParams& c) {
  check_params(p, c, "kv_compress_out_blocks");
  return make_dims(p, c).out_blocks;
}

course::PagedParams kv_compress_out_params(const course::PagedParams& p, const KvCompressParams& c) {
  check_params(p, c, "kv_compress_out_params");
  course::PagedParams out = p;
  out.max_blocks_per_seq = make_dims(p, c).out_blocks;
  out.num_blocks = p.batch * out.max_blocks_per_seq;
  return out;
}

size_t kv_compress_workspace_bytes(const course::PagedParams& p, const KvCompressParams& c) {
  check_params(p, c, "kv_compress_workspace_bytes");
  return carve(nullptr, make_dims(p, c), p.batch).floats * sizeof(float);
}

void kv_compress(const __half* q_window, const __half* k_cache, const __half* v_cache, const int32_t* block_table,
                 const int32_t* context_lens, __half* k_out, __half* v_out, int32_t* out_block_table,
                 int32_t* out_context_lens, int32_t* kept_indices, void* workspace, const course::PagedParams& p,
                 const KvCompressParams& c, cudaStream_t stream) {
  const char* fn = "kv_compress";
  course::require_not_null(q_window, fn, "q_window");
  course::require_not_null(k_cache, fn, "k_cache");
  course::require_not_null(v_cache, fn, "v_cache");
  course::require_not_null(block_table, fn, "block_table");
  course::require_not_null(context_lens, fn, "context_lens");
  course::require_not_null(k_out, fn, "k_out");
  course::require_not_null(v_out, fn, "v_out");
  course::require_not_null(out_block_table, fn, "out_block_table");
  course::require_not_null(out_context_lens, fn, "out_context_lens");
  course::require_not_null(kept_indices, fn, "kept_indices");
  course::require_not_null(workspace, fn, "workspace");
  // 16-byte loads and stores of 8 halves need 16-byte aligned rows (cudaMalloc gives 256).
  course::require(aligned16(q_window), fn, "q_window", "must be 16-byte aligned");
  course::require(aligned16(k_cache), fn, "k_cache", "must be 16-byte aligned");
  course::require(aligned16(v_cache), fn, "v_cache", "must be 16-byte aligned");
  course::require(aligned16(k_out), fn, "k_out", "must be 16-byte aligned");
  course::require(aligned16(v_out), fn, "v_out", "must be 16-byte aligned");
  course::require(aligned16(workspace), fn, "workspace", "must be 16-byte aligned");
  check_params(p, c, fn);

  const KvcDims dm = make_dims(p, c);
  const Workspace ws = carve(static_cast<float*>(workspace), dm, p.batch);
  switch (p.head_dim) {
    case 32:
      launch_all<32>(q_window, k_cache, v_cache, block_table, context_lens, k_out, v_out, out_block_table,
                     out_context_lens, kept_indices, ws, dm, p.batch, stream);
      break;
    case 64:
      launch_all<64>(q_window, k_cache, v_cache, block_table, context_lens, k_out, v_out, out_block_table,
                     out_context_lens, kept_indices, ws, dm, p.batch, stream);
      break;
    default:
      launch_all<128>(q_window, k_cache, v_cache, block_table, context_lens, k_out, v_out, out_block_table,
                      out_context_lens, kept_indices, ws, dm, p.batch, stream);
  }
}
