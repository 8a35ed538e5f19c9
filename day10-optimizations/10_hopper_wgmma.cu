// Day 10 · Exercise 10 · FlashAttention-3-style forward on Hopper: wgmma, TMA, warp specialization
// Lesson: day10-optimizations/10_hopper_wgmma/README.md. Test: make test EX=10_hopper_wgmma
//
// One thread block = Br query rows of one (batch, head), warpgroups of 128 threads:
//   warpgroup 0, the producer: one thread issues every copy (TMA) and hands its registers back
//     (setmaxnreg.dec); the copy engine does the work, so one thread is enough;
//   the consumers, 64 query rows each (the M of wgmma): two at D = 128 (Br = 128, registers taken
//     up to 240 by setmaxnreg.inc), three at D = 64 under ping-pong (Br = 192, 160 registers each,
//     as FlashAttention-3 does): S_ij (64 × 128 fp32), P_ij (16-bit) and O_i (64 × D fp32) all
//     live in registers.
// Q_i is copied once; the key tiles K_j, V_j (Bc keys) go through a ring of kStages shared-memory
// stages. Per stage four mbarriers: K full and V full (the copy engine completes them, counting
// bytes), K empty and V empty (the 8 consumer warps arrive when they are done reading): K_j is
// released as soon as S_ij is computed, V_j after P_ij·V_j, so the next K can load meanwhile.
// S_ij = Q_i K_jᵀ is one wgmma chain with both operands in shared memory; O_i += P_ij V_j takes
// P_ij from registers (the accumulator of S, rounded and re-packed, never stored) and V_j from
// shared memory, transposed by the instruction itself.
// The overlapped order (FlashAttention-3's intra-warpgroup pipelining): the tensor cores run
// S_{i,j} and P_{i,j-1}·V_{j-1} back to back while the warpgroup computes the softmax of S_{i,j};
// only the rescale of O_i waits for P_{i,j-1}·V_{j-1} to finish. Ping-pong (FlashAttention-3's
// inter-warpgroup schedule): the consumers take turns issuing their GEMMs, handing the turn on
// through one named barrier each, so that one's softmax runs while another's GEMMs do. The scale
// is folded into the exponent (2^(s·scale·log2 e − m·scale·log2 e)): one FFMA per score, no FMUL.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "10_hopper_wgmma.h"
#include "arch/exp2.cuh"
#include "check_attention_args.h"
#include "cuda_check.h"
#include "arch/sm90.cuh"
#include "arch/sm80.cuh"
#include "smem_limit.h"

// ---- index helpers (10_hopper_wgmma.h), host and device --------------------------------------
__host__ __device__ int wgmma_acc_row(int t, int i) {
  // TODO(1) (≈ 2 lines): the row of the warpgroup's 64 × N tile, and in wgmma_acc_col below the
  //   column, that element d[i] of thread t holds (lesson: "The warpgroup accumulator, thread by
  //   thread").
  return 0;  // TODO(1): replace (every element on row 0: wrong, but inside the tile)
}

__host__ __device__ int wgmma_acc_col(int t, int i) {
  return 0;  // TODO(1): replace (every element in column 0: wrong, but inside the tile)
}

__host__ __device__ int wgmma_p_a_index(int kk, int j) {
  // TODO(2) (≈ 1 line): which of the thread's S elements (i and i + 1) register j of P's A
  //   fragment packs at k-step kk (lesson: "The warpgroup accumulator, thread by thread").
  return 0;  // TODO(2): replace (always S elements 0 and 1: wrong, but inside the fragment)
}

__host__ __device__ uint64_t wgmma_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  // TODO(3) (≈ 4 lines): the 64-bit descriptor: each field in its bits, in 16-byte units, and the
  //   swizzle mode of the 128-byte swizzle (lesson: "Matrix descriptors").
  return 0;  // TODO(3): replace
}

