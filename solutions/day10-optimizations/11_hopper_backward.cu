// Day 10 · Exercise 11 · FlashAttention-3-style backward on Hopper: wgmma, TMA, warp specialization
// Lesson: day10-optimizations/11_hopper_backward/README.md. Test: make test EX=11_hopper_backward
//
// Three kernels. (1) bwd_rows_kernel: per query row, L·log2 e (+inf where no key is seen or past
// Nq, so that P = 0 there with no mask) and D_i = rowsum(dO_i ∘ O_i); the dQ accumulator and the
// deterministic mode's counters zeroed. (3) bwd_dq_kernel: dQ = scale · accumulator, un-permuted
// and rounded. (2) hopper_bwd_kernel, one thread block per (batch, KV head, Bc = 128 keys):
//   warpgroup 0, the producer: thread 0 issues every copy (K_j, V_j once; per step Q_i, dO_i
//     with TMA, L_i and D_i with bulk copies) into a ring of stages; in the kDqReduce rung
//     thread 32 hands each step's dQ piece to the copy engine (one bulk reduce-add); thread 64
//     is the watchdog;
//   warpgroups 1 and 2, the consumers: 64 keys each (the M of wgmma), registers raised to 240:
//     Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ with keys on the rows, so that Pᵀ and dSᵀ come out of
//     the accumulator already in the A-operand layout of dV += Pᵀ dO_i and dK += dSᵀ Q_i (taken
//     from registers, dO_i and Q_i read transposed by the instruction); dSᵀ also goes to shared
//     memory, where dQ_i = dS K_j reads it transposed. dK and dV stay in registers to the end.
// A step is one (query head of the group, query tile) pair: GQA's G heads run in one block, so
// their dK, dV add up in registers without atomics.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "11_hopper_backward.h"
#include "arch/exp2.cuh"
#include "arch/sm80.cuh"
#include "arch/sm90.cuh"
#include "check_attention_args.h"
#include "cuda_check.h"
#include "smem_limit.h"

// ---- index helpers (11_hopper_backward.h), host and device -----------------------------------
// snippet-begin: acc-layout
__host__ __device__ int hbwd_acc_key(int t, int i) {
  return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2);  // warp w: keys 16w .. 16w + 15
}

__host__ __device__ int hbwd_acc_query(int t, int i) {
  return 8 * (i / 4) + 2 * (t % 4) + i % 2;  // 4 elements per 8-query block
}
// snippet-end: acc-layout

// snippet-begin: ds-offset
__host__ __device__ uint32_t hbwd_ds_offset(int key, int query) {
  const int plane = query / 64, col = query % 64;  // 64 queries = one 128-byte row per key
  const int chunk = (col / 8) ^ (key % 8);         // the 16-byte chunk, XOR the row within its 8
  return uint32_t(plane * 128 * 128 + key * 128 + chunk * 16 + (col % 8) * 2);
}
// snippet-end: ds-offset

// snippet-begin: dq-coords
__host__ __device__ int hbwd_dq_row(int head_dim, int w, int t, int i) {
  const int r = hbwd_acc_key(t, i);  // the m64n64 accumulator's row
  return head_dim == 128 ? r : 64 * w + r;
}

__host__ __device__ int hbwd_dq_col(int head_dim, int w, int t, int i) {
  const int c = hbwd_acc_query(t, i);  // and its column
  return head_dim == 128 ? 64 * w + c : c;
}
// snippet-end: dq-coords

namespace {

using course::arch::exp2_ftz;
using course::arch::kLog2e;
using course::arch::smem_u32;
using course::arch::sm80::pack2;
using course::arch::sm80::unpack2;
namespace sm90 = course::arch::sm90;

// The 64-bit descriptor of a wgmma operand stored with the 128-byte swizzle (as exercise 10's
// wgmma_desc_sw128; given here: exercise 10 is where it is learned).
__device__ __forceinline__ uint64_t desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16 |
         uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32 | uint64_t(1) << 62;
}

enum NamedBarrier : int {
  kConsumerDone = 1,  // 1, 2: one consumer warpgroup's threads, before it tells the watchdog
  kDsFull = 3,        // both consumers: the whole dSᵀ of the step is in shared memory
};

