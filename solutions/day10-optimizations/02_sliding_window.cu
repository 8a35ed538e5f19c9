// Day 10 · Exercise 02 · sliding-window attention (fp32): band tiles only, and decode over a ring KV cache.
// Lesson: day10-optimizations/02_sliding_window/README.md. Test: make test EX=02_sliding_window
//
// The tile machinery (S_ij in registers, padded shared memory, cp.async, the exact exp2 online
// softmax) is exercise 01's, shared through flash_fp32_tiles.cuh: attend_tiles<C> walks the key
// tiles it is told to walk. What this exercise adds is only the sparsity:
//
//   * prefill: a query tile visits the key tiles that intersect its band
//     [q0 + off − w, q_last + off] and no other, so the work is O(N·w) instead of O(N²);
//     only tiles that cut through one of the band's two edges pay for the per-element mask;
//   * decode: the cache holds the last w + 1 tokens in a ring; attention does not care about
//     the order of its keys, so the kernel reads the written slots in slot order, never
//     "unrolling" the ring.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include "02_sliding_window.h"
#include "check_args.h"
#include "flash_fp32_tiles.cuh"
#include "smem_limit.h"

// ---------------------------------------------------------------------------------------------
// Index helpers of the prefill kernel (02_sliding_window.h states what each returns). Defined
// here, in the kernels' translation unit, so that nvcc inlines them into the kernels; the test
// links their host copies and checks them on the CPU.

__host__ __device__ WindowTiles window_band_tiles(int q0, int q_last, int off, int w, int seq_k, int bc) {
  WindowTiles band{0, 0};  // no tile
  // snippet-begin: band-tiles
  // The band of the whole tile: the first row's lowest key to the last row's highest key.
  const int band_lo = max(q0 + off - w, 0);
  const int band_hi = min(q_last + off, seq_k - 1);
  band.first = band_lo / bc;  // the tile holding band_lo: usually only partly visible
  band.count = band_hi < band_lo ? 0 : band_hi / bc - band.first + 1;
  // snippet-end: band-tiles
  return band;
}

__host__ __device__ bool window_tile_is_full(int kv0, int q0, int q_last, int off, int w, int bc) {
  bool full = false;  // "partial": always safe, never fast
  // snippet-begin: band-mask
  // A tile is full when every real row sees every key of it: it ends at or below the first
  // row's diagonal and starts at or above the last row's window edge. Only the tiles that cut
  // an edge of the band pay for the per-element test.
  full = kv0 + bc - 1 <= q0 + off && kv0 >= q_last + off - w;
  // snippet-end: band-mask
  return full;
}

namespace {

using flash_fp32::FlashConfig;

// ---------------------------------------------------------------------------------------------
// Prefill: one block per (query tile, query head, batch). Query i sees keys
// [i + off − w, i + off]; w has been clamped to at most seq_k on the host (a wider window is
// plain causal), so i + off − w cannot overflow.
template <class C>
__global__ void __launch_bounds__(C::kThreads)
    sliding_window_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                          float* __restrict__ o, int heads, int group, int seq_q, int seq_k, float scale, int w) {
  constexpr int BR = C::BR, BC = C::BC, D = C::D;
  const int q0 = blockIdx.x * BR;
  const int64_t bh = int64_t(blockIdx.z) * heads + blockIdx.y;
  const int64_t bh_kv = bh / group;            // GQA: query head h reads KV head h / G
  const int off = seq_k - seq_q;               // bottom-right alignment
  const int q_last = min(q0 + BR, seq_q) - 1;  // last real row of this tile

  // Which key tiles to visit: first_tile, first_tile + 1, ..., first_tile + n_tiles - 1.
  const WindowTiles band = window_band_tiles(q0, q_last, off, w, seq_k, BC);
  const int first_tile = band.first, n_tiles = band.count;

  // Which tiles need the per-element test, and the test itself. A tail tile (keys past seq_k)
  // always does; attend_tiles hides those keys on its own.
  auto needs_mask = [=](int kv0) { return kv0 + BC > seq_k || !window_tile_is_full(kv0, q0, q_last, off, w, BC); };
  auto visible = [=](int i, int key) {
    bool seen = true;
    // snippet-begin: band-visible
    seen = key <= i + off && key >= i + off - w;  // i + off − w <= key <= i + off
    // snippet-end: band-visible
    return seen;
  };

  flash_fp32::attend_tiles<C>(
      q + bh * seq_q * D, k + bh_kv * seq_k * D, v + bh_kv * seq_k * D, o + bh * seq_q * D, q0, seq_q, seq_k, scale,
      n_tiles, [=](int t) { return (first_tile + t) * BC; }, needs_mask, visible);
}

}  // namespace