namespace {

using course::arch::exp2_ftz;
using course::arch::kLog2e;
using course::arch::smem_u32;
namespace sm90 = course::arch::sm90;

using course::arch::sm80::pack2;

// Named barriers: hardware barriers 1..15 (0 is __syncthreads), each for the threads a call
// names. Consumer cw's own end is kConsumerDone + cw; its turn to issue GEMMs is kConsumerTurn + cw.
constexpr int kMaxConsumers = 3;
enum NamedBarrier : int {
  kConsumerDone = 1,                  // 1 .. 3: one consumer warpgroup's threads, before it tells the watchdog
  kConsumerTurn = 1 + kMaxConsumers,  // 4 .. 6: consumer cw's turn under ping-pong (it and the one before it)
};

// snippet-begin: config
template <class T, int D, int kStagesT, bool kOverlapT, bool kPingPongT, int kConsumersT = 2>
struct HopperConfig {
  static constexpr int kStages = kStagesT;                   // K/V ring depth
  using Ring = course::arch::sm90::RingState<kStages>;       // tile j's stage and barrier parity
  static constexpr bool kOverlap = kOverlapT;                // softmax of tile j under the GEMMs of j-1
  static constexpr bool kPingPong = kPingPongT;              // the consumers take turns issuing GEMMs
  static constexpr int kRowsPerConsumer = 64;                // M of wgmma: one warpgroup, 64 query rows
  static constexpr int kConsumers = kConsumersT;             // consumer warpgroups: 2, or 3 at D = 64
  static constexpr int kBr = kRowsPerConsumer * kConsumers;  // 128 (or 192) query rows per block
  static constexpr int kBc = 128;                            // keys per tile: N of S = Q·Kᵀ
  static constexpr int kWarpgroupThreads = 128;              // 4 warps: the unit of wgmma and of setmaxnreg
  static constexpr int kConsumerThreads = kWarpgroupThreads * kConsumers;
  static constexpr int kTurnThreads = 2 * kWarpgroupThreads;  // a turn: its taker and the one handing it over
  static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumers);
  // The register file at entry, split evenly over the block's threads (rounded down to 8, as
  // ptxas allocates): setmaxnreg moves registers between warpgroups, it cannot make more.
  static constexpr int kRegsAtEntry = course::arch::sm90::kRegsPerSm / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 24;  // one issuing thread needs almost nothing
  // What is left after the producer's share, split over the consumers (rounded down to 8):
  // (168·384 − 24·128) / 256 = 240 with two, (128·512 − 24·128) / 384 → 160 with three.
  static constexpr int kConsumerRegs =
      (kRegsAtEntry * kThreads - kProducerRegs * kWarpgroupThreads) / kConsumerThreads / 8 * 8;
  static constexpr int kSwizzleRowBytes = 128;                            // the 128-byte swizzle's row
  static constexpr int kSwizzleCols = kSwizzleRowBytes / int(sizeof(T));  // 64 16-bit values
  static constexpr int kSwizzleAtomBytes = 8 * kSwizzleRowBytes;  // 8 rows: the pattern repeats every 1024 bytes
  static constexpr int kColBlocks = D / kSwizzleCols;
  static constexpr int kQBlockBytes = kBr * kSwizzleRowBytes;   // one 64-column block of Q_i
  static constexpr int kKVBlockBytes = kBc * kSwizzleRowBytes;  // one 64-column block of K_j or V_j
  static constexpr int kQBytes = kQBlockBytes * kColBlocks;
  static constexpr int kKVTileBytes = kKVBlockBytes * kColBlocks;
  static constexpr int kKSteps = D / 16;                   // k-steps of S = Q·Kᵀ (k = head dim)
  static constexpr int kPVSteps = kBc / 16;                // k-steps of O += P·V (k = keys)
  static constexpr int kAccS = kBc / 2;                    // S elements per consumer thread
  static constexpr int kAccO = D / 2;                      // O elements per consumer thread
  static constexpr int kReleaseArrivals = 4 * kConsumers;  // one per consumer warp
  static constexpr int kBarriers = 2 + 4 * kStages;        // Q full; per stage K/V full, K/V empty; done
  // Slack of one swizzle atom: the pattern repeats every 1024 bytes and tiles must start on one.
  static constexpr size_t kSmemBytes =
      kSwizzleAtomBytes + size_t(kQBytes) + 2 * size_t(kStages) * kKVTileBytes + 8 * kBarriers;

