// Day 10 · Exercise 06 · split-KV decode (flash-decoding): one query token per sequence over a paged fp16 KV cache, split along the context.
// Lesson: day10-optimizations/06_split_kv_decode/README.md. Test: make test EX=06_split_kv_decode
//
// Decode reads every K/V byte once and does ~1 FLOP per byte with it: the kernel is a memory
// copy with a dot product attached, so its speed is the fraction of HBM bandwidth it reaches.
// Day 06 ran one block per (sequence, KV head): with B = 1 that is 8 blocks on 132 SMs. Here the
// context is also cut into splits:
//   * pass 1: one block per (KV head chunk, split, sequence) walks its split's tokens, serving
//     all (up to 8) query heads of the group from each K/V row it loads, and leaves the partial
//     online-softmax state (m, ℓ, O) of each head in fp32 workspace;
//   * pass 2: one block per (query head, sequence) merges the partials of the non-empty splits
//     with the log-sum-exp rule and writes o in fp16.
// With one split, pass 1 normalises and writes o itself: no workspace, no second launch.
//
// What makes it fast (each measured on an H100: day10-optimizations/06_split_kv_decode/12-measure.md):
//   * K/V tiles stream into shared memory with cp.async, three stages deep: two 16 KiB tiles are
//     in flight while the warps compute the third, so a block never waits for HBM between tiles;
//   * about two pass-1 blocks per SM (the split rule): one leaves each scheduler a single warp,
//     too few to issue the dot products as fast as HBM delivers the rows; more than two only
//     adds partials to write and merge;
//   * the merge spreads the splits over up to 1024 threads and, on sm_90+, is launched while
//     pass 1 is still finishing (programmatic dependent launch), hiding most of its launch.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "06_split_kv_decode.h"
#include "arch/exp2.cuh"
#include "check_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"

// The tokens [begin, end) of one split (the header's contract). Pass 1 calls it on the device, the
// [index] tests on the host; defined here, in the kernel's translation unit, so nvcc inlines it.
__host__ __device__ SplitKvRange split_kv_split_range(int split, int split_len, int len) {
  // TODO(1) (≈ 3 lines): the range of split `split`: its chunk of split_len tokens, cut at the
  //          context length len, empty (end <= begin) when the chunk starts at or past len, and
  //          exact where the chunk's end would overflow an int (lesson: "Splitting the context").
  return {0, 0};  // TODO(1): replace (every split empty until then)
}

namespace {

using course::arch::copy16;
using course::arch::cp_async_commit;
using course::arch::cp_async_wait;
using course::arch::exp2_ftz;
using course::arch::kLog2e;

constexpr int kWarps = 4;             // 128 threads per pass-1 block
constexpr int kStages = 3;            // K/V tiles in shared memory: one being computed, two in flight
constexpr int kTileBytes = 8192;      // bytes of K (and of V) per tile: 48 KiB for the three stages
constexpr int kMaxHeadsPerBlock = 8;  // query heads one block serves (the contract's ceil(G / 8))
constexpr int kBlocksPerSm = 2;       // pass-1 blocks per SM the automatic split count aims for
// Registers are capped so that 4 pass-1 blocks fit on an SM (65536 / (128 · 4) = 128 each) for
// groups of up to 4 heads: uncapped, the compiler takes ~150 and only 3 fit, and with one split
// (large batches) B = 64, Hkv = 8 is 512 blocks, which then need two waves on 132 SMs instead of
// one. Groups of 8 keep 8 accumulators of 8 floats per lane and would spill at 128.
constexpr int min_blocks_per_sm(int heads_per_block) { return heads_per_block <= 4 ? 4 : 2; }
constexpr int kMinSplitTokens = 256;  // shorter splits cost more in partials and merging than they gain
constexpr int kMaxSplits = 1024;
constexpr int kMergeThreads = 1024;  // the merge block: head_dim × (up to 1024 / head_dim) split groups

// Eight fp16 values of one K or V row (one 16-byte load) as fp32.
__device__ void unpack8(const uint4& raw, float (&x)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    x[2 * i] = f.x;
    x[2 * i + 1] = f.y;
  }
}