// The ring decode kernel's index helper (02_sliding_window.h), defined here for the same reason.
__host__ __device__ int ring_window_slots(int len, int capacity) {
  int n_valid = 0;  // no slot
  // snippet-begin: ring-slots
  // With capacity = w + 1, tokens max(0, len − capacity) .. len − 1 are in the window, token t in
  // slot t % capacity: before the ring wraps (len ≤ capacity) they fill slots 0 .. len − 1;
  // after, every slot holds one of them. Either way the visible keys are exactly the slots
  // [0, min(len, capacity)), in some order, and the softmax does not care about order. Slots
  // past n_valid are never loaded.
  n_valid = max(0, min(len, capacity));
  // snippet-end: ring-slots
  return n_valid;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Ring decode: one block per (group of query heads, KV head, sequence). The G query heads that
// share a KV head are consecutive rows of q [B, Hq, D], so they form one small query tile and
// every K/V slot is read once for all of them. The keys are the ring's slots [0, n_valid).
template <class C>
__global__ void __launch_bounds__(C::kThreads)
    ring_decode_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                       const float* __restrict__ v_cache, const int32_t* __restrict__ seq_lens, float* __restrict__ o,
                       int heads_q, int heads_kv, int capacity, float scale) {
  constexpr int BC = C::BC, D = C::D;
  const int group = heads_q / heads_kv;
  const int q0 = blockIdx.x * C::BR;  // first query head of this tile within the group
  const int hk = blockIdx.y, b = blockIdx.z;
  const int64_t q_off = (int64_t(b) * heads_q + int64_t(hk) * group) * D;
  const int64_t kv_off = (int64_t(b) * heads_kv + hk) * int64_t(capacity) * D;
  const int len = seq_lens[b];

  const int n_valid = ring_window_slots(len, capacity);  // the ring slots [0, n_valid) hold the window
  const int n_tiles = (n_valid + BC - 1) / BC;

  // Keys past n_valid are masked (and never copied) by attend_tiles itself, which treats
  // n_valid as seq_k; every other slot is visible to every query head.
  flash_fp32::attend_tiles<C>(
      q + q_off, k_cache + kv_off, v_cache + kv_off, o + q_off, q0, group, n_valid, scale, n_tiles,
      [=](int t) { return t * BC; }, [=](int kv0) { return kv0 + BC > n_valid; }, [](int, int) { return true; });
}

template <class C>
void launch_prefill(const float* q, const float* k, const float* v, float* o, const course::AttentionParams& p, int w,
                    cudaStream_t stream) {
  const auto kernel = sliding_window_kernel<C>;
  flash_fp32::allow_smem(kernel, C::kSmemBytes);
  const dim3 grid((p.seq_q + C::BR - 1) / C::BR, p.heads_q, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k, v, o, p.heads_q, p.group_size(), p.seq_q, p.seq_k,
                                                       p.softmax_scale(), w);
  CUDA_CHECK_LAUNCH();
}