// snippet-begin: config
template <class T, int D, int kStagesT, bool kDqReduceT>
struct BwdConfig {
  static constexpr int kStages = kStagesT;                   // Q_i / dO_i ring depth
  using Ring = sm90::RingState<kStages>;                     // step s's stage and parity
  static constexpr bool kDqReduce = kDqReduceT;              // dQ through shared memory + bulk reduce-add
  static constexpr int kKeysPerConsumer = 64;                // M of wgmma: one warpgroup, 64 keys
  static constexpr int kConsumers = 2;                       // consumer warpgroups
  static constexpr int kBc = kKeysPerConsumer * kConsumers;  // 128 keys per block
  static constexpr int kBr = D == 128 ? 64 : 128;            // queries per step: N of Sᵀ
  static constexpr int kWarpgroupThreads = 128;              // the unit of wgmma and of setmaxnreg
  static constexpr int kConsumerThreads = kWarpgroupThreads * kConsumers;
  static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumers);
  static constexpr int kProducerRegs = 24;      // three busy threads need almost nothing
  static constexpr int kConsumerRegs = 240;     // 24·128 + 240·256 = 168·384
  static constexpr int kSwizzleRowBytes = 128;  // the 128-byte swizzle's row: 64 values
  static constexpr int kSwizzleCols = kSwizzleRowBytes / int(sizeof(T));
  static constexpr int kSwizzleAtomBytes = 8 * kSwizzleRowBytes;  // the pattern repeats every 1024 bytes
  static constexpr int kColBlocks = D / kSwizzleCols;             // 64-column blocks of a row of D values
  static constexpr int kKVBlockBytes = kBc * kSwizzleRowBytes;    // one column block of K_j or V_j
  static constexpr int kKVTileBytes = kKVBlockBytes * kColBlocks;
  static constexpr int kQBlockBytes = kBr * kSwizzleRowBytes;  // one column block of Q_i or dO_i
  static constexpr int kQTileBytes = kQBlockBytes * kColBlocks;
  static constexpr int kRowStatBytes = kBr * 4;                 // L_i or D_i of a step, fp32
  static constexpr int kDsPlaneBytes = kBc * kSwizzleRowBytes;  // dSᵀ: 128 keys × 64 queries
  static constexpr int kDsBytes = kDsPlaneBytes * (kBr / 64);
  static constexpr int kDqTileFloats = kBr * D;   // a query tile's dQ piece
  static constexpr int kDqPieceFloats = 64 * 64;  // one consumer's part of it
  static constexpr int kKSteps = D / 16;          // Sᵀ, dPᵀ: k = head dim
  static constexpr int kQSteps = kBr / 16;        // dV, dK: k = queries
  static constexpr int kKeySteps = kBc / 16;      // dQ: k = keys
  static constexpr int kAccS = kBr / 2;           // Sᵀ (and dPᵀ) elements per thread
  static constexpr int kAccKV = D / 2;            // dK (and dV) elements per thread
  static constexpr int kAccDq = kDqPieceFloats / kWarpgroupThreads;
  static constexpr int kReleaseArrivals = 4 * kConsumers;  // one per consumer warp
  // dQ tiles in shared memory: at D = 128 one fills while the other drains; at D = 64 (twice the
  // dSᵀ bytes) only one fits.
  static constexpr int kDqBuffers = kDqReduce ? (D == 128 ? 2 : 1) : 0;
  using DqRing = sm90::RingState<kDqBuffers == 2 ? 2 : 1>;
  static constexpr int kBarriers =
      1 + 2 * kStages + 2 * 2 + 1;  // KV full; Q full/empty per stage; dQ full/empty ×2; done
  static constexpr size_t kSmemBytes =
      kSwizzleAtomBytes + 2 * size_t(kKVTileBytes) + 2 * size_t(kStages) * kQTileBytes + 2 * size_t(kDsBytes) +
      kDqBuffers * 4 * size_t(kDqTileFloats) + 2 * 2 * size_t(kRowStatBytes) + 8 * kBarriers;
  static constexpr int kRegsAtEntry = sm90::kRegsPerSm / kThreads / 8 * 8;

  static_assert(D == 64 || D == 128, "head dims 64 and 128");
  static_assert(D % kSwizzleCols == 0 && kBr % 64 == 0, "rows of Q, K, V and dSᵀ are whole 128-byte swizzle rows");
  static_assert(kDqTileFloats == kConsumers * kDqPieceFloats, "each consumer computes one 64 × 64 piece of dQ_i");
  static_assert(kSmemBytes <= size_t(sm90::kMaxSmemPerBlock),
                "K_j, V_j, the Q_i/dO_i ring, two dSᵀ buffers and dQ_i must fit the opt-in shared memory");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumerThreads <= kRegsAtEntry * kThreads,
                "what the producer gives back must cover what the consumers take");
};
// snippet-end: config

template <int kStages>
struct Barriers {
  uint64_t kv_full;
  uint64_t q_full[kStages];   // Q_i, dO_i, L_i, D_i of the step have landed
  uint64_t q_empty[kStages];  // the 8 consumer warps are done reading them
  uint64_t dq_full[2];        // kDqReduce: both consumers' dQ pieces are in the step's dQ buffer
  uint64_t dq_empty[2];       // kDqReduce: the copy engine has read that buffer
  uint64_t done;              // both consumers finished (for the watchdog)
};

// Where the block's shared memory goes (offsets from the 1024-aligned base).
template <class C>
struct SmemLayout {
  static constexpr size_t kK = 0;
  static constexpr size_t kV = kK + C::kKVTileBytes;
  static constexpr size_t kQ = kV + C::kKVTileBytes;
  static constexpr size_t kDO = kQ + size_t(C::kStages) * C::kQTileBytes;
  static constexpr size_t kDs = kDO + size_t(C::kStages) * C::kQTileBytes;  // two buffers
  static constexpr size_t kDq = kDs + 2 * size_t(C::kDsBytes);
  static constexpr size_t kL = kDq + C::kDqBuffers * 4 * size_t(C::kDqTileFloats);
  static constexpr size_t kBar = kL + 4 * size_t(C::kRowStatBytes);  // two buffers of [L: Br, D_i: Br]
  static_assert(kDs % C::kSwizzleAtomBytes == 0, "dSᵀ must start on a swizzle atom");
  static_assert(kBar + sizeof(Barriers<C::kStages>) + C::kSwizzleAtomBytes <= C::kSmemBytes, "layout fits");
};

