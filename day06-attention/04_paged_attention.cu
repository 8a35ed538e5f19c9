// Day 06 · Exercise 04 · paged attention (decode): one query token per sequence over a paged KV cache.
// Lesson: day06-attention/04_paged_attention/README.md. Test: make test EX=04_paged_attention
// YOUR TASK: fill in the markers TODO(1)..(5). TODO(1) is the page-address helper, which
//   `build/bin/ex_04_paged_attention "[index]"` checks on the CPU, no GPU needed. The thread
//   layout, the loads-in-flight loop, the merge of partial softmax states and the launcher are given.
//
// Decode is memory bound (about 1 FLOP per byte of K/V for G = 1), so the whole design is about
// reading every K/V byte exactly once, as fast as HBM allows:
//   * one block per (sequence b, KV head, chunk of up to 8 query heads of the group): each K/V
//     row it reads serves all those query heads (GQA: K/V read once, not G times);
//   * each lane loads one float4 of a row, so a warp reads whole rows coalesced, and a warp
//     issues 2·kUnroll independent loads before it uses any of them (bytes in flight);
//   * each warp keeps its own online-softmax state (m, ℓ, O) over the tokens it visits; the
//     warps' states are merged once at the end through shared memory.
// Token t of sequence b sits in physical block block_table[b][t / block_size], slot
// t % block_size; tokens at or past context_lens[b] are never loaded (they may hold NaN).
#include <cmath>
#include <cstdint>

#include "04_paged_attention.h"
#include "arch/exp2.cuh"
#include "check_args.h"
#include "cuda_check.h"

// The page address of token t (the contract is in 04_paged_attention.h). Defined here, in the
// kernel's translation unit, so that nvcc inlines it into the kernel; the CPU test ([index])
// calls the host copy.
__host__ __device__ int64_t paged_attention_kv_offset(const int32_t* seq_blocks, int t, int hk, int heads_kv,
                                                      int block_size, int head_dim) {
  return 0;  // TODO(1) (≈ 3 lines): the element offset of token t, KV head hk: the physical block that
             //            holds the token (from its sequence's block table), its slot in that block,
             //            then the token's row in [num_blocks, Hkv, block_size, D] order
             //            (lesson: "The address computation").
}