  static_assert(D % kSwizzleCols == 0, "a row of Q, K or V is a whole number of 128-byte swizzle rows");
  static_assert(kConsumers >= 2 && kConsumers <= kMaxConsumers, "named barriers are reserved for 2 or 3 consumers");
  static_assert(kBr <= 256, "a TMA box has at most 256 rows: Q_i is one box per 64-column block");
  static_assert(kSmemBytes <= size_t(course::arch::sm90::kMaxSmemPerBlock),
                "Q, the K/V ring and the barriers must fit the shared memory a block may opt in to");
  static_assert(kProducerRegs % 8 == 0 && kConsumerRegs % 8 == 0 &&
                    kProducerRegs >= course::arch::sm90::kMinRegsSetmaxnreg &&
                    kConsumerRegs <= course::arch::sm90::kMaxRegsSetmaxnreg,
                "setmaxnreg takes 24 .. 256 registers in steps of 8");
  static_assert(kProducerRegs * kWarpgroupThreads + kConsumerRegs * kConsumerThreads <= kRegsAtEntry * kThreads,
                "what the producer gives back must cover what the consumers take");
};
// snippet-end: config

// The block's barriers, in shared memory after the tiles. K and V of a stage are released
// apart: K_j is free as soon as S_ij is computed, V_j only after P_ij·V_j.
template <int kStages>
struct Barriers {
  uint64_t q_full;
  uint64_t k_full[kStages];
  uint64_t v_full[kStages];
  uint64_t k_empty[kStages];
  uint64_t v_empty[kStages];
  uint64_t done;  // completed when both consumer warpgroups have finished (for the watchdog)
};

// ---- the producer: one thread --------------------------------------------------------------
template <class C, class T>
__device__ __forceinline__ void produce(const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                        T* Qs, T* Ks, T* Vs, Barriers<C::kStages>& bar, int q0, int bh_q, int bh_kv,
                                        int n_tiles) {
  sm90::tma_prefetch_map(tm_q);
  sm90::tma_prefetch_map(tm_k);
  sm90::tma_prefetch_map(tm_v);
  sm90::mbar_arrive_expect_tx(&bar.q_full, C::kQBytes);
#pragma unroll
  for (int cb = 0; cb < C::kColBlocks; ++cb)
    sm90::tma_load_3d(reinterpret_cast<unsigned char*>(Qs) + cb * C::kQBlockBytes, tm_q, cb * C::kSwizzleCols, q0, bh_q,
                      &bar.q_full);
  // TODO(4) (≈ 16 lines): for every key tile j, in stage j mod kStages: once the consumers have
  //   released that stage's K, announce the bytes of K_j and copy it (one box per 64-column
  //   block); then the same for V_j with V's barriers (lesson: "The producer: TMA into a ring of
  //   stages" and "mbarrier: phases and parity").
}

// ---- the consumers' pieces -----------------------------------------------------------------
// O is 64 × D: one wgmma shape per head dim.
template <class T, int D>
__device__ __forceinline__ void wgmma_pv(float (&o)[D / 2], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (D == 64)
    sm90::wgmma_m64n64k16_rs<T>(o, a, db, 1);
  else
    sm90::wgmma_m64n128k16_rs<T>(o, a, db, 1);
}

// S = Q_i K_jᵀ for this warpgroup's 64 rows: D/16 wgmma's, both operands K-major with the
// 128-byte swizzle. q_addr: the warpgroup's first Q row in block 0; k_addr: the stage's K tile.
template <class C, class T>
__device__ __forceinline__ void issue_s_gemm(float (&s)[C::kAccS], uint32_t q_addr, uint32_t k_addr) {
  // TODO(5) (≈ 8 lines): S = Q_i K_jᵀ for this warpgroup's 64 rows as one group of D/16 wgmma's,
  //   both operands in shared memory (lesson: "Issuing wgmma: fence, commit, wait").
}