// Token t's logical block t / block_size and slot t % block_size, without a division per token:
// the GPU has no integer divider (a division is a ~20-instruction routine) and pass 1 needs one
// per copied row. With r = floor((2^32 - 1) / block_size), computed once, floor(t·r / 2^32) is
// t / block_size or one less for every t < 2^31, and one comparison corrects it.
struct PageDivider {
  int block_size;
  unsigned reciprocal;
  __device__ explicit PageDivider(int bs) : block_size(bs), reciprocal(0xFFFFFFFFu / unsigned(bs)) {}
  __device__ void split(int t, int& block, int& slot) const {
    block = int(__umulhi(unsigned(t), reciprocal));
    slot = t - block * block_size;
    if (slot >= block_size) {
      ++block;
      slot -= block_size;
    }
  }
};

// Folds the state (m2, l2, acc2) into (m, l, acc); either may be empty (m = -inf, l = 0). Scores
// stay in raw units; exponents are (m - m_new)·scale·log2(e).
__device__ void fold_state(float& m, float& l, float (&acc)[8], float m2, float l2, const float (&acc2)[8],
                           float scale_log2) {
  const float m_new = fmaxf(m, m2);
  const float m_use = m_new == -INFINITY ? 0.f : m_new;  // both empty: avoid (-inf) - (-inf)
  const float a = exp2f((m - m_use) * scale_log2), a2 = exp2f((m2 - m_use) * scale_log2);
  l = l * a + l2 * a2;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = fmaf(a2, acc2[i], acc[i] * a);
  m = m_new;
}