template <class C>
void launch_decode(const float* q, const float* k_cache, const float* v_cache, const int32_t* seq_lens, float* o,
                   const course::RingCacheParams& p, cudaStream_t stream) {
  const auto kernel = ring_decode_kernel<C>;
  flash_fp32::allow_smem(kernel, C::kSmemBytes);
  const dim3 grid((p.group_size() + C::BR - 1) / C::BR, p.heads_kv, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(q, k_cache, v_cache, seq_lens, o, p.heads_q, p.heads_kv,
                                                       p.capacity(), p.softmax_scale());
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void sliding_window_attention(const float* q, const float* k, const float* v, float* o,
                              const course::AttentionParams& p, cudaStream_t stream) {
  const char* fn = "sliding_window_attention";
  flash_fp32::check_dense_args(q, k, v, o, p, fn);  // as exercise 01
  course::require_non_negative(p.window, fn, "window");
  // i + off <= seq_k − 1, so a window of seq_k or more reaches key 0 from every row: plain
  // causal. Clamping keeps i + off − w far from integer overflow.
  const int w = std::min(p.window, p.seq_k);

  const int smem_limit = course::smem_limit_per_block();
  auto go = [&](auto config) { launch_prefill<decltype(config)>(q, k, v, o, p, w, stream); };
  switch (p.head_dim) {  // the tile shapes of exercise 01 (FlashConfig<D, BR, BC, kRowsPerThread>)
    case 32:
      flash_fp32::with_first_fitting<FlashConfig<32, 64, 64, 8>>(smem_limit, go);
      break;
    case 64:
      flash_fp32::with_first_fitting<FlashConfig<64, 64, 64, 8>, FlashConfig<64, 64, 32, 8>>(smem_limit, go);
      break;
    default:
      flash_fp32::with_first_fitting<FlashConfig<128, 128, 64, 8>, FlashConfig<128, 64, 32, 8>,
                                     FlashConfig<128, 32, 32, 4>>(smem_limit, go);
      break;
  }
}

void ring_decode_attention(const float* q, const float* k_cache, const float* v_cache, const int32_t* seq_lens,
                           float* o, const course::RingCacheParams& p, cudaStream_t stream) {
  const char* fn = "ring_decode_attention";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k_cache, fn, "k_cache");
  course::require_not_null(v_cache, fn, "v_cache");
  course::require_not_null(seq_lens, fn, "seq_lens");
  course::require_not_null(o, fn, "o");
  flash_fp32::check_aligned16(q, fn, "q");
  flash_fp32::check_aligned16(k_cache, fn, "k_cache");
  flash_fp32::check_aligned16(v_cache, fn, "v_cache");
  flash_fp32::check_aligned16(o, fn, "o");
  flash_fp32::check_heads(p.batch, p.heads_q, p.heads_kv, p.head_dim, fn);
  course::require_non_negative(p.window, fn, "window");
  course::require(p.window < (1 << 30), fn, "window", "must be < 2^30 (slot indices are int)");

  // A decode "query tile" is the G query heads of one KV head: BR = 8 rows instead of prefill's
  // 64-128, so few rows are padding. The grid is only B · Hkv blocks (512 for B = 64, Hkv = 8),
  // so what matters is that all of them are resident at once: key tiles of 32 slots at D = 128
  // keep a block at 38 KiB (5 per SM on an H100); 64-slot tiles (72 KiB, 3 per SM) measured
  // 66 % of copy bandwidth there, because 512 blocks then need 1.3 waves.
  const int smem_limit = course::smem_limit_per_block();
  auto go = [&](auto config) { launch_decode<decltype(config)>(q, k_cache, v_cache, seq_lens, o, p, stream); };
  switch (p.head_dim) {
    case 32:
      flash_fp32::with_first_fitting<FlashConfig<32, 8, 64, 4>>(smem_limit, go);
      break;
    case 64:
      flash_fp32::with_first_fitting<FlashConfig<64, 8, 64, 4>>(smem_limit, go);
      break;
    default:
      flash_fp32::with_first_fitting<FlashConfig<128, 8, 32, 4>>(smem_limit, go);
      break;
  }
}