// O_i += P_ij V_j: Bc/16 wgmma's, A = P from registers, B = V_j N-major (its rows are keys, its
// 64-column blocks kKVBlockBytes apart: the leading byte offset).
template <class C, class T, int D>
__device__ __forceinline__ void issue_pv_gemm(float (&o)[C::kAccO], uint32_t (&pa)[C::kPVSteps][4], uint32_t v_addr) {
  // TODO(6) (≈ 5 lines): O += P·V as one group of Bc/16 wgmma's, P from registers, V_j through a
  //   descriptor of its N-major layout (lesson: "Issuing wgmma: fence, commit, wait").
}

// Mask and online softmax for one tile, in place on the accumulator fragment of S (P_ij in fp32). Thread t holds rows
// wgmma_acc_row(t, i) ∈ {r_lo, r_lo + 8} and 32 columns of each; the other 96 columns of a row
// are in the three other threads of its quad. m[r], the running max of the raw scores q·k (the
// scale is applied in the exponent, scale > 0 keeps the max where it is), is the same in the 4 threads of a quad; l[r] is this thread's share of ℓ (its 32 columns), summed
// over the quad once, at the end. alpha[r]: the factor by which O's row r must shrink.
template <class C>
__device__ __forceinline__ void softmax_tile(float (&s)[C::kAccS], float (&m)[2], float (&alpha)[2], int t, int row0,
                                             int k0, int Nk, int off, bool causal, bool needs_mask, float scale_log2) {
  // TODO(7) (≈ 22 lines): mask this tile's scores (only when needs_mask), then per row r: the new
  //   maximum over the quad, alpha[r], m[r], and the probabilities in place of the scores, the
  //   scale applied inside the exponent (exp2_ftz, one fused multiply-add per score). A row that
  //   has seen no key yet must come out 0, never NaN (lesson: "The online softmax on wgmma
  //   fragments").
  alpha[0] = alpha[1] = 1.f;  // TODO(7): replace
}

// P_ij (in s, fp32) rounded into the A-operand registers of P·V, and ℓ ← α·ℓ + rowsum(P_ij),
// summed in fp32 from the unrounded values: no unpacking (the D = 64 kernel is short of ALU
// issue slots, not of accuracy: the rounding of P moves each weight by at most 2^-8 relative
// (bf16; 2^-11 fp16), independently, so ℓ and the P that multiplies V disagree far below the
// tolerance).
template <class C, class T>
__device__ __forceinline__ void pack_p(const float (&s)[C::kAccS], uint32_t (&pa)[C::kPVSteps][4], float (&l)[2],
                                       const float (&alpha)[2]) {
  // TODO(8) (≈ 12 lines): P rounded to T into the A-operand registers, and ℓ updated in fp32
  //   (lesson: "The online softmax on wgmma fragments").
}

// O's rows shrink by alpha. After the first tiles a row's maximum rarely moves (alpha = 1 for
// every row of the warp): the multiplications are skipped then, exactly (x·1 = x).
template <int N>
__device__ __forceinline__ void rescale_rows(float (&o)[N], const float (&alpha)[2]) {
  if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] *= alpha[(i / 2) % 2];
}

// The 8 consumer warps each arrive once: a tile is free when all have finished reading it.
__device__ __forceinline__ void release(uint64_t* empty) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbar_arrive(empty);
}

