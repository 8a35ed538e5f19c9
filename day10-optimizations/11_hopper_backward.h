// Day 10 · Exercise 11 · the FlashAttention-3-style backward on Hopper (wgmma, TMA, warp specialization) — the contract.
//
// The gradients of exercise 09, computed with exercise 10's instructions. Given the forward's
// inputs Q, K, V, its output O, its per-row log-sum-exp L and dO, computes dQ, dK, dV of
//   O = softmax(scale · Q·Kᵀ + mask) · V
// in the FlashAttention-2 paper's notation (per batch and query head; i a query, j a key):
//   P_ij = exp(scale · q_i·k_j − L_i)   (0 where the mask hides key j from query i)
//   D_i  = rowsum(dO_i ∘ O_i)
//   dV = Pᵀ dO     dP = dO Vᵀ     dS = P ∘ (dP − D_i)     dQ = scale · dS K     dK = scale · dSᵀ Q
// With GQA, dK and dV of a KV head are the sums over the G = Hq / Hkv query heads that read it.
// Exercise 10's flash_attention_wgmma (its `lse` overload) and 05's flash_attention_mma write the
// O and L this needs; common/reference_backward.h is the fp64 reference of every quantity above.
//
// Tensors (all device pointers; layouts and masks: common/attention_params.h):
//   q, o, d_o, dq   T    [B, Hq, Nq, D]     T = __half or __nv_bfloat16, one overload each
//   k, v, dk, dv    T    [B, Hkv, Nk, D]
//   lse             fp32 [B, Hq, Nq]       natural log; −inf for a row that sees no key
//   workspace       flash_attention_wgmma_backward_workspace_bytes(p) bytes (scratch: L·log2 e and
//                   D_i per row, the fp32 accumulator of dQ, the deterministic mode's counters;
//                   its contents on entry do not matter)
// Precision: every product accumulates in fp32 (S, dP, dV, dK, dQ within a key block, and dQ
// across key blocks); P and dS are rounded to T where they are wgmma operands; dq, dk, dv are
// rounded once when they are written.
// Any Hq that is a multiple of Hkv, any Nq, Nk >= 1 (Nq != Nk and tails included), causal (bottom-
// right aligned) or not, head_dim 64 or 128; p.window must be -1. A query row that sees no key
// gets dQ = 0 and adds nothing to dK, dV. q, k, v, o, d_o, dq, dk, dv and workspace must be
// 16-byte aligned, lse 4-byte aligned (any cudaMalloc pointer is).
// Throws std::invalid_argument naming the field (q, k, v, o, d_o, lse, dq, dk, dv, workspace,
// batch, heads_q, heads_kv, seq_q, seq_k, head_dim, window) before any launch. Needs sm_90 (built
// for the architecture-specific target sm_90a only).
//
// Determinism. dQ of a query tile is the sum of one partial product per key block, and the key
// blocks are different thread blocks. By default they add in whatever order they finish (fp32
// adds in another order round differently: two runs may differ in the last bits of dQ; dK and dV
// are always reproducible). With `deterministic` true the key blocks of a query tile add in the
// order of their index (each waits for a counter in the workspace): bit-identical dQ every run,
// at the cost the chapter measures (on an H100, 0.99–1.18× the default's time without a mask,
// 1.08–1.30× causal).
//
// Work: three kernels on `stream`, nothing allocated, nothing synchronised: (1) L·log2 e and D_i
// per row into the workspace, the dQ accumulator and the counters zeroed; (2) one thread block per
// (batch, KV head, block of Bc = 128 keys): a producer warpgroup (TMA) and two consumer
// warpgroups of 64 keys each, dK and dV in registers, dQ added to the fp32 accumulator once per
// query tile; (3) dQ = scale · accumulator, rounded to T.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "attention_params.h"