// ---------------------------------------------------------------------------------------------
// Pass 1. Grid: x = KV head · head chunks, y = split, z = sequence. Each lane computes with 8
// halves (16 bytes) of a row, so D / 8 lanes cover a token and a warp covers 32 / (D / 8) tokens
// per step.
template <int D, int GB>
__global__ void __launch_bounds__(kWarps * 32, min_blocks_per_sm(GB))
    split_kv_partial_kernel(const __half* __restrict__ q, const __half* __restrict__ k_cache,
                            const __half* __restrict__ v_cache, const int32_t* __restrict__ block_table,
                            const int32_t* __restrict__ context_lens, __half* __restrict__ o,
                            float* __restrict__ part_o, float* __restrict__ part_m, float* __restrict__ part_l,
                            int heads_q, int heads_kv, int block_size, int max_blocks_per_seq, int split_len,
                            float scale_log2) {
  constexpr int kLanesPerToken = D / 8;
  constexpr int kTokensPerStep = 32 / kLanesPerToken;
  constexpr int kTile = kTileBytes / (2 * D);           // tokens per tile: 32 at D = 128
  constexpr int kWarpTokens = kTile / kWarps;           // tokens of a tile one warp computes
  constexpr int kSteps = kWarpTokens / kTokensPerStep;  // 4 for every D
  constexpr int kTileChunks = kTile * kLanesPerToken;   // 16-byte chunks of K (or of V) per tile
  constexpr int kCopiesPerThread = kTileChunks / (kWarps * 32);
  static_assert(kWarpTokens * kWarps == kTile && kSteps * kTokensPerStep == kWarpTokens,
                "a tile splits into whole warps' shares, each into whole steps of 32 lanes");
  static_assert(kCopiesPerThread * kWarps * 32 == kTileChunks, "every thread issues the same number of 16-byte copies");
  static_assert(sizeof(uint4) * kStages * 2 * kTileChunks <= 48 * 1024,
                "the stages are static shared memory: at most 48 KiB without an opt-in");
  // The pipeline's K and V tiles; once the loop is done the same bytes hold each warp's state
  // for the block-level fold (16 KiB at D = 128, GB = 8).
  __shared__ uint4 stage[kStages][2][kTileChunks];
  static_assert(sizeof(float) * kWarps * GB * (D + 2) <= sizeof(stage), "the fold's scratch must fit the stages");

  const int group = heads_q / heads_kv;
  const int chunks = (group + GB - 1) / GB;
  const int hk = blockIdx.x / chunks, g0 = (blockIdx.x % chunks) * GB;
  const int split = blockIdx.y, num_splits = gridDim.y;
  const int b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int slot = lane / kLanesPerToken, col = lane % kLanesPerToken;
  const int len = context_lens[b];

  // This split's tokens [begin, end). With more than one split, an empty split (end <= begin)
  // returns at once: it leaves no partial, and the merge reads only the splits that hold tokens.
  // With one split the block runs even for a context of 0 tokens: it writes o's zeros itself.
  const SplitKvRange range = split_kv_split_range(split, split_len, len);
  const int begin = range.begin, end = range.end;
  if (num_splits > 1 && begin >= end) return;

  const int32_t* table = block_table + size_t(b) * max_blocks_per_seq;
  const uint4* k8 = reinterpret_cast<const uint4*>(k_cache);
  const uint4* v8 = reinterpret_cast<const uint4*>(v_cache);
  const int n_tiles = (end - begin + kTile - 1) / kTile;
  const PageDivider pages(block_size);

  // Starts copying tile j (tokens begin + j·kTile ...) into stage j % kStages. Consecutive
  // threads copy consecutive 16 bytes. Tokens at or past `end` are zero-filled, never read: past
  // len they may be NaN, past the split they belong to another block.
  auto load_tile = [&](int j) {
#pragma unroll
    for (int i = 0; i < kCopiesPerThread; ++i) {
      const int c = threadIdx.x + i * kWarps * 32;
      const int t = begin + j * kTile + c / kLanesPerToken;
      size_t row = 0;
      if (t < end) {
        int block = 0, slot_in_block = 0;
        pages.split(t, block, slot_in_block);
        row = (size_t(table[block]) * heads_kv + hk) * block_size + slot_in_block;
      }
      const size_t src = row * kLanesPerToken + c % kLanesPerToken;
      copy16(reinterpret_cast<float*>(&stage[j % kStages][0][c]), reinterpret_cast<const float*>(k8 + src), t < end);
      copy16(reinterpret_cast<float*>(&stage[j % kStages][1][c]), reinterpret_cast<const float*>(v8 + src), t < end);
    }
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < n_tiles) load_tile(j);
    cp_async_commit();  // possibly empty: every iteration below then waits for the same group count
  }

  // Query chunk of each served head (fp32, unscaled: the scale multiplies s - m, see day 06).
  float q_h[GB][8], acc[GB][8], m[GB], l[GB];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);
    if (g0 + g < group)
      raw = reinterpret_cast<const uint4*>(q)[(size_t(b) * heads_q + hk * group + g0 + g) * kLanesPerToken + col];
    unpack8(raw, q_h[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.f;
    m[g] = -INFINITY;
    l[g] = 0.f;
  }

  for (int j = 0; j < n_tiles; ++j) {
    cp_async_wait<kStages - 2>();  // this thread's copies of tile j have landed ...
    __syncthreads();  // ... and everyone's; and every warp is done with tile j − 1, whose stage the load below refills
    if (j + kStages - 1 < n_tiles) load_tile(j + kStages - 1);
    cp_async_commit();

    // This warp's kWarpTokens rows of the tile, kTokensPerStep per step.
    const uint4* k_rows = &stage[j % kStages][0][warp * kWarpTokens * kLanesPerToken];
    const uint4* v_rows = &stage[j % kStages][1][warp * kWarpTokens * kLanesPerToken];
    const int t0 = begin + j * kTile + warp * kWarpTokens;
    const bool full = begin + (j + 1) * kTile <= end;  // no token of the tile is masked (all but the last)
    float s[GB][kSteps];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      float k_t[8];
      unpack8(k_rows[(u * kTokensPerStep + slot) * kLanesPerToken + col], k_t);
      const bool real = full || t0 + u * kTokensPerStep + slot < end;
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(q_h[g][i], k_t[i], dot);
#pragma unroll
        for (int off = kLanesPerToken / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        s[g][u] = real ? dot : -INFINITY;
      }
    }
    // TODO(2) (≈ 25 lines): fold this tile's scores s[g][u] and the matching V rows (v_rows)
    //          into each served head's running state (m[g], l[g], acc[g]) with the online
    //          softmax, so that after the split's last tile they are its (m_s, ℓ_s, O_s). A masked
    //          token (s = −inf) adds nothing, and no NaN appears while a state has seen only
    //          masked tokens; unpack each V row once for all heads (lesson: "The partial online
    //          softmax").
  }
  cp_async_wait<0>();
  __syncthreads();  // no copy in flight and no warp still reading a tile: the stages become the fold's scratch
  float* scratch = reinterpret_cast<float*>(&stage[0][0][0]);
  auto& sh_acc = *reinterpret_cast<float(*)[kWarps][GB][D]>(scratch);
  auto& sh_m = *reinterpret_cast<float(*)[kWarps][GB]>(scratch + kWarps * GB * D);
  auto& sh_l = *reinterpret_cast<float(*)[kWarps][GB]>(scratch + kWarps * GB * (D + 1));

  // Fold the token slots of a warp (lanes with the same column), then the warps via shared memory.