// ---- a consumer warpgroup: 64 query rows -----------------------------------------------------
template <class C, class T, int D, bool kLse>
__device__ __forceinline__ void consume(T* Qs, T* Ks, T* Vs, Barriers<C::kStages>& bar, T* __restrict__ o,
                                        float* __restrict__ lse, const course::AttentionParams& p, float scale, int q0,
                                        int h, int b, int n_tiles, int cw, int t) {
  const int Nq = p.seq_q, Nk = p.seq_k, off = Nk - Nq;
  const int row0 = q0 + cw * C::kRowsPerConsumer;  // this warpgroup's first query row
  const float scale_log2 = scale * kLog2e;         // exp(scale·x) = 2^(x·scale·log2 e)
  const int next = (cw + 1) % C::kConsumers;       // the consumer whose turn follows this one's
  const uint32_t q_addr = smem_u32(Qs) + cw * C::kRowsPerConsumer * C::kSwizzleRowBytes;
  const uint32_t k_base = smem_u32(Ks), v_base = smem_u32(Vs);

  // The accumulators of this warpgroup's 64 rows (lesson: "The warpgroup accumulator, thread by thread"):
  // element i of thread t sits at row wgmma_acc_row(t, i), column wgmma_acc_col(t, i). acc_o holds
  // O_i (64 × D fp32, kAccO per thread); S_ij of a key tile (64 × Bc fp32, kAccS per thread) is
  // declared by the consumer loop (TODO(9), TODO(10)), and the softmax turns it into P_ij in place.
  float acc_o[C::kAccO];
#pragma unroll
  for (int i = 0; i < C::kAccO; ++i) acc_o[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
  uint32_t pa[C::kPVSteps][4];

  // A tile needs the mask when it reaches past Nk or past the warpgroup's first diagonal.
  auto needs_mask = [&](int k0) { return k0 + C::kBc > Nk || (p.causal && k0 + C::kBc - 1 > row0 + off); };

  if (n_tiles > 0) sm90::mbar_wait(&bar.q_full, 0);
  // Ping-pong: consumer 0 takes the first turn, handed to it by the last consumer; every turn ends
  // by handing the next to consumer `next`. All take n_tiles + 1 turns, so the last consumer's
  // last hand-over is taken by consumer 0 after its loop (below): no arrival is left pending.
  if constexpr (C::kPingPong)
    if (n_tiles > 0 && cw == C::kConsumers - 1) sm90::named_barrier_arrive(kConsumerTurn, C::kTurnThreads);
  if constexpr (!C::kOverlap) {
    // TODO(9) (≈ 18 lines): the key loop, one tile at a time, with S's accumulator (kAccS floats,
    //   the layout of acc_o) declared inside it: wait for K_j, S, release K_j, softmax, P, rescale
    //   O, wait for V_j, O += P·V, release V_j (lesson: "The consumer loop, one tile at a time" and
    //   "mbarrier: phases and parity").
  } else if (n_tiles > 0) {
    // TODO(10) (≈ 40 lines): the same loop, S's accumulator again declared per tile (tile 0's
    //   and each iteration's), with tile j's softmax running while the tensor cores
    //   compute P_{j-1}·V_{j-1} (lesson: "Hiding the softmax under the GEMMs"); with
    //   C::kPingPong, every issue of GEMMs is one turn, taken from the consumer before this one and
    //   handed on to `next` (lesson: "Ping-pong between the consumers").
  }

  // Epilogue: ℓ summed over the quad, O / ℓ (zeros for a row that saw nothing), 16-bit stores;
  // with kLse, also L = scale·m + ln ℓ of the thread's two rows (−inf for a row that saw nothing),
  // written by the first thread of each quad (all four hold the same m and ℓ). A template flag:
  // the kernels without lse are compiled exactly as if it did not exist.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if constexpr (kLse) {
    if (t % 4 == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = row0 + wgmma_acc_row(t, 2 * r);  // elements 0 and 2: rows r_lo and r_lo + 8
        if (row < Nq) lse[(int64_t(b) * p.heads_q + h) * Nq + row] = l[r] > 0.f ? m[r] * scale + logf(l[r]) : -INFINITY;
      }
    }
  }
  T* out = o + (int64_t(b) * p.heads_q + h) * Nq * D;
#pragma unroll
  for (int i = 0; i < C::kAccO; i += 2) {
    const int r = (i / 2) % 2;
    const int row = row0 + wgmma_acc_row(t, i);
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    if (row < Nq)
      *reinterpret_cast<uint32_t*>(out + int64_t(row) * D + wgmma_acc_col(t, i)) =
          pack2<T>(acc_o[i] * inv, acc_o[i + 1] * inv);
  }
  if constexpr (C::kPingPong)
    if (n_tiles > 0 && cw == 0) sm90::named_barrier_sync(kConsumerTurn, C::kTurnThreads);
  // Tell the watchdog this warpgroup is done (its 4 warps have all passed their last wait).
  sm90::named_barrier_sync(kConsumerDone + cw, C::kWarpgroupThreads);
  if (t == 0) sm90::mbar_arrive(&bar.done);
}