// The query tiles that hold a row seeing at least one key of the block whose first key is k0.
// A step s of the block is (query head bh_q0 + s / n, query tile tile(s)), n = end − begin: the
// heads one after the other, and within a head the tiles from the last to the first. The order
// matters in the deterministic mode, where key block j adds to a tile only after block j − 1:
// walking down, every block starts on the same last tile and block j trails block j − 1 by one
// step; walking up, block j would start on tiles that block j − 1 reaches last, and wait.
struct TileRange {
  int begin, end;
  __device__ __forceinline__ int tile(int s) const { return end - 1 - s % (end - begin); }
};
__device__ __forceinline__ TileRange query_tiles(int k0, int Nq, int Nk, bool causal, int br) {
  const int first_row = causal ? k0 - (Nk - Nq) : 0;
  return {first_row > 0 ? first_row / br : 0, (Nq + br - 1) / br};
}

__device__ __forceinline__ uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- (1) per row: L·log2 e, D_i; the accumulator and counters zeroed -------------------------
// One warp per row of the padded [B·Hq, Nq'] grid; lane l reads D/32 values of O and dO.
template <class T, int D>
__global__ void __launch_bounds__(256)
    bwd_rows_kernel(const T* __restrict__ o, const T* __restrict__ d_o, const float* __restrict__ lse,
                    float* __restrict__ lse2, float* __restrict__ delta, float* __restrict__ dq_acc,
                    uint32_t* __restrict__ counters, int Nq, int Nq_pad, int64_t padded_rows) {
  constexpr int kPer = D / 32;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= padded_rows) return;  // whole warps: padded_rows·32 threads
  const int64_t bh = row / Nq_pad;
  const int i = int(row % Nq_pad);
  float sum = 0.f;
  if (i < Nq) {
    const int64_t src = (bh * Nq + i) * D + lane * kPer;
#pragma unroll
    for (int c = 0; c < kPer; c += 2) {
      // snippet-begin: delta
      const float2 a = unpack2<T>(*reinterpret_cast<const uint32_t*>(o + src + c));
      const float2 g = unpack2<T>(*reinterpret_cast<const uint32_t*>(d_o + src + c));
      sum = fmaf(a.x, g.x, fmaf(a.y, g.y, sum));
      // snippet-end: delta
    }
  }
#pragma unroll
  for (int m = 16; m > 0; m /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  float* z = dq_acc + row * D + lane * kPer;
#pragma unroll
  for (int c = 0; c < kPer; ++c) z[c] = 0.f;
  if (lane == 0) {
    const float l = i < Nq ? lse[bh * Nq + i] : -INFINITY;
    // +inf: exp2(s − inf) = 0, so rows that see nothing (and padding rows) need no mask.
    lse2[row] = l == -INFINITY ? INFINITY : l * kLog2e;
    delta[row] = sum;
    if (i % 64 == 0) counters[row / 64] = 0;
  }
}

// ---- (3) dQ = scale · accumulator, from the consumers' order to row-major ------------------
template <class T, int D>
__global__ void __launch_bounds__(256)
    bwd_dq_kernel(const float* __restrict__ dq_acc, T* __restrict__ dq, int Nq, int Nq_pad, int64_t n4, float scale) {
  constexpr int kBr = D == 128 ? 64 : 128;
  constexpr int kTile4 = kBr * D / 4;  // float4s per query tile
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < n4; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t tile = g / kTile4;
    const int e = int(g % kTile4), w = e / 1024, f = (e % 1024) / 128, t = e % 128;
    const int64_t bh = tile / (Nq_pad / kBr);
    const int q0 = int(tile % (Nq_pad / kBr)) * kBr;
    const float4 a = reinterpret_cast<const float4*>(dq_acc)[g];
    const int row0 = q0 + hbwd_dq_row(D, w, t, 4 * f), col = hbwd_dq_col(D, w, t, 4 * f);
    T* out = dq + (bh * Nq) * D + col;
    // snippet-begin: dq-scale
    if (row0 < Nq) *reinterpret_cast<uint32_t*>(out + int64_t(row0) * D) = pack2<T>(scale * a.x, scale * a.y);
    if (row0 + 8 < Nq) *reinterpret_cast<uint32_t*>(out + int64_t(row0 + 8) * D) = pack2<T>(scale * a.z, scale * a.w);
    // snippet-end: dq-scale
  }
}

// ---- (2) the main kernel --------------------------------------------------------------------
struct BwdArgs {
  const float* lse2;
  const float* delta;
  float* dq_acc;
  uint32_t* counters;
  int Nq_pad;
  float scale;
  bool deterministic;
};