namespace {

using course::arch::kLog2e;

constexpr int kWarps = 4;             // 128 threads: small blocks, several resident per SM
constexpr int kUnroll = 4;            // token steps per warp iteration (2·kUnroll loads in flight)
constexpr int kMaxHeadsPerBlock = 8;  // query heads one block serves (registers: 8 per head-float4)

__device__ float4 scale4(float4 a, float s) { return make_float4(a.x * s, a.y * s, a.z * s, a.w * s); }
__device__ float4 fma4(float s, float4 a, float4 acc) {
  return make_float4(fmaf(s, a.x, acc.x), fmaf(s, a.y, acc.y), fmaf(s, a.z, acc.z), fmaf(s, a.w, acc.w));
}

// Merge the online-softmax state (m2, l2, acc2) into (m, l, acc); both may be empty (m = -inf).
// m is in raw score units; exponents are (m - m_new)·scale·log2(e).
__device__ void merge_state(float& m, float& l, float4& acc, float m2, float l2, float4 acc2, float scale_log2) {
  const float m_new = fmaxf(m, m2);
  const float m_use = m_new == -INFINITY ? 0.f : m_new;
  const float a = exp2f((m - m_use) * scale_log2), a2 = exp2f((m2 - m_use) * scale_log2);
  l = l * a + l2 * a2;
  acc = fma4(a2, acc2, scale4(acc, a));
  m = m_new;
}

template <int D, int GB>
__global__ void __launch_bounds__(kWarps * 32)
    paged_decode_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                        const float* __restrict__ v_cache, const int32_t* __restrict__ block_table,
                        const int32_t* __restrict__ context_lens, float* __restrict__ o, int heads_q, int heads_kv,
                        int block_size, int max_blocks_per_seq, float scale_log2) {
  constexpr int kLanesPerToken = D / 4;                // one float4 of the row per lane
  constexpr int kTokensPerStep = 32 / kLanesPerToken;  // tokens one warp load covers (1, 2, 4)
  constexpr int kTokensPerIter = kTokensPerStep * kUnroll;
  // Per-warp partial results for the final merge (16 KiB at D = 128, GB = 8).
  __shared__ float4 part_acc[kWarps][GB][kLanesPerToken];
  __shared__ float part_m[kWarps][GB], part_l[kWarps][GB];

  const int group = heads_q / heads_kv;
  const int chunks = (group + GB - 1) / GB;
  const int hk = blockIdx.x / chunks, g0 = (blockIdx.x % chunks) * GB;
  const int b = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slot = lane / kLanesPerToken, col = lane % kLanesPerToken;
  const int len = context_lens[b];
  const int32_t* table = block_table + size_t(b) * max_blocks_per_seq;
  const float4* k4 = reinterpret_cast<const float4*>(k_cache);
  const float4* v4 = reinterpret_cast<const float4*>(v_cache);

  // The query float4 of each served head, unscaled: scores stay in raw units and the softmax
  // multiplies (s - m) by scale·log2(e) only AFTER subtracting the max. Pre-scaling q instead
  // would round every logit before the subtraction, an error of ~1e-4 at logits of 1e3 (the
  // lesson of exercise 02); here the extra multiply is free, decode waits on memory anyway.
  float4 q_h[GB], acc[GB];
  float m[GB], l[GB];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    q_h[g] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (g0 + g < group) {
      // TODO(2) (≈ 2 lines): load this lane's float4 (column col) of the query vector of the block's
      //          served head number g into q_h[g], as it is, unscaled (lesson: "Who serves which head").
    }
    acc[g] = make_float4(0.f, 0.f, 0.f, 0.f);
    m[g] = -INFINITY;
    l[g] = 0.f;
  }

  for (int t0 = warp * kTokensPerIter; t0 < len; t0 += kWarps * kTokensPerIter) {
    // Issue every load of this iteration before using any: 2·kUnroll independent 16-byte loads
    // per lane keep enough bytes in flight to cover DRAM latency. Tokens past len are not loaded.
    float4 k_t[kUnroll], v_t[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u * kTokensPerStep + slot;
      k_t[u] = v_t[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (t < len) {
        const int64_t off = paged_attention_kv_offset(table, t, hk, heads_kv, block_size, D);  // row start, in floats
        k_t[u] = k4[off / 4 + col];  // float4 number col of the token's row
        v_t[u] = v4[off / 4 + col];
      }
    }
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float s[kUnroll];
      float s_max = -INFINITY;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        // TODO(3) (≈ 5 lines): s[u], the raw score of head g against the token this lane loaded in step u,
        //          complete in every lane of that token; -inf for a token past the context; track the
        //          largest in s_max (lesson: "04 · One token, D/4 lanes").
      }
      // TODO(4) (≈ 10 lines): fold the kUnroll scores and V rows into head g's online-softmax state
      //          m[g], l[g], acc[g], with the same conventions as merge_state above (lesson: "04 · Raw
      //          scores, base-2 softmax").
    }
  }

  // Merge the token slots of the warp (lanes with the same column, different slot)...