template <class C, class T, int D, bool kLse>
__global__ void __launch_bounds__(C::kThreads, 1)
    hopper_flash_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v, T* __restrict__ o, course::AttentionParams p,
                        float scale, float* __restrict__ lse) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  T* Qs = reinterpret_cast<T*>(base);
  T* Ks = reinterpret_cast<T*>(base + C::kQBytes);
  T* Vs = reinterpret_cast<T*>(base + C::kQBytes + C::kStages * C::kKVTileBytes);
  auto& bar = *reinterpret_cast<Barriers<C::kStages>*>(base + C::kQBytes + 2 * C::kStages * C::kKVTileBytes);

  // Causal blocks differ in cost: start the heavy ones (last query rows) first.
  const int q_block = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int q0 = q_block * C::kBr;
  const int h = blockIdx.y, b = blockIdx.z;
  const int Nq = p.seq_q, Nk = p.seq_k, off = Nk - Nq;
  const int h_kv = h / (p.heads_q / p.heads_kv);
  const int q_last = min(q0 + C::kBr, Nq) - 1;
  const int k_end = p.causal ? min(Nk, q_last + off + 1) : Nk;
  const int n_tiles = k_end > 0 ? (k_end + C::kBc - 1) / C::kBc : 0;

  if (threadIdx.x == 0) {
    sm90::mbar_init(&bar.q_full, 1);
    for (int s = 0; s < C::kStages; ++s) {
      sm90::mbar_init(&bar.k_full[s], 1);
      sm90::mbar_init(&bar.v_full[s], 1);
      sm90::mbar_init(&bar.k_empty[s], C::kReleaseArrivals);
      sm90::mbar_init(&bar.v_empty[s], C::kReleaseArrivals);
    }
    sm90::mbar_init(&bar.done, C::kConsumers);
    sm90::mbar_init_fence();
  }
  __syncthreads();  // every thread sees initialised barriers before anyone waits on one

  // The warpgroup index, broadcast from lane 0 so the compiler knows it is warp-uniform.
  const int wg = __shfl_sync(0xffffffffu, int(threadIdx.x) / C::kWarpgroupThreads, 0),
            t = threadIdx.x % C::kWarpgroupThreads;
  if (wg == 0) {
    sm90::regs_dealloc<C::kProducerRegs>();
    // No tile: every row sees nothing; nothing is loaded (no copy may outlive the block).
    if (t == 0 && n_tiles > 0)
      produce<C>(&tm_q, &tm_k, &tm_v, Qs, Ks, Vs, bar, q0, b * p.heads_q + h, b * p.heads_kv + h_kv, n_tiles);
    else if (t == 32)
      sm90::watchdog(&bar.done);
  } else {
    // The two roles are the two branches of one if/else: ptxas then gives each branch the
    // register budget its setmaxnreg sets (an early return instead keeps everyone at 168).
    sm90::regs_alloc<C::kConsumerRegs>();
    consume<C, T, D, kLse>(Qs, Ks, Vs, bar, o, lse, p, scale, q0, h, b, n_tiles, wg - 1, t);
  }
#endif
}