// ---- the producer: thread 0 ------------------------------------------------------------------
template <class C, class T>
__device__ __forceinline__ void produce(const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                        const CUtensorMap* tm_do, unsigned char* base, Barriers<C::kStages>& bar,
                                        const BwdArgs& a, int k0, int bh_kv, int bh_q0, int G, TileRange tiles) {
  using L = SmemLayout<C>;
  sm90::tma_prefetch_map(tm_q);
  sm90::tma_prefetch_map(tm_k);
  sm90::tma_prefetch_map(tm_v);
  sm90::tma_prefetch_map(tm_do);
  sm90::mbar_arrive_expect_tx(&bar.kv_full, 2 * C::kKVTileBytes);
#pragma unroll
  for (int cb = 0; cb < C::kColBlocks; ++cb) {
    sm90::tma_load_3d(base + L::kK + cb * C::kKVBlockBytes, tm_k, cb * C::kSwizzleCols, k0, bh_kv, &bar.kv_full);
    sm90::tma_load_3d(base + L::kV + cb * C::kKVBlockBytes, tm_v, cb * C::kSwizzleCols, k0, bh_kv, &bar.kv_full);
  }
  const int n_tiles = tiles.end - tiles.begin;
  // snippet-begin: producer-loop
  for (int s = 0; s < G * n_tiles; ++s) {
    const auto ring = C::Ring::at(s);
    const int st = ring.stage;
    const int bh = bh_q0 + s / n_tiles, q0 = tiles.tile(s) * C::kBr;
    sm90::mbar_wait(&bar.q_empty[st], ring.empty_parity());
    sm90::mbar_arrive_expect_tx(&bar.q_full[st], 2 * C::kQTileBytes);
#pragma unroll
    for (int cb = 0; cb < C::kColBlocks; ++cb) {
      const size_t off = size_t(st) * C::kQTileBytes + cb * C::kQBlockBytes;
      sm90::tma_load_3d(base + L::kQ + off, tm_q, cb * C::kSwizzleCols, q0, bh, &bar.q_full[st]);
      sm90::tma_load_3d(base + L::kDO + off, tm_do, cb * C::kSwizzleCols, q0, bh, &bar.q_full[st]);
    }
  }
  // snippet-end: producer-loop
}

// ---- the dQ writer (kDqReduce): thread 32 --------------------------------------------------
template <class C>
__device__ __forceinline__ void reduce_dq(unsigned char* base, Barriers<C::kStages>& bar, const BwdArgs& a,
                                          int key_block, int bh_q0, int G, TileRange tiles) {
  using L = SmemLayout<C>;
  const int n_tiles = tiles.end - tiles.begin;
  // snippet-begin: dq-reduce
  for (int s = 0; s < G * n_tiles; ++s) {
    const int bh = bh_q0 + s / n_tiles, qt = tiles.tile(s);
    const int64_t row = int64_t(bh) * a.Nq_pad + int64_t(qt) * C::kBr;
    uint32_t* counter = a.counters + row / 64;
    const auto buf = C::DqRing::at(s);  // the dQ buffer of step s, its use number's parity
    const float* piece = reinterpret_cast<const float*>(base + L::kDq) + buf.stage * C::kDqTileFloats;
    sm90::mbar_wait(&bar.dq_full[buf.stage], buf.full_parity());
    if (a.deterministic) {  // key block k adds after key blocks 0 .. k-1, in that order
      while (load_acquire(counter) != uint32_t(key_block)) {}
      asm volatile("fence.proxy.async.global;\n" ::: "memory");
    }
    sm90::bulk_reduce_add_f32(a.dq_acc + row * (C::kDqTileFloats / C::kBr), piece, 4 * C::kDqTileFloats);
    sm90::bulk_commit();
    sm90::bulk_wait_read_all();
    sm90::mbar_arrive(&bar.dq_empty[buf.stage]);  // the consumers may write this buffer again
    if (a.deterministic) {
      sm90::bulk_wait_all();
      asm volatile("fence.proxy.async.global;\n" ::: "memory");
      __threadfence();
      atomicAdd(counter, 1u);
    }
  }
  // snippet-end: dq-reduce
  sm90::bulk_wait_all();  // no copy may outlive the block
}

// Element ci of step s's (L·log2 e, D_i) rows: L's Br values, then D's.
template <class C>
__device__ __forceinline__ float step_stat(const BwdArgs& a, int bh_q0, TileRange tiles, int s, int ci) {
  const int n_tiles = tiles.end - tiles.begin;
  const int64_t row = int64_t(bh_q0 + s / n_tiles) * a.Nq_pad + int64_t(tiles.tile(s)) * C::kBr;
  return ci < C::kBr ? a.lse2[row + ci] : a.delta[row + ci - C::kBr];
}

// ---- the consumers' GEMMs ----------------------------------------------------------------------
// Sᵀ (or dPᵀ) = A·Bᵀ, 64 keys × Br queries: A = the warpgroup's 64 rows of K_j (V_j), B = Q_i
// (dO_i), both K-major: kKSteps wgmma's, a k-step moving both start addresses.
template <class C, class T>
__device__ __forceinline__ void gemm_keys_queries(float (&acc)[C::kAccS], uint32_t a_addr, uint32_t b_addr) {
  const uint64_t da = desc_sw128(a_addr, 16, C::kSwizzleAtomBytes), db = desc_sw128(b_addr, 16, C::kSwizzleAtomBytes);
#pragma unroll
  for (int kk = 0; kk < C::kKSteps; ++kk) {
    const uint64_t a_step = ((kk / 4) * C::kKVBlockBytes + (kk % 4) * 32) / 16;
    const uint64_t b_step = ((kk / 4) * C::kQBlockBytes + (kk % 4) * 32) / 16;
    if constexpr (C::kBr == 64)
      sm90::wgmma_m64n64k16_ss<T>(acc, da + a_step, db + b_step, kk > 0);
    else
      sm90::wgmma_m64n128k16_ss<T>(acc, da + a_step, db + b_step, kk > 0);
  }
}

