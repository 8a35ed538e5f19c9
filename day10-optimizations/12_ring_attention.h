// Day 10 · Exercise 12 · ring attention: one long sequence over R GPUs — the contract.
//
//   O = softmax(scale · Q·Kᵀ + mask) · V   for a sequence too long for one GPU, split over the R
//   ranks of a RingComm (day10-optimizations/nccl_ring.cuh: one GPU each, one host thread). Every
//   rank keeps its query tokens; the K/V blocks travel around the ring, rank r → rank r + 1, one
//   hop per step, while each rank runs the local kernel on the block it holds. After R steps
//   every rank has seen every block, and its partial outputs, merged by their log-sum-exp, are
//   exactly the attention over the whole sequence.
//
// The global problem: p with seq_q == seq_k == N (one sequence attends to itself), Q, O
// [B, Hq, N, D] and K, V [B, Hkv, N, D], fp16 (__half) or bf16 (__nv_bfloat16), one overload
// each; any Hkv dividing Hq (GQA); head_dim 64 or 128 and window -1 (the local kernel's);
// causal or not (bottom-right alignment is top-left here, Nq == Nk); scale as in
// attention_params.h. Partial outputs are merged in fp32; O is rounded to the 16-bit type once.
//
// The split. The sequence is cut into 2R chunks: chunk c holds tokens
//   [ring_chunk_start(c), ring_chunk_start(c + 1)),   ring_chunk_start(c) = ⌊c·N / 2R⌋,
// so chunk lengths differ by at most 1 and N need not be a multiple of anything (N >= 2R: no
// chunk is empty). Rank r holds two chunks, ring_chunk(r, 0) and ring_chunk(r, 1):
//   zigzag (the default): chunks r and 2R − 1 − r   (an early and a late one: under the causal
//                          mask every rank then has the same work)
//   naive  (zigzag false): chunks 2r and 2r + 1     (causal: rank R − 1 has 2R − 1 times the work
//                          of rank 0, and the ring waits for it; kept to measure exactly that)
// Each chunk is its own contiguous tensor on its rank's GPU (ring.device(r)). For half h = 0, 1
// of rank r, with c = ring_chunk(r, h, R, zigzag) and L = ring_chunk_len(c, N, R):
//   q[h], o[h]   [B, Hq,  L, D]      k[h], v[h]   [B, Hkv, L, D]      16-byte aligned
//   workspace    ring_attention_workspace_bytes(p, R) bytes, 256-byte aligned (cudaMalloc is)
// o[h] is written entirely; nothing outside o and the workspace is written.
//
// The schedule. At step s = 0 .. R−1 rank r holds the K/V block (both chunks) of rank
// ring_source(r, s) = (r − s) mod R; during step s it sends that block on to rank r + 1 and
// receives the block of step s + 1 from rank r − 1 (ncclSend/ncclRecv, one group over all
// ranks, on the ranks' comm streams), while its compute stream runs the local kernel on every
// (query chunk, key chunk) pair that is not skipped: ring_pair_kind says which are skipped
// (causal: the key chunk lies after the query chunk), fully visible, or the causal diagonal.
// Each pair's partial output and log-sum-exp are merged into a running fp32 (O, L) per query row.
//
// The launcher enqueues everything on the ring's streams and returns; ring.synchronize() waits
// (and turns a deadlock into std::runtime_error after the ring's timeout). The ring's streams
// do not wait for other streams, the legacy default stream included: inputs must be complete
// (cudaDeviceSynchronize on each GPU after cudaMemcpy) before the call. It throws
// std::invalid_argument naming the field (buffers, q, k, v, o, workspace, seq_q, seq_k, batch,
// heads_q, heads_kv, head_dim, window) before anything is enqueued; std::runtime_error for a
// NCCL error or a timeout (RingComm). Needs sm_80 (exercise 05) and NCCL.
//
// The local kernel (given code, ring_local_attention below), picked per GPU at run time:
// exercise 10's flash_attention_wgmma (FlashAttention-3 style: wgmma, TMA, warp specialization)
// where the build links it (it compiles sm_90a: COURSE_CUDA_ARCH has 90; the build then defines
// COURSE_HAVE_10_HOPPER_WGMMA) and the rank's GPU is sm_90 (cudaDevAttrComputeCapabilityMajor
// == 9: H100, H200, GH200); exercise 05's flash_attention_mma everywhere else. Both write O and
// the log-sum-exp L = m + ln ℓ (natural log, scaled logits, −inf for a row that sees no key) by
// the same contract, so the merge is the same for either; they differ in speed, and in that 05's ℓ
// sums the 16-bit-rounded P (10's the fp32 P), far below the tolerances.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "attention_params.h"
#include "nccl_ring.cuh"