// kLse: the kernel that also writes the log-sum-exp (lse not null); without it lse is unused.
template <class T, int D, int kStages, bool kOverlap, bool kPingPong, bool kLse = false, int kConsumers = 2>
void launch(const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
            cudaStream_t stream) {
  using C = HopperConfig<T, D, kStages, kOverlap, kPingPong, kConsumers>;
  const size_t limit = size_t(course::smem_limit_per_block());
  if (C::kSmemBytes > limit)
    throw std::runtime_error("flash_attention_wgmma: needs " + std::to_string(C::kSmemBytes) +
                             " bytes of shared memory per block, the limit is " + std::to_string(limit));
  const CUtensorMap tm_q = sm90::make_tensor_map_sw128(q, uint64_t(p.batch) * p.heads_q, p.seq_q, D, C::kBr);
  const CUtensorMap tm_k = sm90::make_tensor_map_sw128(k, uint64_t(p.batch) * p.heads_kv, p.seq_k, D, C::kBc);
  const CUtensorMap tm_v = sm90::make_tensor_map_sw128(v, uint64_t(p.batch) * p.heads_kv, p.seq_k, D, C::kBc);
  auto kernel = hopper_flash_kernel<C, T, D, kLse>;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes)));
  const dim3 grid((p.seq_q + C::kBr - 1) / C::kBr, p.heads_q, p.batch);
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, o, p, p.softmax_scale(), lse);
  CUDA_CHECK_LAUNCH();
}

// Ping-pong's consumers: three at D = 64, where S, P and O fit 160 registers and the softmax is as
// long as the GEMMs (a third warpgroup keeps the tensor cores fed); two at D = 128 (O alone is 64).
template <int D>
constexpr int kPingPongConsumers = D == 64 ? 3 : 2;

template <class T, int D>
void launch_step(WgmmaStep step, const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
                 cudaStream_t stream) {
  switch (step) {
    case WgmmaStep::kSerial:
      return launch<T, D, 1, false, false>(q, k, v, o, lse, p, stream);
    case WgmmaStep::kTwoStages:
      return launch<T, D, 2, false, false>(q, k, v, o, lse, p, stream);
    case WgmmaStep::kOverlapped:
      return launch<T, D, 2, true, false>(q, k, v, o, lse, p, stream);
    case WgmmaStep::kPingPong:  // the only rung that writes lse (flash_attention_wgmma)
      if (lse != nullptr) return launch<T, D, 2, true, true, true, kPingPongConsumers<D>>(q, k, v, o, lse, p, stream);
      return launch<T, D, 2, true, true, false, kPingPongConsumers<D>>(q, k, v, o, nullptr, p, stream);
  }
  throw std::invalid_argument("flash_attention_wgmma_step: step must be kSerial, kTwoStages, kOverlapped or kPingPong");
}

template <class T>
void wgmma_impl(WgmmaStep step, const T* q, const T* k, const T* v, T* o, float* lse, const course::AttentionParams& p,
                cudaStream_t stream) {
  const char* fn = "flash_attention_wgmma";
  course::require_attention_tensors(q, k, v, o, p, fn);
  if (lse != nullptr) course::require_aligned(lse, 4, fn, "lse");
  course::require(p.head_dim == 64 || p.head_dim == 128, fn, "head_dim",
                  "must be 64 or 128 (got " + std::to_string(p.head_dim) + ")");
  course::require(p.window == -1, fn, "window", "must be -1 (sliding windows are exercise 02)");
  if (p.head_dim == 64)
    launch_step<T, 64>(step, q, k, v, o, lse, p, stream);
  else
    launch_step<T, 128>(step, q, k, v, o, lse, p, stream);
}

}  // namespace

void flash_attention_wgmma(const __half* q, const __half* k, const __half* v, __half* o,
                           const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(WgmmaStep::kPingPong, q, k, v, o, nullptr, p, stream);
}

void flash_attention_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                           const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(WgmmaStep::kPingPong, q, k, v, o, nullptr, p, stream);
}

void flash_attention_wgmma(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                           const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(WgmmaStep::kPingPong, q, k, v, o, lse, p, stream);
}

void flash_attention_wgmma(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                           float* lse, const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(WgmmaStep::kPingPong, q, k, v, o, lse, p, stream);
}

void flash_attention_wgmma_step(WgmmaStep step, const __half* q, const __half* k, const __half* v, __half* o,
                                const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(step, q, k, v, o, nullptr, p, stream);
}

void flash_attention_wgmma_step(WgmmaStep step, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                __nv_bfloat16* o, const course::AttentionParams& p, cudaStream_t stream) {
  wgmma_impl(step, q, k, v, o, nullptr, p, stream);
}