// acc (64 keys × D) += A · B: A from registers (Pᵀ or dSᵀ, k = queries), B = dO_i or Q_i read
// transposed (N-major: its rows are the k dimension, its 64-column blocks kQBlockBytes apart).
template <class C, class T, int D>
__device__ __forceinline__ void gemm_kv(float (&acc)[C::kAccKV], const uint32_t (&a)[C::kQSteps][4], uint32_t b_addr) {
  const uint64_t db = desc_sw128(b_addr, C::kQBlockBytes, C::kSwizzleAtomBytes);
#pragma unroll
  for (int kk = 0; kk < C::kQSteps; ++kk) {
    const uint64_t step = kk * 2 * C::kSwizzleAtomBytes / 16;  // 16 rows = two 8-row atoms
    if constexpr (D == 64)
      sm90::wgmma_m64n64k16_rs<T>(acc, a[kk], db + step, 1);
    else
      sm90::wgmma_m64n128k16_rs<T>(acc, a[kk], db + step, 1);
  }
}

// This consumer's 64 × 64 piece of dQ_i = dS K_j over the block's 128 keys: A = dS, read from
// the stored dSᵀ transposed (M-major), B = K_j read transposed (N-major).
template <class C, class T>
__device__ __forceinline__ void gemm_dq(float (&acc)[C::kAccDq], uint32_t ds_addr, uint32_t k_addr) {
  const uint64_t da = desc_sw128(ds_addr, C::kDsPlaneBytes, C::kSwizzleAtomBytes);
  const uint64_t db = desc_sw128(k_addr, C::kKVBlockBytes, C::kSwizzleAtomBytes);
#pragma unroll
  for (int kk = 0; kk < C::kKeySteps; ++kk) {
    const uint64_t step = kk * 2 * C::kSwizzleAtomBytes / 16;
    sm90::wgmma_m64n64k16_ss_mn_major<T>(acc, da + step, db + step, kk > 0);
  }
}

__device__ __forceinline__ void release(uint64_t* empty) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbar_arrive(empty);
}