// ---------------------------------------------------------------------------------------------
// Index helpers, host and device. The kernel calls them; the test checks them on the CPU (its
// "[index]" cases), without a GPU.
//
// A consumer warpgroup (threads t = 0..127) owns 64 keys of the block. Its transposed score tile
// Sᵀ = K_j Q_iᵀ (64 keys × Br queries, fp32) is an m64nBr wgmma accumulator: element i of thread
// t sits at one (key, query) of the tile — the layout of exercise 10's wgmma_acc_row/col, with
// keys on the rows.

// The key (0..63, the row) of element i of thread t.
__host__ __device__ int hbwd_acc_key(int t, int i);
// The query (0..Br-1, the column) of element i of thread t.
__host__ __device__ int hbwd_acc_query(int t, int i);

// dSᵀ in shared memory, the A operand of dQ = dS·K read transposed (M-major): Bc = 128 keys, and
// per 64 queries one plane of 128 rows × 128 bytes (a key's 64 queries), written with the 128-byte
// swizzle TMA uses. Returns the byte offset of element (key, query), 0 <= key < 128,
// 0 <= query < Br (Br = 64 or 128: query / 64 picks the plane).
__host__ __device__ uint32_t hbwd_ds_offset(int key, int query);

// The fp32 dQ accumulator of a query tile, Br × D, in the order the consumers hold it: each of the
// two consumer warpgroups w computes a 64 × 64 piece (D = 128: all Br = 64 rows, columns 64w ..
// 64w + 63; D = 64: rows 64w .. 64w + 63 of Br = 128, all columns), and thread t's elements
// 4f .. 4f + 3 are stored as one float4 at float index 4096·w + 4·(128·f + t). A warp's float4
// stores are then 512 consecutive bytes. The row and the column within the tile of element i of
// thread t of warpgroup w:
__host__ __device__ int hbwd_dq_row(int head_dim, int w, int t, int i);
__host__ __device__ int hbwd_dq_col(int head_dim, int w, int t, int i);

// ---------------------------------------------------------------------------------------------
// The staircase of the chapter, one rung per idea, for the bench (`make bench`, family
// backward_fp16). flash_attention_wgmma_backward runs kDqReduce (ordered when deterministic).
enum class HopperBwdStep {
  kSerial = 1,     // one Q/dO stage; each consumer adds its piece of dQ with float4 atomics
  kTwoStages = 2,  // a ring of two Q/dO stages: the next query tile loads while this one computes
  kDqReduce = 3,   // dQ through shared memory instead: a producer warp adds each tile with one bulk
                   // reduce-add (the consumers no longer wait for atomics; the order can be fixed)
};

// Bytes of scratch space for p: 4 · B · Hq · (Nq' · (D + 2) + Nq' / 64) with Nq' = Nq rounded up
// to 128, rounded up to a multiple of 256.
size_t flash_attention_wgmma_backward_workspace_bytes(const course::AttentionParams& p);

void flash_attention_wgmma_backward(const __half* q, const __half* k, const __half* v, const __half* o,
                                    const __half* d_o, const float* lse, __half* dq, __half* dk, __half* dv,
                                    void* workspace, const course::AttentionParams& p, cudaStream_t stream = 0,
                                    bool deterministic = false);
void flash_attention_wgmma_backward(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const __nv_bfloat16* o, const __nv_bfloat16* d_o, const float* lse,
                                    __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv, void* workspace,
                                    const course::AttentionParams& p, cudaStream_t stream = 0,
                                    bool deterministic = false);

// One rung of the staircase (same contract, same checks; `deterministic` needs kDqReduce).
void flash_attention_wgmma_backward_step(HopperBwdStep step, const __half* q, const __half* k, const __half* v,
                                         const __half* o, const __half* d_o, const float* lse, __half* dq, __half* dk,
                                         __half* dv, void* workspace, const course::AttentionParams& p,
                                         cudaStream_t stream = 0);
void flash_attention_wgmma_backward_step(HopperBwdStep step, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                         const __nv_bfloat16* v, const __nv_bfloat16* o, const __nv_bfloat16* d_o,
                                         const float* lse, __nv_bfloat16* dq, __nv_bfloat16* dk, __nv_bfloat16* dv,
                                         void* workspace, const course::AttentionParams& p, cudaStream_t stream = 0);