// ---------------------------------------------------------------------------------------------
// Index helpers (the launcher calls them on the host; the [index] tests check them on the CPU).

// The first token of chunk c (0 <= c <= 2·ranks; chunk 2·ranks starts at n, the end):
// ⌊c·n / (2·ranks)⌋, exact for every n >= 0 that fits an int (the product c·n may not).
__host__ __device__ int ring_chunk_start(int c, int n, int ranks);

// The number of tokens of chunk c (0 <= c < 2·ranks).
__host__ __device__ int ring_chunk_len(int c, int n, int ranks);

// The chunk that rank `rank` holds as its half `half` (0 or 1), zigzag or naive (above).
__host__ __device__ int ring_chunk(int rank, int half, int ranks, bool zigzag);

// The rank whose K/V block rank `rank` holds at step `step` (0 <= step < ranks): (rank − step)
// mod ranks. Step 0 is the rank's own block; each step the blocks move one rank on.
__host__ __device__ int ring_source(int rank, int step, int ranks);

// What a query chunk does with a key chunk.
enum RingPairKind {
  kRingSkip = 0,      // causal, and every key comes after every query: no work
  kRingFull = 1,      // every query sees every key: the kernel without a mask
  kRingDiagonal = 2,  // causal, the same chunk: the kernel with its causal mask (Nq == Nk)
};
__host__ __device__ RingPairKind ring_pair_kind(int q_chunk, int k_chunk, bool causal);

// ---------------------------------------------------------------------------------------------
// Buffers and launcher.

// Bytes of each rank's workspace: the two K/V slots the blocks travel through (one read, one
// receiving), the running O (fp32) and L of the rank's two query chunks, and one partial
// output of the local kernel with its log-sum-exp, all sized for the longest chunk ⌈N / 2R⌉.
size_t ring_attention_workspace_bytes(const course::AttentionParams& p, int ranks);

// One rank's tensors: q[h], k[h], v[h], o[h] hold chunk ring_chunk(rank, h, R, zigzag).
template <class T>
struct RingRank {
  const T* q[2] = {nullptr, nullptr};
  const T* k[2] = {nullptr, nullptr};
  const T* v[2] = {nullptr, nullptr};
  T* o[2] = {nullptr, nullptr};
  void* workspace = nullptr;
};

template <class T>
struct RingBuffers {
  std::vector<RingRank<T>> rank;  // one entry per rank of the ring, in rank order
};

// The local kernel: one (query chunk, key chunk) pair on the current GPU, O and its log-sum-exp
// (lse [B, Hq, Nq] fp32, or null) with exercise 05's / 10's contract and checks, enqueued
// on `stream`. ring_local_kernel names the one GPU `device` runs: "10_hopper_wgmma" or
// "05_fp16_mma" (the bench's rows and the tests' messages say it).
void ring_local_attention(const __half* q, const __half* k, const __half* v, __half* o, float* lse,
                          const course::AttentionParams& p, cudaStream_t stream);
void ring_local_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                          float* lse, const course::AttentionParams& p, cudaStream_t stream);
const char* ring_local_kernel(int device);

void ring_attention(const RingBuffers<__half>& b, const course::AttentionParams& p, RingComm& ring, bool zigzag = true);
void ring_attention(const RingBuffers<__nv_bfloat16>& b, const course::AttentionParams& p, RingComm& ring,
                    bool zigzag = true);