// ---- a consumer warpgroup: 64 keys ---------------------------------------------------------------
template <class C, class T, int D>
__device__ __forceinline__ void consume(unsigned char* base, Barriers<C::kStages>& bar, const BwdArgs& a,
                                        const course::AttentionParams& p, T* __restrict__ dk, T* __restrict__ dv,
                                        int k0, int bh_kv, int bh_q0, int G, TileRange tiles, int cw, int t) {
  using L = SmemLayout<C>;
  const int Nq = p.seq_q, Nk = p.seq_k, off = Nk - Nq;
  const int n_tiles = tiles.end - tiles.begin, n_steps = G * n_tiles;
  const uint32_t s_base = smem_u32(base);
  const uint32_t k_rows = s_base + L::kK + cw * C::kKeysPerConsumer * C::kSwizzleRowBytes;  // my 64 keys
  const uint32_t v_rows = s_base + L::kV + cw * C::kKeysPerConsumer * C::kSwizzleRowBytes;
  // dQ piece: D = 128, columns 64cw.. = K's column block cw; D = 64, queries 64cw.. = dSᵀ plane cw.
  const uint32_t dq_k = s_base + L::kK + (D == 128 ? cw * C::kKVBlockBytes : 0);
  const uint32_t dq_ds_plane = D == 128 ? 0 : cw * C::kDsPlaneBytes;
  const float scale_log2 = a.scale * kLog2e;
  const int key_first = k0 + cw * C::kKeysPerConsumer;

  float acc_dv[C::kAccKV], acc_dk[C::kAccKV];
#pragma unroll
  for (int i = 0; i < C::kAccKV; ++i) acc_dv[i] = acc_dk[i] = 0.f;

  // L·log2 e and D_i of a step: consumer thread ci (0..255) stores element ci of the pair (L's
  // Br values, then D's) into stats buffer s % 2, a plain global load and shared store that the
  // kDsFull barriers order; step 0's before the loop.
  const int ci = cw * C::kWarpgroupThreads + t;
  const bool has_stat = ci < 2 * C::kBr;
  float* stat_buf = reinterpret_cast<float*>(base + L::kL);  // [2][L: Br, D: Br]
  if (has_stat && n_steps > 0) stat_buf[ci] = step_stat<C>(a, bh_q0, tiles, 0, ci);
  sm90::named_barrier_sync(kDsFull, C::kConsumerThreads);
  if (n_steps > 0) sm90::mbar_wait(&bar.kv_full, 0);
  // snippet-begin: consumer-loop
  for (int s = 0; s < n_steps; ++s) {
    const auto ring = C::Ring::at(s);
    const int st = ring.stage;
    const int bh = bh_q0 + s / n_tiles, q0 = tiles.tile(s) * C::kBr;
    const uint32_t q_addr = s_base + L::kQ + st * C::kQTileBytes, do_addr = s_base + L::kDO + st * C::kQTileBytes;
    const float* Ls = stat_buf + (s % 2) * 2 * C::kBr;  // this step's L·log2 e, then its D_i
    const float* Ds = Ls + C::kBr;
    // The next step's L·log2 e and D_i, one value per thread, read now and stored before this
    // step's kDsFull barrier: the load's latency hides under the step's products.
    const float next_stat = has_stat && s + 1 < n_steps ? step_stat<C>(a, bh_q0, tiles, s + 1, ci) : 0.f;
    const uint32_t ds_buf = L::kDs + (s % 2) * C::kDsBytes;
    sm90::mbar_wait(&bar.q_full[st], ring.full_parity());

    // Sᵀ and dPᵀ in one group.
    float acc_s[C::kAccS], acc_dp[C::kAccS];
    sm90::wgmma_fence();
    gemm_keys_queries<C, T>(acc_s, k_rows, q_addr);
    gemm_keys_queries<C, T>(acc_dp, v_rows, do_addr);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_regs(acc_s);
    sm90::fence_regs(acc_dp);

    // Pᵀ = exp2(scale·log2e·Sᵀ − L·log2e) (0 where masked) and dSᵀ = Pᵀ ∘ (dPᵀ − D), 16 queries
    // (8 elements) at a time, each rounded at once into the A-operand registers of k-step kk
    // (register j packs elements 8kk + 2j and 8kk + 2j + 1), and dSᵀ stored for dQ, two
    // neighbouring queries per 32-bit store.
    const bool needs_mask = k0 + C::kBc > Nk || (p.causal && k0 + C::kBc - 1 > q0 + off);
    // snippet-begin: mask
    if (needs_mask) {  // one branch per step: the unmasked steps pay nothing for the mask
#pragma unroll
      for (int i = 0; i < C::kAccS; ++i) {
        const int kg = key_first + hbwd_acc_key(t, i), qg = q0 + hbwd_acc_query(t, i);
        if (kg >= Nk || (p.causal && kg > qg + off)) acc_s[i] = -INFINITY;  // P = 2^-inf = 0
      }
    }
    // snippet-end: mask
    uint32_t pa[C::kQSteps][4], da[C::kQSteps][4];
#pragma unroll
    for (int kk = 0; kk < C::kQSteps; ++kk) {
      float2 l2, d2;  // L·log2 e and D_i of the two queries of registers j, j + 1 (j even)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 8 * kk + 2 * j;
        const int query = hbwd_acc_query(t, i), key = hbwd_acc_key(t, i);
        // Registers j and j + 1 hold keys r and r + 8 of the same two queries: one load for both
        // (left to itself, the compiler loads again: the dSᵀ stores in between might alias).
        if (j % 2 == 0) {
          l2 = *reinterpret_cast<const float2*>(Ls + query);
          d2 = *reinterpret_cast<const float2*>(Ds + query);
        }
        // snippet-begin: recompute-p
        float p0 = exp2_ftz(fmaf(acc_s[i], scale_log2, -l2.x));
        float p1 = exp2_ftz(fmaf(acc_s[i + 1], scale_log2, -l2.y));
        // snippet-end: recompute-p
        // snippet-begin: ds
        const float ds0 = p0 * (acc_dp[i] - d2.x), ds1 = p1 * (acc_dp[i + 1] - d2.y);
        // snippet-end: ds
        pa[kk][j] = pack2<T>(p0, p1);
        da[kk][j] = pack2<T>(ds0, ds1);
        *reinterpret_cast<uint32_t*>(base + ds_buf + hbwd_ds_offset(cw * C::kKeysPerConsumer + key, query)) = da[kk][j];
      }
    }
    sm90::fence_proxy_async_shared();  // the stores above, before the dQ wgmma's read them

    // dV += Pᵀ dO_i, dK += dSᵀ Q_i (one group).
    sm90::wgmma_fence();
    gemm_kv<C, T, D>(acc_dv, pa, do_addr);
    gemm_kv<C, T, D>(acc_dk, da, q_addr);
    sm90::wgmma_commit();

    if (has_stat && s + 1 < n_steps) stat_buf[((s + 1) % 2) * 2 * C::kBr + ci] = next_stat;
    // Both consumers' dSᵀ is in place (and, with two buffers, nobody still reads the one the
    // next step writes: that was step s - 1's, read by dQ before either consumer got here);
    // the same holds for the next step's L and D_i and the step before's.
    sm90::named_barrier_sync(kDsFull, C::kConsumerThreads);
    float acc_dq[C::kAccDq];
    sm90::wgmma_fence();
    gemm_dq<C, T>(acc_dq, s_base + ds_buf + dq_ds_plane, dq_k);
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_regs(acc_dv);
    sm90::fence_regs(acc_dk);
    sm90::fence_regs(acc_dq);
    release(&bar.q_empty[st]);  // Q_i, dO_i, L_i, D_i are no longer read

    // This consumer's piece of dQ_i into the fp32 accumulator, thread t's float4 f at
    // 4096·cw + 4·(128·f + t) of the tile.
    float* tile = a.dq_acc + (int64_t(bh) * a.Nq_pad + q0) * D;
    if constexpr (C::kDqReduce) {
      const auto buf = C::DqRing::at(s);
      float* piece = reinterpret_cast<float*>(base + L::kDq) + buf.stage * C::kDqTileFloats + cw * C::kDqPieceFloats;
      sm90::mbar_wait(&bar.dq_empty[buf.stage], buf.empty_parity());  // the copy engine has read its last tile
#pragma unroll
      for (int f = 0; f < C::kAccDq / 4; ++f)
        reinterpret_cast<float4*>(piece)[128 * f + t] =
            make_float4(acc_dq[4 * f], acc_dq[4 * f + 1], acc_dq[4 * f + 2], acc_dq[4 * f + 3]);
      sm90::fence_proxy_async_shared();  // before the bulk reduce reads them
      sm90::mbar_arrive(&bar.dq_full[buf.stage]);
    } else {
      float4* dst = reinterpret_cast<float4*>(tile) + cw * (C::kDqPieceFloats / 4);
#pragma unroll
      for (int f = 0; f < C::kAccDq / 4; ++f)
        atomicAdd(dst + 128 * f + t,
                  make_float4(acc_dq[4 * f], acc_dq[4 * f + 1], acc_dq[4 * f + 2], acc_dq[4 * f + 3]));
    }
  }
  // snippet-end: consumer-loop

  // Epilogue: this warpgroup's 64 keys of dK (times scale) and dV.
  T* dk_rows = dk + int64_t(bh_kv) * Nk * D;
  T* dv_rows = dv + int64_t(bh_kv) * Nk * D;