#pragma unroll
  for (int off = kLanesPerToken; off < 32; off *= 2) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[g], off);
      float4 a2;
      a2.x = __shfl_xor_sync(0xffffffffu, acc[g].x, off);
      a2.y = __shfl_xor_sync(0xffffffffu, acc[g].y, off);
      a2.z = __shfl_xor_sync(0xffffffffu, acc[g].z, off);
      a2.w = __shfl_xor_sync(0xffffffffu, acc[g].w, off);
      merge_state(m[g], l[g], acc[g], m2, l2, a2, scale_log2);
    }
  }
  // ...then the warps, through shared memory.
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      part_acc[warp][g][col] = acc[g];
      if (col == 0) {
        part_m[warp][g] = m[g];
        part_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();  // all warps' partial states are written before anyone merges them

  for (int e = threadIdx.x; e < GB * kLanesPerToken; e += kWarps * 32) {
    const int g = e / kLanesPerToken, c = e % kLanesPerToken;
    if (g0 + g >= group) continue;
    float m_all = -INFINITY, l_all = 0.f;
    float4 acc_all = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int w = 0; w < kWarps; ++w)
      merge_state(m_all, l_all, acc_all, part_m[w][g], part_l[w][g], part_acc[w][g][c], scale_log2);
    // TODO(5) (≈ 3 lines): store the merged, normalised output of served head g (float4 c of its row of
    //          o); a sequence with no token outputs zeros (lesson: "04 · Merging partial states").
  }
}

template <int D, int GB>
void launch(const float* q, const float* k_cache, const float* v_cache, const int32_t* block_table,
            const int32_t* context_lens, float* o, const course::PagedParams& p, cudaStream_t stream) {
  const int chunks = (p.group_size() + GB - 1) / GB;
  const dim3 grid(unsigned(p.heads_kv * chunks), unsigned(p.batch));
  paged_decode_kernel<D, GB><<<grid, kWarps * 32, 0, stream>>>(q, k_cache, v_cache, block_table, context_lens, o,
                                                               p.heads_q, p.heads_kv, p.block_size,
                                                               p.max_blocks_per_seq, p.softmax_scale() * kLog2e);
  CUDA_CHECK_LAUNCH();
}

// Heads per block: the group size rounded up to a power of two, at most kMaxHeadsPerBlock.
template <int D>
void launch_d(const float* q, const float* k_cache, const float* v_cache, const int32_t* block_table,
              const int32_t* context_lens, float* o, const course::PagedParams& p, cudaStream_t stream) {
  const int g = p.group_size();
  if (g <= 1)
    launch<D, 1>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
  else if (g <= 2)
    launch<D, 2>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
  else if (g <= 4)
    launch<D, 4>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
  else
    launch<D, kMaxHeadsPerBlock>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

void paged_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* block_table,
                     const int32_t* context_lens, float* o, const course::PagedParams& p, cudaStream_t stream) {
  const char* fn = "paged_attention";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k_cache, fn, "k_cache");
  course::require_not_null(v_cache, fn, "v_cache");
  course::require_not_null(block_table, fn, "block_table");
  course::require_not_null(context_lens, fn, "context_lens");
  course::require_not_null(o, fn, "o");
  // float4 loads need 16-byte aligned rows (cudaMalloc gives 256-byte alignment).
  course::require(aligned16(q), fn, "q", "must be 16-byte aligned");
  course::require(aligned16(k_cache), fn, "k_cache", "must be 16-byte aligned");
  course::require(aligned16(v_cache), fn, "v_cache", "must be 16-byte aligned");
  course::require(aligned16(o), fn, "o", "must be 16-byte aligned");
  course::require_positive(p.batch, fn, "batch");
  course::require(p.batch <= 65535, fn, "batch", "must be <= 65535 (grid y)");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_q % p.heads_kv == 0, fn, "heads_kv", "must divide heads_q");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require_positive(p.block_size, fn, "block_size");
  course::require_positive(p.num_blocks, fn, "num_blocks");
  course::require_positive(p.max_blocks_per_seq, fn, "max_blocks_per_seq");
  course::require((long long)p.max_blocks_per_seq * p.block_size <= 0x7fffffffLL, fn, "max_blocks_per_seq",
                  "times block_size must fit in int");

  switch (p.head_dim) {
    case 32:
      launch_d<32>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
      break;
    case 64:
      launch_d<64>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
      break;
    default:
      launch_d<128>(q, k_cache, v_cache, block_table, context_lens, o, p, stream);
      break;
  }
}
