// Day 10 · Exercise 07 · rotary position embedding with YaRN scaling: RoPE on Q and K (NeoX and GPT-J pairs), linear / NTK / YaRN frequencies, angles exact at position 10^6.
// Lesson: day10-optimizations/07_rope_yarn/README.md. Test: make test EX=07_rope_yarn
//
// RoPE reads every element of Q and K once, rotates it with its partner and writes it once:
// 0.75 FLOP per byte, a copy with a little arithmetic on the side. The kernel's figure of merit
// is the fraction of copy bandwidth it reaches; its design follows from that:
//   * the host turns the scaled frequencies θ'_i (double) into a table of D/2 fixed-point turn
//     steps, passed as a kernel argument, so no kernel ever evaluates pow, log or a YaRN ramp;
//   * one block per (token, chunk of its heads): all Hq + Hkv rows of a token share one position,
//     so each pair's cos and sin are computed once per block and reused for every row;
//   * the rows are staged in shared memory with 16-byte cp.async copies (all in flight at once,
//     while the block computes its angles), rotated there pair by pair, and written back with
//     16-byte stores: both global passes are fully coalesced, whatever the layout's pairing.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "07_rope_yarn.h"
#include "check_args.h"
#include "arch/async_copy.cuh"
#include "cuda_check.h"
#include "half_convert.cuh"

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The two elements of pair i (the header's contract). The kernel calls it on the device, the
// [index] tests on the host; defined here, in the kernel's translation unit, so nvcc inlines it.
__host__ __device__ RopePair rope_pair(RopeLayout layout, int head_dim, int i) {
  // TODO(1) (≈ 3 lines): the elements (a, b) of pair i in each layout (lesson: "Two layouts,
  //          one rotation").
  return {0, 0};  // TODO(1): replace (every pair is (0, 0) until then)
}

double rope_frequency_factor(const RopeParams& p, int i) {
  // TODO(2) (≈ 14 lines): θ'_i / θ_i for the four scalings; for YaRN, the deployed ramp: γ
  //          linear in the pair index between the rounded correction dimensions of β_fast and
  //          β_slow (lesson: "Linear, NTK and YaRN, band by band").
  return 1.0;  // TODO(2): replace (plain RoPE's factor until then)
}

double rope_yarn_mscale(const RopeParams& p) {
  // TODO(3) (≈ 2 lines): the factor each of q and k gets, 1 unless YaRN stretches the context
  //          (lesson: "The YaRN temperature").
  return 1.0;  // TODO(3): replace
}

uint64_t rope_turn_step(double inv_freq) {
  // TODO(4) (≈ 1 line): θ' in turns per position as 0.64 fixed point (lesson: "The precision
  //          trap").
  return 0;  // TODO(4): replace (no rotation until then)
}

__host__ __device__ float rope_turns(uint64_t step, int32_t pos) {
  // TODO(5) (≈ 2 lines): pos · step / 2^64 reduced to the nearest whole turn, exactly, then as a
  //          float (lesson: "The precision trap").
  return 0.f;  // TODO(5): replace
}

namespace {

using course::arch::copy16;
using course::arch::cp_async_commit;
using course::arch::cp_async_wait;

constexpr int kMaxThreads = 128;  // threads per block: the largest multiple of D/2 up to 128
constexpr int kTileBytes = 8192;  // rows of one token staged per block: 4096 / D rows
constexpr int kMaxPairs = 128;    // D <= 256

// The per-call constants, passed by value as a kernel argument (1 KiB + 4 bytes).
struct RopeTable {
  uint64_t step[kMaxPairs];  // rope_turn_step(θ'_i) of pair i
  float mscale;              // rope_yarn_mscale(p)
};

using course::from_float;  // fp32 -> 16 bits, nearest even (common/half_convert.cuh)
using course::to_float;

// Grid: one block per (token, chunk of its heads), x = token · chunks + chunk. The block's rows
// are heads row0 .. row0 + rows − 1 of the token, counting the Hq query heads first and then the
// Hkv key heads. blockDim.x is a multiple of D/2 (so also of D/8): thread t always rotates pair
// t % (D/2) and always copies 16-byte piece t % (D/8) of a row.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    rope_kernel(const T* q, const T* k, T* q_out, T* k_out, const int32_t* __restrict__ positions, int heads_q,
                int heads_kv, int seq_len, int head_dim, int layout, int rows_per_block, int chunks, RopeTable table) {
  __shared__ uint4 tile[kTileBytes / 16];
  const int token = int(blockIdx.x) / chunks;  // b · N + n, also the index into positions
  const int row0 = (int(blockIdx.x) % chunks) * rows_per_block;
  const int rows = min(rows_per_block, heads_q + heads_kv - row0);
  if (rows <= 0) return;  // the whole block: the chunks before it already cover every head
  const int b = token / seq_len, n = token % seq_len;
  const int half = head_dim / 2, pieces = head_dim / 8;

  // Element offset of the block's row r in q (query heads) or k (key heads), [B, H, N, D].
  auto row_offset = [&](int r) {
    const int h = row0 + r;
    return h < heads_q ? ((size_t(b) * heads_q + h) * seq_len + n) * head_dim
                       : ((size_t(b) * heads_kv + (h - heads_q)) * seq_len + n) * head_dim;
  };

  // Stage every row of the block in shared memory: all copies in flight at once.
  const int piece = threadIdx.x % pieces, row_step = blockDim.x / pieces;
  for (int r = threadIdx.x / pieces; r < rows; r += row_step) {
    const T* src = (row0 + r < heads_q ? q : k) + row_offset(r);
    copy16(reinterpret_cast<float*>(&tile[r * pieces + piece]), reinterpret_cast<const float*>(src) + 4 * piece, true);
  }
  cp_async_commit();

  // While the rows arrive: the rotation of this thread's pair i at the token's position.
  const int i = threadIdx.x % half;
  const int32_t pos = positions[token];
  float cos_a = 1.f, sin_a = 0.f;  // mscale · cos(pos · θ'_i), mscale · sin(pos · θ'_i)
  // TODO(6) (≈ 4 lines): cos_a and sin_a of pair i at pos, from its fixed-point step in the
  //          table, accurate at any int32 position, times the YaRN mscale (lesson: "The
  //          precision trap" and "The YaRN temperature").

  cp_async_wait<0>();
  __syncthreads();  // every row has landed in shared memory
  T* elems = reinterpret_cast<T*>(tile);
  for (int r = threadIdx.x / half; r < rows; r += blockDim.x / half) {
    // TODO(7) (≈ 5 lines): rotate pair i of row r (elems + r · head_dim) in place, in fp32,
    //          rounding each result to T once (lesson: "Two layouts, one rotation").
  }
  __syncthreads();  // every pair is rotated before any row is written out

  for (int r = threadIdx.x / pieces; r < rows; r += row_step) {
    T* dst = (row0 + r < heads_q ? q_out : k_out) + row_offset(r);
    reinterpret_cast<uint4*>(dst)[piece] = tile[r * pieces + piece];
  }
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

template <typename T>
void launch(const T* q, const T* k, T* q_out, T* k_out, const int32_t* positions, const RopeParams& p,
            cudaStream_t stream) {
  const char* fn = "rope_yarn";
  course::require_not_null(q, fn, "q");
  course::require_not_null(k, fn, "k");
  course::require_not_null(q_out, fn, "q_out");
  course::require_not_null(k_out, fn, "k_out");
  course::require_not_null(positions, fn, "positions");
  course::require(aligned16(q), fn, "q", "must be 16-byte aligned");
  course::require(aligned16(k), fn, "k", "must be 16-byte aligned");
  course::require(aligned16(q_out), fn, "q_out", "must be 16-byte aligned");
  course::require(aligned16(k_out), fn, "k_out", "must be 16-byte aligned");
  course::require_positive(p.batch, fn, "batch");
  course::require_positive(p.heads_q, fn, "heads_q");
  course::require_positive(p.heads_kv, fn, "heads_kv");
  course::require_positive(p.seq_len, fn, "seq_len");
  course::require(p.head_dim % 16 == 0 && p.head_dim >= 16 && p.head_dim <= 2 * kMaxPairs, fn, "head_dim",
                  "must be a multiple of 16 in [16, 256] (got " + std::to_string(p.head_dim) + ")");
  course::require(p.layout == RopeLayout::kNeox || p.layout == RopeLayout::kGptj, fn, "layout",
                  "must be RopeLayout::kNeox or RopeLayout::kGptj");
  course::require(std::isfinite(p.base) && p.base > 1.0, fn, "base", "must be finite and > 1");
  course::require(p.scaling == RopeScaling::kNone || p.scaling == RopeScaling::kLinear ||
                      p.scaling == RopeScaling::kNtk || p.scaling == RopeScaling::kYarn,
                  fn, "scaling", "must be one of RopeScaling's values");
  if (p.scaling != RopeScaling::kNone)
    course::require(std::isfinite(p.factor) && p.factor >= 1.0, fn, "factor", "must be finite and >= 1");
  if (p.scaling == RopeScaling::kYarn) {
    course::require_positive(p.original_max_position, fn, "original_max_position");
    course::require(std::isfinite(p.beta_slow) && p.beta_slow >= 0.0, fn, "beta_slow", "must be finite and >= 0");
    course::require(std::isfinite(p.beta_fast) && p.beta_fast > p.beta_slow, fn, "beta_fast",
                    "must be finite and > beta_slow");
  }
  const long long heads = (long long)p.heads_q + p.heads_kv;
  const int cap = kTileBytes / (2 * p.head_dim);  // rows that fit the tile
  const long long chunks = (heads + cap - 1) / cap;
  const int rows_per_block = int((heads + chunks - 1) / chunks);  // balanced: 40 heads -> 20 + 20
  const long long blocks = (long long)p.batch * p.seq_len * chunks;
  course::require(heads <= 0x7fffffffLL, fn, "heads_kv", "plus heads_q must fit in int");
  course::require(blocks <= 0x7fffffffLL, fn, "seq_len",
                  "gives too many blocks: batch · seq_len · ceil((heads_q + heads_kv) / (4096 / head_dim)) "
                  "must be < 2^31");

  // The per-pair constants, in double on the host: the kernel never sees pow, log or the ramp.
  RopeTable table = {};
  for (int i = 0; i < p.head_dim / 2; ++i)
    table.step[i] = rope_turn_step(rope_frequency_factor(p, i) * std::pow(p.base, -2.0 * i / p.head_dim));
  table.mscale = float(rope_yarn_mscale(p));

  const int half = p.head_dim / 2;
  const int threads = (kMaxThreads / half) * half;
  rope_kernel<T><<<unsigned(blocks), threads, 0, stream>>>(q, k, q_out, k_out, positions, p.heads_q, p.heads_kv,
                                                           p.seq_len, p.head_dim, int(p.layout), rows_per_block,
                                                           int(chunks), table);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void rope_yarn(const __half* q, const __half* k, __half* q_out, __half* k_out, const int32_t* positions,
               const RopeParams& p, cudaStream_t stream) {
  launch(q, k, q_out, k_out, positions, p, stream);
}

void rope_yarn(const __nv_bfloat16* q, const __nv_bfloat16* k, __nv_bfloat16* q_out, __nv_bfloat16* k_out,
               const int32_t* positions, const RopeParams& p, cudaStream_t stream) {
  launch(q, k, q_out, k_out, positions, p, stream);
}