#pragma unroll
  for (int i = 0; i < C::kAccKV; i += 2) {
    const int key = key_first + hbwd_acc_key(t, i), col = hbwd_acc_query(t, i);
    if (key < Nk) {
      *reinterpret_cast<uint32_t*>(dk_rows + int64_t(key) * D + col) =
          pack2<T>(a.scale * acc_dk[i], a.scale * acc_dk[i + 1]);
      *reinterpret_cast<uint32_t*>(dv_rows + int64_t(key) * D + col) = pack2<T>(acc_dv[i], acc_dv[i + 1]);
    }
  }
  sm90::named_barrier_sync(kConsumerDone + cw, C::kWarpgroupThreads);
  if (t == 0) sm90::mbar_arrive(&bar.done);
}

template <class C, class T, int D>
__global__ void __launch_bounds__(C::kThreads, 1)
    hopper_bwd_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                      const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                      T* __restrict__ dk, T* __restrict__ dv, course::AttentionParams p, BwdArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  auto& bar = *reinterpret_cast<Barriers<C::kStages>*>(base + SmemLayout<C>::kBar);

  // Under the causal mask the first key blocks see the most query tiles: blockIdx.x = 0 first.
  const int key_block = blockIdx.x, k0 = key_block * C::kBc;
  const int h_kv = blockIdx.y, b = blockIdx.z;
  const int G = p.heads_q / p.heads_kv;
  const int bh_kv = b * p.heads_kv + h_kv, bh_q0 = b * p.heads_q + h_kv * G;
  const TileRange tiles = query_tiles(k0, p.seq_q, p.seq_k, p.causal, C::kBr);

  if (threadIdx.x == 0) {
    sm90::mbar_init(&bar.kv_full, 1);
    for (int s = 0; s < C::kStages; ++s) {
      sm90::mbar_init(&bar.q_full[s], 1);
      sm90::mbar_init(&bar.q_empty[s], C::kReleaseArrivals);
    }
    for (int s = 0; s < 2; ++s) {
      sm90::mbar_init(&bar.dq_full[s], C::kConsumerThreads);
      sm90::mbar_init(&bar.dq_empty[s], 1);
    }
    sm90::mbar_init(&bar.done, C::kConsumers);
    sm90::mbar_init_fence();
  }
  __syncthreads();  // every thread sees initialised barriers before anyone waits on one

  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / C::kWarpgroupThreads, 0),
            t = threadIdx.x % C::kWarpgroupThreads;
  const bool any = tiles.end > tiles.begin;
  if (wg == 0) {
    sm90::regs_dealloc<C::kProducerRegs>();
    if (t == 0 && any)
      produce<C, T>(&tm_q, &tm_k, &tm_v, &tm_do, base, bar, a, k0, bh_kv, bh_q0, G, tiles);
    else if (t == 32 && any && C::kDqReduce)
      reduce_dq<C>(base, bar, a, key_block, bh_q0, G, tiles);
    else if (t == 64)
      sm90::watchdog(&bar.done);
  } else {
    sm90::regs_alloc<C::kConsumerRegs>();
    consume<C, T, D>(base, bar, a, p, dk, dv, k0, bh_kv, bh_q0, G, tiles, wg - 1, t);
  }
#endif
}

template <class T, int D, int kStages, bool kDqReduce>
void launch_main(const T* q, const T* k, const T* v, const T* d_o, T* dk, T* dv, const course::AttentionParams& p,
                 const BwdArgs& a, cudaStream_t stream) {
  using C = BwdConfig<T, D, kStages, kDqReduce>;
  const size_t limit = size_t(course::smem_limit_per_block());
  if (C::kSmemBytes > limit)
    throw std::runtime_error("flash_attention_wgmma_backward: needs " + std::to_string(C::kSmemBytes) +
                             " bytes of shared memory per block, the limit is " + std::to_string(limit));
  const uint64_t planes_q = uint64_t(p.batch) * p.heads_q, planes_kv = uint64_t(p.batch) * p.heads_kv;
  const CUtensorMap tm_q = sm90::make_tensor_map_sw128(q, planes_q, p.seq_q, D, C::kBr);
  const CUtensorMap tm_do = sm90::make_tensor_map_sw128(d_o, planes_q, p.seq_q, D, C::kBr);
  const CUtensorMap tm_k = sm90::make_tensor_map_sw128(k, planes_kv, p.seq_k, D, C::kBc);
  const CUtensorMap tm_v = sm90::make_tensor_map_sw128(v, planes_kv, p.seq_k, D, C::kBc);
  auto kernel = hopper_bwd_kernel<C, T, D>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  const dim3 grid((p.seq_k + C::kBc - 1) / C::kBc, p.heads_kv, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, tm_do, dk, dv, p, a);
  CUDA_CHECK_LAUNCH();
}

int padded_rows_of(int Nq) { return (Nq + 127) / 128 * 128; }