#pragma unroll
  for (int off = kLanesPerToken; off < 32; off *= 2) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float acc2[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc2[i] = __shfl_xor_sync(0xffffffffu, acc[g][i], off);
      const float m2 = __shfl_xor_sync(0xffffffffu, m[g], off);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[g], off);
      fold_state(m[g], l[g], acc[g], m2, l2, acc2, scale_log2);
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
#pragma unroll
      for (int i = 0; i < 8; ++i) sh_acc[warp][g][col * 8 + i] = acc[g][i];
      if (col == 0) {
        sh_m[warp][g] = m[g];
        sh_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();  // every warp's state is in shared memory before anyone folds them

  for (int e = threadIdx.x; e < GB * kLanesPerToken; e += kWarps * 32) {
    const int g = e / kLanesPerToken, c = e % kLanesPerToken;
    if (g0 + g >= group) continue;
    float m_all = -INFINITY, l_all = 0.f, acc_all[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int w = 0; w < kWarps; ++w) {
      float acc_w[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc_w[i] = sh_acc[w][g][c * 8 + i];
      fold_state(m_all, l_all, acc_all, sh_m[w][g], sh_l[w][g], acc_w, scale_log2);
    }
    const size_t row = size_t(b) * heads_q + hk * group + g0 + g;
    if (num_splits == 1) {
      // The whole context in one block: normalise and write o directly (context 0: zeros).
      const float inv_l = l_all > 0.f ? 1.f / l_all : 0.f;
      __align__(16) __half2 out[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) out[i] = __floats2half2_rn(acc_all[2 * i] * inv_l, acc_all[2 * i + 1] * inv_l);
      reinterpret_cast<uint4*>(o)[row * kLanesPerToken + c] = *reinterpret_cast<const uint4*>(out);
    } else {
      // The partial stays fp32 and unnormalised: ℓ alone can pass 65504 (fp16's largest value)
      // within one split, and rounding O to fp16 here would add an error the merge cannot undo.
      const size_t prow = row * num_splits + split;
      float4* dst = reinterpret_cast<float4*>(part_o + prow * D + c * 8);
      dst[0] = make_float4(acc_all[0], acc_all[1], acc_all[2], acc_all[3]);
      dst[1] = make_float4(acc_all[4], acc_all[5], acc_all[6], acc_all[7]);
      if (c == 0) {
        part_m[prow] = m_all;
        part_l[prow] = l_all;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Pass 2. Grid: x = query head, y = sequence. Block: D × groups threads; thread (d, r) folds
// element d of splits r, r + groups, r + 2·groups, ..., then group 0 folds the groups together.
// With ~33 splits one thread per element would wait for 33 loads in a row; 8 groups wait for 5.
template <int D>
__global__ void __launch_bounds__(kMergeThreads)
    split_kv_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_m,
                          const float* __restrict__ part_l, const int32_t* __restrict__ context_lens,
                          __half* __restrict__ o, int heads_q, int num_splits, int split_len, float scale_log2) {
  __shared__ float sh_acc[kMergeThreads];
  __shared__ float sh_m[kMergeThreads / D], sh_l[kMergeThreads / D];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent of pass 1 (sm_90+): this block may start before pass 1
  // has finished, and waits here until all of pass 1's writes are visible. Without that launch
  // attribute (older GPUs) the wait returns at once: the stream already ordered the kernels.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int groups = blockDim.x / D;
  const int d = threadIdx.x % D, r = threadIdx.x / D;
  const size_t row = size_t(blockIdx.y) * heads_q + blockIdx.x;
  const int len = context_lens[blockIdx.y];
  const float* pm = part_m + row * num_splits;
  const float* pl = part_l + row * num_splits;
  const float* po = part_o + row * num_splits * D + d;

  // Split s holds tokens iff s · split_len < len: only those left a partial in the workspace.
  const int used = min(int((int64_t(len) + split_len - 1) / split_len), num_splits);
  float m = -INFINITY, l = 0.f, acc = 0.f;  // this thread's fold of its splits (none yet)
  // TODO(3) (≈ 10 lines): fold the partials of this thread's splits (r, r + groups, ... below
  //          `used`; their m_s, ℓ_s and element d of O_s in pm, pl, po) one after the other into
  //          (m, l, acc), the running state the code below combines across groups (lesson:
  //          "Merging the partials").
  sh_acc[threadIdx.x] = acc;
  if (d == 0) {
    sh_m[r] = m;
    sh_l[r] = l;
  }
  __syncthreads();  // every group's (m, ℓ, acc) is in shared memory before group 0 folds them
  if (r != 0) return;
  float m_all = -INFINITY;
  for (int i = 0; i < groups; ++i) m_all = fmaxf(m_all, sh_m[i]);
  float l_all = 0.f, acc_all = 0.f;
  if (m_all != -INFINITY) {  // context 0: no split held a token, the output is zeros
    for (int i = 0; i < groups; ++i) {
      const float w = exp2f((sh_m[i] - m_all) * scale_log2);  // 0 for a group that folded nothing
      l_all = fmaf(w, sh_l[i], l_all);
      acc_all = fmaf(w, sh_acc[i * D + d], acc_all);
    }
  }
  o[row * D + d] = __float2half_rn(l_all > 0.f ? acc_all / l_all : 0.f);
}

// ---------------------------------------------------------------------------------------------
// Host side.

using PartialKernel = void (*)(const __half*, const __half*, const __half*, const int32_t*, const int32_t*, __half*,
                               float*, float*, float*, int, int, int, int, int, float);

template <int D>
PartialKernel pick_for_group(int group) {
  // Heads per block: the group size rounded up to a power of two, at most kMaxHeadsPerBlock.
  if (group <= 1) return split_kv_partial_kernel<D, 1>;
  if (group <= 2) return split_kv_partial_kernel<D, 2>;
  if (group <= 4) return split_kv_partial_kernel<D, 4>;
  return split_kv_partial_kernel<D, kMaxHeadsPerBlock>;
}

PartialKernel pick_kernel(const course::PagedParams& p) {
  switch (p.head_dim) {
    case 32:
      return pick_for_group<32>(p.group_size());
    case 64:
      return pick_for_group<64>(p.group_size());
    default:
      return pick_for_group<128>(p.group_size());
  }
}

void check_params(const course::PagedParams& p, const SplitKvOptions& opt, const char* fn) {
  course::require_positive(p.batch, fn, "batch");
  course::require(p.batch <= 65535, fn, "batch", "must be <= 65535 (grid z)");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require(p.heads_q <= 65535, fn, "heads_q", "must be <= 65535 (merge grid x)");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require(p.heads_q % p.heads_kv == 0, fn, "heads_kv", "must divide heads_q");
  course::require(p.head_dim == 32 || p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 32, 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require_positive(p.block_size, fn, "block_size");
  course::require_positive(p.num_blocks, fn, "num_blocks");
  course::require_positive(p.max_blocks_per_seq, fn, "max_blocks_per_seq");
  course::require((long long)p.max_blocks_per_seq * p.block_size <= 0x7fffffffLL, fn, "max_blocks_per_seq",
                  "times block_size must fit in int");
  course::require(opt.num_splits >= 0 && opt.num_splits <= kMaxSplits, fn, "num_splits",
                  "must be 0 (automatic) or in [1, 1024] (got " + std::to_string(opt.num_splits) + ")");
}

int device_attribute(cudaDeviceAttr attr) {
  int dev = 0, value = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, dev));
  return value;
}

int splits_for(const course::PagedParams& p, const SplitKvOptions& opt) {
  if (opt.num_splits > 0) return opt.num_splits;
  const long long window = (long long)p.max_blocks_per_seq * p.block_size;
  const int chunks = (p.group_size() + kMaxHeadsPerBlock - 1) / kMaxHeadsPerBlock;
  const long long base = (long long)p.batch * p.heads_kv * chunks;  // blocks with one split
  // About kBlocksPerSm blocks per SM, all in one wave: the nearest whole number of splits
  // (B = 1, 8 KV heads, 132 SMs: 264 / 8 = 33; B = 16: 264 / 128 → 2; B >= 23: 1).
  const long long wanted = (long long)kBlocksPerSm * device_attribute(cudaDevAttrMultiProcessorCount);
  const long long longest = std::min<long long>((window + kMinSplitTokens - 1) / kMinSplitTokens, kMaxSplits);
  return int(std::max(1LL, std::min((wanted + base / 2) / base, longest)));
}

int split_length(const course::PagedParams& p, int num_splits) {
  const long long window = (long long)p.max_blocks_per_seq * p.block_size;
  return int((window + num_splits - 1) / num_splits);
}

// Pass 2 as a programmatic dependent launch where the GPU has it (sm_90+): its blocks are
// scheduled while pass 1's last blocks still run, and wait in the kernel for pass 1's results.
template <int D>
void launch_merge(const float* part_o, const float* part_m, const float* part_l, const int32_t* context_lens, __half* o,
                  const course::PagedParams& p, int splits, int split_len, float scale_log2, cudaStream_t stream) {
  cudaLaunchAttribute overlap[1] = {};
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(p.heads_q), unsigned(p.batch));
  cfg.blockDim = dim3(unsigned(D * std::min(splits, kMergeThreads / D)));
  cfg.stream = stream;
  cfg.attrs = overlap;
  cfg.numAttrs = device_attribute(cudaDevAttrComputeCapabilityMajor) >= 9 ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, split_kv_merge_kernel<D>, part_o, part_m, part_l, context_lens, o, p.heads_q,
                                splits, split_len, scale_log2));
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

int split_kv_decode_num_splits(const course::PagedParams& p, const SplitKvOptions& opt) {
  check_params(p, opt, "split_kv_decode_num_splits");
  return splits_for(p, opt);
}

size_t split_kv_decode_workspace_bytes(const course::PagedParams& p, const SplitKvOptions& opt) {
  check_params(p, opt, "split_kv_decode_workspace_bytes");
  const int splits = splits_for(p, opt);
  if (splits == 1) return 0;
  return size_t(p.batch) * p.heads_q * splits * (p.head_dim + 2) * sizeof(float);
}

void split_kv_decode(const __half* q, const __half* k_cache, const __half* v_cache, const int32_t* block_table,
                     const int32_t* context_lens, __half* o, float* workspace, const course::PagedParams& p,
                     cudaStream_t stream, const SplitKvOptions& opt) {
  const char* fn = "split_kv_decode";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k_cache, fn, "k_cache");
  course::require_not_null(v_cache, fn, "v_cache");
  course::require_not_null(block_table, fn, "block_table");
  course::require_not_null(context_lens, fn, "context_lens");
  course::require_not_null(o, fn, "o");
  // 16-byte loads and stores of 8 halves need 16-byte aligned rows (cudaMalloc gives 256).
  course::require(aligned16(q), fn, "q", "must be 16-byte aligned");
  course::require(aligned16(k_cache), fn, "k_cache", "must be 16-byte aligned");
  course::require(aligned16(v_cache), fn, "v_cache", "must be 16-byte aligned");
  course::require(aligned16(o), fn, "o", "must be 16-byte aligned");
  check_params(p, opt, fn);
  const int splits = splits_for(p, opt);
  if (splits > 1) {
    course::require_not_null(workspace, fn, "workspace");
    course::require(aligned16(workspace), fn, "workspace", "must be 16-byte aligned");
  }

  // Workspace layout: O partials [B, Hq, S, D], then m [B, Hq, S], then ℓ [B, Hq, S].
  const size_t rows = size_t(p.batch) * p.heads_q * splits;
  float* part_o = splits > 1 ? workspace : nullptr;
  float* part_m = splits > 1 ? workspace + rows * p.head_dim : nullptr;
  float* part_l = splits > 1 ? part_m + rows : nullptr;
  const int split_len = split_length(p, splits);
  const float scale_log2 = p.softmax_scale() * kLog2e;

  // ceil(G / 8) head chunks per KV head: a group of at most kMaxHeadsPerBlock = 8 query heads fits
  // one block of the kernel picked (1, 2, 4 or 8 heads per block), a larger one takes ceil(G / 8).
  const int chunks = (p.group_size() + kMaxHeadsPerBlock - 1) / kMaxHeadsPerBlock;
  const dim3 grid1(unsigned(p.heads_kv * chunks), unsigned(splits), unsigned(p.batch));
  pick_kernel(p)<<<grid1, kWarps * 32, 0, stream>>>(q, k_cache, v_cache, block_table, context_lens, o, part_o, part_m,
                                                    part_l, p.heads_q, p.heads_kv, p.block_size, p.max_blocks_per_seq,
                                                    split_len, scale_log2);
  CUDA_CHECK_LAUNCH();
  if (splits == 1) return;
  switch (p.head_dim) {
    case 32:
      launch_merge<32>(part_o, part_m, part_l, context_lens, o, p, splits, split_len, scale_log2, stream);
      break;
    case 64:
      launch_merge<64>(part_o, part_m, part_l, context_lens, o, p, splits, split_len, scale_log2, stream);
      break;
    default:
      launch_merge<128>(part_o, part_m, part_l, context_lens, o, p, splits, split_len, scale_log2, stream);
  }
}