template <class T, int D>
void launch_all(HopperBwdStep step, bool deterministic, const T* q, const T* k, const T* v, const T* o, const T* d_o,
                const float* lse, T* dq, T* dk, T* dv, void* workspace, const course::AttentionParams& p,
                cudaStream_t stream) {
  const int Nq_pad = padded_rows_of(p.seq_q);
  const int64_t padded_rows = int64_t(p.batch) * p.heads_q * Nq_pad;
  BwdArgs a;
  a.dq_acc = static_cast<float*>(workspace);  // [B·Hq, Nq', D], each query tile in the consumers' order
  float* lse2 = a.dq_acc + padded_rows * D;   // [B·Hq, Nq']
  float* delta = lse2 + padded_rows;          // [B·Hq, Nq']
  a.counters = reinterpret_cast<uint32_t*>(delta + padded_rows);  // [B·Hq, Nq' / 64]
  a.lse2 = lse2;
  a.delta = delta;
  a.Nq_pad = Nq_pad;
  a.scale = p.softmax_scale();
  a.deterministic = deterministic;

  const int64_t row_blocks = (padded_rows * 32 + 255) / 256;
  bwd_rows_kernel<T, D><<<dim3(unsigned(row_blocks)), 256, 0, stream>>>(o, d_o, lse, lse2, delta, a.dq_acc, a.counters,
                                                                        p.seq_q, Nq_pad, padded_rows);
  CUDA_CHECK_LAUNCH();
  switch (step) {
    case HopperBwdStep::kSerial:
      launch_main<T, D, 1, false>(q, k, v, d_o, dk, dv, p, a, stream);
      break;
    case HopperBwdStep::kTwoStages:
      launch_main<T, D, 2, false>(q, k, v, d_o, dk, dv, p, a, stream);
      break;
    case HopperBwdStep::kDqReduce:
      launch_main<T, D, 2, true>(q, k, v, d_o, dk, dv, p, a, stream);
      break;
  }
  const int64_t n4 = padded_rows * D / 4;
  const int64_t dq_blocks = (n4 + 255) / 256 < 65536 ? (n4 + 255) / 256 : 65536;
  bwd_dq_kernel<T, D><<<dim3(unsigned(dq_blocks)), 256, 0, stream>>>(a.dq_acc, dq, p.seq_q, Nq_pad, n4, a.scale);
  CUDA_CHECK_LAUNCH();
}

template <class T>
void backward_impl(HopperBwdStep step, bool deterministic, const T* q, const T* k, const T* v, const T* o, const T* d_o,
                   const float* lse, T* dq, T* dk, T* dv, void* workspace, const course::AttentionParams& p,
                   cudaStream_t stream) {
  const char* fn = "flash_attention_wgmma_backward";
  course::require_attention_tensors(q, k, v, o, p, fn);
  const char* names[5] = {"d_o", "dq", "dk", "dv", "workspace"};
  const void* ptrs[5] = {d_o, dq, dk, dv, workspace};
  for (int i = 0; i < 5; ++i) {
    course::require_not_null(ptrs[i], fn, names[i]);
    course::require_aligned(ptrs[i], 16, fn, names[i]);
  }
  course::require_not_null(lse, fn, "lse");
  course::require_aligned(lse, 4, fn, "lse");
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");
  if (step != HopperBwdStep::kSerial && step != HopperBwdStep::kTwoStages && step != HopperBwdStep::kDqReduce)
    throw std::invalid_argument("flash_attention_wgmma_backward_step: step must be kSerial, kTwoStages or kDqReduce");
  if (p.head_dim == 64)
    launch_all<T, 64>(step, deterministic, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
  else
    launch_all<T, 128>(step, deterministic, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

}  // namespace

size_t flash_attention_wgmma_backward_workspace_bytes(const course::AttentionParams& p) {
  const size_t rows = size_t(p.batch) * size_t(p.heads_q) * size_t(padded_rows_of(p.seq_q));
  const size_t bytes = 4 * (rows * (size_t(p.head_dim) + 2) + rows / 64);
  return (bytes + 255) / 256 * 256;
}

// The default and the deterministic mode both run kDqReduce: the fastest rung in 6 of the 8
// large shapes measured (chapter, "What to measure"), and the only one whose adds can be ordered.
static HopperBwdStep default_step(bool) { return HopperBwdStep::kDqReduce; }

void flash_attention_wgmma_backward(const __half* q, const __half* k, const __half* v, const __half* o,
                                    const __half* d_o, const float* lse, __half* dq, __half* dk, __half* dv,
                                    void* workspace, const course::AttentionParams& p, cudaStream_t stream,
                                    bool deterministic) {
  backward_impl(default_step(deterministic), deterministic, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

void flash_attention_wgmma_backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const __nv_bfloat16* o, const __nv_bfloat16* d_o, const float* lse,
                                    __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, void* workspace,
                                    const course::AttentionParams& p, cudaStream_t stream, bool deterministic) {
  backward_impl(default_step(deterministic), deterministic, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

void flash_attention_wgmma_backward_step(HopperBwdStep step, const __half* q, const __half* k, const __half* v,
                                         const __half* o, const __half* d_o, const float* lse, __half* dq, __half* dk,
                                         __half* dv, void* workspace, const course::AttentionParams& p,
                                         cudaStream_t stream) {
  backward_impl(step, false, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}

void flash_attention_wgmma_backward_step(HopperBwdStep step, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                         const __nv_bfloat16* v, const __nv_bfloat16* o, const __nv_bfloat16* d_o,
                                         const float* lse, __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                                         void* workspace, const course::AttentionParams& p, cudaStream_t stream) {
  backward_impl(step, false, q, k, v, o, d_o, lse, dq, dk, dv, workspace, p, stream);
}
